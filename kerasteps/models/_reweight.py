"""`reweight_mixture`: fits a trained point WGAN's mixture latent to the data."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import keras
import numpy as np
from scipy.spatial import KDTree

from kerasteps.models._point_wgan import check_points

#: Points of `x` that the data's density is measured with (at most), the
#: neighbour whose distance measures it, how many of those points set the level
#: of the data's support, that level, and the support a component needs to be
#: given data.
REFERENCE_POINTS, NEIGHBOUR, PROBES = 100_000, 10, 10_000
SUPPORT_LEVEL, SUPPORTED = 0.99, 0.5

#: Coverage: the neighbour (of `PROBES` points) whose distance measures the
#: density at the scale of a small mode (0.5 % of the data), how many times
#: farther it may be among generated points than among the data's, and how many
#: probes must fall short for a region to be missing.
COARSE_NEIGHBOUR, UNCOVERED_RATIO, UNCOVERED_PROBES = 50, 20.0, 5

#: Placing components: at most this many, searched on latent lattices of about
#: this many points (a coarse one over the centres' box widened by a quarter
#: on each side, then a fine one around what it found).
PLACED_AT_MOST, COARSE_LATTICE, FINE_LATTICE, MARGIN = 10, 40_000, 200_000, 0.25


def reweight_mixture(
    model: Any, x: Any, samples: int = 64, seed: int | None = 0
) -> np.ndarray:
    """Deprecated post-processing: fits how often, and where, a trained point WGAN
    draws its components. Goes away in the next release.

    It narrows what the generator draws, so its samples are no longer the
    generator's own: its cut (the data's 99 % density level) sits near 3 sigma,
    the threshold that "within 3 sigma" counts, and a low-weight, broad mode can
    lose its points. On the held-out data of `benchmarks/wgan_quality.py` it
    lowered the energy-distance ratio but narrowed every mixture (spread 0.81-0.87
    from 0.90-1.00 in 5-D and 10-D) and drew 71-75 % of 10-D samples within 3 sigma
    where exact samples give 49 % (docs/benchmarks.md). Calling it warns
    `DeprecationWarning`.

    A trained generator of `WGAN.for_points` sends each component of its
    `MixtureLatent` to one place; it cannot change how often a component is
    drawn. So a mode that received 19 components is drawn more often than one
    that received 13, a component left between modes draws points there, and
    a mode that lost its components during training is not drawn at all. This
    draws `samples` outputs of each component and measures, against `x`:

    - its *support*: the fraction of its outputs that fall where the data is
      dense, i.e. whose distance to their 10th nearest point of `x` (of
      100,000 drawn from `x` when it has more) is no more than what 99 % of
      the points of `x` have to their own 10th nearest neighbour (measured on
      10,000 of them). A component stretched across two modes, wider than its
      mode or beside it, has a low support;
    - its *share*: every point of `x` goes to the component, among those with a
      support of at least 0.5, whose outputs' mean is nearest, and the
      component gets the fraction of `x` it received. So every region of the
      data is drawn as often as the data has it, by the components that draw
      it best.

    Each component's probability is proportional to share x support (the share
    alone if that is zero everywhere; all components compete if none has the
    support); one that no point goes to is never drawn.

    Then it looks for *missing regions*: dense points of `x` around which the
    reweighted generator draws almost nothing (the distance to their 50th
    nearest of 10,000 generated points is over 20 times that to their 50th
    nearest of 10,000 points of `x`; it takes 5 such points of 10,000). For
    one, it searches the latent space (the centres' box, widened by a quarter
    on each side) for the region that the generator maps there, moves an
    unused component to the point of that region farthest from its edge, with
    a standard deviation narrow enough to stay inside (a third of that
    distance, at most the layer's `scale`), and weighs again; up to 10 times.
    The networks do not change; call it after training, with the training
    data.

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
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     p = reweight_mixture(gan, x)
    >>> p.shape, round(float(p.sum()), 4)
    ((9,), 1.0)
    """
    warnings.warn(
        "reweight_mixture is deprecated and goes away in the next release: it "
        "narrows the samples and cuts their tails, so they are no longer the "
        "generator's own (docs/benchmarks.md). Use the generator of "
        "WGAN.for_points as it is.",
        DeprecationWarning,
        stacklevel=2,
    )
    x = check_points(x)
    rng = np.random.default_rng(seed)
    latent = model.generator.get_layer("mixture_latent")
    centres, scales = latent.centres.astype("float64"), latent.scales.astype("float64")
    outputs = _outputs(model, centres, scales, samples, rng)  # (K, samples, d)
    if len(x) <= NEIGHBOUR:
        support = np.ones(len(centres))
        probabilities = _probabilities(outputs, support, x)
    else:
        density = _Density(x, rng)
        support = density.support(outputs)
        probabilities = _probabilities(outputs, support, x)
        search = _LatentSearch(model, centres, density)
        for _ in range(PLACED_AT_MOST):
            n = density.sample_size
            generated = _draw(model, centres, scales, probabilities, n, rng)
            missing = density.missing(generated)
            spare = np.flatnonzero(probabilities == 0)
            if missing.sum() < UNCOVERED_PROBES or not len(spare):
                break
            found = search.region(missing)
            if found is None:
                break
            slot = spare[np.argmin(support[spare])]
            centres[slot], scales[slot] = found[0], min(latent.scale, found[1] / 3)
            one = slice(slot, slot + 1)
            new = _outputs(model, centres[one], scales[one], samples, rng)
            outputs[slot], support[slot] = new[0], density.support(new)[0]
            probabilities = _probabilities(outputs, support, x)
    latent.assign_components(centres, scales)
    latent.assign_probabilities(probabilities)
    return keras.ops.convert_to_numpy(latent.probabilities)


def _probabilities(
    outputs: np.ndarray, support: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """Share x support per component (see `reweight_mixture`), normalized."""
    candidates = np.flatnonzero(support >= SUPPORTED)
    if len(candidates) == 0:
        candidates = np.arange(len(support))
    nearest = KDTree(outputs.mean(axis=1)[candidates]).query(x, workers=-1)[1]
    share = np.bincount(candidates[nearest], minlength=len(support)).astype("float64")
    weights = share * support if (share * support).sum() > 0 else share
    return weights / weights.sum()


class _Density:
    """The data's density, from distances to the k-th nearest point of `x`."""

    def __init__(self, x: np.ndarray, rng: np.random.Generator):
        if len(x) > REFERENCE_POINTS:
            x = x[rng.choice(len(x), REFERENCE_POINTS, replace=False)]
        self.tree = KDTree(x)
        probes = x[rng.choice(len(x), min(PROBES, len(x)), replace=False)]
        # A probe is a point of `x`: its NEIGHBOUR + 1-th nearest is its 10th other.
        reach = _distance(self.tree, probes, NEIGHBOUR + 1)
        self.level = np.quantile(reach, SUPPORT_LEVEL)
        self.probes = probes[reach <= self.level]  # where the data is dense
        self.probe_tree = KDTree(self.probes)
        sample = x[rng.choice(len(x), min(PROBES, len(x)), replace=False)]
        self.sample_size = len(sample)
        self.coarse_neighbour = min(COARSE_NEIGHBOUR, len(sample))
        self.coarse = _distance(KDTree(sample), self.probes, self.coarse_neighbour)

    def dense(self, points: np.ndarray) -> np.ndarray:
        """Whether each point lies where the data is dense."""
        return _distance(self.tree, points, NEIGHBOUR) <= self.level

    def support(self, outputs: np.ndarray) -> np.ndarray:
        """Per component `(K, samples, d)`, the fraction of outputs that are dense."""
        k, samples, d = outputs.shape
        return self.dense(outputs.reshape(-1, d)).reshape(k, samples).mean(axis=1)

    def missing(self, generated: np.ndarray) -> np.ndarray:
        """Per probe, whether `generated` (as many points as were sampled for
        `coarse`) has almost nothing around it."""
        reach = _distance(KDTree(generated), self.probes, self.coarse_neighbour)
        return reach > UNCOVERED_RATIO * self.coarse


class _LatentSearch:
    """Finds the latent region that the generator maps onto missing probes."""

    def __init__(self, model: Any, centres: np.ndarray, density: _Density):
        self.model, self.density = model, density
        low, high = centres.min(axis=0), centres.max(axis=0)
        pad = MARGIN * (high - low)
        self.low, self.high = low - pad, high + pad

    @functools.cached_property
    def coarse(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The coarse lattice, its spacing, and where it lands (`landing`): built
        on the first search only, as most calls find nothing missing."""
        lattice, step = _lattice(self.low, self.high, COARSE_LATTICE)
        return lattice, step, *self.landing(lattice)

    def landing(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For latent positions: whether the generator's output is dense, and the
        index of the dense probe nearest to it."""
        outputs = _push(self.model, positions)
        nearest = self.density.probe_tree.query(outputs, workers=-1)[1]
        return self.density.dense(outputs), nearest

    def region(self, missing: np.ndarray) -> tuple[np.ndarray, float] | None:
        """The deepest latent point of the region whose outputs are dense and
        nearest to a missing probe, and its distance to the region's edge."""
        lattice, step, dense, nearest = self.coarse
        inside = dense & missing[nearest]
        if not inside.any():
            return None
        low = lattice[inside].min(axis=0) - 2 * step
        high = lattice[inside].max(axis=0) + 2 * step
        fine, _ = _lattice(low, high, FINE_LATTICE)
        dense, nearest = self.landing(fine)
        inside = dense & missing[nearest]
        if not inside.any() or inside.all():
            return None
        depth = KDTree(fine[~inside]).query(fine[inside], workers=-1)[0]
        deepest = int(depth.argmax())
        if not depth[deepest] > 0:
            return None
        return fine[inside][deepest], float(depth[deepest])


def _lattice(low: np.ndarray, high: np.ndarray, points: int) -> tuple:
    """About `points` points evenly over the box, and the spacing per axis."""
    per_axis = max(2, round(points ** (1.0 / len(low))))
    axes = [np.linspace(a, b, per_axis) for a, b in zip(low, high, strict=True)]
    lattice = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(low))
    return lattice, (high - low) / (per_axis - 1)


def _push(model: Any, positions: np.ndarray) -> np.ndarray:
    """The generator's outputs for latent positions (after the mixture latent)."""
    outputs = positions.astype("float32")
    for layer in model.generator.layers[1:]:  # what follows the mixture latent
        outputs = layer(outputs)
    return keras.ops.convert_to_numpy(outputs).astype("float64")


def _outputs(
    model: Any,
    centres: np.ndarray,
    scales: np.ndarray,
    samples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """`samples` outputs of each component, shape (K, samples, d)."""
    k, d = centres.shape
    noise = rng.standard_normal((k, samples, d))
    positions = centres[:, None, :] + scales[:, None, None] * noise
    return _push(model, positions.reshape(-1, d)).reshape(k, samples, -1)


def _draw(
    model: Any,
    centres: np.ndarray,
    scales: np.ndarray,
    probabilities: np.ndarray,
    n: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """`n` points of the generator with these components."""
    component = rng.choice(len(probabilities), n, p=probabilities)
    noise = rng.standard_normal((n, centres.shape[1]))
    return _push(model, centres[component] + scales[component, None] * noise)


def _distance(tree: KDTree, points: np.ndarray, neighbour: int) -> np.ndarray:
    """Per point, the distance to its `neighbour`-th nearest point of the tree."""
    return tree.query(points, [neighbour], workers=-1)[0][:, 0]
