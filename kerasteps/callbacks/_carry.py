"""`RunCarry`: what a run continues from and hands on, and its values' windows
(private).

A run continues the state it resumes (a restored checkpoint's `ResumeState`, or the
end of the model's previous `fit()`): its run id and links, and the open window of
each `reduce="mean"` schedule, so that a resumed run writes the same means as an
uninterrupted one. Between points it keeps, per callback, where its window began;
at a point it gives the callback its values, reduced as the callback asks, from
`MetricWindows` (the state is read once per step). At a checkpoint or the run's end
it hands the same on, as a `ResumeState`, with the examples per batch the run trains
on: a resumed run is checked to train on as many as its checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from kerasteps._files import _atomic
from kerasteps._resume_state import ResumeState
from kerasteps.callbacks import _sinks, _windows
from kerasteps.callbacks.step_event import StepRecord, Values, scalar_items

logger = logging.getLogger("kerasteps")


@dataclass(slots=True)
class Member:
    """What the run keeps for one callback: its last fired step and the start of
    its open window (the cumulative state at its previous point, `window_step`)."""

    callback: Any
    window_start: _windows.State
    window_step: int
    last_fired: int | None = None

    def reads(self, *modes: str) -> bool:
        """Whether the callback reads values on a schedule, reduced by one of
        `modes` (`"mean"`, `"last"`)."""
        cb = self.callback
        return cb.reads_values and cb.reduce in modes and cb.every is not None


class RunCarry:
    """The run id, links and value windows of one `fit()` call of one model."""

    def __init__(
        self,
        model: keras.Model,
        start_step: int,
        resume: ResumeState | None,
        previous: RunCarry | None = None,
        saves_into: str | None = None,
    ):
        resume = _as_fork(resume, saves_into) if resume is not None else None
        self.windows = _windows.MetricWindows(model)
        self.start_step = start_step
        carried = resume.windows if resume is not None else {}
        #: Per schedule, where a window that carries a partial one in begins: the
        #: partial window's state, negated (`window_between` adds it).
        self._starts: dict[str, _windows.State] = {
            schedule: {k: -np.asarray(v, dtype=np.float64) for k, v in w.items()}
            for schedule, w in carried.items()
        }
        # The examples per batch of the checkpoint resumed from, and its path, until
        # the run's first batch checks them (`check_examples`).
        self._expected: tuple[int, str] | None = None
        if resume is not None and resume.examples_per_step is not None:
            self._expected = (resume.examples_per_step, resume.source)
        # The run id and links come from the checkpoint, else the previous `fit()`.
        known = resume if resume is not None and resume.run_id is not None else previous
        carried_id = known.run_id if known is not None else None
        #: The id of the run this `fit()` continues (see `kerasteps.callbacks._sinks`):
        #: carried by the checkpoint it resumes from or the model's previous `fit()`
        #: (also one that raised), else new.
        self.run_id = carried_id or _sinks.new_run_id()
        #: What the run is known as elsewhere (`StepRun.links`), carried with its id.
        self.links: dict[str, str] = dict(known.links) if carried_id else {}
        #: False when the run continues a state whose run is unknown (a model loaded
        #: from a `.keras` file at a step > 0): its sinks continue what they find.
        self.run_known = carried_id is not None or start_step == 0
        #: The run this one branches off (`ResumeState.forked_from`), or None.
        self.forked_from = resume.forked_from if resume is not None else None
        #: The checkpoint the run was restored from (`ResumeState.source`), or None.
        self.resumed_from = resume.source if resume is not None else None
        #: The deciding callbacks' states the run continues from (`saved_state`).
        self.decisions = dict(resume.decisions) if resume is not None else {}
        self._snapshots: dict[int, _windows.State] = {start_step: {}}
        self.last_readers: list[Any] = []

    def member(self, callback: Any) -> Member:
        """A new member for `callback`, its window opened where the carried one of
        its schedule left off."""
        start = self._starts.get(repr(callback.every), {})
        return Member(callback, start, self.start_step)

    def check_examples(self, step: int, batches: int) -> None:
        """A resumed run trains on as many examples per batch as its checkpoint:
        checked once, at its first batch (`batches` trained since the run began;
        `step`, the step before it).

        Raises:
            ValueError: the run trains on batches of another size.
        """
        if self._expected is None:
            return
        expected, source = self._expected
        self._expected = None
        per_batch = self._examples_per_batch(step, batches)
        if per_batch is not None and abs(per_batch - expected) > 1e-6:
            raise ValueError(
                f"kerasteps: this run trains on {per_batch:g} examples per batch, but "
                f"the checkpoint it resumed from ({source}) was trained on {expected}: "
                "`skip_consumed` skipped the batches of the wrong size, so the run "
                "would not see the data the interrupted run would have seen. Resume "
                f"with the batch size {expected}, or start a new run."
            )

    def _examples_per_batch(self, step: int, batches: int) -> float | None:
        """The mean examples per batch of the run's `batches` batches (the loss
        tracker's count), or None before any batch or without a loss tracker."""
        if batches <= 0:
            return None
        loss = self.windows.cumulative(step).get("loss")
        return loss[1] / batches if loss is not None else None

    def examples_per_step(self, step: int, batches: int) -> int | None:
        """Examples per batch of the run's `batches` batches, if constant."""
        per_batch = self._examples_per_batch(step, batches)
        if per_batch is None:
            return None
        rounded = round(per_batch)
        return int(rounded) if abs(per_batch - rounded) < 1e-6 and rounded > 0 else None

    def values(
        self, record: StepRecord, member: Member, counters: list[str], last_prev: int
    ) -> Values:
        """The training values of a step for a callback, reduced as it asks."""
        logs = scalar_items({k: v for k, v in record.logs.items() if k not in counters})
        if member.callback.reduce == "epoch" or not logs:
            return logs, frozenset()
        state = self.windows.cumulative(record.step, record.logs)
        if member.callback.reduce == "mean":
            start = member.window_start
            member.window_start = state
            member.window_step = record.step
        else:
            start = self._snapshots.get(last_prev if record.final else record.prev)
            if start is None:
                return logs, frozenset()
        return self.windows.reduce(logs, _windows.window_between(state, start))

    def snapshot_for_last(self, step: int, horizon: int) -> None:
        """Keeps the state where a `reduce="last"` callback's next step will begin
        (`horizon`: the steps one batch end may move)."""
        schedules = [callback.every for callback in self.last_readers]
        if any(s.last or s.crossed(step, step + horizon) for s in schedules):
            self._snapshots[step] = self.windows.cumulative(step)
            for old in sorted(self._snapshots)[:-3]:
                del self._snapshots[old]

    def resume_state(
        self, members: list[Member], step: int, examples_per_step: int | None = None
    ) -> ResumeState:
        """What a run that continues from `step` gets: the run id and links, the
        examples per step, and the partial window of each `reduce="mean"` schedule
        of `members` at `step`."""
        # Per schedule, the window of the callback that recorded values last (a
        # provider with the same schedule never advances its window).
        latest: dict[str, Member] = {}
        for member in [m for m in members if m.reads("mean")]:
            key = repr(member.callback.every)
            if key not in latest or member.window_step > latest[key].window_step:
                latest[key] = member
        state = self.windows.cumulative(step) if latest else {}
        out: dict[str, dict[str, list[float]]] = {}
        for key, member in latest.items():
            window = _windows.window_between(state, member.window_start)
            out[key] = {k: list(map(float, v)) for k, v in window.items() if np.any(v)}
        return ResumeState(
            step=step,
            windows=out,
            run_id=self.run_id,
            examples_per_step=examples_per_step,
            links=dict(self.links),
            decisions={
                m.callback.state_key: m.callback.state_dict()
                for m in members
                if m.callback.state_key is not None
            },
        )


