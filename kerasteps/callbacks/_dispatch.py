"""`Dispatcher`: the per-`fit()` coordinator that every kerasteps callback shares
(private).

Keras calls each callback on its own; kerasteps callbacks must agree on the step, see
each other's values (a validation run at step N reaches every sink at step N whatever
the callback order) and read the training state once per step. One `Dispatcher` per
model and `fit()` call does that, with two helpers: a `StepTracker` (`_tracker.py`)
knows the global step, and a `RunCarry` (`_carry.py`) the run's id and the windows
of its values, carried in from the state the run resumes and handed on.

Between steps where some callback is due, a batch end costs a few attribute reads. At
a due step the first kerasteps callback that Keras calls processes the batch for all
of them, in role order (providers such as validation first, then guards, sinks,
checkpoints, stop); the others return at once. Each callback's event carries its
values, reduced as it asks (see `StepEvent`), when it reads values at that step.

Keras runs batch ends on the training thread on TensorFlow (`IS_THREAD_SAFE` is False
there). On JAX and PyTorch it may dispatch them to a thread pool, unless a callback
says it is not async-safe; kerasteps callbacks read the training state at the steps
where they act, which in a pool thread would race with training, so they are not.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

import keras

from kerasteps import distribute
from kerasteps import steps as steps_lib
from kerasteps._resume_state import ResumeState
from kerasteps.callbacks._carry import Member, RunCarry
from kerasteps.callbacks._tracker import StepTracker
from kerasteps.callbacks.step_event import StepEvent, StepRecord, scalar_items
from kerasteps.callbacks.step_run import StepRun
from kerasteps.steps import StepNotCountedError

#: The roles of kerasteps callbacks, in the order they act at one step: values are
#: provided, checked, recorded, then acted on (checkpoint, stop). The one place that
#: orders callbacks (`StepCallback.role`).
ROLES = ("provider", "guard", "sink", "action")

#: A kerasteps callback (`kerasteps.callbacks.StepCallback`; not imported here,
#: which imports this module): what the dispatcher reads of it is its public
#: interface (`every`, `reduce`, `role`, `on_step`...).
StepCallback = Any

logger = logging.getLogger("kerasteps")

_DISPATCHERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DISPATCHERS_LOCK = threading.Lock()


class _Acting:
    """Counts the nested blocks where kerasteps callbacks act (`Dispatcher.acting`)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> None:
        self.count += 1

    def __exit__(self, *exc_info: Any) -> None:
        self.count -= 1


