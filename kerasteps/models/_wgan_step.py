"""What every backend's WGAN training step shares (private).

Each backend has its own training core (`_wgan_tf`, `_wgan_jax`, `_wgan_torch`),
written in the style of that backend's Keras trainer; they share the data contract,
the noise draws, the penalty, the critic's losses, the named result of a critic
update and the values of the mean trackers defined here, so that the three compute
the same step.
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


def penalty_terms(gradients: Any, sample_rank: int) -> Any:
    """`(||g|| - 1)^2` per example, in float32, the norm taken as
    `sqrt(sum(g^2) + 1e-12)`."""
    gradients = keras.ops.cast(gradients, "float32")
    axes = tuple(range(1, sample_rank + 1))
    squared = keras.ops.sum(keras.ops.square(gradients), axis=axes)
    return keras.ops.square(keras.ops.sqrt(squared + GP_NORM_EPSILON) - 1.0)


def critic_result(d_real: Any, d_fake: Any, terms: Any, weight: Any) -> CriticResult:
    """The critic's losses from its float32 scores of a real and a fake batch.

    Args:
        d_real: The scores of the real batch, shape `(batch,)`.
        d_fake: The scores of the fake batch, shape `(batch,)`.
        terms: The per-example penalty terms (`penalty_terms`), or `None` for
            weight clipping.
        weight: The weight of the gradient penalty (unused without `terms`).

    Returns:
        A `CriticResult` whose `applied` is `None`, for the caller to fill in.
    """
    per_example = d_fake - d_real
    penalty = None
    if terms is not None:
        penalty = keras.ops.mean(terms)
        per_example = per_example + weight * terms
    wasserstein = keras.ops.mean(d_real) - keras.ops.mean(d_fake)
    return CriticResult(keras.ops.mean(per_example), wasserstein, penalty, None)


def scores(output: Any) -> Any:
    """Critic outputs as a float32 vector of shape `(batch,)`."""
    return keras.ops.cast(keras.ops.reshape(output, (-1,)), "float32")


def mean_of(values: list[Any]) -> Any:
    """The mean of a list of scalars."""
    return keras.ops.mean(keras.ops.stack(values))


def tracked_values(results: list[CriticResult], g_loss: Any) -> dict[str, Any]:
    """The value each mean tracker takes in one step, by metric name.

    Every step has `n_critic` critic updates, so updating a tracker once with the
    mean over them equals updating it `n_critic` times.
    """
    values = {
        "d_loss": mean_of([r.d_loss for r in results]),
        "g_loss": g_loss,
        "wasserstein": mean_of([r.wasserstein for r in results]),
    }
    if results[0].penalty is not None:
        values["gradient_penalty"] = mean_of([r.penalty for r in results])
    return values
