"""`StopAtTime`: ends training within a time budget, with time left to save."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import Any

import keras

from kerasteps._resume_state import ResumeState
from kerasteps._validate import check_bool, check_number, check_positive_number
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent

__all__ = ["StopAtTime"]

logger = logging.getLogger("kerasteps")
_NAME = "StopAtTime"


class StopAtTime(StepCallback):
    """Stops training before `max_seconds` of training time are spent.

    Two clocks (Lightning's `Timer` and a scheduler's slot):

    - `carry=True` (default): a budget of training time across resumes. The
      time spent, from each `fit()`'s begin, is part of every checkpoint that
      `StepCheckpoint` saves; a run resumed from one goes on counting from it (the
      time between that checkpoint and an interruption is not counted: it trained
      nothing that survived).
    - `carry=False`: this process's limit, counted from the moment the callback
      was made (the launcher's `--max-time`), not saved.

    Training stops early enough for the final checkpoint to be written in time:
    at the step where what is left would not cover twice one more step (this
    run's mean step time) and one more save (the run's `StepCheckpoint`'s longest
    save, copy to commit), training stops (the step time is timed from the
    first check of the run on, after compiling), and the `Every(..., last=True)`
    schedules save at that step. What runs once per process (compiling the
    epoch end's work and the first save: about 0.4 s on JAX here) is not
    foreseen: keep a budget well above it. Between those checks nothing runs at
    the quiet steps: a timer wakes the run when the time left gets close.

    Not under a multi-worker strategy (refused when the run begins): the workers'
    clocks would stop them at different steps.

    A resumed run whose budget is spent (or that stopped) does not train again: `fit()`
    raises a `RuntimeError` before the first step (`remaining(model)` is 0: check
    it first, as `StopAtStep.remaining`).

    Args:
        max_seconds: Positive number: the budget in seconds.
        carry: Bool, default True: count the training time across resumes (saved
            in checkpoints); False: this process's time since construction.
        since: Optional `time.monotonic()` reading, with `carry=False`: the
            process clock counts from it instead (a launcher's start).

    Example:

    >>> import numpy as np, keras, kerasteps
    >>> from kerasteps.callbacks import StopAtTime
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> stop = StopAtTime(0.5)
    >>> x, y = np.ones((40, 2)), np.ones((40, 1))
    >>> _ = model.fit(x, y, batch_size=2, epochs=10**6, verbose=0, callbacks=[stop])
    >>> stop.stopped_step == kerasteps.global_step(model)
    True
    """

    role = "action"
    async_safe = True
    reads_model = False  # its events' values only
    stops_training = True  # at ends on the training thread (`StepCallback`)
    reads_values = False

    def __init__(
        self, max_seconds: float, carry: bool = True, since: float | None = None
    ):
        super().__init__(every=None)
        self.max_seconds = check_positive_number("max_seconds", max_seconds)
        self.carry = check_bool("carry", carry)
        self.state_name = _NAME if self.carry else None
        #: The global step at which this callback stopped training, else None.
        self.stopped_step: int | None = None
        if since is not None and self.carry:
            raise ValueError(
                "`since` sets where the process clock starts: give it with "
                f"carry=False only; received since={since!r} with carry=True."
            )
        self._made = (
            time.monotonic()
            if since is None
            else check_number("since", since, 0.0, time.monotonic())
        )
        self._spent = 0.0  # carried in from a checkpoint
        self._began: float | None = None  # this run's begin (monotonic)
        self._mark: tuple[float, int] | None = None  # a first check: time, step
        self._timer: threading.Timer | None = None

    @property
    def elapsed(self) -> float:
        """The seconds this budget has spent so far."""
        if not self.carry:
            return time.monotonic() - self._made
        running = 0.0 if self._began is None else time.monotonic() - self._began
        return self._spent + running

    def state_dict(self) -> dict[str, Any]:
        """The training time spent, and the stop, for the checkpoint taken now."""
        return {
            "elapsed": self.elapsed,
            "max_seconds": self.max_seconds,
            "stopped_step": self.stopped_step,
        }

    def remaining(self, model: keras.Model) -> float:
        """The seconds of the budget left for a model (restored from a checkpoint:
        its saved time counts), before `fit()`.

        Args:
            model: The compiled model (possibly restored from a checkpoint).
        """
        if not self.carry:
            return max(0.0, self.max_seconds - self.elapsed)
        resume = ResumeState.of(model)
        saved = None if resume is None else resume.decisions.get(_NAME)
        if self._stopped_in(saved) is not None:
            return 0.0
        return max(0.0, self.max_seconds - _elapsed_of(saved))

    def _stopped_in(self, saved: Mapping[str, Any] | None) -> int | None:
        """The step where a saved run with this budget stopped, else None (a new
        `max_seconds` wins over the saved one)."""
        if (
            not isinstance(saved, Mapping)
            or saved.get("max_seconds") != self.max_seconds
        ):
            return None
        return saved.get("stopped_step")

    # -- the run --------------------------------------------------------------------
    def on_run_begin(self, start_step: int) -> None:
        if self.run.lockstep:
            raise ValueError(
                f"{_NAME}: under a multi-worker strategy each worker's clock would "
                "stop it at another step, and a worker that stops alone blocks the "
                "others: stop at a step (StopAtStep) instead."
            )
        self.stopped_step, self._mark = None, None
        self._began = self.run.began  # fit()'s work before this callback counts
        saved = self.run.saved_state(self.state_key) if self.carry else None
        self._spent = _elapsed_of(saved)
        stopped = self._stopped_in(saved)
        if self.elapsed >= self.max_seconds or stopped is not None:
            raise RuntimeError(
                f"{_NAME}(max_seconds={self.max_seconds:g}): the run already spent "
                f"{self.elapsed:.1f} s of it"
                + ("" if stopped is None else f" and stopped at step {stopped}")
                + f", at global step {start_step}: nothing is left to train. Skip "
                "`fit()` when `stop.remaining(model) == 0`."
            )
        if saved is not None and saved.get("max_seconds") != self.max_seconds:
            logger.info(
                "%s: the run continues with max_seconds %g (the checkpoint's run had "
                "%r); %.1f s spent so far.",
                _NAME,
                self.max_seconds,
                saved.get("max_seconds"),
                self._spent,
            )
        self._arm(min(1.0, (self.max_seconds - self.elapsed) / 2))

    def on_other_step(self, event: StepEvent) -> None:
        if self.stopped_step is not None:
            return
        now, left = time.monotonic(), self.max_seconds - self.elapsed
        if self._mark is None:  # the first check: steps timed from here on (the
            self._mark = (now, event.step)  # first ones compiled)
        since, at = self._mark
        step_seconds = (now - since) / max(1, event.step - at)
        margin = 2 * (step_seconds + self.run.checkpoint_seconds)
        if at == event.step and left > margin:  # no step timed yet
            self._arm(min(left / 4, 0.5))
            return
        if left > margin:  # check again halfway to the margin (the margin may grow)
            self._arm((left - margin) / 2)
            return
        self.stopped_step = event.step
        self.model.stop_training = True
        logger.info(
            "%s: stopping at step %d after %.2f s (max_seconds=%g): the %.3f s left "
            "would not cover twice one more step (%.3f s) and the final checkpoint "
            "(%.3f s).",
            _NAME,
            event.step,
            self.elapsed,
            self.max_seconds,
            left,
            step_seconds,
            self.run.checkpoint_seconds,
        )

    def on_run_end(self, final_step: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        if self.carry and self._began is not None:
            self._spent, self._began = self.elapsed, None

    def _arm(self, delay: float) -> None:
        """Wakes the run (every callback acts at the next batch end) in `delay` s."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(max(0.0, delay), self._wake)
        self._timer.daemon = True
        self._timer.start()

    def _wake(self) -> None:
        run = self._run
        if run is not None and not run.ended:
            run.wake()


def _elapsed_of(state: Mapping[str, Any] | None) -> float:
    """The time a saved state records (0.0 for none or a malformed one)."""
    value = None if not isinstance(state, Mapping) else state.get("elapsed")
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else 0.0
