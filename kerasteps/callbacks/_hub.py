"""The per-`fit()` coordinator that every kerasteps callback shares (private).

Keras calls each callback on its own; kerasteps callbacks must agree on the step, see
each other's values (a validation run at step N reaches every sink at step N whatever
the callback order) and read the training state once per step. One `RunHub` per model
and `fit()` call does that:

- **The step.** It reads the global step when the run begins and then tracks it in
  Python: after the batch that ends at epoch-local index `b` the model has trained on
  `epoch_start + b + 1` batches (the global step is that, divided by the gradient
  accumulation steps). It reads the true step where tracking cannot know it: at the
  epoch's last batch (Keras runs whole executions of `steps_per_execution` steps, so
  an epoch of 200 steps with K=7 trains 203), at every batch when the epoch length is
  unknown and K > 1 or when the optimizer may skip steps (loss scaling), and at every
  epoch end. A model that returns its global counter in its logs (`WGAN`) is taken at
  its word.
- **Counting is checked.** At the first batch of a run it checks that the global step
  moved; if it did not while the model trained (a GAN training with optimizers of its
  own, `model.optimizer` unused), training stops with an error that names the
  optimizers and the one-line declaration.
- **Dispatch.** Between steps where some callback is due, a batch end costs a few
  attribute reads. At a due step the first kerasteps callback that Keras calls
  processes the batch for all of them, in role order (providers such as validation
  first, then guards, sinks, checkpoints, stop); the others return at once.
- **Values.** `training_values` gives each callback its values reduced as it asks
  (see `StepEvent`), from `MetricWindows`: state is read once per step.

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
import numpy as np

from kerasteps import _compat, distribute
from kerasteps import steps as steps_lib
from kerasteps._resume_state import ResumeState
from kerasteps.callbacks import _sinks, _windows
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

#: How many batches of a run the hub checks that the global step moves.
_PROGRESS_CHECK_BATCHES = 100

_HUBS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_HUBS_LOCK = threading.Lock()


def _weights_fingerprint(model: keras.Model) -> list[float] | None:
    variables = model.trainable_variables
    if not variables:
        return None
    return [float(keras.ops.convert_to_numpy(keras.ops.sum(v))) for v in variables]


def _iterations(optimizers: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for name, optimizer in optimizers.items():
        try:
            out[name] = steps_lib._to_int(optimizer.iterations)
        except Exception:  # noqa: BLE001 - an optimizer not built yet
            out[name] = 0
    return out


def _carried_windows(resume: ResumeState | None) -> dict[str, _windows.State]:
    """The partial windows a run carries in from the state it resumes, as arrays."""
    if resume is None:
        return {}
    return {
        schedule: {k: np.asarray(v, dtype=np.float64) for k, v in windows.items()}
        for schedule, windows in resume.windows.items()
    }


def _declaration(suggestion: str) -> str:
    return f'    kerasteps.count_optimizer_steps(model, global_step="{suggestion}")\n'


class _ProgressCheck:
    """Checks that the global step counts training: before the run when the model
    certainly trains with optimizers of its own (`steps.undeclared_optimizers`),
    else at its first batches."""

    def __init__(self, model: keras.Model, start_step: int, start_micro: int):
        self.model = model
        self.start_step = start_step
        self.start_micro = start_micro
        own = steps_lib.undeclared_optimizers(model)
        if own:
            raise StepNotCountedError(self._refusal(own))
        self.batches = 0
        self.weights = _weights_fingerprint(model)
        self.optimizers = _iterations(steps_lib.optimizer_attributes(model))
        self.counters = steps_lib.step_counters(model)

    def moved(self, step: int, micro: int) -> bool:
        """True once the step moved; raises if the model trained without counting."""
        self.batches += 1
        if step > self.start_step or micro > self.start_micro:
            return True
        counters = steps_lib.step_counters(self.model)
        if any(counters[k] != v for k, v in self.counters.items()):
            return True  # another declared counter moved (the critic's)
        found = steps_lib.optimizer_attributes(self.model)
        optimizers = _iterations(found)
        global_optimizer = steps_lib.global_optimizer(self.model)
        others_moved = [
            name
            for name, count in optimizers.items()
            if count != self.optimizers.get(name, 0)
            and found[name] is not global_optimizer
        ]
        weights = _weights_fingerprint(self.model)
        trained = others_moved or (
            self.weights is not None and weights is not None and weights != self.weights
        )
        if trained:
            raise StepNotCountedError(self._message(optimizers))
        return self.batches >= _PROGRESS_CHECK_BATCHES  # nothing trained: look again

    def _refusal(self, own: dict[str, Any]) -> str:
        """Before training: the model's train_step uses optimizers of its own."""
        name = type(self.model).__name__
        iterations = _iterations(own)
        found = ", ".join(f"`{attr}`" for attr in own)
        suggestion = steps_lib.suggest_global_step({k: 0 for k in iterations})
        return (
            f"kerasteps: {name} defines its own train_step and holds the optimizers "
            f"{found}, while `model.optimizer` is the RMSprop that compile() sets "
            "when given none: the model counts its steps with optimizers other than "
            "`model.optimizer`, whose iterations would stay at "
            f"{self.start_step}, and every step-based callback would see step "
            f"{self.start_step} (no logs, no checkpoints, no stop). Nothing was "
            "trained. Declare which optimizer counts the global step (for a GAN, "
            "the generator's), once after compile() and again after building the "
            "model anew, before restoring a checkpoint:\n\n"
            f"{_declaration(suggestion)}\n"
            "If your train_step does update `model.optimizer`, declare that one: "
            'global_step="optimizer".'
        )

    def _message(self, optimizers: dict[str, int]) -> str:
        name = type(self.model).__name__
        counter = steps_lib.global_step_name(self.model)
        if steps_lib.is_plain(self.model):
            what = f"`model.optimizer.iterations` stayed at {self.start_step}"
        else:
            what = f"its global counter `{counter}` stayed at {self.start_step}"
        found = ", ".join(
            f"`{attr}` (iterations {count})" for attr, count in optimizers.items()
        )
        moving = {
            k: v - self.optimizers.get(k, 0)
            for k, v in optimizers.items()
            if v != self.optimizers.get(k, 0)
        }
        if moving:
            suggestion = steps_lib.suggest_global_step(moving)
            applied = (
                " That step was applied: the optimizers' counters hold it (after "
                f"the declaration the global step is {optimizers[suggestion]}). To "
                "train from the same start again, rebuild or reload the model first."
            )
        else:
            suggestion, applied = "<optimizer>", ""
        return (
            f"kerasteps: {name} trained in the first step of this run, but its global "
            f"step did not move: {what}. The model updates its weights with "
            "optimizers other than `model.optimizer`, so every step-based callback "
            f"would see step {self.start_step} (no logs, no checkpoints, no stop). "
            f"Optimizers found on the model: {found or 'none'}. Declare which one "
            "counts the global step (for a GAN, the generator's), once after "
            "compile() (and again after building the model anew):\n\n"
            f"{_declaration(suggestion)}\n{applied.strip()}"
        ).rstrip() + "\n"


