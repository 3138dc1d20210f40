"""Toy 2-D Gaussian mixtures and a mode-coverage evaluation for GANs.

The two classic mode-collapse benchmarks of the GAN literature (VEEGAN, PacGAN,
Unrolled GAN): a ring of 8 Gaussians and a 5 x 5 grid of Gaussians, each mode with a
small standard deviation. `mode_coverage` measures how many modes a generator covers,
how many of its samples are of high quality, and how far its mode histogram is from
uniform.

Example:

>>> from kerasteps import mixtures
>>> x, centres = mixtures.ring_of_gaussians(1000, seed=0)
>>> x.shape, centres.shape
((1000, 2), (8, 2))
>>> cov = mixtures.mode_coverage(x, centres, std=0.02)
>>> cov.modes_captured, cov.high_quality > 0.99
(8, True)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from kerasteps._validate import check_int, check_positive_number

__all__ = [
    "PACGAN_STD",
    "ModeCoverage",
    "grid_of_gaussians",
    "mode_coverage",
    "nearest_modes",
    "pacgan_mixture",
    "ring_of_gaussians",
]


def _sample(
    centres: np.ndarray, n: int, std: float, seed: int | None
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    modes = rng.integers(len(centres), size=n)
    x = centres[modes] + std * rng.standard_normal((n, centres.shape[1]))
    return x.astype(np.float32), centres.astype(np.float32)


def ring_of_gaussians(
    n: int,
    modes: int = 8,
    radius: float = 2.0,
    std: float = 0.02,
    seed: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Samples a ring of equally weighted 2-D Gaussians.

    Mode `k` is centred at `radius * (cos(2 pi k / modes), sin(2 pi k / modes))`;
    each sample picks a mode uniformly at random and adds isotropic noise.

    Args:
        n: Number of samples, an int >= 1.
        modes: Number of modes on the ring. Defaults to `8`.
        radius: Radius of the ring. Defaults to `2.0`.
        std: Standard deviation of every mode. Defaults to `0.02`.
        seed: Optional int seed for NumPy's generator. Defaults to `None`.

    Returns:
        A tuple `(samples, centres)`: float32 arrays of shape `(n, 2)` and
        `(modes, 2)`.

    Example:

    >>> from kerasteps.mixtures import ring_of_gaussians
    >>> x, centres = ring_of_gaussians(4, seed=0)
    >>> x.dtype, centres[0].tolist()
    (dtype('float32'), [2.0, 0.0])
    """
    n = check_int("n", n, wrong_type=ValueError)
    modes = check_int("modes", modes, wrong_type=ValueError)
    radius = check_positive_number("radius", radius)
    std = check_positive_number("std", std)
    angles = 2.0 * np.pi * np.arange(modes) / modes
    centres = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return _sample(centres, n, std, seed)


