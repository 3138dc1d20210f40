"""The per-`fit()` coordinator that every kerasteps callback shares (private).

Keras calls each callback on its own; kerasteps callbacks must agree on the step, see
each other's values (a validation run at step N reaches every sink at step N whatever
the callback order) and act in order even when Keras dispatches batch-end callbacks to
a thread pool. One `RunHub` per model and `fit()` call does that:

- it reads the global step once when the run begins and then tracks it in Python: the
  step after the batch that ends at epoch-local index `b` is
  `epoch_start + min(b + 1, steps_per_epoch)`; it re-reads the true step at every
  epoch end, when Keras has drained its callback threads;
- the first kerasteps callback that Keras calls for a batch processes that batch for
  all of them (providers such as validation first, then guards, sinks, checkpoints,
  stop); the others return at once;
- batches are processed strictly in order: with async dispatch a batch waits until the
  batch before it has been processed.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np

from kerasteps import distribute
from kerasteps import steps as steps_lib

logger = logging.getLogger("kerasteps")

# How long a batch waits for the batch before it (async dispatch) before going on.
_ORDER_TIMEOUT_S = 30.0

_HUBS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_HUBS_LOCK = threading.Lock()


def scalar_items(values: Mapping[str, Any]) -> dict[str, float]:
    """Returns the entries of `values` that are single numbers, as Python scalars."""
    out: dict[str, float] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[key] = value
            continue
        try:
            array = np.asarray(value)
        except Exception:  # noqa: BLE001 - not convertible: not a scalar
            continue
        if array.size != 1 or array.dtype.kind not in "iuf":
            continue
        item = array.reshape(()).item()
        out[key] = item
    return out


@dataclass
class StepEvent:
    """What a kerasteps callback receives when it acts at a step.

    Attributes:
        step: The true global step after the update(s) that produced `logs`.
        prev: The global step before them (`step - K` with `steps_per_execution=K`).
        logs: The training logs of that step (Keras's batch logs).
        extras: Values provided at this step by kerasteps providers
            (`val_*` from validation, throughput), or by Keras's own validation.
        scheduled: True when the receiving callback's own schedule fired; False
            when it is called only to record `extras`.
        final: True at the end of the run (`Every(last=True)`).
        epoch_last: True when this is the epoch's last batch: Keras's epoch-end
            validation values for this step may still come (sinks that write one
            record per step wait for the epoch end, where `flush()` is called).
        time: Wall-clock time (seconds since the epoch) of the event.
    """

    step: int
    prev: int
    logs: Mapping[str, Any]
    hub: RunHub
    extras: dict[str, Any] = field(default_factory=dict)
    scheduled: bool = True
    final: bool = False
    epoch_last: bool = False
    time: float = field(default_factory=time.time)
    _counters: dict[str, int] | None = None

    @property
    def counters(self) -> dict[str, int]:
        """The model's step counters at this step (`{"step": n}` for a plain model)."""
        if self._counters is None:
            self._counters = self.hub.counters_at(self.step, self.logs)
        return self._counters

    def values(self) -> dict[str, float]:
        """The scalar values to record: logs and extras when scheduled, else extras."""
        if not self.scheduled:
            return scalar_items(self.extras)
        merged = scalar_items(self.logs)
        for name in self.hub.counter_names:
            merged.pop(name, None)
        merged.update(scalar_items(self.extras))
        return merged


class RunHub:
    """Shared state of one `fit()` call of one model (see module docstring)."""

    def __init__(self, model: keras.Model, params: dict):
        self.model = model
        self.params = params
        self.counter_names = list(steps_lib.step_counter_variables(model))
        self.global_name = steps_lib.global_step_name(model)
        self.is_plain = self.counter_names == [steps_lib.PLAIN_COUNTER]
        self.is_chief = distribute.is_chief(model)
        self.start_step = steps_lib.global_step(model)
        self.step = self.start_step
        self.callbacks: list[Any] = []
        self.last_logs: Mapping[str, Any] = {}
        self.ended = False
        self._epoch = None
        self._epoch_ended = None
        self._epoch_start = self.start_step
        self._last_batch = -1
        self._cond = threading.Condition(threading.RLock())
        self._order_broken = False
        self.started_at = time.time()

    # -- registration -------------------------------------------------------------
    def register(self, callback: Any) -> None:
        with self._cond:
            if callback not in self.callbacks:
                self.callbacks.append(callback)
                # Stable sort: phase first, then the order the user listed them.
                self.callbacks.sort(key=lambda cb: cb.phase)

    @property
    def steps_per_execution(self) -> int:
        return max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))

    # -- step bookkeeping ---------------------------------------------------------
    def epoch_begin(self, epoch: int) -> None:
        with self._cond:
            if self._epoch == epoch:
                return
            self._epoch = epoch
            self._epoch_start = self.step
            self._last_batch = -1

    def _wait_for_predecessor(self, batch: int) -> None:
        """Blocks until the batch before `batch` has been processed (async mode)."""
        predecessor = batch - self.steps_per_execution
        if predecessor < 0 or self._order_broken:
            return
        ok = self._cond.wait_for(
            lambda: self._last_batch >= predecessor, timeout=_ORDER_TIMEOUT_S
        )
        if not ok:
            self._order_broken = True
            logger.warning(
                "kerasteps: batch %d of epoch %s waited %.0f s for batch %d; "
                "continuing without ordering.",
                batch,
                self._epoch,
                _ORDER_TIMEOUT_S,
                predecessor,
            )

    def batch_end(self, batch: int, logs: Mapping[str, Any] | None) -> None:
        """Processes one Keras batch end for every registered callback, once."""
        if batch <= self._last_batch:  # fast path: another callback processed it
            return
        with self._cond:
            if self.ended or batch <= self._last_batch:
                return
            self._wait_for_predecessor(batch)
            if batch <= self._last_batch:
                return
            steps_in_epoch = self.params.get("steps") if self.params else None
            done = batch + 1
            if steps_in_epoch:
                done = min(done, int(steps_in_epoch))
            step = self._epoch_start + done
            prev = self.step
            self._last_batch = batch
            if step <= prev:
                self._cond.notify_all()
                return
            self.step = step
            self.last_logs = logs or {}
            epoch_last = bool(steps_in_epoch) and done >= int(steps_in_epoch)
            try:
                self._dispatch(prev, step, self.last_logs, epoch_last)
            finally:
                self._cond.notify_all()

    def _dispatch(
        self, prev: int, step: int, logs: Mapping[str, Any], epoch_last: bool
    ) -> None:
        event = StepEvent(
            step=step, prev=prev, logs=logs, hub=self, epoch_last=epoch_last
        )
        for callback in self.callbacks:
            every = callback.every
            fired = every is not None and every.fires(prev, step, self.start_step)
            callback._dispatch_step(event, fired)

    def epoch_end(self, epoch: int, logs: Mapping[str, Any] | None) -> None:
        """Re-reads the true step; hands Keras's `val_*` values to the sinks."""
        with self._cond:
            if self.ended or self._epoch_ended == epoch:
                return
            self._epoch_ended = epoch
            self.resync()
            values = {k: v for k, v in (logs or {}).items() if k.startswith("val_")}
            values = scalar_items(values)
            if values:
                self._dispatch_extras(values)
            for callback in self.callbacks:
                callback.flush()

    def _dispatch_extras(self, values: dict[str, Any]) -> None:
        event = StepEvent(
            step=self.step,
            prev=self.step,
            logs={},
            hub=self,
            extras=values,
            scheduled=False,
        )
        for callback in self.callbacks:
            callback._dispatch_step(event, False)

    def resync(self) -> None:
        """Sets the tracked step to the model's true global step."""
        true_step = steps_lib.global_step(self.model)
        if true_step != self.step:
            logger.debug(
                "kerasteps: tracked step %d, true step %d; using the true step.",
                self.step,
                true_step,
            )
            self.step = true_step
            self._epoch_start = true_step

    def train_end(self) -> None:
        """Fires `Every(last=True)` callbacks at the final step, then closes all."""
        with self._cond:
            if self.ended:
                return
            self.resync()
            final = self.step
            event = StepEvent(
                step=final, prev=final, logs=self.last_logs, hub=self, final=True
            )
            if final > self.start_step:
                for callback in self.callbacks:
                    every = callback.every
                    fired = bool(
                        every is not None
                        and every.last
                        and callback._last_fired_step != final
                    )
                    callback._dispatch_step(event, fired)
            self.ended = True
            errors = []
            for callback in self.callbacks:
                try:
                    callback.on_run_end(final)
                except Exception as error:  # noqa: BLE001 - close the others first
                    errors.append(error)
            if errors:
                raise errors[0]

    # -- values -------------------------------------------------------------------
    def counters_at(self, step: int, logs: Mapping[str, Any]) -> dict[str, int]:
        """The step counters at `step`: from the logs when the model put them there."""
        if self.is_plain:
            return {steps_lib.PLAIN_COUNTER: int(step)}
        values = scalar_items({k: logs[k] for k in self.counter_names if k in logs})
        if len(values) == len(self.counter_names):
            counters = {k: int(values[k]) for k in self.counter_names}
        else:
            counters = steps_lib.step_counters(self.model)
        counters[self.global_name] = int(step)
        return counters

    def learning_rates(self, step: int) -> dict[str, float]:
        """The learning rate of each optimizer used by the update that made `step`."""
        rates: dict[str, float] = {}
        for name, optimizer in steps_lib.step_optimizers(self.model).items():
            rate = _learning_rate(optimizer, step if self.is_plain else None, name=name)
            if rate is not None:
                rates[name] = rate
        return rates


def _learning_rate(optimizer: Any, step: int | None, name: str) -> float | None:
    raw = getattr(optimizer, "_learning_rate", None)
    try:
        if isinstance(raw, keras.optimizers.schedules.LearningRateSchedule):
            if step is None:
                step = int(keras.ops.convert_to_numpy(optimizer.iterations))
            value = raw(max(step - 1, 0))
        else:
            value = optimizer.learning_rate
        value = float(keras.ops.convert_to_numpy(value))
    except Exception:  # noqa: BLE001 - an optimizer without a readable rate
        logger.debug("kerasteps: no learning rate for optimizer %r", name)
        return None
    return value


def get_hub(model: keras.Model, params: dict) -> RunHub:
    """Returns the hub of this model's current `fit()` call, creating it if new."""
    with _HUBS_LOCK:
        hub = _HUBS.get(model)
        if hub is None or hub.params is not params or hub.ended:
            hub = RunHub(model, params)
            _HUBS[model] = hub
        return hub
