"""`ValidateEvery`: validation every N global steps, without disturbing training."""

from __future__ import annotations

import sys
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from kerasteps import _compat, _variables
from kerasteps._validate import check_int, check_name
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent, scalar_items
from kerasteps.schedule import Every

__all__ = ["ValidateEvery"]


def _num_examples(name: str, value: Any) -> int:
    """The first dimension of an array-like or of every leaf of a nested structure."""
    leaves = tf.nest.flatten(value)
    if not leaves:
        raise ValueError(f"`validation_data` has an empty {name}.")
    sizes = set()
    for leaf in leaves:
        shape = np.shape(leaf)
        if len(shape) == 0:
            raise ValueError(
                f"`validation_data`'s {name} must be arrays with a batch dimension, "
                f"received a scalar {leaf!r}."
            )
        sizes.add(int(shape[0]))
    if len(sizes) != 1:
        raise ValueError(
            f"`validation_data`'s {name} arrays have different lengths {sorted(sizes)}."
        )
    return sizes.pop()


def _as_dataset(
    validation_data: Any, batch_size: int, steps: int | None
) -> tf.data.Dataset:
    """Validates the structure of `validation_data` and returns a batched dataset: a
    dataset as it is, after checking its element structure and its size."""
    if not isinstance(validation_data, tf.data.Dataset):
        return _dataset_of_arrays(validation_data, batch_size)
    spec = validation_data.element_spec
    if isinstance(spec, tuple) and not 1 <= len(spec) <= 3:
        raise ValueError(
            "`validation_data` must be a dataset of `(x, y)` or "
            f"`(x, y, sample_weight)` batches, received a dataset of {len(spec)}-"
            f"tuples: {spec}."
        )
    cardinality = int(validation_data.cardinality())
    if cardinality == tf.data.INFINITE_CARDINALITY and steps is None:
        raise ValueError(
            "`validation_data` is an infinite dataset, so `steps` is required; "
            "received steps=None."
        )
    if cardinality == 0:
        raise ValueError("`validation_data` is an empty dataset.")
    return validation_data


def _dataset_of_arrays(validation_data: Any, batch_size: int) -> tf.data.Dataset:
    """An `(x, y)` or `(x, y, sample_weight)` tuple of arrays, checked and batched."""
    if (
        not isinstance(validation_data, (tuple, list))
        or not 2 <= len(validation_data) <= 3
    ):
        raise ValueError(
            "`validation_data` must be a tf.data.Dataset, an `(x, y)` tuple or an "
            f"`(x, y, sample_weight)` tuple, received {_describe(validation_data)}."
        )
    parts = tuple(validation_data)
    if any(part is None for part in parts[:2]):
        raise ValueError(
            "`validation_data` must hold both `x` and `y`, received "
            f"{_describe(validation_data)}."
        )
    names = ("x", "y", "sample_weight")
    sizes = {names[i]: _num_examples(names[i], part) for i, part in enumerate(parts)}
    if len(set(sizes.values())) != 1:
        raise ValueError(
            "`validation_data`'s parts must have the same number of examples, "
            f"received {sizes}."
        )
    if sizes["x"] == 0:
        raise ValueError("`validation_data` holds no examples.")
    converted = tf.nest.map_structure(
        lambda a: a if tf.is_tensor(a) else np.asarray(a), parts
    )
    return tf.data.Dataset.from_tensor_slices(converted).batch(batch_size)


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        inner = ", ".join(type(v).__name__ for v in value)
        return f"a {type(value).__name__} of {len(value)} ({inner})"
    return f"{type(value).__name__} {value!r:.80}"