def _as_fork(resume: ResumeState, saves_into: str | None) -> ResumeState:
    """`resume` as a fork when its checkpoint was restored from another directory
    than the one the run saves into, and that directory still holds it: the run
    branches off the restored one, which it never writes (its MLflow run, sinks'
    claims). A checkpoint whose directory is gone was moved: the run continues."""
    if saves_into is None or resume.source is None or resume.run_id is None:
        return resume
    restored_from = os.path.dirname(resume.source.rstrip("/"))
    if _atomic.is_local(saves_into) and _atomic.is_local(restored_from):
        same = os.path.realpath(saves_into) == os.path.realpath(restored_from)
        gone = not os.path.isdir(resume.source)
    else:
        same, gone = saves_into.rstrip("/") == restored_from, False
    if same or gone:
        return resume
    logger.info(
        "kerasteps: the checkpoint %s was restored into a run that saves into %s: "
        "this run is a fork of run %s at step %d, with a run id, sinks' claims and "
        "MLflow run of its own.",
        resume.source,
        saves_into,
        resume.run_id,
        resume.step,
    )
    parent = {"run_id": resume.run_id, "step": resume.step, "links": resume.links}
    return dataclasses.replace(resume, run_id=None, links={}, forked_from=parent)


__all__ = ["Member", "RunCarry"]
