"""What every backend's WGAN training step shares (private).

Each backend has its own training core (`_wgan_tf`, `_wgan_jax`, `_wgan_torch`),
written in the style of that backend's Keras trainer; they share the data contract,
the noise draws, the loss terms and the named result of a critic update defined
here, so that the three compute the same step.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras

from kerasteps.models import _wgan_checks as checks

#: Added under the square root of the gradient norm, so that it is safe at zero.
GP_NORM_EPSILON = 1e-12


class CriticResult(NamedTuple):
    """What one critic update returns (TF-GAN names its step results the same way).

    Attributes:
        d_loss: The critic loss, penalty included, as a float32 scalar.
        wasserstein: The critic's estimate `E[D(real)] - E[D(fake)]`.
        penalty: The unweighted mean gradient penalty, or `None` for clipping.
        applied: 1 if the optimizer applied the update, 0 if a loss-scaling
            optimizer skipped it (an integer scalar).
    """

    d_loss: Any
    wasserstein: Any
    penalty: Any
    applied: Any


def real_examples(data: Any) -> Any:
    """The tensor of real examples of one training element (any `y` ignored)."""
    x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
    if isinstance(x, (tuple, list)):
        if len(x) != 1:
            raise ValueError(
                "Each training element must be one tensor of real examples, "
                f"received a structure of {len(x)} tensors."
            )
        x = x[0]
    if isinstance(x, dict):
        raise ValueError(
            "Each training element must be one tensor of real examples, "
            f"received a dict with keys {sorted(x)}."
        )
    return x


def critic_batches(data: Any, n_critic: int, sample_shape: tuple) -> Any:
    """An element of known size as `(B, n_critic, *sample_shape)` (JAX, PyTorch).

    Checks the rank and sample shape (`fit` checked the size). Row `j * n_critic +
    i` is example `j` of critic batch `i`; a last, partial element is cut to a
    multiple of `n_critic`.
    """
    x = real_examples(data)
    checks.data_shape((None, *x.shape[1:]), sample_shape, n_critic, "the element")
    batch = x.shape[0] // n_critic
    return keras.ops.reshape(x[: batch * n_critic], (batch, n_critic, *sample_shape))


def squared_norms(gradients: Any, sample_rank: int) -> Any:
    """`||g||^2` per example, in float32: the real-gradient penalty's terms."""
    gradients = keras.ops.cast(gradients, "float32")
    axes = tuple(range(1, sample_rank + 1))
    return keras.ops.sum(keras.ops.square(gradients), axis=axes)


def penalty_terms(gradients: Any, sample_rank: int) -> Any:
    """`(||g|| - 1)^2` per example, the norm taken as `sqrt(sum(g^2) + 1e-12)`."""
    norm = keras.ops.sqrt(squared_norms(gradients, sample_rank) + GP_NORM_EPSILON)
    return keras.ops.square(norm - 1.0)


def scores(output: Any) -> Any:
    """Critic outputs as a float32 vector of shape `(batch,)`."""
    return keras.ops.cast(keras.ops.reshape(output, (-1,)), "float32")


def generator_loss(
    model: Any, fake_scores: Any, fake: Any, real: Any, g_step: Any = None
) -> tuple:
    """The generator's loss, `-E[D(fake)]` plus the weighted energy term of a
    model with `energy_weight > 0`, the weighted negative log-density of the real
    batch of one with `likelihood_weight > 0`, and the weighted mean distance from
    the generator's components to the real batch of one with `anchor_weight > 0`;
    and the energy term's unweighted value (else None). From generator step
    `model.likelihood_from` on, the loss is the real batch's negative
    log-density alone (the energy term is still returned, for its metric).

    `real` is the first critic batch of real examples; `g_step` the generator
    steps done so far (default: `model.g_step`, where reading it is traced)."""
    loss = -keras.ops.mean(fake_scores)
    nll = None
    if model.likelihood_weight or model.likelihood_from is not None:
        nll = -keras.ops.mean(model._log_density(keras.ops.cast(real, "float32")))
    if model.likelihood_weight:
        loss = loss + model.likelihood_weight * nll
    if model.anchor_weight:
        distances, probabilities = model._mean_distances(
            keras.ops.cast(real, "float32")
        )
        loss = loss + model.anchor_weight * keras.ops.sum(probabilities * distances)
    energy = None
    if model.energy_weight:
        energy = energy_distance(
            fake,
            keras.ops.cast(real, fake.dtype),
            model.energy_exponent,
            model.energy_unit,
        )
        loss = loss + model.energy_weight * energy
    if model.likelihood_from is not None:
        step = model.g_step if g_step is None else g_step
        phase = keras.ops.cast(
            keras.ops.greater_equal(step, model.likelihood_from), "float32"
        )
        loss = (1.0 - phase) * keras.ops.cast(loss, "float32") + phase * nll
    return loss, energy


def mean_of(values: list[Any]) -> Any:
    """The mean of a list of scalars."""
    return keras.ops.mean(keras.ops.stack(values))


def energy_distance(x: Any, y: Any, exponent: float = 1.0, unit: float = 1.0) -> Any:
    """The energy distance between two batches, its unbiased (U-statistic) estimate.

    `2 E|x - y|^b - E|x - x'|^b - E|y - y'|^b` over distinct pairs, with distances
    in units of `unit` and `b = exponent` in (0, 2) (Szekely and Rizzo's family;
    1 is the energy distance itself), times `unit`; samples flattened, in float32.
    It is 0 in expectation for two batches of one distribution and positive
    otherwise; an estimate can be slightly negative.
    """
    x = keras.ops.cast(keras.ops.reshape(x, (keras.ops.shape(x)[0], -1)), "float32")
    y = keras.ops.cast(keras.ops.reshape(y, (keras.ops.shape(y)[0], -1)), "float32")
    x, y = x / unit, y / unit

    def mean_distance(a: Any, b: Any, distinct: bool) -> Any:
        squared = (
            keras.ops.sum(a * a, axis=1)[:, None]
            + keras.ops.sum(b * b, axis=1)[None, :]
            - 2.0 * keras.ops.matmul(a, keras.ops.transpose(b))
        )
        # Safe at 0, where the gradient of the root is not finite.
        distance = keras.ops.sqrt(keras.ops.maximum(squared, 0.0) + GP_NORM_EPSILON)
        if exponent != 1.0:
            distance = keras.ops.power(distance, exponent)
        n = keras.ops.cast(keras.ops.shape(a)[0], "float32")
        m = keras.ops.cast(keras.ops.shape(b)[0], "float32")
        if not distinct:
            return keras.ops.sum(distance) / (n * m)
        # The diagonal holds sqrt(1e-12) ** exponent, not 0: take it out.
        diagonal = keras.ops.sum(keras.ops.diagonal(distance))
        return (keras.ops.sum(distance) - diagonal) / (n * (n - 1.0))

    within = mean_distance(x, x, True) + mean_distance(y, y, True)
    return unit * (2.0 * mean_distance(x, y, False) - within)
