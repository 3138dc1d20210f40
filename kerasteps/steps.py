"""The global step of a Keras model, its counters, and the other model queries.

The **global step** is the number of completed training updates of a model. It is read
from a variable that is saved with the model (in `.keras` files and in checkpoints), so
it continues across `fit()` calls, new callback instances and restarts.

- For a plain compiled model it is `model.optimizer.iterations`: 0 before the first
  update, 1 after it. With Keras's gradient accumulation
  (`optimizer(gradient_accumulation_steps=k)`) it counts updates, one per `k` batches,
  as TF1, Lightning and Hugging Face do; the batches are `micro_steps(model)`.
- A model that trains with optimizers of its own (a GAN with `self.d_optimizer` and
  `self.g_optimizer`, `model.optimizer` left unused) declares them in one line, after
  `compile()` (and again after building the model anew, before a restore):

  ```python
  kerasteps.count_optimizer_steps(model, global_step="g_optimizer")
  ```

  Its counters are then the `iterations` of each optimizer attribute, named after the
  attribute (`{"d_optimizer": ..., "g_optimizer": ...}`), and the global step is the
  named one's. kerasteps refuses to train such a model without the declaration: it
  would sit at step 0 forever.
- A model class can declare its counters itself, through the *step-counter protocol*:

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
  names; kerasteps callbacks then report those exact values.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import keras

from kerasteps import _compat
from kerasteps._variables import read_floats, read_int

_compat.check_keras_version()  # every part that uses Keras imports this module

__all__ = [
    "StepNotCountedError",
    "count_optimizer_steps",
    "global_step",
    "global_step_name",
    "learning_rate_at",
    "micro_steps",
    "optimizer_attributes",
    "step_counters",
    "step_counter_variables",
    "step_optimizers",
    "sync_trained_state",
]

#: Name of the single counter of a plain model in `step_counters`.
PLAIN_COUNTER = "step"


class StepNotCountedError(RuntimeError):
    """A model trained but its global step did not move (raised in `fit()`).

    kerasteps raises it before training a model that certainly trains with
    optimizers of its own (`undeclared_optimizers`), and otherwise at the first
    training step of a run where the model's weights or optimizers moved while its
    global step stayed (that step was applied). The message names the optimizers
    it found and the `count_optimizer_steps` line that fixes it.
    """


@dataclass(frozen=True)
class _Declaration:
    """What `count_optimizer_steps` recorded for one model (not saved with it)."""

    counters: tuple[str, ...]  # optimizer attribute names, in attribute order
    global_name: str


_DECLARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _require_model(model: Any) -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"Expected a keras.Model for `model`, received {type(model).__name__}: "
            f"{model!r}"
        )


def _has_protocol(model: Any) -> bool:
    return callable(getattr(model, "kerasteps_counters", None))


def is_plain(model: keras.Model) -> bool:
    """True when the global step is `model.optimizer.iterations` (no declaration)."""
    return model not in _DECLARED and not _has_protocol(model)


def optimizer_attributes(model: keras.Model) -> dict[str, Any]:
    """Returns the optimizers that are attributes of a model, by attribute name.

    `model.optimizer` comes first when it is set; an optimizer held under two names
    is listed once, under its first name other than `optimizer`.

    Args:
        model: A `keras.Model`.

    Returns:
        An ordered `dict` of attribute name to `keras.optimizers.Optimizer`.

    Example:

    >>> import keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> list(kerasteps.steps.optimizer_attributes(model))
    ['optimizer']
    """
    _require_model(model)
    by_id: dict[int, tuple[str, Any]] = {}  # the first name of each optimizer
    for name, value in vars(model).items():
        public = not name.startswith("_") and name != "optimizer"
        if public and isinstance(value, keras.optimizers.Optimizer):
            by_id.setdefault(id(value), (name, value))
    default = getattr(model, "optimizer", None)
    if isinstance(default, keras.optimizers.Optimizer) and id(default) not in by_id:
        by_id = {id(default): ("optimizer", default), **by_id}
    return dict(by_id.values())


#: An optimizer attribute's lower-cased name that says it trains a GAN's generator:
#: it holds `generator`, or a word (a run of letters and digits) `g` or `gen`.
_GENERATOR_NAME = re.compile(r"generator|(?<![a-z0-9])g(?:en)?(?![a-z0-9])")


def suggest_global_step(moves: Mapping[str, int]) -> str:
    """The optimizer attribute most likely to count a model's global step.

    The global step of a GAN is its generator's updates: an attribute whose name
    says generator (a word `g`, `gen` or `generator`: `g_optimizer`, `gen_opt`,
    `generator_optimizer`) comes first; among the others (or among several of
    those), the one that moved least (a critic may move `n_critic` times per
    generator update); a tie goes to the first in order. What kerasteps suggests
    in the `count_optimizer_steps` line of its messages.

    Args:
        moves: Optimizer attribute name -> how many updates it made in the steps
            seen (0 for all when unknown), in attribute order; not empty.

    Returns:
        The attribute name to suggest.

    Example:

    >>> from kerasteps.steps import suggest_global_step
    >>> suggest_global_step({"d_optimizer": 1, "g_optimizer": 1})
    'g_optimizer'
    >>> suggest_global_step({"critic_opt": 5, "actor_opt": 1})
    'actor_opt'
    """
    names = list(moves)
    pool = [name for name in names if _GENERATOR_NAME.search(name.lower())] or names
    return min(pool, key=lambda name: (moves[name], names.index(name)))


@functools.cache
def _default_rmsprop_config() -> dict[str, Any]:
    return keras.optimizers.RMSprop().get_config()


def _is_compile_default(optimizer: Any) -> bool:
    """Whether `optimizer` is what `compile()` sets when given none: an RMSprop
    with Keras's default settings (any name)."""
    if type(optimizer) is not keras.optimizers.RMSprop:
        return False
    default = {**_default_rmsprop_config(), "name": optimizer.name}
    return optimizer.get_config() == default


