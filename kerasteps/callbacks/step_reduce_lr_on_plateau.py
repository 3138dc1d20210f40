"""`StepReduceLROnPlateau`: cuts the learning rate when a validation value stops
improving."""

from __future__ import annotations

import logging
import numbers
from collections.abc import Mapping
from typing import Any

from kerasteps import _compat
from kerasteps import steps as steps_lib
from kerasteps._validate import check_int, check_number
from kerasteps.callbacks._plateau import Plateau
from kerasteps.callbacks.step_event import StepEvent

__all__ = ["StepReduceLROnPlateau"]

logger = logging.getLogger("kerasteps")
_NAME = "StepReduceLROnPlateau"


class StepReduceLROnPlateau(Plateau):
    """Cuts the learning rate of every optimizer when a validation value stops
    improving.

    Keras's `ReduceLROnPlateau`, at the steps where a validation computes
    `monitor` (`ValidateEvery`'s steps, or Keras's own `validation_data` at an
    epoch end), for every optimizer of the model (a WGAN's `d` and `g`), and exact
    across a resume. `patience` counts validations: at the `patience`-th
    validation in a row that did not improve on the best by more than `min_delta`
    (with `patience_steps` instead: the first one that many steps after the last
    improvement or cut), each rate becomes `max(rate * factor, min_lr)`, from the
    next step on, and the count restarts. The `cooldown` validations after a cut
    do not count.

    A rate given as a `LearningRateSchedule` (the WGAN's default compile) is not
    cut: the run is refused before the first step, naming the optimizer. Compile
    with a constant rate, or let the schedule do the decay.

    Its state (the count, the best value and its step, the cooldown left, the cuts
    and the rates after them) is part of every checkpoint that `StepCheckpoint`
    saves, taken after the decision of that step, and the rates themselves are
    optimizer variables, saved with them: a resumed run cuts at the same steps as
    the uninterrupted one. Arguments given to the constructor win over the saved
    state (said at INFO).

    At each validation it adds `plateau/<monitor>` (the validations without
    improvement) for the sinks; at a cut, the new rates, `cut/learning_rate`
    (`cut/learning_rate/d`, `cut/learning_rate/g` for a WGAN). A cut is one INFO
    line naming the step, the value, the rule and the rates.

    Args:
        monitor: Name of the validation value, default `"val_loss"`.
        factor: Number in (0, 1), default 0.1: what a cut multiplies a rate by.
        patience: Positive int, default 5 (unless `patience_steps`): validations
            in a row without improvement before a cut.
        mode: `"auto"` (default), `"min"` or `"max"`: inferred from the name; a
            mode that contradicts the name is refused.
        min_delta: Number >= 0, default 1e-4 (Keras's): the least change that
            counts as an improvement.
        cooldown: Int >= 0, default 0: validations after a cut that do not count.
        min_lr: Number >= 0, default 0: no rate is cut below it.
        baseline: Optional number: the count restarts only on values better than
            it.
        start_step: Int >= 0, default 0: validations before this global step are
            not judged (a warm-up).
        patience_steps: Positive int or None (default): cut when this many steps
            passed without improvement, instead of `patience` validations.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StepReduceLROnPlateau, ValidateEvery
    >>> dense = keras.layers.Dense(1, kernel_initializer="zeros")
    >>> model = keras.Sequential([keras.Input((1,)), dense])
    >>> model.compile(keras.optimizers.SGD(0.1), "mse")
    >>> x = np.linspace(-1, 1, 40)[:, None]
    >>> cut = StepReduceLROnPlateau(patience=2, factor=0.5)
    >>> validate = ValidateEvery(5, validation_data=(x, -x))  # gets worse
    >>> _ = model.fit(x, x, batch_size=2, epochs=2, verbose=0,
    ...               callbacks=[validate, cut])
    >>> [step for step, _ in cut.cuts], round(float(model.optimizer.learning_rate), 6)
    ([15, 25, 35], 0.0125)
    """

    default_patience = 5
    async_safe = True  # a cut at a step applies from the next step on

    def __init__(
        self,
        monitor: str = "val_loss",
        factor: float = 0.1,
        patience: int | None = None,
        mode: str = "auto",
        min_delta: float = 1e-4,
        cooldown: int = 0,
        min_lr: float = 0.0,
        baseline: float | None = None,
        start_step: int = 0,
        patience_steps: int | None = None,
    ):
        super().__init__(
            monitor, min_delta, patience, patience_steps, mode, baseline, start_step
        )
        real = isinstance(factor, numbers.Real) and not isinstance(factor, bool)
        if not (real and 0 < factor < 1):
            raise ValueError(
                f"`factor` must be a number > 0 and < 1, received {factor!r}."
            )
        self.factor = float(factor)
        self.cooldown = check_int("cooldown", cooldown, 0)
        self.min_lr = check_number("min_lr", min_lr, 0.0)

    def _clear(self) -> None:
        super()._clear()
        #: Validations left before the count starts again after a cut.
        self.cooldown_left = 0
        #: `(step, {optimizer: rate after the cut})` of each cut, oldest first.
        self.cuts: list[tuple[int, dict[str, float]]] = []

    def state_dict(self) -> dict[str, Any]:
        """The decision state: count, best and its step, cooldown, the cuts."""
        state = super().state_dict()
        state.update(
            cooldown_left=self.cooldown_left,
            cuts=[[step, dict(rates)] for step, rates in self.cuts],
        )
        return state

    def _load_more(self, state: Mapping[str, Any]) -> None:
        self.cooldown_left = check_int("cooldown_left", state["cooldown_left"], 0)
        self.cuts = [
            (check_int("cut step", step, 0), {str(k): float(v) for k, v in r.items()})
            for step, r in state["cuts"]
        ]

    # -- the run --------------------------------------------------------------------
    def on_run_ready(self) -> None:
        super().on_run_ready()
        self._optimizers = {
            name: optimizer
            for name, optimizer in steps_lib.step_optimizers(self.model).items()
            if optimizer is not None
        }
        if not self._optimizers:
            raise ValueError(
                f"{_NAME}: the model {self.model.name!r} has no optimizer whose "
                "learning rate it could cut."
            )
        for name, optimizer in self._optimizers.items():
            inner = steps_lib._innermost(optimizer)
            raw = getattr(inner, "_learning_rate", None)
            if _compat.learning_rate_schedule(inner) is not None or callable(raw):
                raise ValueError(
                    f"{_NAME}: the learning rate of optimizer "
                    f"{name or 'optimizer'!r} ({type(inner).__name__}) is a schedule "
                    f"({type(raw).__name__}), which a cut cannot scale: compile it "
                    "with a constant rate, or drop StepReduceLROnPlateau and let the "
                    "schedule decay it."
                )

    def on_step(self, event: StepEvent) -> dict[str, float] | None:
        value = self.judge(event)
        if value is None:
            return None
        out = {f"plateau/{self.monitor}": float(self.wait)}
        if self.cooldown_left:
            self.cooldown_left -= 1
            self.restart(event.step)
            out[f"plateau/{self.monitor}"] = 0.0
        elif self.plateaued(event.step):
            rule = self.rule(value)
            event.learning_rates()  # the rates this step applied, for the sinks
            rates = self._cut()
            self.restart(event.step)
            self.cooldown_left = self.cooldown
            if rates:
                self.cuts.append((event.step, rates))
                out.update(
                    {
                        "cut/learning_rate" + (f"/{k}" if k else ""): v
                        for k, v in rates.items()
                    }
                )
                logger.info(
                    "%s: cutting the learning rate at step %d: %s; %s.",
                    _NAME,
                    event.step,
                    rule,
                    ", ".join(
                        f"{k or 'learning_rate'} -> {v:.6g}" for k, v in rates.items()
                    ),
                )
        return out

    def _cut(self) -> dict[str, float]:
        """Multiplies each rate above `min_lr` by `factor` (not below `min_lr`);
        returns the new rates of those it changed."""
        steps_lib.sync_trained_state(self.model)  # JAX: the next step reads them
        rates = {}
        for name, optimizer in self._optimizers.items():
            inner = steps_lib._innermost(optimizer)
            # Read as `learning_rate_at` reads it: under a multi-worker strategy
            # the rate is a `MirroredVariable`, which `float()` refuses.
            old = steps_lib.learning_rate_at(inner)
            new = max(old * self.factor, self.min_lr)
            if new < old:
                inner.learning_rate = new
                rates[name] = steps_lib.learning_rate_at(inner)
        return rates
