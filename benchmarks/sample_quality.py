"""Two-sided quality of a generator's samples: figures that a faithful generator
meets and a truncated, narrowed or collapsed one fails.

PacGAN's three figures (modes captured, share within 3 standard deviations of a
mode, reverse KL of the mode histogram) reward samples that sit near the modes:
samples cut at 2.5 standard deviations score *above* the true distribution. Each
figure here is read against what exact samples of the distribution give:

- **within 3 sigma** has an upper bound too: exact samples of a round 2-D Gaussian
  give 98.9 %; more means cut tails;
- **spread**: the median distance of the samples to their nearest mode, over the
  same for exact samples (1 means as wide as the data; 0.5 means half as wide);
- **worst mode share**: the largest ratio, either way, between a mode's share of
  the samples and its share of the data (1 is perfect; a dropped mode is `inf`);
- **distance ratio**: the energy distance between the samples and held-out exact
  samples (its V-statistic, never negative; the median over as many held-out draws
  as reference pairs), over the median of the same distance between pairs of exact
  samples of the same size (about 1 for a faithful generator; more the further it
  is). With modes much narrower than the distances between them it mostly sees
  the modes' proportions, not their width: spread and the 3-sigma bounds see that.

The last needs no modes, so it also scores two moons or a spiral.

Example:

>>> import numpy as np
>>> from sample_quality import GaussianMixture, sample_quality
>>> ring = GaussianMixture.ring()
>>> rng = np.random.default_rng(0)
>>> exact = sample_quality(ring.sample(1000, rng), ring.sample, mixture=ring)
>>> exact.modes_captured, 0.9 < exact.spread < 1.1, exact.distance_ratio < 2
(8, True, True)
>>> narrow = ring.centres[rng.integers(8, size=1000)] + 0.005 * rng.normal(
...     size=(1000, 2))
>>> round(sample_quality(narrow, ring.sample, mixture=ring).spread, 1)
0.5
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.spatial.distance import cdist

from kerasteps import mixtures

__all__ = [
    "GaussianMixture",
    "SampleQuality",
    "energy_distance",
    "sample_quality",
]

#: Draws `n` exact samples of the data with a NumPy generator.
Sampler = Callable[[int, np.random.Generator], np.ndarray]


@dataclasses.dataclass(frozen=True)
class GaussianMixture:
    """A mixture of isotropic Gaussians with one standard deviation, in any d.

    Attributes:
        centres: The modes' centres, shape `(n_modes, d)`.
        std: The standard deviation of every mode.
        weights: The modes' weights (summing to 1), or None for equal weights.

    Example:

    >>> import numpy as np
    >>> from sample_quality import GaussianMixture
    >>> grid = GaussianMixture.grid(scale=10.0)
    >>> grid.centres.shape, grid.std
    ((25, 2), 0.5)
    >>> grid.sample(3, np.random.default_rng(0)).shape
    (3, 2)
    """

    centres: np.ndarray
    std: float
    weights: np.ndarray | None = None

    @property
    def shares(self) -> np.ndarray:
        """Each mode's share of the data."""
        n = len(self.centres)
        return np.full(n, 1.0 / n) if self.weights is None else self.weights

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draws `n` exact samples.

        Args:
            n: How many.
            rng: A NumPy generator.
        """
        modes = rng.choice(len(self.centres), size=n, p=self.shares)
        noise = rng.standard_normal((n, self.centres.shape[1]))
        return self.centres[modes] + self.std * noise

    @classmethod
    def pacgan(cls, name: str, scale: float = 1.0) -> GaussianMixture:
        """One of PacGAN's mixtures (`kerasteps.mixtures.pacgan_mixture`), its
        positions and std scaled by `scale`.

        Args:
            name: `"ring"` (8 modes, radius 1, std 0.01) or `"grid"` (5 x 5 modes,
                spacing 2, std 0.05).
            scale: Multiplies the positions and the std.
        """
        _, centres, std = mixtures.pacgan_mixture(name, 1)
        return cls(centres.astype(np.float64) * scale, std * scale)

    @classmethod
    def ring(cls, scale: float = 1.0) -> GaussianMixture:
        """PacGAN's ring, scaled by `scale` (see `pacgan`).

        Args:
            scale: Multiplies the radius and the std.
        """
        return cls.pacgan("ring", scale)

    @classmethod
    def grid(cls, scale: float = 1.0) -> GaussianMixture:
        """PacGAN's grid, scaled by `scale` (see `pacgan`).

        Args:
            scale: Multiplies the spacing and the std.
        """
        return cls.pacgan("grid", scale)


@dataclasses.dataclass(frozen=True)
class SampleQuality:
    """The two-sided figures of `sample_quality` (see the module docstring).

    Attributes:
        modes_captured: PacGAN's count of modes with at least a fifth of the
            uniform share of the high-quality samples (None without modes).
        n_modes: The number of modes (None without modes).
        within_3_sigma: Share of the samples within 3 std of their nearest mode.
        reverse_kl: PacGAN's reverse KL of the mode histogram.
        spread: Median nearest-mode distance over exact samples' (1: as wide).
        worst_mode_share: Largest ratio, either way, of a mode's sample share to
            its data share (1: every mode as often as the data has it).
        distance_ratio: Energy distance to held-out exact samples over the median
            energy distance between pairs of exact samples (None with `pairs=0`).
    """

    modes_captured: int | None
    n_modes: int | None
    within_3_sigma: float | None
    reverse_kl: float | None
    spread: float | None
    worst_mode_share: float | None
    distance_ratio: float | None

    def misses(
        self, distance_limit: float | None = None, share_limit: float | None = None
    ) -> list[str]:
        """The targets these figures miss (empty when all are met).

        Where modes are defined (issue #44's targets): every mode captured, within
        3 sigma in [85 %, 99.5 %] (exact samples of a round 2-D mode give 98.9 %;
        above 99.5 % the tails are cut), spread in [0.8, 1.25] and, with
        `share_limit`, worst mode share <= `share_limit`. With `distance_limit`:
        distance ratio <= `distance_limit`.

        Args:
            distance_limit: The largest distance ratio allowed, or None.
            share_limit: The largest worst mode share allowed, or None.

        Example:

        >>> from sample_quality import SampleQuality
        >>> SampleQuality(8, 8, 0.999, 0.001, 0.6, 1.1, 1.2).misses()
        ['within 3 sigma 99.90 % > 99.5 %', 'spread 0.60 outside [0.8, 1.25]']
        """
        out = []
        ratio = self.distance_ratio
        if distance_limit is not None and ratio is not None and ratio > distance_limit:
            out.append(f"distance ratio {ratio:.2f} > {distance_limit}")
        if self.n_modes is None:
            return out
        if self.modes_captured < self.n_modes:
            out.append(f"modes {self.modes_captured}/{self.n_modes}")
        if not 0.85 <= self.within_3_sigma <= 0.995:
            bound = "< 85 %" if self.within_3_sigma < 0.85 else "> 99.5 %"
            out.append(f"within 3 sigma {100 * self.within_3_sigma:.2f} % {bound}")
        if not 0.8 <= self.spread <= 1.25:
            out.append(f"spread {self.spread:.2f} outside [0.8, 1.25]")
        if share_limit is not None and self.worst_mode_share > share_limit:
            out.append(f"worst mode share {self.worst_mode_share:.2f} > {share_limit}")
        return out

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict.

        Example:

        >>> from sample_quality import SampleQuality
        >>> SampleQuality(8, 8, 0.99, 0.001, 1.0, 1.1, 1.2).as_dict()["spread"]
        1.0
        """
        return dataclasses.asdict(self)


def _mean_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The mean Euclidean distance over all pairs `(a_i, b_j)`, in chunks of rows
    (SciPy's `cdist`: about 2.5 times as fast as NumPy's matmul form, and exact)."""
    total = 0.0
    for start in range(0, len(a), 1024):
        total += cdist(a[start : start + 1024], b).sum()
    return total / (len(a) * len(b))


def energy_distance(a: Any, b: Any) -> float:
    """The energy distance of two samples, its biased (V-statistic) estimate:
    `2 E|a - b| - E|a - a'| - E|b - b'|` over all pairs, diagonals included. It is
    never negative, and 0 only for the same empirical distribution.

    Args:
        a: Samples, shape `(n, d)`.
        b: Samples, shape `(m, d)`.

    Example:

    >>> import numpy as np
    >>> from sample_quality import energy_distance
    >>> a = np.random.default_rng(0).normal(size=(500, 2))
    >>> energy_distance(a, a), energy_distance(a, a + 1.0) > 0.5
    (0.0, True)
    """
    a = np.asarray(a, dtype=np.float64)
    return _energy(a, np.asarray(b, dtype=np.float64), _mean_distance(a, a))


def _energy(a: np.ndarray, b: np.ndarray, within_a: float) -> float:
    value = 2 * _mean_distance(a, b) - within_a - _mean_distance(b, b)
    return max(float(value), 0.0)


def sample_quality(
    samples: Any,
    sample_exact: Sampler,
    *,
    mixture: GaussianMixture | None = None,
    pairs: int = 10,
    seed: int = 12345,
) -> SampleQuality:
    """The two-sided figures of `samples` (see the module docstring).

    Args:
        samples: The generator's samples, shape `(n, d)`.
        sample_exact: Draws exact samples of the data: `(n, rng) -> (n, d)`.
        mixture: The `GaussianMixture` the data is, for the figures about modes;
            None for data without modes (only `distance_ratio` is given).
        pairs: Pairs of exact samples for the distance's reference, >= 10; 0
            leaves the distance out (its cost grows as n squared: about 1 s for
            2500 samples, where the rest takes milliseconds).
        seed: Seeds the held-out and reference draws (the same for every
            generator scored with it).

    Returns:
        A `SampleQuality`.

    Raises:
        ValueError: if `pairs` is not 0 or >= 10, or `samples` is not `(n, d)`
            with n >= 2.
    """
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim != 2 or len(samples) < 2:
        raise ValueError(
            f"`samples` must have shape (n, d) with n >= 2, received {samples.shape}."
        )
    if type(pairs) is not int or not (pairs == 0 or pairs >= 10):
        raise ValueError(f"`pairs` must be 0 or an int >= 10, received {pairs!r}.")
    rng = np.random.default_rng(seed)
    n = len(samples)
    held_out = sample_exact(n, rng)
    ratio = None
    if pairs:
        # The median over `pairs` held-out draws: one draw whose mode counts
        # happen to be off would make every generator look far.
        own = _mean_distance(samples, samples)
        to_held_out = np.median(
            [
                _energy(samples, held, own)
                for held in [held_out]
                + [sample_exact(n, rng) for _ in range(pairs - 1)]
            ]
        )
        reference = np.median(
            [
                energy_distance(sample_exact(n, rng), sample_exact(n, rng))
                for _ in range(pairs)
            ]
        )
        ratio = float(to_held_out / reference)
    if mixture is None:
        return SampleQuality(None, None, None, None, None, None, ratio)
    coverage = mixtures.mode_coverage(samples, mixture.centres, mixture.std)
    nearest, distance = mixtures.nearest_modes(samples, mixture.centres)
    _, exact_distance = mixtures.nearest_modes(held_out, mixture.centres)
    shares = np.bincount(nearest, minlength=len(mixture.centres)) / n
    with np.errstate(divide="ignore"):
        ratios = np.maximum(shares / mixture.shares, mixture.shares / shares)
    return SampleQuality(
        modes_captured=coverage.modes_captured,
        n_modes=coverage.n_modes,
        within_3_sigma=float(coverage.high_quality),
        reverse_kl=float(coverage.reverse_kl),
        spread=float(np.median(distance) / np.median(exact_distance)),
        worst_mode_share=float(ratios.max()),
        distance_ratio=ratio,
    )