def _own_train_step(model: keras.Model) -> bool:
    """Whether the model's class (not Keras) defines its `train_step`."""
    for cls in type(model).__mro__:
        if "train_step" in vars(cls):
            return not cls.__module__.startswith("keras.")
    return False


def undeclared_optimizers(model: keras.Model) -> dict[str, Any]:
    """The optimizers a model certainly trains with instead of `model.optimizer`.

    Non-empty for a model without a declaration (`count_optimizer_steps`, the
    step-counter protocol) whose class defines its own `train_step`, that holds
    optimizers as attributes besides `model.optimizer`, and whose `model.optimizer`
    is the RMSprop that `compile()` sets when given none (keras-io's GANs call
    `super().compile()` and keep their own): its global step would stay where it
    is. Such a model is refused before training; other models are checked at
    their first step.

    Args:
        model: A `keras.Model`.

    Returns:
        Attribute name -> optimizer, `model.optimizer` left out; `{}` otherwise.

    Example:

    >>> import keras
    >>> from kerasteps.steps import undeclared_optimizers
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile()
    >>> undeclared_optimizers(model)  # Keras's train_step uses model.optimizer
    {}
    """
    _require_model(model)
    if not is_plain(model) or not _own_train_step(model):
        return {}
    found = optimizer_attributes(model)
    default = found.pop("optimizer", None)  # None when unset or also another's
    return found if _is_compile_default(default) else {}