class Dispatcher:
    """Shared state of one `fit()` call of one model (see module docstring)."""

    def __init__(
        self, model: keras.Model, params: dict, previous: Dispatcher | None = None
    ):
        self.model = model
        self.params = params
        self.is_chief = distribute.is_chief(model)
        start_step = steps_lib.global_step(model)
        self.carry = RunCarry(
            model, start_step, ResumeState.take(model, start_step), previous
        )
        self.tracker = StepTracker(
            model, params, self.carry.windows, self.carry.expected_examples
        )
        self._members: list[Member] = []
        # Chief-only callbacks on another worker: they do nothing, but their
        # schedules count, so that every worker reads the metric state at the same
        # steps (under MultiWorkerMirroredStrategy, a read is a collective op).
        self._passive: list[Member] = []
        self._lockstep = distribute.task_of(model)[0] is not None
        self.last_logs: Mapping[str, Any] = {}
        self.ended = False
        #: The step where a guard found a non-finite loss (set by the guard), or None.
        self.non_finite_at: int | None = None
        self._epoch = None
        self._epoch_ended = None
        self._last_batch = -1
        self._lock = threading.RLock()
        #: The thread that runs this `fit()`: Keras calls the callbacks' hooks there.
        self.thread = threading.get_ident()
        self._acting = _Acting()
        self._next_due = 0  # dispatch at the first step change, then when due
        self._quiet_until: float = -1
        self._wake = False
        self._provided: tuple[int, set[str]] = (-1, set())
        self._warned: set[str] = set()
        #: What the run's callbacks see of it (`kerasteps.callbacks.StepRun`).
        self.run = StepRun(self)

    # -- what StepRun reads ---------------------------------------------------------
    @property
    def step(self) -> int:
        return self.tracker.step

    @property
    def start_step(self) -> int:
        return self.tracker.start_step

    @property
    def run_id(self) -> str:
        return self.carry.run_id

    @property
    def links(self) -> dict[str, str]:
        return self.carry.links

    @property
    def steps_per_execution(self) -> int:
        return self.tracker.steps_per_execution

    def resume_state(self) -> ResumeState:
        """What a checkpoint of the model now hands to a run resumed from it."""
        return self.carry.resume_state(
            self._members + self._passive,
            self.tracker.step,
            self.tracker.examples_per_step(),
        )

    # -- registration -------------------------------------------------------------
    def register(self, callback: StepCallback, active: bool = True) -> None:
        """Adds a callback; an inactive one (a sink on a worker) only counts."""
        if callback.role not in ROLES:
            raise ValueError(
                f"{type(callback).__name__}.role must be one of {', '.join(ROLES)}; "
                f"received {callback.role!r}."
            )
        with self._lock:
            group = self._members if active else self._passive
            if all(member.callback is not callback for member in group):
                group.append(self.carry.member(callback))
                # Stable sort: role first, then the order the user listed them.
                group.sort(key=lambda member: ROLES.index(member.callback.role))
            self.carry.last_readers = [
                cb
                for cb in self._all_callbacks()
                if cb.reads_values and cb.reduce == "last" and cb.every is not None
            ]
            self._next_due = 0
            self._quiet_until = -1

    @property
    def callbacks(self) -> list[StepCallback]:
        """The active callbacks of the run, in the order they act at a step."""
        return [member.callback for member in self._members]

    def _all_callbacks(self) -> list[StepCallback]:
        return [member.callback for member in self._members + self._passive]

    def may_provide(self, name: str) -> bool:
        """Whether a provider of the run declares `name`, or declares no names and
        has not acted yet (`StepRun.may_provide`)."""
        for member in self._members:
            callback = member.callback
            if not callback.is_provider:
                continue
            declares = callback.value_prefix or callback.provides
            if callback.may_provide(name) or (
                not declares and member.last_fired is None
            ):
                return True
        return False

    def wake(self) -> None:
        """Makes the next batch end dispatch to every callback (a signal arrived)."""
        self._wake = True
        self._quiet_until = -1

    @property
    def acting(self) -> bool:
        """True while kerasteps callbacks of this run act: within the run's begin,
        a step's dispatch, an epoch end or the run's end (see `act`).

        On the training thread (`thread`) while this run has not `ended`, False
        means the thread is elsewhere: in Keras, another callback, or past a `fit()`
        that raised (Keras calls no hook then). `StepProgressBar` reads it.
        """
        return self._acting.count > 0

    def act(self) -> _Acting:
        """A context manager: the block is kerasteps callbacks' work (`acting`)."""
        return self._acting

    # -- Keras's hooks --------------------------------------------------------------
    def epoch_begin(self, epoch: int) -> None:
        with self._lock:
            if self._epoch == epoch:
                return
            self._epoch = epoch
            self.tracker.epoch_begin()
            self._last_batch = -1
            self.carry.windows.epoch_begin()
            self._quiet_until = self._quiet_batches()

    def batch_end(self, batch: int, logs: Mapping[str, Any] | None) -> None:
        """Processes one Keras batch end for every registered callback, once."""
        batch += self.tracker.batch_end_shift  # Keras < 3.11: the execution's first
        if batch <= self._last_batch:  # another kerasteps callback processed it
            return
        self._last_batch = batch
        self.last_logs = logs or {}
        if batch < self._quiet_until:  # nothing is due: only count
            self.tracker.count(batch)
            return
        with self._lock, self._acting:
            if not self.ended:
                self._batch_end(batch, self.last_logs)
                self._quiet_until = self._quiet_batches()

    def _batch_end(self, batch: int, logs: Mapping[str, Any]) -> None:
        self.carry.windows.invalidate()
        try:
            advanced = self.tracker.advance(batch, logs)
        except (StepNotCountedError, ValueError):
            self.abort()
            raise
        if advanced is None:
            return  # no update finished (gradient accumulation, a skipped step)
        prev, step, epoch_last = advanced
        if self._wake or epoch_last or step >= self._next_due:
            self._wake = False
            self._dispatch(prev, step, logs, epoch_last)
            self._next_due = self._due_after(step)
        if self.carry.last_readers:
            tracker = self.tracker
            horizon = max(1, -(-tracker.steps_per_execution // tracker.accumulation))
            self.carry.snapshot_for_last(step, horizon)

    def _quiet_batches(self) -> float:
        """Batches with an index below this need nothing but counting."""
        if (
            self.ended
            or self._wake
            or not self.tracker.settled
            or self.carry.last_readers
        ):
            return -1
        return self.tracker.quiet_limit(self._next_due)

    def _reads_at(self, prev: int, step: int, final: bool) -> bool:
        """True if a callback that reduces values (on any worker) acts at `step`."""
        return any(
            member.callback.reads_values
            and member.callback.reduce != "epoch"
            and self._fires(member, prev, step, final)
            for member in self._members + self._passive
        )

    def _due_after(self, step: int) -> int:
        due = math.inf
        for callback in self._all_callbacks():
            for every in callback.schedules():
                due = min(due, every.next_after(step))
        return due

    def _dispatch(
        self,
        prev: int,
        step: int,
        logs: Mapping[str, Any],
        epoch_last: bool,
        final: bool = False,
    ) -> None:
        # Every callback due at this step reads the trained state: under JAX it
        # lives outside the model's variables mid-epoch until synced. Batch ends run
        # on the training thread (kerasteps callbacks are not async-safe), so the
        # sync cannot race with the next step.
        steps_lib.sync_trained_state(self.model)
        record = self._record(step, prev, logs, epoch_last=epoch_last, final=final)
        if self._lockstep and self._reads_at(prev, step, final):
            self.carry.windows.cumulative(step, logs)  # every worker, before all else
        for member in self._members:
            self._call(member, record, self._fires(member, prev, step, final))
        for member in self._passive:
            if self._fires(member, prev, step, final):
                member.last_fired = step
        self._provided = (step, set(record.extras))

    def _record(
        self, step: int, prev: int, logs: Mapping[str, Any], **facts: Any
    ) -> StepRecord:
        return StepRecord(
            step=step,
            prev=prev,
            logs=logs,
            run=self.run,
            facts=self.tracker,
            time=time.time(),
            **facts,
        )

    def _call(self, member: Member, record: StepRecord, fired: bool) -> None:
        """Calls one callback at a step: `on_step` when its schedule fired (or a
        sink with values that providers added), else `on_other_step`."""
        callback = member.callback
        if fired:
            member.last_fired = record.step
        elif not (
            callback.records_extras and record.extras and not callback.is_provider
        ):
            if callback.acts_between_steps:
                callback.on_other_step(StepEvent(record, False))
            return
        values = None
        if fired and callback.reads_values and callback.wants_values(record.step):
            values = self.carry.values(
                record, member, self.tracker.counter_names, self.tracker.last_prev
            )
        provided = callback.on_step(StepEvent(record, fired, values))
        if callback.is_provider and provided:
            record.extras.update(provided)

    def _fires(self, member: Member, prev: int, step: int, final: bool) -> bool:
        every = member.callback.every
        if every is None:
            return False
        if final:
            return every.last and member.last_fired != step
        return every.fires(prev, step, self.tracker.start_step)

    def epoch_end(self, epoch: int, logs: Mapping[str, Any] | None) -> None:
        """Re-reads the true step; hands Keras's `val_*` values to the sinks."""
        with self._lock, self._acting:
            if self.ended or self._epoch_ended == epoch:
                return
            self._epoch_ended = epoch
            self.carry.windows.close_epoch()
            self.tracker.resync()
            values = {k: v for k, v in (logs or {}).items() if k.startswith("val_")}
            values = self._keras_validation(scalar_items(values))
            if values:
                self._dispatch_extras(values)
            for callback in self.callbacks:
                callback.flush()

    def test_begin(self) -> None:
        """Keras's own validation is about to reset the metrics: keep their state."""
        with self._lock:
            if not self.ended:
                self.carry.windows.close_epoch()

    def _keras_validation(self, values: dict[str, float]) -> dict[str, float]:
        """Keras's `val_*` values, without those a provider gave at the same step."""
        if not values:
            return values
        for callback in self.callbacks:
            prefix = callback.value_prefix
            if not prefix or prefix in self._warned:
                continue
            clashing = sorted(k for k in values if k.startswith(prefix))
            if clashing:
                self._warned.add(prefix)
                logger.warning(
                    "kerasteps: Keras's own validation (fit's `validation_data` or "
                    "`validation_split`) logs %s at epoch ends, and %s logs the same "
                    "keys on its schedule: the series mix two evaluations. At a step "
                    "where both ran, %s's values are written. To keep them apart, "
                    'give it another prefix, e.g. `prefix="val_steps_"`.',
                    ", ".join(clashing),
                    type(callback).__name__,
                    type(callback).__name__,
                )
        step, provided = self._provided
        if step == self.tracker.step:
            values = {k: v for k, v in values.items() if k not in provided}
        return values

    def _dispatch_extras(self, values: dict[str, Any]) -> None:
        step = self.tracker.step
        record = self._record(step, step, {}, extras=values)
        for member in self._members:
            self._call(member, record, False)

    def train_end(self) -> None:
        """Fires `Every(last=True)` callbacks at the final step, then closes all."""
        with self._lock, self._acting:
            if self.ended:
                return
            self.carry.windows.close_epoch()
            self.tracker.resync()
            final = self.tracker.step
            trained = final > self.tracker.start_step
            if trained:
                self._dispatch(final, final, self.last_logs, False, final=True)
            members = self._members + self._passive
            self.carry.resume_state(members, final, windows=trained).attach(self.model)
            self._close()

    def abort(self) -> None:
        """Closes every callback after an error, without dispatching anything."""
        with self._lock, self._acting:
            if not self.ended:
                self._close()

    def _close(self) -> None:
        self.ended = True
        errors = []
        for callback in self.callbacks:
            try:
                callback.on_run_end(self.tracker.step)
            except Exception as error:  # noqa: BLE001 - close the others first
                errors.append(error)
        if errors:
            raise errors[0]


def get_dispatcher(model: keras.Model, params: dict) -> Dispatcher:
    """The dispatcher of this model's current `fit()` call, created if new."""
    with _DISPATCHERS_LOCK:
        dispatcher = _DISPATCHERS.get(model)
        if dispatcher is None or dispatcher.params is not params or dispatcher.ended:
            dispatcher = Dispatcher(model, params, previous=dispatcher)
            _DISPATCHERS[model] = dispatcher
        return dispatcher
