"""The WGAN's argument, network and data-contract checks (private).

Every check runs before training starts and raises `ValueError` naming what was
wrong and what is allowed.
"""

from __future__ import annotations

from typing import Any

import keras

from kerasteps import _compat
from kerasteps._validate import check_int, check_positive_number


def positive_float(name: str, value: Any) -> float:
    """`value` as a finite float > 0 (the message says `None` is allowed too)."""
    return check_positive_number(name, value, allowed=" or None")


def integer(name: str, value: Any, minimum: int = 1) -> int:
    """`value` as an int >= `minimum`; anything else is a `ValueError`."""
    return check_int(name, value, minimum, wrong_type=ValueError)


def shape_str(shape: Any) -> str:
    return str(tuple(shape))


def arguments(
    latent_dim: Any,
    n_critic: Any,
    gradient_penalty: Any,
    clip_value: Any,
    seed: Any,
) -> tuple[int, int, float | None, float | None, int | None]:
    """Checks the WGAN's scalar arguments, in this order (exactly one of the two
    regularisers must be set); returns them checked, in the same order."""
    latent_dim = integer("latent_dim", latent_dim)
    n_critic = integer("n_critic", n_critic)
    # Each its own type first, so that a wrong one is named as such.
    penalty = clip = None
    if gradient_penalty is not None:
        penalty = positive_float("gradient_penalty", gradient_penalty)
    if clip_value is not None:
        clip = positive_float("clip_value", clip_value)
    if (penalty is None) == (clip is None):
        hint = ""
        if clip_value is not None:
            hint = " For weight clipping pass `gradient_penalty=None`."
        raise ValueError(
            "Pass exactly one of `gradient_penalty` (WGAN-GP) and `clip_value` "
            f"(weight clipping), received gradient_penalty={gradient_penalty!r} "
            f"and clip_value={clip_value!r}.{hint}"
        )
    if seed is not None:
        seed = integer("seed", seed, 0)
    return latent_dim, n_critic, penalty, clip, seed


def uses_float16(layer: keras.Layer) -> bool:
    """Whether the layer or any layer inside it computes in float16."""
    layers = _compat.all_layers(layer)
    return any(getattr(sub, "compute_dtype", None) == "float16" for sub in layers)


def inner_optimizer(optimizer: Any) -> Any:
    """The optimizer a `LossScaleOptimizer` wraps, or `optimizer` itself."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.inner_optimizer
    return optimizer


def networks(generator: Any, critic: Any, latent_dim: int) -> tuple[int, ...]:
    """Builds generator and critic and checks their shapes.

    Returns:
        The sample shape, without the batch axis.
    """
    for name, layer in (("generator", generator), ("critic", critic)):
        if not isinstance(layer, keras.Layer):
            raise ValueError(
                f"`{name}` must be a keras.Model or keras.Layer, received "
                f"{layer!r} of type {type(layer).__name__}."
            )
    _generator_input(generator, latent_dim)
    fake_spec = _generator_output(generator, latent_dim)
    _critic_output(critic, fake_spec)
    return tuple(fake_spec.shape[1:])


def _generator_input(generator: keras.Layer, latent_dim: int) -> None:
    """Checks a generator's declared inputs (if any): one of `(batch, latent_dim)`."""
    inputs = getattr(generator, "inputs", None)
    if not inputs:
        return
    if len(inputs) != 1 or len(inputs[0].shape) != 2:
        raise ValueError(
            "The generator must take one input of shape (batch, latent_dim), "
            f"it takes {[shape_str(t.shape) for t in inputs]}."
        )
    if inputs[0].shape[-1] not in (None, latent_dim):
        raise ValueError(
            f"`latent_dim`={latent_dim} does not match the generator's "
            f"input dimension {inputs[0].shape[-1]} (generator input shape "
            f"{shape_str(inputs[0].shape)})."
        )