def undeclared_restore_hint(model: keras.Model, saved_global: str | None) -> str:
    """What to do when a restored model's global step is not its checkpoint's
    because the model was not declared; `""` when that is not the reason.

    Args:
        model: The model just restored.
        saved_global: The checkpoint's global counter (`meta.json`'s
            `global_counter`): an optimizer attribute when it was declared.

    Example:

    >>> import keras
    >>> from kerasteps.steps import undeclared_restore_hint
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> undeclared_restore_hint(model, "step")
    ''
    """
    if not is_plain(model):
        return ""
    others = optimizer_attributes(model)
    if others.pop("optimizer", None) is None or not others:
        return ""  # model.optimizer is one of them (or none is set)
    suggested = suggest_global_step(dict.fromkeys(others, 0))
    suggestion = saved_global if saved_global in others else suggested
    iterations = {name: read_int(opt.iterations) for name, opt in others.items()}
    listed = ", ".join(f"`{k}` (iterations {v})" for k, v in iterations.items())
    return (
        " The model counts its steps with optimizers other than `model.optimizer`: "
        f"{listed}; undeclared, its global step is `model.optimizer.iterations`. "
        "Declare the one that counts the global step, then restore again:\n\n"
        f'    kerasteps.count_optimizer_steps(model, global_step="{suggestion}")\n'
    )


def count_optimizer_steps(model: keras.Model, global_step: str) -> None:
    """Declares a model's counters: the `iterations` of each of its optimizers.

    For a model whose `train_step` trains with optimizers of its own (keras-io's
    GANs: `self.d_optimizer`, `self.g_optimizer`), `model.optimizer` never moves and
    the global step would stay 0. After this call the counters are the iterations of
    every optimizer attribute of the model (named after the attribute; the unused
    `model.optimizer` is left out unless it is the one named), and the global step is
    the named optimizer's. Every kerasteps callback then logs all the counters and
    learning rates, and `StopAtStep`, `StepCheckpoint` and resume use the global step.

    The declaration lives in this process, not in the model's files: call it again
    after building or loading the model anew (before `StepCheckpoint.restore_latest`,
    which then continues the counters).

    Args:
        model: The compiled `keras.Model` (its optimizers must be attributes).
        global_step: Attribute name of the optimizer whose updates are the global
            step, e.g. `"g_optimizer"`.

    Raises:
        TypeError: if `model` is not a `keras.Model`.
        ValueError: if the model declares counters through the step-counter protocol,
            or `global_step` names none of its optimizers.

    Example:

    >>> import keras, kerasteps
    >>> class GAN(keras.Model):
    ...     def compile(self, d_optimizer, g_optimizer):
    ...         super().compile()
    ...         self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer
    >>> gan = GAN()
    >>> gan.compile(keras.optimizers.Adam(), keras.optimizers.Adam())
    >>> kerasteps.count_optimizer_steps(gan, global_step="g_optimizer")
    >>> kerasteps.step_counters(gan)
    {'d_optimizer': 0, 'g_optimizer': 0}
    """
    _require_model(model)
    if _has_protocol(model):
        raise ValueError(
            f"{type(model).__name__} declares its counters itself "
            "(`kerasteps_counters`); `count_optimizer_steps` is for models without."
        )
    found = optimizer_attributes(model)
    if not isinstance(global_step, str) or global_step not in found:
        listed = ", ".join(f"`{name}`" for name in found) or "none"
        raise ValueError(
            f"`global_step` must name an optimizer attribute of "
            f"{type(model).__name__}, received {global_step!r}; its optimizers: "
            f"{listed}. Call `count_optimizer_steps` after `compile()`."
        )
    names = tuple(n for n in found if n != "optimizer" or n == global_step)
    _DECLARED[model] = _Declaration(counters=names, global_name=global_step)


def _declared_optimizers(model: keras.Model) -> dict[str, Any]:
    names = _DECLARED[model].counters
    optimizers = {name: getattr(model, name, None) for name in names}
    for name, optimizer in optimizers.items():
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise ValueError(
                f"`count_optimizer_steps` declared the optimizer `{name}` of "
                f"{type(model).__name__}, but `model.{name}` is now {optimizer!r}."
            )
    return optimizers


