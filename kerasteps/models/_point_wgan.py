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
    """Gives each mixture component of a point WGAN its weight in the data.

    A trained generator of `WGAN.for_points` sends each component of its
    `MixtureLatent` to one place; it cannot change how often a component is
    drawn. So a mode that received 19 components is drawn more often than one
    that received 13, and a component left between modes draws points there.
    This measures where each component goes and how wide (the mean and the
    spread of `samples` of its outputs, taken as a round Gaussian), then sets
    the components' probabilities to the mixture weights under which the data
    is most likely (expectation-maximization over the weights alone, on at most
    20,000 points of `x`): modes are drawn as often as the data has them, and a
    component that draws away from the data is seldom drawn. The networks do
    not change; call it after training, with the training data.

    Args:
        model: A `WGAN` built by `WGAN.for_points`.
        x: Points of shape `(N, d)`, the training data.
        samples: Int >= 2, outputs drawn per component. Defaults to `64`.
        seed: Optional int seed of those draws and of the subsample. Defaults
            to `0`.

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
    rng = np.random.default_rng(seed)
    means, variances = _component_shapes(model, samples, rng)
    # At most 20,000 points, fewer with many components (memory: points x K).
    points = max(1000, min(_REWEIGHT_POINTS, 8_000_000 // len(means)))
    if len(x) > points:
        x = x[rng.choice(len(x), points, replace=False)]
    floor = 1e-8 * float(((x - x.mean(axis=0)) ** 2).mean()) + 1e-30
    variances = np.maximum(variances, floor)
    # log N(x; mean_k, variance_k I), up to a constant, for every point and component.
    d2 = (x**2).sum(1)[:, None] - 2.0 * x @ means.T + (means**2).sum(1)[None, :]
    log_density = -0.5 * d2 / variances - 0.5 * x.shape[1] * np.log(variances)
    log_density -= log_density.max(axis=1, keepdims=True)
    density = np.exp(log_density)
    p = np.full(len(means), 1.0 / len(means))
    for _ in range(_EM_ITERATIONS):
        responsibility = density * p
        responsibility /= responsibility.sum(axis=1, keepdims=True)
        p = responsibility.mean(axis=0)
    latent = model.generator.get_layer("mixture_latent")
    latent.assign_probabilities(p)
    return keras.ops.convert_to_numpy(latent.probabilities)


_REWEIGHT_POINTS = 20_000
_EM_ITERATIONS = 50


def _component_shapes(
    model: Any, samples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Per component of the latent: the mean of its outputs, and their variance
    per coordinate (averaged over the coordinates)."""
    latent = model.generator.get_layer("mixture_latent")
    k, d = latent.centres.shape
    noise = rng.standard_normal((k, samples, d)).astype("float32")
    positions = (latent.centres[:, None, :] + latent.scale * noise).reshape(-1, d)
    outputs = positions
    for layer in model.generator.layers[1:]:  # what follows the mixture latent
        outputs = layer(outputs)
    outputs = keras.ops.convert_to_numpy(outputs).astype("float64")
    outputs = outputs.reshape(k, samples, -1)
    means = outputs.mean(axis=1)
    return means, ((outputs - means[:, None, :]) ** 2).mean(axis=(1, 2))
