"""`Monitor`: the validation value that a deciding callback judges (private).

`StepCheckpoint(monitor=...)` ranks checkpoints by it; `StepEarlyStopping` and
`StepReduceLROnPlateau` watch it. One rule for all of them: a value is judged at the
step it is about, where a validation computed it (a provider's `val_*` values, or
Keras's own at an epoch end), once; a monitor that no validation of the run can
give is refused when the run begins, and one that a validation does not hold is an
error there, naming those it holds.
"""

from __future__ import annotations

import logging
from typing import Any

import keras

from kerasteps import _compat
from kerasteps._validate import check_name
from kerasteps.callbacks.step_event import StepEvent, scalar_items
from kerasteps.callbacks.step_run import StepRun
from kerasteps.checkpoint._retention import infer_mode

logger = logging.getLogger("kerasteps")


def metric_names(model: keras.Model) -> set[str] | None:
    """The names of the values the model's `evaluate` gives (the loss and each
    compiled metric), or None when they are known only once it ran (a model with
    a `test_step` of its own, or several outputs before it ran)."""
    if type(model).test_step is not keras.Model.test_step:
        return None
    several = len(getattr(model, "outputs", None) or [None]) > 1
    if several and not _compat.compiled_loss_built(model):
        return None  # each output's loss is named once it ran
    names = set()
    for metric in model.metrics:
        inner = getattr(metric, "metrics", None)  # Keras's `compile_metrics`
        if inner is None:
            names.add(metric.name)
        elif not getattr(metric, "built", True):
            return _compat.compiled_metric_names(model)
        else:
            names.update(m.name for m in inner)
    return names or None


class Monitor:
    """One callback's monitored validation value (see the module docstring).

    Args:
        owner: The callback's name, for its messages.
        name: The value's name (`"val_loss"`).
        mode: `"auto"`, `"min"` or `"max"` (see `_retention.infer_mode`).

    Attributes:
        name: The value's name.
        mode: `"min"` or `"max"`.

    Example:

    >>> from kerasteps.callbacks._monitor import Monitor
    >>> Monitor("StepEarlyStopping", "val_accuracy", "auto").mode
    'max'
    """

    def __init__(self, owner: str, name: Any, mode: Any):
        self.owner = owner
        self.name: str = check_name(name, "monitor", hint=" such as 'val_loss'")
        self.mode = infer_mode(self.name, mode)
        self._prefix = ""
        self._taken: int | None = None
        self._began_at: int | None = None  # the run's start step, once it began

    def begin(self, run: StepRun, model: keras.Model) -> None:
        """Checks that a validation of the run can give the value (at run begin).

        Raises:
            ValueError: naming what the run's validations give instead.
        """
        self._taken, self._began_at = None, run.start_step
        prefixes = [p for p in run.value_prefixes() if self.name.startswith(p)]
        if not prefixes:
            raise ValueError(
                f"{self.owner}: `monitor` {self.name!r} is not a validation value: "
                f"the run's validations give names that start with "
                f"{sorted(run.value_prefixes())} (`val_` + the loss or a compiled "
                "metric's name for fit's `validation_data` and ValidateEvery)."
            )
        self._prefix = max(prefixes, key=len)
        names = metric_names(model)
        if names is not None and self.name[len(self._prefix) :] not in names:
            given = sorted(self._prefix + n for n in names)
            raise ValueError(
                f"{self.owner}: `monitor` {self.name!r} is no value that validating "
                f"the model {model.name!r} gives; it gives {given}."
            )

    def end(self, run: StepRun) -> None:
        """At the run's end: a WARNING when it trained but no validation gave the
        value (nothing was judged: a validation cadence longer than the run?)."""
        if self._began_at is not None and self._taken is None:
            if run.step > self._began_at:
                logger.warning(
                    "%s: no validation of the run (steps %d to %d) gave %r: nothing "
                    "was judged. Validate more often than the run is long.",
                    self.owner,
                    self._began_at + 1,
                    run.step,
                    self.name,
                )
        self._began_at = None

    def take(self, event: StepEvent, run: StepRun) -> float | None:
        """The value at this step when a validation computed it here and it was
        not taken yet (NaN or an infinity as it came), else None.

        Raises:
            ValueError: when this step's validation holds other values with the
                monitor's prefix, but not the monitor (naming those it holds).
        """
        if self._taken == event.step or not event.extras:
            return None
        values = scalar_items(event.extras)
        if self.name in values:
            self._taken = event.step
            return float(values[self.name])
        prefixes = run.value_prefixes()
        ours = [
            key
            for key in values
            if max((p for p in prefixes if key.startswith(p)), key=len, default="")
            == self._prefix
        ]
        if ours:
            raise ValueError(
                f"{self.owner}: `monitor` {self.name!r} is not among the validation "
                f"values of step {event.step}: {sorted(ours)}."
            )
        return None
