"""Tests for `kerasteps.mixtures`: toy Gaussian mixtures and mode coverage."""

import math

import numpy as np
import pytest

from kerasteps import mixtures


def _nearest(x, centres):
    d2 = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
    return d2.argmin(1)


def test_ring_shapes_centres_and_std():
    x, centres = mixtures.ring_of_gaussians(20_000, seed=0)
    assert x.shape == (20_000, 2) and x.dtype == np.float32
    assert centres.shape == (8, 2) and centres.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(centres, axis=1), 2.0, rtol=1e-6)
    angles = np.sort(np.mod(np.arctan2(centres[:, 1], centres[:, 0]), 2 * np.pi))
    np.testing.assert_allclose(angles, 2 * np.pi * np.arange(8) / 8, atol=1e-6)
    nearest = _nearest(x, centres)
    residual = x - centres[nearest]
    np.testing.assert_allclose(residual.std(axis=0), 0.02, rtol=0.05)
    counts = np.bincount(nearest, minlength=8)
    assert counts.min() > 0.8 * 20_000 / 8


def test_ring_options_and_seed():
    x1, c = mixtures.ring_of_gaussians(100, modes=4, radius=3.0, std=0.1, seed=7)
    x2, _ = mixtures.ring_of_gaussians(100, modes=4, radius=3.0, std=0.1, seed=7)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_allclose(c, [[3, 0], [0, 3], [-3, 0], [0, -3]], atol=1e-6)


def test_grid_shapes_centres_and_std():
    x, centres = mixtures.grid_of_gaussians(50_000, seed=1)
    assert x.shape == (50_000, 2) and x.dtype == np.float32
    assert centres.shape == (25, 2)
    assert sorted(set(centres[:, 0].tolist())) == [-4.0, -2.0, 0.0, 2.0, 4.0]
    assert sorted(set(centres[:, 1].tolist())) == [-4.0, -2.0, 0.0, 2.0, 4.0]
    residual = x - centres[_nearest(x, centres)]
    np.testing.assert_allclose(residual.std(axis=0), 0.02, rtol=0.05)


def test_grid_options():
    _, centres = mixtures.grid_of_gaussians(10, side=2, spacing=1.0)
    np.testing.assert_allclose(
        sorted(map(tuple, centres)),
        [(-0.5, -0.5), (-0.5, 0.5), (0.5, -0.5), (0.5, 0.5)],
    )


@pytest.mark.parametrize(
    "fn, kwargs, name",
    [
        (mixtures.ring_of_gaussians, {"n": 0}, "n"),
        (mixtures.ring_of_gaussians, {"n": 10, "modes": 0}, "modes"),
        (mixtures.ring_of_gaussians, {"n": 10, "std": -1.0}, "std"),
        (mixtures.ring_of_gaussians, {"n": 10, "radius": 0}, "radius"),
        (mixtures.grid_of_gaussians, {"n": 10, "side": 0}, "side"),
        (mixtures.grid_of_gaussians, {"n": 10, "spacing": float("nan")}, "spacing"),
    ],
)
def test_generators_validate_arguments(fn, kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        fn(**kwargs)


def test_mode_coverage_perfect_samples():
    x, centres = mixtures.ring_of_gaussians(40_000, seed=2)
    cov = mixtures.mode_coverage(x, centres, std=0.02)
    assert cov.modes_captured == 8 and cov.n_modes == 8
    # P(|x - mu| <= 3 sigma) for a 2-D isotropic Gaussian is 1 - exp(-4.5) ~ 0.989.
    assert cov.high_quality == pytest.approx(1 - math.exp(-4.5), abs=0.005)
    assert 0 <= cov.reverse_kl < 1e-3
    assert cov.counts.sum() == round(cov.high_quality * 40_000)

    exact = np.repeat(centres, 10, axis=0)
    cov = mixtures.mode_coverage(exact, centres, std=0.02)
    assert (cov.modes_captured, cov.high_quality) == (8, 1.0)
    assert cov.reverse_kl == pytest.approx(0.0, abs=1e-8)


def test_mode_coverage_collapsed_samples():
    _, centres = mixtures.ring_of_gaussians(1)
    x = centres[3] + 0.01 * np.random.default_rng(0).standard_normal((1000, 2))
    cov = mixtures.mode_coverage(x, centres, std=0.02)
    assert cov.modes_captured == 1
    assert cov.high_quality == 1.0
    assert cov.reverse_kl == pytest.approx(math.log(8), rel=1e-6)
    assert cov.counts.tolist() == [0, 0, 0, 1000, 0, 0, 0, 0]


def test_mode_coverage_min_share_and_off_mode_samples():
    _, centres = mixtures.ring_of_gaussians(1)
    # 97 samples at mode 0, 3 at mode 1, 100 at the origin (far from every mode).
    x = np.concatenate(
        [
            np.repeat(centres[:1], 97, 0),
            np.repeat(centres[1:2], 3, 0),
            np.zeros((100, 2)),
        ]
    )
    cov = mixtures.mode_coverage(x, centres, std=0.02)
    assert cov.high_quality == 0.5
    assert cov.modes_captured == 2  # 3% >= default 0.2 / 8 = 2.5%
    assert mixtures.mode_coverage(x, centres, 0.02, min_share=0.05).modes_captured == 1
    expected = 0.97 * math.log(0.97 * 8) + 0.03 * math.log(0.03 * 8)
    assert cov.reverse_kl == pytest.approx(expected, rel=1e-6)
    assert cov.as_dict()["modes_captured"] == 2


def test_mode_coverage_no_high_quality_sample():
    _, centres = mixtures.grid_of_gaussians(1)
    cov = mixtures.mode_coverage(centres + 1.0, centres, std=0.02)
    assert (cov.modes_captured, cov.high_quality) == (0, 0.0)
    assert cov.reverse_kl == float("inf")


def test_mode_coverage_validates_inputs():
    _, centres = mixtures.ring_of_gaussians(1)
    with pytest.raises(ValueError, match="`samples`"):
        mixtures.mode_coverage(np.zeros((5, 3)), centres, 0.02)
    with pytest.raises(ValueError, match="`std`"):
        mixtures.mode_coverage(np.zeros((5, 2)), centres, 0.0)
    with pytest.raises(ValueError, match="`min_share`"):
        mixtures.mode_coverage(np.zeros((5, 2)), centres, 0.02, min_share=2.0)
    with pytest.raises(ValueError, match="`centres`"):
        mixtures.mode_coverage(np.zeros((5, 2)), np.zeros((0, 2)), 0.02)
