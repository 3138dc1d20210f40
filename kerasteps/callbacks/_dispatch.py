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
there). On JAX and PyTorch it dispatches them to a thread pool when every callback
that overrides a batch end says it is async-safe (`async_safe`); it then turns each
step's logs into Python numbers there, not on the training thread, which can go on
dispatching steps. kerasteps callbacks read the training state at the steps where
they act, which in a pool thread would race with training; so a batch end that
arrives on another thread only leaves its logs, and the end is processed on the
training thread at the next batch begin (Keras calls it there, before the next
step), or at the epoch end or train end that follows the epoch's last batch (Keras
has waited for its thread there). The trained state is then exactly the state after
that step, as at a batch end. At quiet steps nothing is read: the training thread
never waits for the device there. A stop decided at the next batch begin would
let one more step train, so callbacks that may set `model.stop_training` from a
step (`stops_training`) have the ends of the executions where a callback acts (or
that begin woken by a timer or signal) run on the training thread, through Keras's
switch (`_compat.AsyncTrainSwitch`, set at each batch begin); at an end that
Keras's thread got (a wake came mid-execution) they do not act, and the next
execution's end runs on the training thread, where they do. `StepCheckpoint` stops
at a signal, but its handler sets the flag itself, so Keras stops after the step
in progress. Callbacks that are not async-safe keep every batch end of the run on
the training thread.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import keras

from kerasteps import _compat, distribute
from kerasteps import steps as steps_lib
from kerasteps._resume_state import ResumeState
from kerasteps.callbacks._carry import Member, RunCarry
from kerasteps.callbacks._tracker import StepTracker
from kerasteps.callbacks.step_event import StepEvent, StepRecord, scalar_items
from kerasteps.callbacks.step_run import StepRun
from kerasteps.checkpoint.store import CheckpointStore
from kerasteps.steps import StepNotCountedError

#: The roles of kerasteps callbacks, in the order they act at one step: values are
#: provided, checked, decided on (early stopping: its decisions are values too),
#: recorded, then acted on (checkpoint, stop). The one place that orders callbacks
#: (`StepCallback.role`).
ROLES = ("provider", "guard", "decider", "sink", "action")

#: A kerasteps callback (`kerasteps.callbacks.StepCallback`; not imported here,
#: which imports this module): what the dispatcher reads of it is its public
#: interface (`every`, `reduce`, `role`, `on_step`...).
StepCallback = Any

logger = logging.getLogger("kerasteps")

#: How long the training thread waits for Keras's callback thread to hand over the
#: logs of a step where a callback acts (it is converting them).
POOL_WAIT_S = 300.0

_DISPATCHERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DISPATCHERS_LOCK = threading.Lock()
#: Per model, the directory its next run's `StepCheckpoint` saves into: noted when
#: Keras sets the callbacks' model, before any of them begins the run.
_SAVES_INTO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_saves_into(model: keras.Model, directory: str) -> None:
    """Notes where the model's next run saves its checkpoints (`StepCheckpoint`)."""
    with _DISPATCHERS_LOCK:
        _SAVES_INTO[model] = directory


