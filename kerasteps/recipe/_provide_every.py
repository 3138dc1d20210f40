"""`ProvideEvery`: a recipe's own measurement, handed to the sinks (the recipe kit)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import keras

from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.schedule import Every

__all__ = ["ProvideEvery"]


class ProvideEvery(StepCallback):
    """Adds the values of a function of the model to the sinks, every N steps.

    A provider (`role = "provider"`): at each step of `every` it calls
    `values(model)` and hands the result to every kerasteps sink at that step
    (`StepTensorBoard` scalars, JSON lines, `LogEvery` lines), whatever order the
    callbacks were listed in. A recipe's own measurement (an error on all the
    data, a time) becomes a logged curve this way, with no callback class of its
    own.

    Args:
        every: Positive int or `kerasteps.Every`, when `values` is called.
        values: A callable `model -> {name: float}`.

    Attributes:
        last_values: The values of its latest step.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.recipe import ProvideEvery
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> bias = ProvideEvery(2, lambda model: {"bias": float(model.layers[0].bias[0])})
    >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2, verbose=0,
    ...               callbacks=[bias])
    >>> list(bias.last_values)
    ['bias']
    """

    role = "provider"
    reads_values = False

    def __init__(
        self,
        every: int | Every,
        values: Callable[[keras.Model], Mapping[str, float]],
    ):
        super().__init__(Every.coerce(every, name="every"))
        if not callable(values):
            raise TypeError(
                "`values` must be a callable model -> {name: float}, received "
                f"{values!r}."
            )
        self.values = values
        self.last_values: dict[str, Any] = {}

    def on_step(self, event: StepEvent) -> dict[str, Any]:
        self.last_values = dict(self.values(self.model))
        return self.last_values