def step_counter_variables(model: keras.Model) -> dict[str, Any]:
    """Returns the variables that count a model's training steps, by name.

    Args:
        model: A compiled `keras.Model`, a model declared with
            `count_optimizer_steps`, or a step-counter protocol model.

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
    if model in _DECLARED:
        return {name: o.iterations for name, o in _declared_optimizers(model).items()}
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
        model: A compiled `keras.Model`, a declared or a step-counter protocol model.

    Returns:
        `"step"` for a plain model, the declared optimizer attribute, or the
        protocol model's `kerasteps_global_counter`.

    Example:

    >>> import keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> kerasteps.steps.global_step_name(model)
    'step'
    """
    _require_model(model)
    if model in _DECLARED:
        return _DECLARED[model].global_name
    if _has_protocol(model):
        step_counter_variables(model)  # validates the protocol
        return model.kerasteps_global_counter
    return PLAIN_COUNTER


def sync_trained_state(model: keras.Model) -> None:
    """Attaches the trained state to the model's variables (JAX keeps it apart).

    Under JAX, Keras holds the state of an epoch in progress outside the model's
    variables; reading them mid-epoch needs this first (as `Callback.model` does),
    by the name the installed Keras calls (`_compat.sync_jax_state`). Other
    backends train the variables in place: nothing to do.
    """
    _compat.sync_jax_state(model)


def step_counters(model: keras.Model) -> dict[str, int]:
    """Returns the current value of every step counter of a model.

    Args:
        model: A compiled `keras.Model`, a declared or a step-counter protocol model.

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
    return {name: read_int(v) for name, v in step_counter_variables(model).items()}


def global_step(model: keras.Model) -> int:
    """Returns the global step: the number of completed training updates.

    It is 0 before the first update and 1 after it; it is saved with the model and
    continues across `fit()` calls and restarts.

    Args:
        model: A compiled `keras.Model`, a declared or a step-counter protocol model.

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
    return read_int(step_counter_variables(model)[global_step_name(model)])


def step_optimizers(model: keras.Model) -> Mapping[str, Any]:
    """Returns the model's optimizers by short name, for learning-rate logging.

    Args:
        model: A compiled `keras.Model`, a declared or a step-counter protocol model.

    Returns:
        `{"": model.optimizer}` for a plain model; a declared model's optimizers by
        attribute name; a protocol model's `kerasteps_optimizers()` when it defines
        one, else `{}`.

    Example:

    >>> import keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> list(kerasteps.steps.step_optimizers(model))
    ['']
    """
    _require_model(model)
    if model in _DECLARED:
        return _declared_optimizers(model)
    if _has_protocol(model):
        getter = getattr(model, "kerasteps_optimizers", None)
        return dict(getter()) if callable(getter) else {}
    optimizer = getattr(model, "optimizer", None)
    return {"": optimizer} if optimizer is not None else {}


# -- the optimizer that counts the global step, and its batches ----------------------
def _innermost(optimizer: Any) -> Any:
    """The optimizer that counts the batches (inside a `LossScaleOptimizer`)."""
    while getattr(optimizer, "inner_optimizer", None) is not None:
        optimizer = optimizer.inner_optimizer
    return optimizer


def _batches_per_update(optimizer: Any) -> int:
    """The gradient accumulation steps of an optimizer, or 1 (also for None)."""
    return int(getattr(_innermost(optimizer), "gradient_accumulation_steps", 0) or 1)


def global_optimizer(model: keras.Model) -> Any | None:
    """The optimizer whose `iterations` is the global step; None for protocol models."""
    if model in _DECLARED:
        return _declared_optimizers(model)[_DECLARED[model].global_name]
    return None if _has_protocol(model) else getattr(model, "optimizer", None)


def accumulation_steps(model: keras.Model) -> int:
    """Batches per global step: the global optimizer's gradient accumulation, or 1."""
    return _batches_per_update(global_optimizer(model))


