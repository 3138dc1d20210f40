"""`StopAtStep`: ends training at a planned global step, also after a resume."""

from __future__ import annotations

import logging

import keras

from kerasteps import steps as steps_lib
from kerasteps._validate import check_int
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.schedule import Every

__all__ = ["StopAtStep"]

logger = logging.getLogger("kerasteps")


class StopAtStep(StepCallback):
    """Stops training when the global step reaches `max_steps`.

    Plan a run in steps, not epochs: pass `epochs` and `steps_per_epoch` large
    enough (e.g. an infinite `dataset.repeat()`, `steps_per_epoch=1000`,
    `epochs=10**6`) and training ends with `kerasteps.global_step(model) ==
    max_steps`, also when the run resumed from a checkpoint (the step is the
    model's, not a batch count of this `fit()` call). With `steps_per_execution=K`
    Keras can only stop between executions: training ends at the first execution
    boundary at or after `max_steps`. When `max_steps` is not `start + j*K`, a
    WARNING at run begin says where training will stop (an epoch end that cuts an
    execution short can move the boundaries), and the line logged at the stop gives
    the true step and how far past `max_steps` it is. Choose `max_steps` as
    `start + j*K` to stop exactly.

    A run that already starts at or after `max_steps` (a finished run launched
    again) cannot be stopped before Keras trains at least one more step, so `fit()`
    raises a `RuntimeError` before training instead: check
    `stop.remaining(model) == 0` first and skip `fit()`.

    It acts last at a step (after sinks and checkpoints have written it).

    Args:
        max_steps: Positive int, the global step at which training ends.

    Example:

    >>> import numpy as np, keras, kerasteps
    >>> from kerasteps.callbacks import StopAtStep
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> stop = StopAtStep(30)
    >>> x, y = np.ones((40, 2)), np.ones((40, 1))
    >>> _ = model.fit(x, y, batch_size=2, epochs=100, verbose=0, callbacks=[stop])
    >>> kerasteps.global_step(model), stop.remaining(model)
    (30, 0)
    """

    role = "action"
    async_safe = True
    reads_model = False  # its events' values only
    stops_training = True  # at ends on the training thread (`StepCallback`)
    reads_values = False

    def __init__(self, max_steps: int):
        max_steps = check_int("max_steps", max_steps)
        # Fires when the step crosses `max_steps` (the schedule's first firing step).
        super().__init__(Every(max_steps))
        self.max_steps = max_steps
        #: The global step at which this callback stopped training, else None.
        self.stopped_step: int | None = None

    def remaining(self, model: keras.Model) -> int:
        """Returns how many steps are left before `max_steps` (0 when reached).

        Args:
            model: The compiled model (possibly restored from a checkpoint).

        Example:

        >>> import keras
        >>> from kerasteps.callbacks import StopAtStep
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> StopAtStep(60).remaining(model)
        60
        """
        return max(0, self.max_steps - steps_lib.global_step(model))

    def on_run_begin(self, start_step: int) -> None:
        self.stopped_step = None
        if start_step >= self.max_steps:
            raise RuntimeError(
                f"StopAtStep(max_steps={self.max_steps}): the model is already at "
                f"global step {start_step}, so there is nothing left to train, and "
                "Keras would run at least one more step. Skip `fit()` when "
                "`stop.remaining(model) == 0`."
            )
        stride = self.run.steps_per_execution // self.run.accumulation
        left = self.max_steps - start_step
        if stride > 1 and left % stride:
            logger.warning(
                "StopAtStep(max_steps=%d): with steps_per_execution=%d the step moves "
                "%d at a time from %d, so training stops at step %d, the first "
                "execution boundary past %d (an epoch end can move the boundaries).",
                self.max_steps,
                self.run.steps_per_execution,
                stride,
                start_step,
                start_step + -(-left // stride) * stride,
                self.max_steps,
            )

    def on_step(self, event: StepEvent) -> None:
        if event.step < self.max_steps or self.stopped_step is not None:
            return
        self.stopped_step = event.step
        self.model.stop_training = True
        past = event.step - self.max_steps
        logger.info(
            "StopAtStep: reached global step %d (max_steps=%d%s); stopping training.",
            event.step,
            self.max_steps,
            f", {past} past it: steps_per_execution={self.run.steps_per_execution}"
            if past
            else "",
        )
