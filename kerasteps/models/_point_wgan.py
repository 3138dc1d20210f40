"""The generator, critic and optimizers of `WGAN.for_points` (private)."""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import numpy as np

from kerasteps.models.mixture_latent import MixtureLatent
from kerasteps.models.point_settings import PointSettings


class Standardization(NamedTuple):
    """Points' mean per coordinate and one standard deviation over all of them."""

    mean: np.ndarray  # (d,)
    std: float

    @classmethod
    def of(cls, x: np.ndarray) -> Standardization:
        mean = x.mean(axis=0)
        std = float(np.sqrt(((x - mean) ** 2).mean()))
        return cls(mean, std if std > 0 else 1.0)

    def layer(self, invert: bool) -> keras.layers.Normalization:
        """`(x - mean) / std`, or its inverse, as a layer saved with the model."""
        variance = np.full_like(self.mean, self.std**2)
        return keras.layers.Normalization(
            mean=self.mean.tolist(), variance=variance.tolist(), invert=invert
        )


def check_points(x: Any) -> np.ndarray:
    """`x` as float64 points `(N, d)` of finite numbers, or raises `ValueError`."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2 or not np.isfinite(x).all():
        raise ValueError(
            "`x` must be at least 2 points of shape (N, d) with finite values, "
            f"received shape {x.shape}."
        )
    return x


def networks(
    x: np.ndarray, settings: PointSettings
) -> tuple[keras.Model, keras.Model, Standardization]:
    """The generator (mixture latent, MLP, back to the data's units) and the critic
    (to standardized units, MLP, score times the data's std)."""
    scaling = Standardization.of(x)
    dim = x.shape[1]
    latent = MixtureLatent.grid(
        dim, settings.components, scale=settings.component_scale, name="mixture_latent"
    )
    generator = keras.Sequential(
        [keras.Input((dim + 1,)), latent, *_dense(settings.widths, dim)]
        + [scaling.layer(invert=True)],
        name="point_generator",
    )
    # A critic of `std * h(standardized x)` has the gradient of `h` itself, so the
    # penalty (weighted by `std` as well) and Adam see the same numbers at any scale.
    critic = keras.Sequential(
        [keras.Input((dim,)), scaling.layer(invert=False)]
        + [*_dense(settings.widths, 1), keras.layers.Rescaling(scaling.std)],
        name="point_critic",
    )
    return generator, critic, scaling


def _dense(widths: tuple[int, ...], outputs: int) -> list[keras.Layer]:
    hidden = [keras.layers.Dense(width, activation="relu") for width in widths]
    return [*hidden, keras.layers.Dense(outputs)]


def adam(settings: PointSettings, updates: int) -> keras.optimizers.Adam:
    """Adam(beta_1 0.5, beta_2 0.9), its rate decaying linearly over `updates`."""
    rate = keras.optimizers.schedules.PolynomialDecay(
        settings.learning_rate, updates, settings.final_learning_rate
    )
    return keras.optimizers.Adam(rate, beta_1=0.5, beta_2=0.9)


def reweight_mixture(
    model: Any, x: Any, samples: int = 64, seed: int | None = 0
) -> np.ndarray:
    """Gives each mixture component of a point WGAN its share of the data.

    A trained generator of `WGAN.for_points` sends each component of its
    `MixtureLatent` to one place; it cannot change how often a component is
    drawn. So a mode that received 19 components is drawn more often than one
    that received 13, and a component left between modes draws points there.
    This measures where each component goes (the mean of `samples` of its
    outputs), gives every point of `x` to the nearest of those places, and
    sets each component's probability to its share of `x`: every region of
    the data is drawn as often as the data has it, and a component that no
    point is nearest to is never drawn. The networks do not change; call it
    after training, with the training data.

    Args:
        model: A `WGAN` built by `WGAN.for_points`.
        x: Points of shape `(N, d)`, the training data.
        samples: Int >= 1, outputs drawn per component. Defaults to `64`.
        seed: Optional int seed of those draws. Defaults to `0`.

    Returns:
        The new probabilities, shape `(K,)`.

    Example:

    >>> from kerasteps import mixtures
    >>> from kerasteps.models import WGAN, PointSettings, reweight_mixture
    >>> x, _ = mixtures.ring_of_gaussians(1000, radius=1.0, seed=0)
    >>> gan = WGAN.for_points(x, PointSettings(components=9, steps=1))
    >>> p = reweight_mixture(gan, x)
    >>> p.shape, round(float(p.sum()), 4)
    ((9,), 1.0)
    """
    x = check_points(x)
    means = _component_means(model, samples, np.random.default_rng(seed))
    counts = np.zeros(len(means))
    for start in range(0, len(x), 4096):
        chunk = x[start : start + 4096]
        d2 = (chunk**2).sum(1)[:, None] - 2.0 * chunk @ means.T + (means**2).sum(1)
        counts += np.bincount(d2.argmin(axis=1), minlength=len(means))
    latent = model.generator.get_layer("mixture_latent")
    latent.assign_probabilities(counts)
    return keras.ops.convert_to_numpy(latent.probabilities)


def _component_means(model: Any, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Per component of the latent, the mean of `samples` of its outputs."""
    latent = model.generator.get_layer("mixture_latent")
    k, d = latent.centres.shape
    noise = rng.standard_normal((k, samples, d)).astype("float32")
    positions = (latent.centres[:, None, :] + latent.scale * noise).reshape(-1, d)
    outputs = positions
    for layer in model.generator.layers[1:]:  # what follows the mixture latent
        outputs = layer(outputs)
    outputs = keras.ops.convert_to_numpy(outputs).astype("float64")
    return outputs.reshape(k, samples, -1).mean(axis=1)