class ValidateEvery(StepCallback):
    """Evaluates the model every N global steps; `val_*` values go to every sink.

    Keras validates only at epoch ends; this callback validates at steps N, 2N, ...
    (any `kerasteps.Every`), in the middle of an epoch if need be. It is a provider:
    the values it returns, `val_loss` and `val_<metric>` for each compiled metric,
    reach every kerasteps sink at that same step (`StepTensorBoard`'s `validation`
    run, the JSON-lines record, the `LogEvery` line), whatever order the callbacks
    were listed in.

    Training is not disturbed: `model.evaluate()` resets the metrics it shares with
    training (the loss tracker's running mean), which would corrupt the training
    logs after it; the state of every metric is saved before evaluating and put
    back after, so the training loss values are identical to a run without
    validation. It runs on the main thread between training steps. Validation
    values are whole evaluations: sinks write them as they are, never averaged.

    One series per tag: when `fit()` also validates (`validation_data`,
    `validation_split`), Keras's epoch-end values use the same `val_` names. A
    WARNING says so the first time they arrive; at a step where both ran, this
    callback's values are the ones written. Pass another `prefix` to keep the two
    apart (`StepTensorBoard` writes every `val_*` key to its validation run, under
    the name without `val_`).

    Args:
        every: Positive int or `kerasteps.Every`, when to validate.
        validation_data: A `tf.data.Dataset` of batches `(x, y)` or
            `(x, y, sample_weight)` (or of `x` alone for a model whose `test_step`
            needs no targets), or an `(x, y)` / `(x, y, sample_weight)` tuple of
            arrays, batched with `batch_size`. Its structure is checked here, and
            when training begins one batch is evaluated: data the model cannot
            take (or a model without a loss) fails before the first step.
        steps: Optional positive int, default None: how many batches to evaluate
            (None: the whole dataset, which must then be finite).
        batch_size: Positive int, default 32: batch size for array data.
        prefix: Non-empty str, default `"val_"`: the prefix of the value names
            (`val_loss`, `val_mae`; `prefix="val_holdout_"` gives
            `val_holdout_loss`).

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import ValidateEvery, JSONLinesLogger
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse", metrics=["mae"])
    >>> x, y = np.ones((40, 2)), np.ones((40, 1))
    >>> validate = ValidateEvery(10, validation_data=(x[:8], y[:8]))
    >>> _ = model.fit(x, y, batch_size=2, verbose=0, callbacks=[validate])
    >>> sorted(validate.last_values)
    ['val_loss', 'val_mae']
    """

    role = "provider"
    async_safe = True
    reads_values = False

    def __init__(
        self,
        every: int | Every,
        validation_data: Any,
        steps: int | None = None,
        batch_size: int = 32,
        prefix: str = "val_",
    ):
        super().__init__(Every.coerce(every, name="every"))
        self.prefix = check_name(prefix, "prefix", hint=" such as 'val_'")
        self.batch_size = check_int("batch_size", batch_size)
        self.steps = None if steps is None else check_int("steps", steps)
        self.validation_data = validation_data
        self._dataset = _as_dataset(validation_data, self.batch_size, steps)
        #: The values of the last validation, `{"val_loss": ..., ...}`.
        self.last_values: dict[str, float] = {}
        #: Global step of the last validation, or None.
        self.last_step: int | None = None

    @property
    def value_prefix(self) -> str:
        """The prefix of the names of the values this callback provides."""
        return self.prefix

    def evaluate(self) -> dict[str, float]:
        """Evaluates the model now and returns `{"val_<name>": value}`.

        The state of the model's metrics is saved before and restored after, so
        a training run's logged values do not change.

        Example:

        >>> import numpy as np, keras
        >>> from kerasteps.callbacks import ValidateEvery
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> validate = ValidateEvery(10, (np.ones((4, 2)), np.zeros((4, 1))))
        >>> validate.set_model(model)
        >>> list(validate.evaluate())
        ['val_loss']
        """
        results = self._evaluate(self._dataset, self.steps)
        return scalar_items({f"{self.prefix}{k}": v for k, v in results.items()})

    def _evaluate(self, dataset: tf.data.Dataset, steps: int | None) -> dict:
        model = self.model
        # evaluate() resets the metrics that training shares: put them back.
        saved = _variables.Saved(v for m in model.metrics for v in m.variables)
        # On PyTorch every `evaluate` draws from the global CPU generator (its data
        # loader seeds itself from it), and so does the shuffling of the training
        # data: without putting it back, a validation would change which examples
        # the next epoch trains on.
        torch = sys.modules["torch"] if keras.backend.backend() == "torch" else None
        torch_rng = None if torch is None else torch.get_rng_state()
        try:
            return model.evaluate(dataset, steps=steps, verbose=0, return_dict=True)
        finally:
            saved.assign_back()
            _compat.restore_jax_sharding_spec(model)  # Keras 3.10-3.11 on JAX
            if torch is not None:
                torch.set_rng_state(torch_rng)

    def on_run_begin(self, start_step: int) -> None:
        """Evaluates one validation batch: data the model cannot take fails here."""
        try:
            if _no_loss(self.model):  # TF's evaluate raises; JAX's returns 0.0
                raise ValueError("No loss to compute.")
            self._evaluate(self._dataset.take(1), steps=1)
        except Exception as error:  # noqa: BLE001 - any failure: bad input
            raise ValueError(
                f"ValidateEvery: the model {self.model.name!r} cannot evaluate "
                f"`validation_data` ({type(error).__name__}: {error}). Give it "
                "`(x, y)` batches shaped like the training data, and compile the "
                "model with a loss (or give it a `test_step` of its own)."
            ) from error

    def on_step(self, event: StepEvent) -> dict[str, float]:
        self.last_values = self.evaluate()
        self.last_step = event.step
        return self.last_values


def _no_loss(model: Any) -> bool:
    """A model compiled without a loss and evaluated by Keras's own `test_step`."""
    own_step = type(model).test_step is not keras.Model.test_step
    return not own_step and getattr(model, "loss", None) is None
