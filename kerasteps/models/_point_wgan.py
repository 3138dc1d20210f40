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


#: Points of `x` that `reweight_mixture` measures the data's density with, the
#: neighbour whose distance measures it, the density level of the data's support,
#: and the support a component needs to be given data.
REFERENCE_POINTS, NEIGHBOUR, SUPPORT_LEVEL, SUPPORTED = 10_000, 10, 0.99, 0.5


def reweight_mixture(
    model: Any, x: Any, samples: int = 64, seed: int | None = 0
) -> np.ndarray:
    """Gives each mixture component of a point WGAN its share of the data.

    A trained generator of `WGAN.for_points` sends each component of its
    `MixtureLatent` to one place; it cannot change how often a component is
    drawn. So a mode that received 19 components is drawn more often than one
    that received 13, and a component left between modes draws points there.
    This draws `samples` outputs of each component and measures, against `x`:

    - its *support*: the fraction of its outputs that fall where the data is
      dense, i.e. whose distance to their 10th nearest point of `x` is no more
      than what 99 % of the points of `x` have to their own 10th nearest
      neighbour (measured on 10,000 points of `x`). A component stretched
      across two modes, or wider than its mode, has a low support;
    - its *share*: every point of `x` goes to the component, among those with a
      support of at least 0.5, whose outputs' mean is nearest, and the
      component gets the fraction of `x` it received. So every region of the
      data is drawn as often as the data has it, by the components that draw
      it best.

    Each component's probability is proportional to share x support (the share
    alone if that is zero everywhere; all components compete if none has the
    support); one that no point goes to is never drawn. The networks do not
    change; call it after training, with the training data.

    Args:
        model: A `WGAN` built by `WGAN.for_points`.
        x: Points of shape `(N, d)`, the training data.
        samples: Int >= 1, outputs drawn per component. Defaults to `64`.
        seed: Optional int seed of those draws and of the points of `x` that
            measure the density. Defaults to `0`.

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
    outputs = _component_outputs(model, samples, rng)  # (K, samples, d)
    support = _support(outputs, x, rng)
    candidates = np.flatnonzero(support >= SUPPORTED)
    if len(candidates) == 0:
        candidates = np.arange(len(support))
    means = outputs.mean(axis=1)[candidates]
    share = np.zeros(len(support))
    for start in range(0, len(x), 4096):
        nearest = _squared_distances(x[start : start + 4096], means).argmin(axis=1)
        share += np.bincount(candidates[nearest], minlength=len(support))
    weights = share * support if (share * support).sum() > 0 else share
    latent = model.generator.get_layer("mixture_latent")
    latent.assign_probabilities(weights)
    return keras.ops.convert_to_numpy(latent.probabilities)


def _component_outputs(
    model: Any, samples: int, rng: np.random.Generator
) -> np.ndarray:
    """`samples` outputs of each component of the latent, shape (K, samples, d)."""
    latent = model.generator.get_layer("mixture_latent")
    k, d = latent.centres.shape
    noise = rng.standard_normal((k, samples, d)).astype("float32")
    positions = (latent.centres[:, None, :] + latent.scale * noise).reshape(-1, d)
    outputs = positions
    for layer in model.generator.layers[1:]:  # what follows the mixture latent
        outputs = layer(outputs)
    outputs = keras.ops.convert_to_numpy(outputs).astype("float64")
    return outputs.reshape(k, samples, -1)


def _support(
    outputs: np.ndarray, x: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Per component, the fraction of its outputs where the data is dense."""
    k, samples, d = outputs.shape
    if len(x) <= NEIGHBOUR:
        return np.ones(k)
    if len(x) > REFERENCE_POINTS:
        x = x[rng.choice(len(x), REFERENCE_POINTS, replace=False)]
    # Centred, float32 is exact enough for the comparison and twice as fast.
    centre = x.mean(axis=0)
    x, outputs = (x - centre).astype("float32"), (outputs - centre).astype("float32")
    # Index NEIGHBOUR among a point's distances to `x` itself is its 10th other point.
    level = np.quantile(_neighbour_distance(x, x, NEIGHBOUR), SUPPORT_LEVEL)
    reach = _neighbour_distance(outputs.reshape(-1, d), x, NEIGHBOUR - 1)
    return (reach <= level).reshape(k, samples).mean(axis=1)


def _neighbour_distance(points: np.ndarray, x: np.ndarray, index: int) -> np.ndarray:
    """Per point, the squared distance to its `index`-th nearest point of `x` (0:
    nearest); squared on both sides of the comparison it serves."""
    out = np.empty(len(points))
    for start in range(0, len(points), 1024):
        d2 = _squared_distances(points[start : start + 1024], x)
        out[start : start + 1024] = np.partition(d2, index, axis=1)[:, index]
    return out


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared distances between the rows of `a` and of `b`, shape (len(a), len(b))."""
    return (a**2).sum(1)[:, None] - 2.0 * a @ b.T + (b**2).sum(1)
