"""`StepEvent`: what a kerasteps callback receives when it acts at a global step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kerasteps._validate import check_bool, check_that
from kerasteps.callbacks.step_run import StepRun

__all__ = ["StepEvent"]


def scalar_items(values: Mapping[str, Any]) -> dict[str, float]:
    """Returns the entries of `values` that are single numbers, as Python scalars."""
    out: dict[str, float] = {}
    for key, value in values.items():
        try:
            array = np.asarray(value)
        except Exception:  # noqa: BLE001 - not convertible: not a scalar
            continue
        if array.size == 1 and array.dtype.kind in "iuf":  # not a bool
            out[key] = array.item()
    return out


class StepFacts(Protocol):
    """What the dispatcher reads of the model at a step, on request (private)."""

    def counters_at(self, step: int, logs: Mapping[str, Any]) -> dict[str, int]: ...

    def learning_rates(self, step: int) -> dict[str, float]: ...


#: A callback's reduced training values at a step, and the reduced keys.
Values = tuple[dict[str, float], frozenset[str]]


@dataclass
class StepRecord:
    """The facts of one step, shared by the events of every callback (private)."""

    step: int
    prev: int
    logs: Mapping[str, Any]
    run: StepRun
    facts: StepFacts
    extras: dict[str, Any] = field(default_factory=dict)
    final: bool = False
    epoch_last: bool = False
    time: float = 0.0
    counters: dict[str, int] | None = None
    rates: dict[str, float] | None = None


class StepEvent:
    """What one kerasteps callback receives when it acts at a global step.

    `on_step(event)` gets one: the true global step, Keras's logs of that step, the
    values that providers added (validation, throughput), and `values()`, the values
    to record, reduced as the callback's `reduce` says:

    - `"mean"` (default): for `loss` and every `Mean`-type metric (`mae`, `accuracy`,
      a WGAN's `d_loss`...), the mean over the steps since this callback's previous
      point, weighted by examples as Keras weights them, exact across epoch ends and
      across a resume from a `StepCheckpoint`;
    - `"last"`: the value of the step's own batch (with `steps_per_execution=K`, of
      its last execution of K steps);
    - `"epoch"`: Keras's running mean since the epoch began, as in Keras's logs.

    Metrics that are not means (AUC, precision: no `total`/`count` state) and values
    a custom `train_step` returns without a metric keep Keras's value under every
    `reduce`; `reduced` names the keys that were reduced. Validation values are whole
    evaluations and are never reduced.

    Args:
        record: The facts of the step (the dispatcher makes the events; a callback
            only receives them).
        scheduled: True or False: whether this callback's own schedule fired.
        values: None, or this callback's reduced training values and the reduced
            keys: a `({name: value}, frozenset(names))` pair.

    Attributes:
        step: The true global step after the update(s) that produced the values.
        prev: The global step before them (`step - K` with `steps_per_execution=K`).
        logs: Keras's batch logs of that step (running means since the epoch began).
        extras: Values provided at this step by providers (`val_*` from validation,
            throughput) or by Keras's own epoch-end validation.
        scheduled: True when this callback's own schedule fired; False when it is
            called only to record `extras`.
        final: True at the end of the run (`Every(last=True)`).
        epoch_last: True when this is the epoch's last batch: Keras's validation
            values for this step may still come (sinks that write one record per
            step wait for the epoch end, where `flush()` is called).
        time: Wall-clock time (seconds since the epoch) of the batch end.
        run: The `StepRun` this step belongs to: start step, steps per execution,
            accumulation, abort, the non-finite mark.
        run_start: The global step at which this `fit()` run began.
        global_counter: Name of the counter that is the global step (`"step"` for a
            plain model, `"g_step"` for a WGAN).
        reduced: The keys of `values()` that were reduced (window mean or own
            batch).

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StepCallback
    >>> class PrintMeans(StepCallback):
    ...     def on_step(self, event):
    ...         print(event.step, round(event.values()["loss"], 3), event.reduced)
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> x, y = np.zeros((8, 1)), np.zeros((8, 1))
    >>> _ = model.fit(x, y, batch_size=2, verbose=0, callbacks=[PrintMeans(every=2)])
    2 0.0 frozenset({'loss'})
    4 0.0 frozenset({'loss'})
    """

    def __init__(
        self, record: StepRecord, scheduled: bool, values: Values | None = None
    ):
        check_that("record", record, isinstance(record, StepRecord), "a StepRecord")
        pair = isinstance(values, tuple) and len(values) == 2
        ok = values is None or (pair and isinstance(values[0], Mapping))
        check_that("values", values, ok, "None or a (values, reduced keys) pair")
        self._record = record
        self.scheduled = check_bool("scheduled", scheduled)
        self.step: int = record.step
        self.prev: int = record.prev
        self.logs: Mapping[str, Any] = record.logs
        self.extras: dict[str, Any] = record.extras
        self.final: bool = record.final
        self.epoch_last: bool = record.epoch_last
        self.time: float = record.time
        self.run: StepRun = record.run
        self.run_start: int = record.run.start_step
        self.global_counter: str = record.run.global_counter
        training, self.reduced = values if values is not None else ({}, frozenset())
        self._values = {**training, **scalar_items(record.extras)}

    @property
    def counters(self) -> dict[str, int]:
        """The model's step counters at this step (`{"step": n}` for a plain model)."""
        record = self._record
        if record.counters is None:
            record.counters = record.facts.counters_at(record.step, record.logs)
        return dict(record.counters)

    def learning_rates(self) -> dict[str, float]:
        """The learning rate each optimizer applied at this step, by short name.

        `{"": rate}` for a plain model, `{"d": ..., "g": ...}` for a WGAN; a
        `LearningRateSchedule` is evaluated on the optimizer's count at the update
        that made this step.
        """
        record = self._record
        if record.rates is None:  # read once a step, before a decider cuts them
            record.rates = record.facts.learning_rates(record.step)
        return dict(record.rates)

    # -- the values to record -------------------------------------------------------
    def values(self) -> dict[str, float]:
        """The scalar values to record, reduced as this callback's `reduce` says.

        When `scheduled` (for a callback that reads values and wants them at this
        step): the training logs (without the step counters), reduced, then the
        extras. Otherwise the extras alone.
        """
        return dict(self._values)

    def __repr__(self) -> str:
        return (
            f"StepEvent(step={self.step}, prev={self.prev}, "
            f"scheduled={self.scheduled}, final={self.final})"
        )