def micro_steps(model: keras.Model) -> int:
    """Returns the number of training batches behind the global step.

    It equals `global_step(model)` unless the optimizer accumulates gradients
    (`gradient_accumulation_steps=k`): then the global step counts updates and this
    counts the batches, `k` per update, including those of an update in progress.
    `kerasteps.data.skip_consumed(dataset, model)` skips this many batches.

    Args:
        model: A compiled `keras.Model`, a declared or a step-counter protocol model.

    Example:

    >>> import numpy as np, keras, kerasteps
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(gradient_accumulation_steps=4), "mse")
    >>> _ = model.fit(np.ones((12, 2)), np.ones((12, 1)), batch_size=2, verbose=0)
    >>> kerasteps.global_step(model), kerasteps.steps.micro_steps(model)
    (1, 6)
    """
    if accumulation_steps(model) == 1:
        return global_step(model)
    return read_int(_compat.raw_iterations(_innermost(global_optimizer(model))))


def learning_rate_variable(optimizer: Any) -> keras.Variable | None:
    """Returns the variable that holds an optimizer's learning rate, or None.

    None when the rate is a `LearningRateSchedule` (a function of the step:
    `learning_rate_schedule` gives it, `learning_rate_at` evaluates it), a callable
    or a number. Inside a `LossScaleOptimizer`, the inner optimizer's.

    Args:
        optimizer: A `keras.optimizers.Optimizer`.

    Example:

    >>> import keras
    >>> from kerasteps.steps import learning_rate_variable
    >>> float(learning_rate_variable(keras.optimizers.SGD(0.5)))
    0.5
    >>> schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    >>> learning_rate_variable(keras.optimizers.SGD(schedule)) is None
    True
    """
    source = _compat.learning_rate_source(_innermost(optimizer))
    return source if isinstance(source, keras.Variable) else None


def learning_rate_schedule(optimizer: Any) -> Any | None:
    """Returns the `LearningRateSchedule` an optimizer was given, or None.

    Inside a `LossScaleOptimizer`, the inner optimizer's.

    Args:
        optimizer: A `keras.optimizers.Optimizer`.

    Example:

    >>> import keras
    >>> from kerasteps.steps import learning_rate_schedule
    >>> schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    >>> learning_rate_schedule(keras.optimizers.SGD(schedule)) is schedule
    True
    """
    return _compat.learning_rate_schedule(_innermost(optimizer))


def learning_rate_at(optimizer: Any, step: int | None = None) -> float:
    """Returns the learning rate that the update making global step `step` applied.

    A `LearningRateSchedule` is evaluated on the optimizer's own count before that
    update, as Keras does: `step - 1`, or `step * k - 1` when the optimizer
    accumulates gradients over `k` batches. A constant or variable rate is read as
    it is. With `step=None`, the rate of the optimizer's latest update.

    Args:
        optimizer: A `keras.optimizers.Optimizer`.
        step: The optimizer's update count after the update, or None.

    Returns:
        The learning rate as a float.

    Raises:
        Exception: whatever the optimizer raises when its rate cannot be read.

    Example:

    >>> import keras
    >>> from kerasteps.steps import learning_rate_at
    >>> schedule = keras.optimizers.schedules.PiecewiseConstantDecay([10], [1.0, 0.5])
    >>> optimizer = keras.optimizers.SGD(schedule)
    >>> learning_rate_at(optimizer, 11), learning_rate_at(optimizer, 12)
    (1.0, 0.5)
    """
    inner = _innermost(optimizer)
    schedule = _compat.learning_rate_schedule(inner)
    if schedule is None:
        value = inner.learning_rate
        if isinstance(value, keras.Variable):
            return read_floats([value])[0]
    else:
        step = read_int(inner.iterations) if step is None else step
        value = schedule(max(int(step) * _batches_per_update(inner) - 1, 0))
    return float(keras.ops.convert_to_numpy(value))
