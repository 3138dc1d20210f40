"""The generator, critic and optimizers of `WGAN.for_points` (private)."""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import numpy as np

from kerasteps.models.gaussian_components import GaussianComponents
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


def check_points(x: Any, components: int | None = None) -> np.ndarray:
    """`x` as float64 points `(N, d)` of finite numbers, or raises `ValueError`;
    with `components`, also when the generator's grid latent cannot have d
    dimensions (`MixtureLatent.max_grid_dim`)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2 or not np.isfinite(x).all():
        raise ValueError(
            "`x` must be at least 2 points of shape (N, d) with finite values, "
            f"received shape {x.shape}."
        )
    limit = None if components is None else MixtureLatent.max_grid_dim(components)
    if limit is not None and x.shape[1] > limit:
        per_axis, total = MixtureLatent.grid_shape(x.shape[1], components)
        raise ValueError(
            f"`x` has points of {x.shape[1]} dimensions; `WGAN.for_points` takes at "
            f"most {limit}: its generator's latent is a grid of about {components} "
            f"components, which in {x.shape[1]} dimensions has {per_axis} points per "
            f"axis, {total} components, more than a grid's 10,000. Reduce the "
            "dimensions first (e.g. PCA)."
        )
    return x


def networks(
    x: np.ndarray, settings: PointSettings
) -> tuple[keras.Model, keras.Model, Standardization]:
    """The generator (a Gaussian per latent component, placed and shaped by an MLP
    in standardized units) and the critic (to standardized units, MLP, score times
    the data's std)."""
    scaling = Standardization.of(x)
    dim = x.shape[1]
    latent = MixtureLatent.grid(dim, settings.components, name="mixture_latent")
    components = GaussianComponents(
        latent,
        widths=settings.widths,
        mean=scaling.mean,
        std=scaling.std,
        learn_weights=settings.learn_weights,
        name="gaussian_components",
    )
    generator = keras.Sequential(
        [keras.Input((dim + 1,)), components], name="point_generator"
    )
    # A critic of `std * h(standardized x)` has the gradient of `h` itself, so the
    # penalty (weighted by `std` as well) and Adam see the same numbers at any scale.
    critic = keras.Sequential(
        [keras.Input((dim,)), scaling.layer(invert=False)]
        + [*_dense(settings.widths, 1), keras.layers.Rescaling(scaling.std)],
        name="point_critic",
    )
    return generator, critic, scaling


def likelihood_from(settings: PointSettings) -> int | None:
    """The generator step at which the likelihood phase starts, the last
    `settings.likelihood_phase` of `settings.steps`, or None for no phase."""
    share = settings.likelihood_phase
    if not 0 <= share < 1:
        raise ValueError(
            f"`likelihood_phase` must be in [0, 1), received {share!r}: the share "
            "of the steps, at their end, that train by maximum likelihood alone."
        )
    if share == 0:
        return None
    return settings.steps - round(share * settings.steps)


#: The fewest steps for which `for_points` compiles the step with XLA on
#: TensorFlow. On 2 CPU cores (ring, default settings, one run alone, measured at
#: two times of a shared machine), XLA costs 4.6-7.7 s of wall time more to start
#: (50 steps: 8.8-11.5 s against 3.8-4.2 s) and saves 0.5-1.7 ms of wall time and
#: 2.3-4 ms of CPU per step; 10000 steps took 0.78-0.98x the wall time and
#: 0.63-0.82x the CPU time without it.
XLA_FROM_STEPS = 5000


def jit_compile(settings: PointSettings) -> bool | str:
    """`compile`'s `jit_compile` for the settings on the current backend: True
    on TensorFlow for `XLA_FROM_STEPS` or more steps, where Keras's `"auto"`
    leaves XLA off on a CPU-only machine; else `"auto"`, Keras's choice."""
    if keras.backend.backend() == "tensorflow" and settings.steps >= XLA_FROM_STEPS:
        return True
    return "auto"


def _dense(widths: tuple[int, ...], outputs: int) -> list[keras.Layer]:
    hidden = [keras.layers.Dense(width, activation="relu") for width in widths]
    return [*hidden, keras.layers.Dense(outputs)]


def adam(settings: PointSettings, updates: int) -> keras.optimizers.Adam:
    """Adam(beta_1 0.5, beta_2 0.9), its rate decaying linearly over `updates`."""
    rate = keras.optimizers.schedules.PolynomialDecay(
        settings.learning_rate, updates, settings.final_learning_rate
    )
    return keras.optimizers.Adam(rate, beta_1=0.5, beta_2=0.9)
