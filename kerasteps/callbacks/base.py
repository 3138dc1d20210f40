"""`StepCallback`: the base class of every kerasteps callback."""

from __future__ import annotations

from typing import Any, ClassVar

import keras

from kerasteps.callbacks._hub import RunHub, StepEvent, get_hub
from kerasteps.schedule import Every

__all__ = ["StepCallback"]


class StepCallback(keras.callbacks.Callback):
    """Base class for callbacks that act on the global step, on an `Every` schedule.

    Subclasses implement `on_step(event)` and, when they need them, `on_run_begin`
    and `on_run_end`; they never override the Keras batch hooks. The shared run hub
    (one per model and `fit()` call) tracks the true global step, calls every
    kerasteps callback at a step in a fixed order (providers such as validation,
    then guards, sinks, checkpoints and stop), processes batches in order even with
    Keras's async dispatch, and passes on the values that providers computed.

    `event.step` is always the global step after the update that produced the
    values; with `steps_per_execution=K` the step moves by K between calls and the
    callback fires when a scheduled step was crossed.

    Args:
        every: Positive int or `kerasteps.Every`, when `on_step` fires. `None` for a
            callback that only records values others provide.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StepCallback
    >>> class PrintStep(StepCallback):
    ...     def on_step(self, event):
    ...         print("step", event.step, "loss", round(event.values()["loss"], 3))
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> x = np.zeros((8, 1)); y = np.zeros((8, 1))
    >>> _ = model.fit(x, y, batch_size=2, verbose=0, callbacks=[PrintStep(every=2)])
    step 2 loss 0.0
    step 4 loss 0.0
    """

    #: Order among kerasteps callbacks at one step (lower first).
    phase: ClassVar[int] = 50
    #: Providers add values (`val_*`, throughput) for the sinks at the same step.
    is_provider: ClassVar[bool] = False
    #: Sinks also record values that providers or Keras validation add at a step
    #: where their own schedule did not fire.
    records_extras: ClassVar[bool] = False
    #: Safe to run in Keras's callback thread pool (no model state touched).
    async_safe: ClassVar[bool] = True
    #: Under a multi-worker `tf.distribute` strategy, act on the chief only (sinks).
    chief_only: ClassVar[bool] = False

    def __init__(self, every: int | Every | None = 100):
        super().__init__()
        self.every = None if every is None else Every.coerce(every, name="every")
        self._hub: RunHub | None = None
        self._last_fired_step: int | None = None

    # -- what subclasses implement ------------------------------------------------
    def on_run_begin(self, start_step: int) -> None:
        """Called once per `fit()`, before training, with the global step then.

        Validate the run and prepare files here (raising stops training before any
        update). A resumed run (`start_step` below what a sink already holds) drops
        the entries written after `start_step`.

        Args:
            start_step: The model's global step when `fit()` begins.
        """

    def on_step(self, event: StepEvent) -> dict[str, Any] | None:
        """Acts at a step. Providers return values to share with the sinks.

        Args:
            event: The `StepEvent`: true step, logs, extras, counters.
        """

    def on_run_end(self, final_step: int) -> None:
        """Called once when `fit()` ends (flush and close files here).

        Args:
            final_step: The model's global step at the end of the run.
        """

    def flush(self) -> None:
        """Called at every epoch end, after Keras's validation values were passed on.

        Sinks that hold a step's record until all its values are known write it here.
        """

    # -- helpers ------------------------------------------------------------------
    @property
    def hub(self) -> RunHub:
        """The shared state of the current run (step, start step, model)."""
        if self._hub is None:
            raise RuntimeError(
                f"{type(self).__name__} is not part of a running `fit()` call."
            )
        return self._hub

    def _dispatch_step(self, event: StepEvent, fired: bool) -> None:
        if self.is_provider:
            if fired:
                self._last_fired_step = event.step
                event.scheduled = True
                values = self.on_step(event)
                if values:
                    event.extras.update(values)
            return
        if not fired and not (self.records_extras and event.extras):
            return
        if fired:
            self._last_fired_step = event.step
        event.scheduled = fired
        self.on_step(event)

    # -- Keras hooks (final: subclasses implement the on_run_*/on_step hooks) ------
    def on_train_begin(self, logs: dict | None = None) -> None:
        hub = get_hub(self.model, self.params)
        self._hub = hub
        self._last_fired_step = None
        if self.chief_only and not hub.is_chief:
            return  # a worker that is not the chief: this sink does nothing
        self.on_run_begin(hub.start_step)
        hub.register(self)

    @property
    def active(self) -> bool:
        """False on a worker that is not the chief, for a chief-only callback."""
        return self._hub is not None and self in self._hub.callbacks

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self._hub is not None:
            self._hub.epoch_begin(epoch)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self._hub is not None:
            self._hub.batch_end(batch, logs)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._hub is not None:
            self._hub.epoch_end(epoch, logs)

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._hub is not None:
            self._hub.train_end()