def grid_of_gaussians(
    n: int,
    side: int = 5,
    spacing: float = 2.0,
    std: float = 0.02,
    seed: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Samples a square grid of `side * side` equally weighted 2-D Gaussians.

    The grid is centred at the origin; with the defaults the centres are
    `{-4, -2, 0, 2, 4}^2`, the 25-Gaussian benchmark.

    Args:
        n: Number of samples, an int >= 1.
        side: Number of modes along each axis. Defaults to `5`.
        spacing: Distance between neighbouring centres. Defaults to `2.0`.
        std: Standard deviation of every mode. Defaults to `0.02`.
        seed: Optional int seed for NumPy's generator. Defaults to `None`.

    Returns:
        A tuple `(samples, centres)`: float32 arrays of shape `(n, 2)` and
        `(side * side, 2)`.

    Example:

    >>> from kerasteps.mixtures import grid_of_gaussians
    >>> x, centres = grid_of_gaussians(4, seed=0)
    >>> centres.shape, float(centres.min()), float(centres.max())
    ((25, 2), -4.0, 4.0)
    """
    n = check_int("n", n, wrong_type=ValueError)
    side = check_int("side", side, wrong_type=ValueError)
    spacing = check_positive_number("spacing", spacing)
    std = check_positive_number("std", std)
    axis = (np.arange(side) - (side - 1) / 2.0) * spacing
    centres = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    return _sample(centres, n, std, seed)


#: The standard deviation of every mode of PacGAN's two mixtures (Lin et al., 2018).
PACGAN_STD = {"ring": 0.01, "grid": 0.05}


def pacgan_mixture(
    name: str, n: int, seed: int | None = None
) -> tuple[np.ndarray, np.ndarray, float]:
    """Samples one of PacGAN's mixtures: its ring or its grid of Gaussians.

    `"ring"`: 8 modes on a circle of radius 1, standard deviation 0.01.
    `"grid"`: 5 x 5 modes with spacing 2, standard deviation 0.05.

    Args:
        name: `"ring"` or `"grid"`.
        n: Number of samples, an int >= 1.
        seed: Optional int seed for NumPy's generator. Defaults to `None`.

    Returns:
        A tuple `(samples, centres, std)`.

    Example:

    >>> from kerasteps.mixtures import pacgan_mixture
    >>> x, centres, std = pacgan_mixture("grid", 10, seed=0)
    >>> x.shape, centres.shape, std
    ((10, 2), (25, 2), 0.05)
    """
    if name not in PACGAN_STD:
        raise ValueError(f"`name` must be 'ring' or 'grid', received {name!r}.")
    std = PACGAN_STD[name]
    if name == "ring":
        return (*ring_of_gaussians(n, radius=1.0, std=std, seed=seed), std)
    return (*grid_of_gaussians(n, spacing=2.0, std=std, seed=seed), std)


@dataclasses.dataclass(frozen=True)
class ModeCoverage:
    """Result of `mode_coverage`.

    Attributes:
        modes_captured: Number of modes that received at least `min_share` of
            the high-quality samples.
        n_modes: Number of modes of the mixture.
        high_quality: Share of all samples within `threshold` standard
            deviations of their nearest mode, in `[0, 1]`.
        reverse_kl: `KL(p || uniform)` where `p` is the histogram of the
            high-quality samples over the modes; `0` for perfect coverage,
            `log(n_modes)` when all of them sit at one mode, `inf` when there
            is no high-quality sample.
        counts: Number of high-quality samples at each mode, shape `(n_modes,)`.
    """

    modes_captured: int
    n_modes: int
    high_quality: float
    reverse_kl: float
    counts: np.ndarray

    def as_dict(self) -> dict[str, float]:
        """Returns the scalar fields as a dict, for logging.

        Example:

        >>> import numpy as np
        >>> from kerasteps.mixtures import ModeCoverage
        >>> ModeCoverage(8, 8, 1.0, 0.0, np.ones(8)).as_dict()["modes_captured"]
        8
        """
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "counts"}


def mode_coverage(
    samples: Any,
    centres: Any,
    std: float,
    *,
    threshold: float = 3.0,
    min_share: float | None = None,
    epsilon: float = 1e-10,
) -> ModeCoverage:
    """Measures how well 2-D (or any-D) samples cover the modes of a mixture.

    Each sample is assigned to its nearest centre. It is *high quality* if it
    lies within `threshold * std` of that centre (3 standard deviations by
    default). A mode is *captured* if it received at least `min_share` of the
    high-quality samples; the default is a fifth of the uniform share,
    `0.2 / n_modes` (2.5% for 8 modes, 0.8% for 25). The reverse KL compares the
    histogram `p` of high-quality samples over the modes to the uniform
    histogram: `sum_k p_k log((p_k + epsilon) * n_modes)`.

    Args:
        samples: Array-like of shape `(n, d)`.
        centres: Array-like of shape `(n_modes, d)`, the mode centres.
        std: Standard deviation of the modes, > 0.
        threshold: Distance in standard deviations under which a sample is high
            quality. Defaults to `3.0`.
        min_share: Minimum share of the high-quality samples a mode must receive
            to count as captured, in `(0, 1]`. Defaults to `0.2 / n_modes`.
        epsilon: Small constant added inside the logarithm. Defaults to `1e-10`.

    Returns:
        A `ModeCoverage`.

    Example:

    >>> import numpy as np
    >>> from kerasteps.mixtures import mode_coverage, ring_of_gaussians
    >>> _, centres = ring_of_gaussians(1)
    >>> collapsed = np.repeat(centres[:1], 100, axis=0)
    >>> cov = mode_coverage(collapsed, centres, std=0.02)
    >>> cov.modes_captured, round(cov.reverse_kl, 4)
    (1, 2.0794)
    """
    samples, centres = _as_samples_and_centres(samples, centres)
    std = check_positive_number("std", std)
    threshold = check_positive_number("threshold", threshold)
    n_modes = len(centres)
    if min_share is None:
        min_share = 0.2 / n_modes
    elif not 0 < min_share <= 1:
        raise ValueError(f"`min_share` must be in (0, 1], received {min_share!r}.")

    nearest, distance = nearest_modes(samples, centres)
    hq = distance <= threshold * std
    counts = np.bincount(nearest[hq], minlength=n_modes)
    n_hq = int(hq.sum())
    high_quality = n_hq / len(samples) if len(samples) else 0.0
    if n_hq == 0:
        return ModeCoverage(0, n_modes, high_quality, float("inf"), counts)
    p = counts / n_hq
    captured = int((p >= min_share).sum())
    nz = p > 0
    reverse_kl = float(np.sum(p[nz] * np.log((p[nz] + epsilon) * n_modes)))
    return ModeCoverage(captured, n_modes, high_quality, max(reverse_kl, 0.0), counts)


def _as_samples_and_centres(
    samples: Any, centres: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Both as float64 arrays, `(n, d)` and `(n_modes, d)`, or raises."""
    samples = np.asarray(samples, dtype=np.float64)
    centres = np.asarray(centres, dtype=np.float64)
    if centres.ndim != 2 or len(centres) == 0:
        raise ValueError(
            "`centres` must have shape (n_modes, d) with n_modes >= 1, received "
            f"shape {centres.shape}."
        )
    if samples.ndim != 2 or samples.shape[1] != centres.shape[1]:
        raise ValueError(
            f"`samples` must have shape (n, {centres.shape[1]}) to match `centres`, "
            f"received shape {samples.shape}."
        )
    return samples, centres


def nearest_modes(samples: Any, centres: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's nearest centre (its index) and the distance to it.

    Args:
        samples: Array-like of shape `(n, d)`.
        centres: Array-like of shape `(n_modes, d)`.

    Returns:
        A tuple `(index, distance)`: an int array and a float64 array of shape `(n,)`.

    Example:

    >>> from kerasteps.mixtures import nearest_modes
    >>> index, distance = nearest_modes([[0.0, 0.9]], [[0.0, 0.0], [0.0, 1.0]])
    >>> index.tolist(), distance.round(3).tolist()
    ([1], [0.1])
    """
    samples, centres = _as_samples_and_centres(samples, centres)
    index = np.empty(len(samples), dtype=np.int64)
    distance = np.empty(len(samples))
    # Chunked nearest-centre search keeps memory at O(chunk * n_modes).
    for start in range(0, len(samples), 65536):
        rows = slice(start, start + 65536)
        d2 = ((samples[rows, None, :] - centres[None, :, :]) ** 2).sum(axis=-1)
        index[rows] = d2.argmin(axis=1)
        distance[rows] = np.sqrt(d2.min(axis=1))
    return index, distance
