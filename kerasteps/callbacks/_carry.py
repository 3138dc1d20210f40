"""`RunCarry`: what a run continues from and hands on, and its values' windows
(private).

A run continues the state it resumes (a restored checkpoint's `ResumeState`, or the
end of the model's previous `fit()`): its run id and links, and the open window of
each `reduce="mean"` schedule, so that a resumed run writes the same means as an
uninterrupted one. Between points it keeps, per callback, where its window began;
at a point it gives the callback its values, reduced as the callback asks, from
`MetricWindows` (the state is read once per step). At a checkpoint or the run's end
it hands the same on, as a `ResumeState`.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from kerasteps._resume_state import ResumeState
from kerasteps.callbacks import _sinks, _windows
from kerasteps.callbacks.step_event import StepRecord, scalar_items


class Member:
    """What the run keeps for one callback: its last fired step and the start of
    its open window (the cumulative state at its previous point)."""

    __slots__ = ("callback", "last_fired", "window_start", "window_step")

    def __init__(self, callback: Any, window_start: _windows.State, step: int):
        self.callback = callback
        self.last_fired: int | None = None
        self.window_start = window_start
        self.window_step = step


class RunCarry:
    """The run id, links and value windows of one `fit()` call of one model."""

    def __init__(
        self,
        model: keras.Model,
        start_step: int,
        resume: ResumeState | None,
        previous: Any = None,
    ):
        self.windows = _windows.MetricWindows(model)
        self.start_step = start_step
        self._carried = {}
        if resume is not None:
            self._carried = {
                schedule: {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
                for schedule, w in resume.windows.items()
            }
        carried_id, links = (
            (resume.run_id, resume.links) if resume is not None else (None, {})
        )
        if carried_id is None and previous is not None and not previous.ended:
            # its fit() raised: this one goes on
            carried_id, links = previous.run_id, previous.links
        #: The id of the run this `fit()` continues (see `kerasteps.callbacks._sinks`):
        #: carried by the checkpoint it resumes from or the model's previous `fit()`
        #: (also one that raised), else new.
        self.run_id = carried_id or _sinks.new_run_id()
        #: What the run is known as elsewhere (`StepRun.links`), carried with its id.
        self.links: dict[str, str] = dict(links) if carried_id else {}
        #: False when the run continues a state whose run is unknown (a model loaded
        #: from a `.keras` file at a step > 0): its sinks continue what they find.
        self.run_known = carried_id is not None or start_step == 0
        #: The examples per batch of the checkpoint resumed from, and its path.
        self.expected_examples = (
            (resume.examples_per_step, resume.source)
            if resume is not None and resume.examples_per_step is not None
            else None
        )
        self._snapshots: dict[int, _windows.State] = {start_step: {}}
        self.last_readers: list[Any] = []

    def member(self, callback: Any) -> Member:
        """A new member for `callback`, its window opened where the carried one of
        its schedule left off."""
        start = _windows.carried(self._carried.get(repr(callback.every), {}))
        return Member(callback, start, self.start_step)

    def values(
        self, record: StepRecord, member: Member, counters: list[str], last_prev: int
    ) -> tuple[dict[str, float], frozenset[str]]:
        """The training values of a step for a callback, reduced as it asks."""
        logs = scalar_items(record.logs)
        for name in counters:
            logs.pop(name, None)
        callback = member.callback
        reduce = callback.reduce
        if reduce == "epoch" or not logs or not callback.reads_values:
            return logs, frozenset()
        state = self.windows.cumulative(record.step, record.logs)
        if reduce == "mean":
            window = _windows.window_between(state, member.window_start)
            member.window_start = state
            member.window_step = record.step
        else:
            before = record.prev if not record.final else last_prev
            start = self._snapshots.get(before)
            if start is None:
                return logs, frozenset()
            window = _windows.window_between(state, start)
        return self.windows.reduce(logs, window)

    def snapshot_for_last(self, step: int, horizon: int) -> None:
        """Keeps the state where a `reduce="last"` callback's next step will begin
        (`horizon`: the steps one batch end may move)."""
        for callback in self.last_readers:
            every = callback.every
            if every.last or every.crossed(step, step + horizon):
                self._snapshots[step] = self.windows.cumulative(step)
                for old in sorted(self._snapshots)[:-3]:
                    del self._snapshots[old]
                return

    def open_windows(
        self, members: list[Member], step: int
    ) -> dict[str, dict[str, list[float]]]:
        """The partial window of each `reduce="mean"` schedule at `step`."""
        readers = [
            member
            for member in members
            if member.callback.reads_values
            and member.callback.reduce == "mean"
            and member.callback.every is not None
        ]
        if not readers:
            return {}
        # Per schedule, the window of the callback that recorded values last (a
        # provider with the same schedule never advances its window).
        latest: dict[str, Member] = {}
        for member in readers:
            key = repr(member.callback.every)
            if key not in latest or member.window_step > latest[key].window_step:
                latest[key] = member
        state = self.windows.cumulative(step)
        out: dict[str, dict[str, list[float]]] = {}
        for key, member in latest.items():
            window = _windows.window_between(state, member.window_start)
            out[key] = {k: list(map(float, v)) for k, v in window.items() if np.any(v)}
        return out

    def resume_state(
        self,
        members: list[Member],
        step: int,
        examples_per_step: int | None = None,
        windows: bool = True,
    ) -> ResumeState:
        """What a run that continues from `step` gets: the open windows (unless
        `windows` is False), the run id and links, the examples per step."""
        return ResumeState(
            step=step,
            windows=self.open_windows(members, step) if windows else {},
            run_id=self.run_id,
            examples_per_step=examples_per_step,
            links=dict(self.links),
        )


__all__ = ["Member", "RunCarry"]