class _Acting:
    """Counts the nested blocks where kerasteps callbacks act (`RunHub.acting`)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> None:
        self.count += 1

    def __exit__(self, *exc_info: Any) -> None:
        self.count -= 1


class _Member:
    """What the hub keeps for one callback of the run: its last fired step and
    the start of its open window (the cumulative state at its previous point)."""

    __slots__ = ("callback", "last_fired", "window_start", "window_step")

    def __init__(self, callback: StepCallback, window_start: _windows.State, step: int):
        self.callback = callback
        self.last_fired: int | None = None
        self.window_start = window_start
        self.window_step = step


class RunHub:
    """Shared state of one `fit()` call of one model (see module docstring)."""

    def __init__(
        self, model: keras.Model, params: dict, previous: RunHub | None = None
    ):
        self.model = model
        self.params = params
        self.counter_names = list(steps_lib.step_counter_variables(model))
        self.global_name = steps_lib.global_step_name(model)
        self.is_plain = steps_lib.is_plain(model)
        self.is_chief = distribute.is_chief(model)
        self.accumulation = steps_lib.accumulation_steps(model)
        self.start_step = steps_lib.global_step(model)
        self.start_micro = steps_lib.micro_steps(model)
        self.step = self.start_step
        self._members: list[_Member] = []
        # Chief-only callbacks on another worker: they do nothing, but their
        # schedules count, so that every worker reads the metric state at the same
        # steps (under MultiWorkerMirroredStrategy, a read is a collective op).
        self._passive: list[_Member] = []
        self._lockstep = distribute.task_of(model)[0] is not None
        self.last_logs: Mapping[str, Any] = {}
        self.ended = False
        self.windows = _windows.MetricWindows(model)
        self._continue(ResumeState.take(model, self.start_step), previous)
        #: The step where a guard found a non-finite loss (set by the guard), or None.
        self.non_finite_at: int | None = None
        steps = params.get("steps") if params else None
        self._steps_in_epoch = int(steps) if steps else None
        self._micro = self.start_micro
        self._epoch = None
        self._epoch_ended = None
        self._epoch_start_micro = self.start_micro
        self._last_batch = -1
        # The index Keras passes `on_train_batch_end` -> the execution's last batch.
        self._batch_end_shift = _compat.batch_end_shift(self.steps_per_execution)
        self._last_prev = self.start_step  # prev of the latest step change
        self._lock = threading.RLock()
        #: The thread that runs this `fit()`: Keras calls the callbacks' hooks there.
        self.thread = threading.get_ident()
        self._acting = _Acting()
        self._next_due = 0  # dispatch at the first step change, then when due
        self._quiet_until: float = -1
        self._reports_step = False
        self._wake = False
        self._progress: _ProgressCheck | None = _ProgressCheck(
            model, self.start_step, self.start_micro
        )
        self._exact = self._must_read_each_batch()
        self._snapshots: dict[int, _windows.State] = {self.start_step: {}}
        self._provided: tuple[int, set[str]] = (-1, set())
        self._last_readers: list[StepCallback] = []
        self._warned: set[tuple[str, str]] = set()
        #: What the run's callbacks see of it (`kerasteps.callbacks.StepRun`).
        self.run = StepRun(self)

    def _continue(self, resume: ResumeState | None, previous: RunHub | None) -> None:
        """Takes what the run continues: the state it resumes (a restored
        checkpoint's, or the end of the model's previous `fit()`), else the run of a
        previous `fit()` that raised."""
        self._carry = _carried_windows(resume)
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
        self.run_known = carried_id is not None or self.start_step == 0
        self._expected_examples = (
            (resume.examples_per_step, resume.source)
            if resume is not None and resume.examples_per_step is not None
            else None
        )

    def _must_read_each_batch(self) -> bool:
        spe = self.steps_per_execution
        optimizer = steps_lib.global_optimizer(self.model)
        scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        return scaled or (self._steps_in_epoch is None and spe > 1)

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
                start = _windows.carried(self._carry.get(repr(callback.every), {}))
                group.append(_Member(callback, start, self.start_step))
                # Stable sort: role first, then the order the user listed them.
                group.sort(key=lambda member: ROLES.index(member.callback.role))
            self._last_readers = [
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
    def steps_per_execution(self) -> int:
        return max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))

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

    # -- reading the model --------------------------------------------------------
    def _read_true(self) -> tuple[int, int]:
        """The model's (global step, micro steps), from the trained state."""
        steps_lib.sync_trained_state(self.model)
        step = steps_lib.global_step(self.model)
        micro = steps_lib.micro_steps(self.model) if self.accumulation > 1 else step
        return step, micro

    # -- step bookkeeping ---------------------------------------------------------
    def epoch_begin(self, epoch: int) -> None:
        with self._lock:
            if self._epoch == epoch:
                return
            self._epoch = epoch
            self._epoch_start_micro = self._micro
            self._last_batch = -1
            self.windows.epoch_begin()
            self._quiet_until = self._quiet_batches()

    def batch_end(self, batch: int, logs: Mapping[str, Any] | None) -> None:
        """Processes one Keras batch end for every registered callback, once."""
        batch += self._batch_end_shift  # Keras < 3.11: the execution's first
        if batch <= self._last_batch:  # another kerasteps callback processed it
            return
        self._last_batch = batch
        self.last_logs = logs or {}
        if batch < self._quiet_until:  # nothing is due: only count
            self._micro = self._epoch_start_micro + batch + 1
            self.step = self._micro // self.accumulation
            return
        with self._lock, self._acting:
            if not self.ended:
                self._batch_end(batch, self.last_logs)
                self._quiet_until = self._quiet_batches()

    def _batch_end(self, batch: int, logs: Mapping[str, Any]) -> None:
        self.windows.invalidate()
        done = batch + 1
        epoch_last = self._steps_in_epoch is not None and done >= self._steps_in_epoch
        counted = logs.get(self.global_name) if not self.is_plain else None
        if isinstance(counted, (int, float)) and not isinstance(counted, bool):
            step = int(counted)  # the model reports its counter (WGAN)
            self._micro = step
            self._reports_step = True
        elif epoch_last or self._exact:
            step, self._micro = self._read_true()
        else:
            self._micro = self._epoch_start_micro + done
            step = self._micro // self.accumulation
        if self._progress is not None:
            step = self._check_progress(step)
        prev = self.step
        if step <= prev:
            return  # no update finished (gradient accumulation, a skipped step)
        self.step = step
        self._last_prev = prev
        if self._wake or epoch_last or step >= self._next_due:
            self._wake = False
            self._dispatch(prev, step, logs, epoch_last)
            self._next_due = self._due_after(step)
        if self._last_readers:
            self._snapshot_for_last(step)

    def _check_examples(self, micro: int) -> None:
        """A resumed run trains on as many examples per batch as its checkpoint."""
        expected, source = self._expected_examples
        self._expected_examples = None
        batches = micro - self.start_micro
        loss = self.windows.cumulative(self.step).get("loss")
        if loss is None or batches <= 0:
            return
        per_batch = loss[1] / batches
        if abs(per_batch - expected) > 1e-6:
            raise ValueError(
                f"kerasteps: this run trains on {per_batch:g} examples per batch, but "
                f"the checkpoint it resumed from ({source}) was trained on {expected}: "
                "`skip_consumed` skipped the batches of the wrong size, so the run "
                "would not see the data the interrupted run would have seen. Resume "
                f"with the batch size {expected}, or start a new run."
            )

    def examples_per_step(self) -> int | None:
        """Examples per batch of this run (the loss tracker's count), if constant."""
        batches = self._micro - self.start_micro
        if batches <= 0:
            return None
        loss = self.windows.cumulative(self.step).get("loss")
        if loss is None:
            return None
        per_batch = loss[1] / batches
        rounded = round(per_batch)
        return int(rounded) if abs(per_batch - rounded) < 1e-6 and rounded > 0 else None

    def _quiet_batches(self) -> float:
        """Batches with an index below this need nothing but counting.

        Below it no callback is due, the epoch does not end, and the step is what
        Python tracking says (no exact reads, no counter in the logs, no check).
        """
        if (
            self.ended
            or self._exact
            or self._wake
            or self._reports_step
            or self._progress is not None
            or self._last_readers
        ):
            return -1
        limit = self._next_due * self.accumulation - self._epoch_start_micro - 1
        if self._steps_in_epoch is not None:
            limit = min(limit, self._steps_in_epoch - 1)
        return limit

    def _check_progress(self, step: int) -> int:
        true_step, true_micro = self._read_true()
        try:
            if self._expected_examples is not None:
                self._check_examples(true_micro)
            done = self._progress.moved(true_step, true_micro)
        except (StepNotCountedError, ValueError):
            self.abort()
            raise
        if done:
            self._progress = None
        if true_step != step or true_micro != self._micro:
            # Tracking in Python would drift (the step does not move once per batch).
            self._exact = True
        self._micro = true_micro
        return true_step

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
            self.windows.cumulative(step, logs)  # every worker, before anything else
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
            facts=self,
            time=time.time(),
            **facts,
        )

    def _call(self, member: _Member, record: StepRecord, fired: bool) -> None:
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
        event = StepEvent(record, fired, lambda: self.training_values(record, member))
        values = callback.on_step(event)
        if callback.is_provider and values:
            record.extras.update(values)

    def _fires(self, member: _Member, prev: int, step: int, final: bool) -> bool:
        every = member.callback.every
        if every is None:
            return False
        if final:
            return every.last and member.last_fired != step
        return every.fires(prev, step, self.start_step)

    def epoch_end(self, epoch: int, logs: Mapping[str, Any] | None) -> None:
        """Re-reads the true step; hands Keras's `val_*` values to the sinks."""
        with self._lock, self._acting:
            if self.ended or self._epoch_ended == epoch:
                return
            self._epoch_ended = epoch
            self.windows.close_epoch()
            self.resync()
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
                self.windows.close_epoch()

    def _keras_validation(self, values: dict[str, float]) -> dict[str, float]:
        """Keras's `val_*` values, without those a provider gave at the same step."""
        if not values:
            return values
        for callback in self.callbacks:
            prefix = callback.value_prefix
            if not prefix or ("validation", prefix) in self._warned:
                continue
            clashing = sorted(k for k in values if k.startswith(prefix))
            if clashing:
                self._warned.add(("validation", prefix))
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
        if step == self.step:
            values = {k: v for k, v in values.items() if k not in provided}
        return values

    def _dispatch_extras(self, values: dict[str, Any]) -> None:
        record = self._record(self.step, self.step, {}, extras=values)
        for member in self._members:
            self._call(member, record, False)

    def resync(self) -> None:
        """Sets the tracked step to the model's true global step."""
        true_step, true_micro = self._read_true()
        if true_step != self.step:
            logger.debug(
                "kerasteps: tracked step %d, true step %d; using the true step.",
                self.step,
                true_step,
            )
            self.step = true_step
        self._micro = true_micro
        self._epoch_start_micro = true_micro

    def train_end(self) -> None:
        """Fires `Every(last=True)` callbacks at the final step, then closes all."""
        with self._lock, self._acting:
            if self.ended:
                return
            self.windows.close_epoch()
            self.resync()
            final = self.step
            if final > self.start_step:
                self._dispatch(final, final, self.last_logs, False, final=True)
            carry = self.carry() if final > self.start_step else {}
            ResumeState(final, carry, self.run_id, links=dict(self.links)).attach(
                self.model
            )
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
                callback.on_run_end(self.step)
            except Exception as error:  # noqa: BLE001 - close the others first
                errors.append(error)
        if errors:
            raise errors[0]

    # -- values -------------------------------------------------------------------
    def training_values(
        self, record: StepRecord, member: _Member
    ) -> tuple[dict[str, float], frozenset[str]]:
        """The training values of a step for a callback, reduced as it asks."""
        logs = scalar_items(record.logs)
        for name in self.counter_names:
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
            before = record.prev if not record.final else self._last_prev
            start = self._snapshots.get(before)
            if start is None:
                return logs, frozenset()
            window = _windows.window_between(state, start)
        return self.windows.reduce(logs, window)

    def _snapshot_for_last(self, step: int) -> None:
        """Keeps the state where a `reduce="last"` callback's next step will begin."""
        horizon = max(1, -(-self.steps_per_execution // self.accumulation))
        for callback in self._last_readers:
            every = callback.every
            if every.last or every.crossed(step, step + horizon):
                self._snapshots[step] = self.windows.cumulative(step)
                for old in sorted(self._snapshots)[:-3]:
                    del self._snapshots[old]
                return

    def carry(self) -> dict[str, dict[str, list[float]]]:
        """The partial window of each `reduce="mean"` schedule at the current step."""
        readers = [
            member
            for member in self._members + self._passive
            if member.callback.reads_values
            and member.callback.reduce == "mean"
            and member.callback.every is not None
        ]
        if not readers:
            return {}
        # Per schedule, the window of the callback that recorded values last (a
        # provider with the same schedule never advances its window).
        latest: dict[str, _Member] = {}
        for member in readers:
            key = repr(member.callback.every)
            if key not in latest or member.window_step > latest[key].window_step:
                latest[key] = member
        state = self.windows.cumulative(self.step)
        out: dict[str, dict[str, list[float]]] = {}
        for key, member in latest.items():
            window = _windows.window_between(state, member.window_start)
            out[key] = {k: list(map(float, v)) for k, v in window.items() if np.any(v)}
        return out

    def counters_at(self, step: int, logs: Mapping[str, Any]) -> dict[str, int]:
        """The step counters at `step`: from the logs when the model put them there."""
        if self.counter_names == [steps_lib.PLAIN_COUNTER]:
            return {steps_lib.PLAIN_COUNTER: int(step)}
        values = scalar_items({k: logs[k] for k in self.counter_names if k in logs})
        if len(values) == len(self.counter_names):
            counters = {k: int(values[k]) for k in self.counter_names}
        else:
            steps_lib.sync_trained_state(self.model)
            counters = steps_lib.step_counters(self.model)
        counters[self.global_name] = int(step)
        return counters

    def learning_rates(self, step: int) -> dict[str, float]:
        """The learning rate of each optimizer used by the update that made `step`."""
        rates: dict[str, float] = {}
        global_optimizer = steps_lib.global_optimizer(self.model)
        for name, optimizer in steps_lib.step_optimizers(self.model).items():
            if optimizer is None:
                continue
            at = step if optimizer is global_optimizer else None
            try:
                rates[name] = steps_lib.learning_rate_at(optimizer, at)
            except Exception as error:  # noqa: BLE001 - report, do not stop training
                if ("learning_rate", name) not in self._warned:
                    self._warned.add(("learning_rate", name))
                    logger.warning(
                        "kerasteps: cannot read the learning rate of optimizer %r "
                        "(%s: %s); it is not logged.",
                        name or "optimizer",
                        type(error).__name__,
                        error,
                    )
        return rates


def get_hub(model: keras.Model, params: dict) -> RunHub:
    """Returns the hub of this model's current `fit()` call, creating it if new."""
    with _HUBS_LOCK:
        hub = _HUBS.get(model)
        if hub is None or hub.params is not params or hub.ended:
            hub = RunHub(model, params, previous=hub)
            _HUBS[model] = hub
        return hub
