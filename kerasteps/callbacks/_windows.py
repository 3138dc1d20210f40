"""Window means of Keras's `Mean` metrics, from their state (private).

Keras's batch logs hold, for `loss` and every `Mean`-type metric, the running mean
since the epoch began. A sink wants the value *about its step*: the mean over the steps
since its previous point. Both come from the same state: a `keras.metrics.Mean` keeps a
`total` and a `count` (examples, or the sum of sample weights), and its result is
`total / count`. So the window's state is the difference of two states, and the
window's value is the metric's own result function applied to it (`sqrt` for
`RootMeanSquaredError`): exact, weighted by examples as Keras weights them, with nothing
re-run and no metric reset.

`MetricWindows` keeps, for one `fit()` run, the *cumulative* state of each such metric
since the run began: the sum over the epochs that ended (Keras resets the metrics at
every epoch begin, and its validation resets them again before the epoch ends) plus the
open epoch's state. A window that spans epoch boundaries is therefore exact too.

State is read from the device only when a sink asks for values (its scheduled steps),
once per step whatever the number of sinks, and once per epoch end.

A window that begins before a checkpoint (or before the previous `fit()` call) carries
its partial state across: the run's `carry()` gives it per schedule, `StepCheckpoint`
stores it in the checkpoint, and a `kerasteps.checkpoint.ResumeState` hands it to the
next run of the model.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import keras
import numpy as np

from kerasteps import steps as steps_lib
from kerasteps._validate import check_choice
from kerasteps._variables import ScalarReader

logger = logging.getLogger("kerasteps")

#: The values of `reduce`.
REDUCE_MODES = ("mean", "last", "epoch")

State = dict[str, np.ndarray]  # metric key -> [total, count] as float64


def check_reduce(reduce: Any) -> str:
    """Returns `reduce` if it is one of `REDUCE_MODES`, else raises `ValueError`."""
    return check_choice("reduce", reduce, REDUCE_MODES)


def carry_problem(carry: Any) -> str | None:
    """What keeps `carry` (a checkpoint's `windows`) from being a run's partial
    windows, or None: `{schedule: {metric: [total, count]}}`, finite numbers.

    Example:

    >>> from kerasteps.callbacks._windows import carry_problem
    >>> carry_problem({"Every(2)": {"loss": [3.5, 4.0]}}) is None
    True
    >>> carry_problem({"Every(2)": {"loss": "x"}})
    "'Every(2)' holds 'loss': 'x', not [total, count]"
    """
    if not isinstance(carry, dict):
        return f"it is {carry!r}, not a mapping of schedules"
    for schedule, windows in carry.items():
        if not isinstance(windows, dict):
            return f"{schedule!r} holds {windows!r}, not a mapping of metrics"
        for key, state in windows.items():
            if not (
                isinstance(state, list)
                and len(state) == 2
                and all(type(v) in (int, float) and math.isfinite(v) for v in state)
            ):
                return f"{schedule!r} holds {key!r}: {state!r}, not [total, count]"
    return None


def _is_mean(metric: Any) -> bool:
    """A metric whose state is an additive `[total, count]` and result total/count."""
    return (
        isinstance(metric, keras.metrics.Mean)
        and len(metric.variables) == 2
        and metric.variables[0] is metric.total
        and metric.variables[1] is metric.count
    )


def _add(a: State, b: State) -> State:
    """`a + b`, key by key (a key that one of them lacks is zero there)."""
    return {key: a.get(key, 0.0) + b.get(key, 0.0) for key in a | b}


class MetricWindows:
    """Cumulative `Mean` metric state of one `fit()` run (see module docstring)."""

    def __init__(self, model: keras.Model):
        self.model = model
        #: Reads a JAX run's trained state without a sync (the dispatcher's), or None.
        self.state: Any = None
        self._metrics: dict[str, Any] | None = None  # key -> Mean metric
        self._reader: ScalarReader | None = None
        self._closed: State = {}
        self._open = False
        self._cache: tuple[int, State] | None = None

    # -- which log keys are means ---------------------------------------------------
    def _discover(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for metric in self.model.metrics:
            subs = getattr(metric, "metrics", None)
            if _is_mean(metric):
                found.setdefault(metric.name, metric)
            elif isinstance(subs, list) and subs:
                # `CompileMetrics`: its dict result names its metrics in their order.
                try:
                    names = list(metric.result())
                except Exception:  # noqa: BLE001 - not built, or not a dict
                    continue
                if len(names) != len(subs):
                    continue
                for name, sub in zip(names, subs, strict=True):
                    if _is_mean(sub):
                        found.setdefault(name, sub)
        return found

    def variables(self) -> list[Any]:
        """The `total` and `count` of each mean metric, in order."""
        if self._metrics is None:
            steps_lib.sync_trained_state(self.model)  # the metrics' results name them
            self._metrics = self._discover()
        return [v for metric in self._metrics.values() for v in metric.variables]

    def _read_open_epoch(self) -> State:
        variables = self.variables()
        # A JAX run's state apart from the model (no sync of the whole model).
        values = None if self.state is None else self.state.read(variables)
        if values is None:
            steps_lib.sync_trained_state(self.model)
            if self._reader is None or len(self._reader.variables) != len(variables):
                self._reader = ScalarReader(variables)
            values = self._reader()
        pairs = np.array(values, dtype=np.float64).reshape(-1, 2)
        return dict(zip(self._metrics, pairs, strict=True))

    def invalidate(self) -> None:
        """A new batch ended: the state read before is old."""
        self._cache = None

    # -- epochs -----------------------------------------------------------------------
    def epoch_begin(self) -> None:
        """Keras has just reset the metrics: the open epoch's state is zero."""
        self._open = True
        self._cache = None

    def close_epoch(self) -> None:
        """Adds the ending epoch's state to the run's, before validation resets it."""
        if not self._open:
            return
        self._closed = _add(self._closed, self._read_open_epoch())
        self._open = False
        self._cache = None

    # -- reading ----------------------------------------------------------------------
    def cumulative(self, step: int, logs: Mapping[str, Any] | None = None) -> State:
        """The run's cumulative state at `step` (read once per step)."""
        if self._cache is not None and self._cache[0] == step:
            return self._cache[1]
        state = self._closed
        if self._open:
            epoch = self._read_open_epoch()
            if logs:
                self._verify(epoch, logs)
                epoch = {k: v for k, v in epoch.items() if k in self._metrics}
            state = _add(state, epoch)
        self._cache = (step, state)
        return state

    def _verify(self, epoch: State, logs: Mapping[str, Any]) -> None:
        """Keeps the keys whose log value is the metric's running mean.

        A custom `train_step` may return, under a metric's name, a value of its own
        (the raw batch loss): that key is then logged as it is, never reduced. The
        check runs at every read (a raw value equals the running mean after one
        batch, rarely after more).
        """
        for key in [key for key in self._metrics if key in logs]:
            try:
                logged = float(logs[key])
            except (TypeError, ValueError):
                logged = math.nan
            expected = self.result(key, epoch[key])
            if expected is None:
                same = logged == 0.0  # Keras's result for no examples
            elif math.isnan(expected):
                same = math.isnan(logged)
            else:
                same = math.isclose(logged, expected, rel_tol=1e-5, abs_tol=1e-7)
            if not same:
                logger.debug(
                    "kerasteps: %r in the logs (%r) is not the running mean of the "
                    "metric of that name (%r); it is logged as it is.",
                    key,
                    logged,
                    expected,
                )
                del self._metrics[key]

    def result(self, key: str, window: np.ndarray) -> float | None:
        """The metric's result on a window's `[total, count]`; None for no examples."""
        total, count = float(window[0]), float(window[1])
        if count <= 0.0:
            return None
        metric = self._metrics[key]
        if type(metric).result is keras.metrics.Mean.result:
            return total / count
        dtype = metric.variables[0].dtype
        value = metric.stateless_result(
            [keras.ops.convert_to_tensor(x, dtype=dtype) for x in (total, count)]
        )
        return float(keras.ops.convert_to_numpy(value))

    def reduce(
        self, logs: Mapping[str, float], window: State
    ) -> tuple[dict[str, float], frozenset[str]]:
        """Replaces each mean in `logs` by its window's value; names those keys."""
        keys = [key for key in logs if key in window and key in (self._metrics or {})]
        results = {key: self.result(key, window[key]) for key in keys}
        reduced = {key: value for key, value in results.items() if value is not None}
        return {**logs, **reduced}, frozenset(reduced)


def window_between(end: State, start: State) -> State:
    """The state of the steps after `start` up to `end` (both cumulative)."""
    return _add(end, {key: -value for key, value in start.items()})
