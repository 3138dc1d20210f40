"""`StepEarlyStopping`: stops training when a validation value stops improving."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import keras

from kerasteps._resume_state import ResumeState
from kerasteps._validate import check_int, check_number
from kerasteps.callbacks._monitor import Monitor
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.checkpoint._retention import is_better

__all__ = ["StepEarlyStopping"]

logger = logging.getLogger("kerasteps")
_NAME = "StepEarlyStopping"


def _stopped_line(step: int, reason: str | None) -> str:
    """The line that says why a restored run does not train again."""
    return f"{_NAME}: the run stopped at step {step}: {reason}"


class StepEarlyStopping(StepCallback):
    """Stops training when a validation value has stopped improving.

    Keras's `EarlyStopping`, at the steps where a validation computes `monitor`
    (`ValidateEvery`'s steps, or Keras's own `validation_data` at an epoch end),
    and exact across a resume. Each value is judged once, at the step it is
    about. `patience` counts validations: training stops at the `patience`-th
    validation in a row that did not improve on the best by more than
    `min_delta` (a value that is not finite never improves). With `baseline`, the
    count restarts only on a value better than the baseline too.

    Its state (the count, the best value and its step, and the stop with its
    reason) is part of every checkpoint that `StepCheckpoint` saves, taken after
    the decision of that step, so a run resumed from a checkpoint decides exactly
    as the uninterrupted one. A resumed run that had already stopped does not train
    again: `fit()` raises a `RuntimeError` before the first step, and
    `stopped(model)` (check it before `fit()`, as `StopAtStep.remaining`) returns
    the line that says why. Arguments given to the constructor win over the saved
    state: a resumed run with another `patience` uses the new one (said at INFO),
    with the saved count.

    At each validation it adds two values for the sinks: `best/<monitor>` (the best
    so far) and `patience/<monitor>` (the validations since it). The stop is one
    INFO line naming the step, the value and the rule.

    Args:
        monitor: Name of the validation value, default `"val_loss"`.
        min_delta: Number >= 0, default 0: the least change that counts as an
            improvement.
        patience: Positive int, default 3: how many validations in a row without
            improvement stop training.
        mode: `"auto"` (default), `"min"` or `"max"`, as for
            `StepCheckpoint(monitor=...)`: inferred from the name; a mode that
            contradicts the name is refused.
        baseline: Optional number: the count restarts only on values better than
            it.
        start_step: Int >= 0, default 0: validations before this global step are
            not judged (a warm-up).

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

    role = "decider"
    records_extras = True
    reads_values = False

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 3,
        mode: str = "auto",
        baseline: float | None = None,
        start_step: int = 0,
    ):
        super().__init__(every=None)
        self._monitor = Monitor(_NAME, monitor, mode)
        self.monitor, self.mode = self._monitor.name, self._monitor.mode
        self.min_delta = check_number("min_delta", min_delta, 0.0)
        self.patience = check_int("patience", patience)
        self.baseline = (
            None if baseline is None else check_number("baseline", baseline, None)
        )
        self.start_step = check_int("start_step", start_step, 0)
        self._clear()

    def _clear(self) -> None:
        #: Validations in a row without improvement.
        self.wait = 0
        #: The best value so far, and its step (None before the first).
        self.best: float | None = None
        self.best_step: int | None = None
        #: The step where this callback stopped training, and why; else None.
        self.stopped_step: int | None = None
        self.reason: str | None = None

    # -- the state a checkpoint carries ---------------------------------------------
    @property
    def state_key(self) -> str:
        """The key of this callback's state in a checkpoint."""
        return f"{_NAME}:{self.monitor}"

    def state_dict(self) -> dict[str, Any]:
        """The decision state: count, best and its step, the stop and its reason."""
        return {
            "wait": self.wait,
            "best": self.best,
            "best_step": self.best_step,
            "stopped_step": self.stopped_step,
            "reason": self.reason,
            "patience": self.patience,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Takes a saved state (a malformed one raises `ValueError`)."""
        try:
            wait = check_int("wait", state["wait"], 0)
            best = state["best"]
            best = None if best is None else check_number("best", best, None)
            best_step = state["best_step"]
            best_step = (
                None if best_step is None else check_int("best_step", best_step, 0)
            )
            stopped = state["stopped_step"]
            stopped = None if stopped is None else check_int("stopped_step", stopped, 0)
            reason = state["reason"]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(
                f"{_NAME}: the saved state {state!r:.200} is malformed ({error})."
            ) from error
        self.wait, self.best, self.best_step = wait, best, best_step
        self.stopped_step, self.reason = (
            stopped,
            reason if isinstance(reason, str) else None,
        )
        if state.get("patience") != self.patience:
            logger.info(
                "%s: the run continues with patience %d (the checkpoint's run had %r); "
                "%d validation(s) without improvement so far.",
                _NAME,
                self.patience,
                state.get("patience"),
                self.wait,
            )

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
        self._clear()
        saved = self.run.saved_state(self.state_key)
        if saved is not None:
            self.load_state_dict(saved)
        if self.stopped_step is not None:
            line = _stopped_line(self.stopped_step, self.reason)
            logger.info("%s; not training again.", line)
            raise RuntimeError(
                f"{line}. It does not train again: skip `fit()` when "
                "`early_stopping.stopped(model)` says so."
            )

    def on_run_ready(self) -> None:
        self._monitor.begin(self.run, self.model)

    def on_step(self, event: StepEvent) -> dict[str, float] | None:
        value = self._monitor.take(event, self.run)
        if value is None or event.step < self.start_step or self.stopped_step:
            return None
        self.wait += 1
        if is_better(value, self.best, self.mode, self.min_delta):
            self.best, self.best_step = value, event.step
            if self.baseline is None or is_better(
                value, self.baseline, self.mode, self.min_delta
            ):
                self.wait = 0
        elif self.wait >= self.patience:
            self._stop(event.step, value)
        best = math.nan if self.best is None else self.best
        return {f"best/{self.monitor}": best, f"patience/{self.monitor}": self.wait}

    def _stop(self, step: int, value: float) -> None:
        since = "" if self.best_step is None else f" (step {self.best_step})"
        against = (
            "the baseline" if self.best is None else f"the best {self.best:.6g}{since}"
        )
        self.reason = (
            f"{self.monitor} = {value:.6g} has not improved on {against} in "
            f"{self.wait} validations (patience {self.patience}, min_delta "
            f"{self.min_delta:g})"
        )
        self.stopped_step = step
        self.model.stop_training = True
        logger.info("%s: stopping at step %d: %s.", _NAME, step, self.reason)
