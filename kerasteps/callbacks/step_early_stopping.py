"""`StepEarlyStopping`: stops training when a validation value stops improving."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import keras

from kerasteps._resume_state import ResumeState
from kerasteps._validate import check_bool
from kerasteps.callbacks._plateau import Plateau
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.checkpoint.store import CheckpointStore

__all__ = ["StepEarlyStopping"]

logger = logging.getLogger("kerasteps")
_NAME = "StepEarlyStopping"


def _stopped_line(step: int, reason: str | None) -> str:
    """The line that says why a restored run does not train again."""
    return f"{_NAME}: the run stopped at step {step}: {reason}"


class StepEarlyStopping(Plateau):
    """Stops training when a validation value has stopped improving.

    Keras's `EarlyStopping`, at the steps where a validation computes `monitor`
    (`ValidateEvery`'s steps, or Keras's own `validation_data` at an epoch end),
    and exact across a resume. Each value is judged once, at the step it is
    about. `patience` counts validations: training stops at the `patience`-th
    validation in a row that did not improve on the best by more than
    `min_delta` (a value that is not finite never improves). With
    `patience_steps` instead, it stops at the first validation without
    improvement `patience_steps` or more steps after the last improvement (or the
    first validation judged), whatever the validations' cadence. With `baseline`,
    the count restarts only on a value better than the baseline too.

    Its state (the count, the best value and its step, and the stop with its
    reason) is part of every checkpoint that `StepCheckpoint` saves, taken after
    the decision of that step, so a run resumed from a checkpoint decides exactly
    as the uninterrupted one. A resumed run that had already stopped does not train
    again: `fit()` raises a `RuntimeError` before the first step, and
    `stopped(model)` (check it before `fit()`, as `StopAtStep.remaining`) returns
    the line that says why. Arguments given to the constructor win over the saved
    state: a resumed run with another `patience` uses the new one (said at INFO),
    with the saved count. Two of them on one monitor keep two states (by their
    order in the callback list).

    At each validation it adds two values for the sinks: `best/<monitor>` (the best
    so far) and `patience/<monitor>` (the validations since it). The stop is one
    INFO line naming the step, the value and the rule.

    Args:
        monitor: Name of the validation value, default `"val_loss"`.
        min_delta: Number >= 0, default 0: the least change that counts as an
            improvement.
        patience: Positive int, default 3 (unless `patience_steps`): how many
            validations in a row without improvement stop training.
        mode: `"auto"` (default), `"min"` or `"max"`, as for
            `StepCheckpoint(monitor=...)`: inferred from the name; a mode that
            contradicts the name is refused.
        baseline: Optional number: the count restarts only on values better than
            it.
        start_step: Int >= 0, default 0: validations before this global step are
            not judged (a warm-up).
        patience_steps: Positive int or None (default): stop when this many steps
            passed without improvement, instead of `patience` validations.
        restore_best_weights: Bool, default False: after a stop, load the
            weights of the best checkpoint on disk (the run's
            `StepCheckpoint(monitor=...)` must rank by the same value), as
            Keras's flag does, once the final checkpoint is committed; the
            global step, the optimizers and that checkpoint stay those of the
            stop. A run that ends without a stop keeps its weights.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StepEarlyStopping, ValidateEvery
    >>> dense = keras.layers.Dense(1, kernel_initializer="zeros")
    >>> model = keras.Sequential([keras.Input((1,)), dense])
    >>> model.compile(keras.optimizers.SGD(0.1), "mse")
    >>> x = np.linspace(-1, 1, 40)[:, None]
    >>> early = StepEarlyStopping(patience=2)
    >>> validate = ValidateEvery(5, validation_data=(x, -x))  # gets worse
    >>> _ = model.fit(x, x, batch_size=2, epochs=5, verbose=0,
    ...               callbacks=[validate, early])
    >>> early.stopped_step, early.best_step
    (15, 5)
    """

    async_safe = True
    stops_training = True  # at ends on the training thread (`StepCallback`)

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int | None = None,
        mode: str = "auto",
        baseline: float | None = None,
        start_step: int = 0,
        patience_steps: int | None = None,
        restore_best_weights: bool = False,
    ):
        super().__init__(
            monitor, min_delta, patience, patience_steps, mode, baseline, start_step
        )
        self.restore_best_weights = check_bool(
            "restore_best_weights", restore_best_weights
        )
        self._stopped_here = False

    def _clear(self) -> None:
        super()._clear()
        #: The step where this callback stopped training, and why; else None.
        self.stopped_step: int | None = None
        self.reason: str | None = None

    def state_dict(self) -> dict[str, Any]:
        """The decision state: count, best and its step, the stop and its reason."""
        state = super().state_dict()
        state.update(stopped_step=self.stopped_step, reason=self.reason)
        return state

    def _load_more(self, state: Mapping[str, Any]) -> None:
        stopped, reason = state["stopped_step"], state["reason"]
        if stopped is not None and not isinstance(stopped, int):
            raise ValueError(f"stopped_step {stopped!r} is not an int")
        self.stopped_step = stopped
        self.reason = reason if isinstance(reason, str) else None

    def stopped(self, model: keras.Model) -> str | None:
        """Why the run restored into `model` already stopped, else None.

        A run that stopped early, restored from its checkpoint, does not train
        again: check this before `fit()` (which raises for it).

        Args:
            model: The model, after `StepCheckpoint.restore_latest`.
        """
        resume = ResumeState.of(model)
        state = None if resume is None else resume.decisions.get(self.state_key)
        if not isinstance(state, Mapping) or state.get("stopped_step") is None:
            return None
        return _stopped_line(state["stopped_step"], state.get("reason"))

    # -- the run --------------------------------------------------------------------
    def on_run_begin(self, start_step: int) -> None:
        super().on_run_begin(start_step)
        if self.stopped_step is not None:
            line = _stopped_line(self.stopped_step, self.reason)
            logger.info("%s; not training again.", line)
            raise RuntimeError(
                f"{line}. It does not train again: skip `fit()` when "
                "`early_stopping.stopped(model)` says so."
            )

    def on_run_ready(self) -> None:
        super().on_run_ready()
        self._stopped_here = False
        ranked_by = self.run.checkpoint_monitor
        if self.restore_best_weights and ranked_by != self.monitor:
            has = (
                "no StepCheckpoint"
                if self.run.checkpoint_directory is None
                else (f"a StepCheckpoint with monitor={ranked_by!r}")
            )
            raise ValueError(
                f"{_NAME}: restore_best_weights=True restores the best checkpoint on "
                f"disk by {self.monitor!r}, but the run has {has}: add "
                f"StepCheckpoint(directory, monitor={self.monitor!r}) to the callbacks."
            )

    def on_run_closed(self) -> None:
        if not (self.restore_best_weights and self._stopped_here):
            return
        store = CheckpointStore(self.run.checkpoint_directory)
        info = store.restore_best(self.model, self.monitor, weights_only=True)
        if info is None:
            logger.warning(
                "%s: no checkpoint in %s records %s: the weights stay those of "
                "step %d.",
                _NAME,
                store.directory,
                self.monitor,
                self.stopped_step,
            )
        else:
            logger.info(
                "%s: restored the weights of %s (step %d, %s=%.6g); the global step "
                "stays %d.",
                _NAME,
                info.path,
                info.step,
                self.monitor,
                info.value,
                self.stopped_step,
            )

    def on_step(self, event: StepEvent) -> dict[str, float] | None:
        value = None if self.stopped_step else self.judge(event)
        if value is None:
            return None
        if self.plateaued(event.step):
            self.reason = self.rule(value)
            self.stopped_step, self._stopped_here = event.step, True
            self.model.stop_training = True
            logger.info("%s: stopping at step %d: %s.", _NAME, event.step, self.reason)
        best = math.nan if self.best is None else self.best
        return {f"best/{self.monitor}": best, f"patience/{self.monitor}": self.wait}
