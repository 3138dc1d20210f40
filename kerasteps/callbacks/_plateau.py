"""`Plateau`: what `StepEarlyStopping` and `StepReduceLROnPlateau` share (private).

Both watch one validation value (`Monitor`: judged once, at the step it is
about) and count how long it has not improved: in validations (`patience`) or in
steps since the count last restarted (`patience_steps`, Composer's `"500ba"`).
Their state (the count, the best and its step, and what the subclass adds) goes
into every checkpoint, so a resumed run decides as the uninterrupted one did.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kerasteps._validate import check_int, check_number
from kerasteps.callbacks._monitor import Monitor
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.checkpoint._retention import is_better

logger = logging.getLogger("kerasteps")


def _optional(check: Any, name: str, value: Any, *args: Any) -> Any:
    return None if value is None else check(name, value, *args)


class Plateau(StepCallback):
    """A decider that counts validations without improvement of `monitor`.

    Args:
        monitor: Name of the validation value (`"val_loss"`).
        min_delta: Number >= 0: the least change that counts as an improvement.
        patience: Positive int or None: validations in a row without improvement
            that make a plateau (None: `default_patience`, unless `patience_steps`).
        patience_steps: Positive int or None: instead of `patience`, the steps
            since the count last restarted that make a plateau.
        mode: `"auto"`, `"min"` or `"max"` (`_retention.infer_mode`).
        baseline: Optional number: the count restarts only on values better than it.
        start_step: Int >= 0: validations before this global step are not judged.

    Example:

    >>> from kerasteps.callbacks._plateau import Plateau
    >>> Plateau("val_accuracy", 0.0, None, 100, "auto", None, 0).mode
    'max'
    """

    role = "decider"
    records_extras = True
    reads_values = False
    #: The patience when neither `patience` nor `patience_steps` is given.
    default_patience = 3

    def __init__(
        self,
        monitor: str,
        min_delta: float,
        patience: int | None,
        patience_steps: int | None,
        mode: str,
        baseline: float | None,
        start_step: int,
    ):
        super().__init__(every=None)
        self._name = type(self).__name__
        self._monitor = Monitor(self._name, monitor, mode)
        self.monitor, self.mode = self._monitor.name, self._monitor.mode
        self.min_delta = check_number("min_delta", min_delta, 0.0)
        if patience is not None and patience_steps is not None:
            raise ValueError(
                f"{self._name}: give `patience` (validations) or `patience_steps` "
                f"(steps), not both; received {patience!r} and {patience_steps!r}."
            )
        self.patience_steps = _optional(check_int, "patience_steps", patience_steps)
        if patience is None and patience_steps is None:
            patience = self.default_patience
        self.patience = _optional(check_int, "patience", patience)
        self.baseline = _optional(check_number, "baseline", baseline, None)
        self.start_step = check_int("start_step", start_step, 0)
        self.state_name = f"{self._name}:{self.monitor}"
        self._clear()

    def _clear(self) -> None:
        #: Validations since the count last restarted (an improvement, a cut).
        self.wait = 0
        #: The step where the count last restarted (None before the first value).
        self.since: int | None = None
        #: The best value so far, and its step (None before the first).
        self.best: float | None = None
        self.best_step: int | None = None
        #: Whether the value judged last improved on the best.
        self.improved = False

    # -- the state a checkpoint carries ---------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The decision state: the count, the best and its step, and the rule."""
        return {
            "wait": self.wait,
            "since": self.since,
            "best": self.best,
            "best_step": self.best_step,
            "patience": self.patience,
            "patience_steps": self.patience_steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Takes a saved state (a malformed one raises `ValueError`)."""
        try:
            self.wait = check_int("wait", state["wait"], 0)
            self.since = _optional(check_int, "since", state["since"], 0)
            self.best = _optional(check_number, "best", state["best"], None)
            self.best_step = _optional(check_int, "best_step", state["best_step"], 0)
            self._load_more(state)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(
                f"{self._name}: the saved state {state!r:.200} is malformed ({error})."
            ) from error
        saved = (state.get("patience"), state.get("patience_steps"))
        if saved != (self.patience, self.patience_steps):
            logger.info(
                "%s: the run continues with %s (the checkpoint's run had %s); "
                "%d validation(s) without improvement so far.",
                self._name,
                self._patience_text(self.patience, self.patience_steps),
                self._patience_text(*saved),
                self.wait,
            )

    def _load_more(self, state: Mapping[str, Any]) -> None:
        """Takes what a subclass adds to the saved state."""

    @staticmethod
    def _patience_text(patience: Any, patience_steps: Any) -> str:
        if patience_steps is not None:
            return f"patience_steps {patience_steps}"
        return f"patience {patience}"

    # -- the run --------------------------------------------------------------------
    def on_run_begin(self, start_step: int) -> None:
        self._clear()
        saved = self.run.saved_state(self.state_key)
        if saved is not None:
            self.load_state_dict(saved)

    def on_run_ready(self) -> None:
        self._monitor.begin(self.run, self.model)

    def on_run_end(self, final_step: int) -> None:
        self._monitor.end(self.run)

    def judge(self, event: StepEvent) -> float | None:
        """Counts the monitored value of this step's validation and returns it;
        None where there is none to judge (no validation, before `start_step`)."""
        value = self._monitor.take(event, self.run)
        if value is None or event.step < self.start_step:
            return None
        self.wait += 1
        if self.since is None:
            self.since = event.step
        self.improved = is_better(value, self.best, self.mode, self.min_delta)
        if self.improved:
            self.best, self.best_step = value, event.step
            if self.baseline is None or is_better(
                value, self.baseline, self.mode, self.min_delta
            ):
                self.restart(event.step)
        return value

    def restart(self, step: int) -> None:
        """Restarts the count at `step` (an improvement, a cut)."""
        self.wait, self.since = 0, step

    def plateaued(self, step: int) -> bool:
        """Whether the value just judged at `step` ends a plateau."""
        if self.improved:
            return False
        if self.patience_steps is not None:
            return step - (self.since or 0) >= self.patience_steps
        return self.wait >= self.patience

    def rule(self, value: float) -> str:
        """Why the value just judged ends a plateau, for the INFO line."""
        since = "" if self.best_step is None else f" (step {self.best_step})"
        against = (
            "the baseline" if self.best is None else f"the best {self.best:.6g}{since}"
        )
        if self.patience_steps is None:
            length = f"{self.wait} validations (patience {self.patience}"
        else:
            length = f"{self.wait} validations since step {self.since} (patience_steps "
            length += f"{self.patience_steps}"
        return (
            f"{self.monitor} = {value:.6g} has not improved on {against} in {length}, "
            f"min_delta {self.min_delta:g})"
        )