class Dispatcher:
    """Shared state of one `fit()` call of one model (see module docstring)."""

    def __init__(
        self, model: keras.Model, params: dict, previous: Dispatcher | None = None
    ):
        self.began = time.monotonic()  # before the run's own work (StepRun.began)
        self.model = model
        self.params = params
        start_step = steps_lib.global_step(model)
        resume = self._resume = ResumeState.take(model, start_step)
        # A previous `fit()` that raised never ended: this one goes on with its run.
        going_on = previous.carry if previous and not previous.ended else None
        saves_into = _SAVES_INTO.pop(model, None)  # under `get_dispatcher`'s lock
        self.carry = RunCarry(model, start_step, resume, going_on, saves_into)
        self.tracker = StepTracker(model, params)
        self.carry.windows.state = self.tracker.state  # one reader of the state
        self._members: list[Member] = []
        # Chief-only callbacks on another worker: they do nothing, but their
        # schedules count, so that every worker reads the metric state at the same
        # steps (under MultiWorkerMirroredStrategy, a read is a collective op).
        self._passive: list[Member] = []
        #: Several processes train the model (a multi-worker `tf.distribute`
        #: cluster, JAX processes): they must act at the same steps.
        self.lockstep = distribute.task_of(model)[0] is not None
        self.last_logs: Mapping[str, Any] = {}
        self.ended = False
        #: True while kerasteps callbacks of this run act (`act`, `StepRun.acting`).
        self.acting = False
        self._epoch = None
        self._epoch_ended = None
        self._last_batch = -1
        #: The index of the batch that the latest execution began with.
        self._begun = -1
        #: Keras's callback thread hands the logs of a batch end here, by index
        #: (an insertion is atomic), and notifies the training thread if it waits.
        self._pool_logs: dict[int, Mapping[str, Any]] = {}
        self._pool_ready = threading.Condition()
        self._pool_waiting = False
        self._lock = threading.RLock()
        self._next_due = 0  # dispatch at the first step change, then when due
        self._quiet_until: float = -1
        self._wake = False
        self._provided: tuple[int, set[str]] = (-1, set())
        self._warned: set[str] = set()
        #: Keras's switch between its callback thread and the training thread for
        #: batch ends (`_compat.AsyncTrainSwitch`), used when a callback may stop
        #: training (`stops_training`); None when Keras has no such switch.
        self.switch: _compat.AsyncTrainSwitch | None = None
        self._switch_sought = False
        self._stoppers = False
        #: True while an end that Keras's callback thread got is processed.
        self._deferred = False
        #: What the run's callbacks see of it (`kerasteps.callbacks.StepRun`).
        self.run = StepRun(self)

    # -- what StepRun asks ----------------------------------------------------------
    def resume_state(self) -> ResumeState:
        """What a checkpoint of the model now hands to a run resumed from it."""
        step, batches = self.tracker.step, self.tracker.batches
        examples = self.carry.examples_per_step(step, batches)
        return self.carry.resume_state(self._members + self._passive, step, examples)

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
            members = self._members + self._passive
            self.carry.last_readers = [m.callback for m in members if m.reads("last")]
            self._stoppers = any(m.callback.stops_training for m in self._members)
            self._next_due = 0
            self._quiet_until = -1

    def twins(self, callback: StepCallback) -> int:
        """How many callbacks of the run with `callback.state_name` began before it."""
        if callback.state_name is None:
            return 0
        return sum(
            m.callback is not callback and m.callback.state_name == callback.state_name
            for m in self._members + self._passive
        )

    def may_provide(self, name: str) -> bool:
        """Whether a provider of the run declares `name`, or declares no names and
        has not acted yet (`StepRun.may_provide`)."""
        for member in self._members:
            callback = member.callback
            declares = callback.value_prefix or callback.provides
            silent = not declares and member.last_fired is None
            if callback.is_provider and (callback.may_provide(name) or silent):
                return True
        return False

    def value_prefixes(self) -> list[str]:
        """`StepRun.value_prefixes`."""
        prefixes = {"val_"} | {
            m.callback.value_prefix
            for m in self._members
            if m.callback.is_provider and m.callback.value_prefix
        }
        return sorted(prefixes)

    def checkpointer(self) -> StepCallback | None:
        """The first registered callback that saves checkpoints, or None."""
        for member in self._members:
            if isinstance(getattr(member.callback, "store", None), CheckpointStore):
                return member.callback
        return None

    def checkpoint_directory(self) -> str | None:
        """The directory of the first registered callback that saves checkpoints."""
        checkpointer = self.checkpointer()
        return None if checkpointer is None else checkpointer.store.directory

    def find_switch(self, callback: StepCallback) -> None:
        """Finds the switch of the `CallbackList` calling `callback` (once per run;
        kept where Keras hands batch ends to its thread)."""
        if not self._switch_sought:
            self._switch_sought = True
            switch = _compat.AsyncTrainSwitch.calling(callback)
            self.switch = switch if switch is not None and switch.available else None

    def wake(self) -> None:
        """Makes the next batch end dispatch to every callback (a signal arrived)."""
        self._wake = True
        self._quiet_until = -1

    @contextlib.contextmanager
    def act(self) -> Iterator[None]:
        """The block is kerasteps callbacks' work (`acting`): the run's begin, a
        step's dispatch, an epoch end or the run's end."""
        outer, self.acting = self.acting, True
        try:
            yield
        finally:
            self.acting = outer

    # -- Keras's hooks --------------------------------------------------------------
    def epoch_begin(self, epoch: int) -> None:
        with self._lock:
            if self._epoch == epoch:
                return
            if self._epoch is None:  # every callback began: before the first step
                with self.act():
                    self._each(lambda member: member.callback.on_run_ready())
            self._epoch = epoch
            self.tracker.epoch_begin()
            self._last_batch = self._begun = -1
            self.carry.windows.epoch_begin()
            self._quiet_until = self._quiet_batches()

    def batch_begin(self, batch: int) -> None:
        """On the training thread, before the execution that begins at `batch`:
        processes the previous execution's end if Keras's callback thread got it
        (async dispatch)."""
        if batch == self._begun:  # another kerasteps callback processed it
            return
        if self._unprocessed():
            self._deferred_end(self._begun, batch - 1)
        self._begun = batch
        if self._stoppers and self.switch is not None:
            # Keras's thread for the ends of quiet executions only: where a
            # callback may stop training, it must decide before Keras checks.
            end = batch + self.tracker.steps_per_execution - 1
            self.switch.set(not self._wake and end < self._quiet_until)

    def batch_end(self, batch: int, logs: Mapping[str, Any] | None) -> None:
        """Processes one Keras batch end for every registered callback, once; on
        Keras's callback thread, only hands over its logs."""
        batch += self.tracker.batch_end_shift  # Keras < 3.11: the execution's first
        if threading.get_ident() != self.run.thread:
            if batch not in self._pool_logs:  # the run's first kerasteps callback
                self._pool_logs[batch] = logs or {}
                if self._pool_waiting:  # set before the training thread looks
                    with self._pool_ready:
                        self._pool_ready.notify_all()
            return
        if batch <= self._last_batch:  # another kerasteps callback processed it
            return
        self._process(batch, logs or {})

    def _process(self, batch: int, logs: Mapping[str, Any]) -> None:
        self._last_batch = batch
        self.last_logs = logs
        if batch < self._quiet_until:  # nothing is due: only count
            self.tracker.count(batch)
            return
        with self._lock, self.act():
            if not self.ended:
                self._batch_end(batch, logs)
                self._quiet_until = self._quiet_batches()

    def _deferred_end(self, begun: int, end: int | None = None) -> None:
        """Processes the end of the execution begun at `begun`, which Keras
        dispatched to its callback thread: at a quiet step by counting alone,
        else with its logs, once that thread has them. `end=None`: after the
        epoch's last batch, where Keras has waited for that thread; an execution
        that ended no batch (the data ran out) has no end to process."""
        if end is not None and end < self._quiet_until:
            self._last_batch = end
            self.tracker.count(end)
            return
        deadline = time.monotonic() + POOL_WAIT_S
        with self._pool_ready:
            self._pool_waiting = True
            try:
                # `list(dict)` copies the keys at once: Keras's thread may insert.
                while not (ends := [k for k in list(self._pool_logs) if k >= begun]):
                    if end is None:
                        return
                    if not self._pool_ready.wait(deadline - time.monotonic()):
                        raise RuntimeError(
                            f"kerasteps: the end of batch {begun} did not reach "
                            f"kerasteps within {POOL_WAIT_S:g} s of the next batch's "
                            "begin: Keras dispatches batch ends to a thread, where a "
                            "callback listed before kerasteps's may have raised "
                            "(fit() raises it next)."
                        )
            finally:
                self._pool_waiting = False
            end = min(ends)
            logs = self._pool_logs[end]
            for key in [k for k in list(self._pool_logs) if k <= end]:
                del self._pool_logs[key]
        self._deferred = True
        try:
            self._process(end, logs)
        finally:
            self._deferred = False

    def _settle(self) -> None:
        """Processes the epoch's last batch end if it was dispatched to Keras's
        callback thread (at the epoch end or train end, once Keras waited for it).
        """
        if self._unprocessed():
            self._deferred_end(self._begun)

    def _unprocessed(self) -> bool:
        """Whether the latest execution began and its end was not processed (Keras
        handed it to its callback thread)."""
        return 0 <= self._begun and self._last_batch < self._begun

    def _batch_end(self, batch: int, logs: Mapping[str, Any]) -> None:
        self.carry.windows.invalidate()
        before = self.tracker.step
        try:
            advanced = self.tracker.advance(batch, logs)
            self.carry.check_examples(before, self.tracker.batches)
        except (StepNotCountedError, ValueError):
            self.abort()
            raise
        if advanced is None:
            return  # no update finished (gradient accumulation, a skipped step)
        prev, step, epoch_last = advanced
        if self._wake or epoch_last or step >= self._next_due:
            self._wake = False
            self._dispatch(self._record(step, prev, logs, epoch_last=epoch_last))
            self._next_due = self._due_after(step)
        if self.carry.last_readers:
            tracker = self.tracker
            horizon = max(1, -(-tracker.steps_per_execution // tracker.accumulation))
            self.carry.snapshot_for_last(step, horizon)

    def _quiet_batches(self) -> float:
        """Batches with an index below this need nothing but counting."""
        busy = self.ended or self._wake or self.carry.last_readers
        if busy or not self.tracker.settled:
            return -1
        return self.tracker.quiet_limit(self._next_due)

    def _reads_model(self, record: StepRecord) -> bool:
        """True if a callback that may act at the step reads the model's state."""
        return any(
            m.callback.reads_model
            and (
                self._fires(m, record)
                or m.callback.acts_between_steps
                or m.callback.records_extras
            )
            for m in self._members
        )

    def _reads_at(self, record: StepRecord) -> bool:
        """True if a callback that reduces values (on any worker) acts at the step."""
        members = self._members + self._passive
        return any(m.reads("mean", "last") and self._fires(m, record) for m in members)

    def _due_after(self, step: int) -> float:
        """The next step where a schedule of a callback (on any worker) is due."""
        members = self._members + self._passive
        dues = [e.next_after(step) for m in members for e in m.callback.schedules()]
        return min(dues, default=math.inf)

    def _dispatch(self, record: StepRecord) -> None:
        # Under JAX the trained state lives outside the model's variables mid-epoch
        # until synced. A callback that reads the model (a checkpoint, validation)
        # needs it synced; this runs on the training thread, between two steps (see
        # the module docstring), so the sync cannot race with the next step. Where
        # the callbacks acting need only values, the metrics' state and the rates
        # are read from the state apart, in one transfer, without the sync.
        state = self.tracker.state
        if state.apart():
            rates = None if self.tracker.checking else self.tracker.rate_variables()
            if (
                rates is None
                or self._reads_model(record)
                or state.read(self.carry.windows.variables() + rates) is None
            ):
                steps_lib.sync_trained_state(self.model)
        if self.lockstep and self._reads_at(record):
            # every worker, before all else
            self.carry.windows.cumulative(record.step, record.logs)

        def call(member: Member) -> None:
            self._call(member, record, self._fires(member, record))

        self._each(call)
        for member in self._passive:
            if self._fires(member, record):
                member.last_fired = record.step
        self._provided = (record.step, set(record.extras))

    def _record(
        self, step: int, prev: int, logs: Mapping[str, Any], **facts: Any
    ) -> StepRecord:
        now = time.time()
        return StepRecord(step, prev, logs, self.run, self.tracker, time=now, **facts)

    def _call(self, member: Member, record: StepRecord, fired: bool) -> None:
        """Calls one callback at a step: `on_step` when its schedule fired (or a
        sink with values that providers added), else `on_other_step`."""
        callback = member.callback
        if self._deferred and callback.stops_training and self.switch is not None:
            # Keras has gone on past this end: a stop decided here would come an
            # execution late. The next execution's end runs on the training thread
            # (a wake), where the callback decides.
            self._wake = True
            return
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
        if provided and callback.role in ("provider", "decider"):
            record.extras.update(provided)

    def _fires(self, member: Member, record: StepRecord) -> bool:
        every = member.callback.every
        if every is None:
            return False
        if record.final:
            return every.last and member.last_fired != record.step
        return every.fires(record.prev, record.step, self.tracker.start_step)

    def epoch_end(self, epoch: int, logs: Mapping[str, Any] | None) -> None:
        """Re-reads the true step; hands Keras's `val_*` values to the sinks."""
        with self._lock, self.act():
            if self.ended or self._epoch_ended == epoch:
                return
            self._settle()
            self._pool_logs.clear()  # Keras waited for its callback thread
            self._epoch_ended = epoch
            self.carry.windows.close_epoch()
            self.tracker.resync()
            values = {k: v for k, v in (logs or {}).items() if k.startswith("val_")}
            values = self._keras_validation(scalar_items(values))
            if values:
                step = self.tracker.step
                record = self._record(step, step, {}, extras=values)
                self._each(lambda member: self._call(member, record, False))
            self._each(lambda member: member.callback.flush())

    def test_begin(self) -> None:
        """Keras's own validation is about to reset the metrics: keep their state."""
        with self._lock:
            if not self.ended:
                self.carry.windows.close_epoch()

    def _keras_validation(self, values: dict[str, float]) -> dict[str, float]:
        """Keras's `val_*` values, without those a provider gave at the same step."""
        for member in self._members:
            prefix = member.callback.value_prefix
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
                    type(member.callback).__name__,
                    type(member.callback).__name__,
                )
        step, provided = self._provided
        if step == self.tracker.step:
            values = {k: v for k, v in values.items() if k not in provided}
        return values

    def train_end(self) -> None:
        """Fires `Every(last=True)` callbacks at the final step, then closes all."""
        with self._lock, self.act():
            if self.ended:
                return
            self._settle()
            self.carry.windows.close_epoch()
            self.tracker.resync()
            final = self.tracker.step
            trained = final > self.tracker.start_step
            if trained:
                self._dispatch(self._record(final, final, self.last_logs, final=True))
            # Nothing trained: no windows to hand on.
            members = self._members + self._passive if trained else []
            self.carry.resume_state(members, final).attach(self.model)
            self._close()
            self._each(lambda member: member.callback.on_run_closed())

    def _each(self, act: Callable[[Member], None]) -> None:
        """`act(member)` for every callback, in order, even after one raised; then,
        if one did, closes the run (every `on_run_end`: files closed, locks given
        back) and raises the first error, which `fit()` ends with."""
        errors = []
        for member in self._members:
            try:
                act(member)
            except Exception as error:  # noqa: BLE001 - the others act first
                if self.ended:  # it closed the run itself (`StepRun.abort`)
                    raise errors[0] if errors else error  # noqa: B904
                name = type(member.callback).__name__
                error.add_note(
                    f"(raised by the callback {name} at step "
                    f"{self.tracker.step}; the other callbacks acted)"
                )
                logger.error(
                    "kerasteps: %s raised %s at step %d; the other callbacks still "
                    "acted, and fit() ends with its error.",
                    name,
                    type(error).__name__,
                    self.tracker.step,
                )
                errors.append(error)
        if errors:
            if not self.ended:
                with contextlib.suppress(Exception):  # the first error is the one
                    self._close()
            raise errors[0]

    def abort(self) -> None:
        """Closes every callback after an error, without dispatching anything."""
        with self._lock, self.act():
            if not self.ended:
                try:
                    self._close()
                finally:
                    # Refused before training: the next `fit()` resumes as this
                    # one would have (its run, its saved decisions).
                    trained = self.tracker.step != self.tracker.start_step
                    held = ResumeState.of(self.model) is not None
                    if self._resume is not None and not (trained or held):
                        self._resume.attach(self.model)

    def _close(self) -> None:
        self.ended = True
        errors = []
        for member in self._members:
            try:
                member.callback.on_run_end(self.tracker.step)
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