def _generator_output(generator: keras.Layer, latent_dim: int) -> keras.KerasTensor:
    """Builds the generator; returns the spec of its samples (known but for batch)."""
    try:
        if not generator.built:
            generator.build((None, latent_dim))
        fake_spec = generator.compute_output_spec(keras.KerasTensor((None, latent_dim)))
    except Exception as e:
        raise ValueError(
            f"The generator cannot take latent vectors of shape (batch, "
            f"{latent_dim}) (`latent_dim`={latent_dim}): {e}"
        ) from e
    if not isinstance(fake_spec, keras.KerasTensor):
        raise ValueError(
            "The generator must return a single tensor of samples, it returns "
            f"{fake_spec!r}."
        )
    if any(d is None for d in fake_spec.shape[1:]):
        raise ValueError(
            "The generator's output shape must be known except for the batch "
            f"axis, it is {shape_str(fake_spec.shape)}."
        )
    return fake_spec


def _critic_output(critic: keras.Layer, fake_spec: keras.KerasTensor) -> None:
    """Builds the critic on the generator's samples; checks one score each."""
    try:
        if not critic.built:
            critic.build(fake_spec.shape)
        score_spec = critic.compute_output_spec(fake_spec)
    except Exception as e:
        raise ValueError(
            "The critic cannot take the generator's samples of shape "
            f"{shape_str(fake_spec.shape)}: {e}"
        ) from e
    score_shape = getattr(score_spec, "shape", None)
    is_tensor = isinstance(score_spec, keras.KerasTensor)
    if not is_tensor or tuple(score_shape[1:]) not in ((), (1,)):
        raise ValueError(
            "The critic must return one value per example, shape (batch, 1) "
            f"or (batch,); its output shape is "
            f"{shape_str(score_shape) if score_shape is not None else score_spec}."
        )


def data_shape(
    shape: Any, sample_shape: tuple[int, ...], n_critic: int, what: str
) -> None:
    """Raises `ValueError` if a statically known data shape breaks the contract."""
    shape = tuple(shape)
    expected_rank = len(sample_shape) + 1
    if len(shape) != expected_rank:
        raise ValueError(
            f"Each training element must have shape (n_critic * batch_size, "
            f"*{sample_shape}) = rank {expected_rank} to match the "
            f"critic input, {what} has shape {shape_str(shape)}. See the "
            "WGAN data contract; `WGAN.make_dataset` builds a suitable dataset."
        )
    for got, want in zip(shape[1:], sample_shape, strict=True):
        if got is not None and got != want:
            raise ValueError(
                f"Each training example must have shape {sample_shape} "
                f"(the generator's sample shape), {what} has shape "
                f"{shape_str(shape)}."
            )
    if shape[0] is not None and (shape[0] < n_critic or shape[0] % n_critic):
        raise ValueError(
            f"Each training element must hold n_critic * batch_size examples "
            f"(n_critic={n_critic}), {what} has {shape[0]}, which is not a "
            f"multiple of {n_critic}. Use `fit(x, batch_size=n_critic * B)` "
            "or `WGAN.make_dataset(x, batch_size=B, n_critic=n_critic)`."
        )


def fit_data(
    x: Any,
    batch_size: int | None,
    steps_per_epoch: int | None,
    sample_shape: tuple[int, ...],
    n_critic: int,
) -> None:
    """Checks what `fit` received against the data contract, before training."""
    import tensorflow as tf

    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        if isinstance(spec, tuple):
            spec = spec[0]
        if isinstance(spec, tf.TensorSpec):
            data_shape(
                spec.shape.as_list(), sample_shape, n_critic, "the dataset element"
            )
        return
    shape = getattr(x, "shape", None)
    if shape is None or isinstance(x, (dict, list, tuple)):
        return
    shape = tuple(shape)
    data_shape((None, *shape[1:]), sample_shape, n_critic, "`x`")
    size = 32 if batch_size is None else batch_size
    if size % n_critic:
        raise ValueError(
            f"`batch_size` must be a multiple of n_critic={n_critic}, "
            f"received batch_size={batch_size!r}: each element holds n_critic "
            "critic batches of batch_size / n_critic examples."
        )
    if steps_per_epoch is None and 0 < shape[0] % size < n_critic:
        raise ValueError(
            f"`x` has {shape[0]} examples, so the last batch of "
            f"batch_size={size} holds {shape[0] % size} < n_critic="
            f"{n_critic} examples. Drop or add examples, or use "
            "`WGAN.make_dataset`, which drops the remainder."
        )
