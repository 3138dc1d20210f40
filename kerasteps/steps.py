"""The global step of a Keras model, and the protocol for models with several counters.

The **global step** is the number of completed training updates of a model. It is read
from a variable that is saved with the model (in `.keras` files and in checkpoints), so
it continues across `fit()` calls, new callback instances and restarts.

- For a plain compiled model it is `model.optimizer.iterations`: 0 before the first
  update, 1 after it.
- A model that trains with several optimizers (a GAN has one for the generator and one
  for the critic) declares its own counters through the *step-counter protocol*:

  ```python
  class MyGAN(keras.Model):
      # Name of the counter that is the global step.
      kerasteps_global_counter = "g_step"

      def kerasteps_counters(self):
          # Ordered mapping name -> integer variable, saved with the model.
          return {"d_step": self.d_step, "g_step": self.g_step}

      def kerasteps_optimizers(self):  # optional: for learning-rate logging
          return {"d": self.d_optimizer, "g": self.g_optimizer}
  ```

  A model may also return its counters in the logs of `train_step` under the same
  names; kerasteps callbacks then report those exact values, which stay right even when
  Keras runs callbacks in a background thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras

__all__ = [
    "global_step",
    "global_step_name",
    "step_counters",
    "step_counter_variables",
    "step_optimizers",
]

#: Name of the single counter of a plain model in `step_counters`.
PLAIN_COUNTER = "step"


def _require_model(model: Any) -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"Expected a keras.Model for `model`, received {type(model).__name__}: "
            f"{model!r}"
        )


def _has_protocol(model: Any) -> bool:
    return callable(getattr(model, "kerasteps_counters", None))


def step_counter_variables(model: keras.Model) -> dict[str, Any]:
    """Returns the variables that count a model's training steps, by name.

    Args:
        model: A compiled `keras.Model`, or a model implementing the step-counter
            protocol (`kerasteps_counters()` and `kerasteps_global_counter`).

    Returns:
        An ordered `dict` mapping counter names to integer variables. A plain model
        has one entry, `"step"`, which is `model.optimizer.iterations`.

    Raises:
        TypeError: if `model` is not a `keras.Model`.
        ValueError: if a plain model is not compiled, or a protocol model names a
            global counter that it does not return.

    Example:

    >>> import keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> list(kerasteps.steps.step_counter_variables(model))
    ['step']
    """
    _require_model(model)
    if _has_protocol(model):
        counters = dict(model.kerasteps_counters())
        name = getattr(model, "kerasteps_global_counter", None)
        if name not in counters:
            raise ValueError(
                f"{type(model).__name__}.kerasteps_global_counter is {name!r}, which "
                f"is not one of its counters {sorted(counters)}."
            )
        return counters
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not getattr(model, "compiled", False):
        raise ValueError(
            f"The model {model.name!r} is not compiled, so it has no global step. "
            "Call `model.compile(optimizer=..., loss=...)` before training with "
            "kerasteps."
        )
    return {PLAIN_COUNTER: optimizer.iterations}


def global_step_name(model: keras.Model) -> str:
    """Returns the name of the counter that is the model's global step.

    Args:
        model: A compiled `keras.Model` or a step-counter protocol model.

    Returns:
        `"step"` for a plain model, else the model's `kerasteps_global_counter`.

    Example:

    >>> import keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> kerasteps.steps.global_step_name(model)
    'step'
    """
    _require_model(model)
    if _has_protocol(model):
        step_counter_variables(model)  # validates the protocol
        return model.kerasteps_global_counter
    return PLAIN_COUNTER


def _to_int(variable: Any) -> int:
    return int(keras.ops.convert_to_numpy(variable))


def step_counters(model: keras.Model) -> dict[str, int]:
    """Returns the current value of every step counter of a model.

    Args:
        model: A compiled `keras.Model` or a step-counter protocol model.

    Returns:
        An ordered `dict` of counter name to `int`: `{"step": n}` for a plain model,
        e.g. `{"d_step": 500, "g_step": 100}` for `kerasteps.models.WGAN`.

    Example:

    >>> import keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> kerasteps.step_counters(model)
    {'step': 0}
    """
    return {name: _to_int(v) for name, v in step_counter_variables(model).items()}


def global_step(model: keras.Model) -> int:
    """Returns the global step: the number of completed training updates.

    It is 0 before the first update and 1 after it; it is saved with the model and
    continues across `fit()` calls and restarts.

    Args:
        model: A compiled `keras.Model` or a step-counter protocol model.

    Returns:
        The global step as an `int`.

    Raises:
        TypeError: if `model` is not a `keras.Model`.
        ValueError: if the model is not compiled.

    Example:

    >>> import numpy as np, keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> kerasteps.global_step(model)
    0
    >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=4, verbose=0)
    >>> kerasteps.global_step(model)
    2
    """
    variables = step_counter_variables(model)
    return _to_int(variables[global_step_name(model)])


def step_optimizers(model: keras.Model) -> Mapping[str, Any]:
    """Returns the model's optimizers by short name, for learning-rate logging.

    Args:
        model: A compiled `keras.Model` or a step-counter protocol model.

    Returns:
        `{"": model.optimizer}` for a plain model; a protocol model's
        `kerasteps_optimizers()` when it defines one, else `{}`.

    Example:

    >>> import keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> list(kerasteps.steps.step_optimizers(model))
    ['']
    """
    _require_model(model)
    if _has_protocol(model):
        getter = getattr(model, "kerasteps_optimizers", None)
        return dict(getter()) if callable(getter) else {}
    optimizer = getattr(model, "optimizer", None)
    return {"": optimizer} if optimizer is not None else {}
