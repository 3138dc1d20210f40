"""Tests for benchmarks/sample_quality.py: exact samples meet every two-sided target,
and the generators the one-sided figures let through fail them (negative
controls: cut tails, narrowed modes, a dropped mode, a dropped rare mode)."""

import numpy as np
import pytest

from benchmarks.sample_quality import (
    GaussianMixture,
    SampleQuality,
    energy_distance,
    sample_quality,
)

N = 1000  # PacGAN scores 2500; 1000 keeps each call near 0.3 s
MIXTURES = {
    f"{name} x{scale}": getattr(GaussianMixture, name)(scale)
    for name in ("ring", "grid")
    for scale in (0.5, 10.0)  # the figures are scale-free: x1 lies between
}


@pytest.mark.parametrize("name", list(MIXTURES))
def test_exact_samples_meet_every_target_about_modes(name):
    """Five draws of 2500 exact samples (PacGAN's protocol) meet every target
    about modes. With 2500 the share within 3 sigma has a standard deviation of
    0.2 %, so 99.5 % is 2.9 of them above 98.9 %; with 1000 it is 2.1 (a draw of
    1000 gave 99.6 %): the bounds need PacGAN's 2500."""
    mixture = MIXTURES[name]
    for seed in range(100, 105):
        samples = mixture.sample(2500, np.random.default_rng(seed))
        quality = sample_quality(samples, mixture.sample, mixture=mixture, pairs=0)
        assert quality.misses(share_limit=1.5) == [], seed
        assert quality.modes_captured == quality.n_modes == len(mixture.centres)


@pytest.mark.parametrize("name", ["ring x1.0", "grid x1.0"])
def test_exact_samples_distance_ratio_is_below_two_in_the_median(name):
    """One draw's ratio is a ratio of energy distances between exact samples: its
    median is about 1, but it exceeds 2 in 12 % (ring) and 5 % (grid) of draws of
    1000 (40 measured), up to 3.9: no bound on one draw holds for a faithful
    generator; the median of five draws is within 2."""
    mixture = getattr(GaussianMixture, name.split()[0])()
    ratios = [
        sample_quality(
            mixture.sample(N, np.random.default_rng(seed)), mixture.sample
        ).distance_ratio
        for seed in range(100, 105)
    ]
    assert np.median(ratios) <= 2.0, ratios


def _exact_and_modes(mixture, seed=0):
    rng = np.random.default_rng(seed)
    modes = rng.choice(len(mixture.centres), size=N, p=mixture.shares)
    noise = rng.standard_normal((N, mixture.centres.shape[1]))
    return modes, noise, rng


def test_tails_cut_at_two_and_a_half_sigma_fail_the_upper_bound():
    ring = GaussianMixture.ring()
    modes, noise, _ = _exact_and_modes(ring)
    norms = np.linalg.norm(noise, axis=1, keepdims=True)
    clipped = noise * np.minimum(1.0, 2.5 / norms)
    quality = sample_quality(
        ring.centres[modes] + ring.std * clipped, ring.sample, mixture=ring
    )
    assert quality.within_3_sigma > 0.995  # "better" than exact samples (98.9 %)
    assert quality.modes_captured == 8 and quality.reverse_kl < 0.02  # PacGAN's pass
    assert any(miss.startswith("within 3 sigma") for miss in quality.misses())


def test_samples_half_as_wide_fail_the_spread():
    grid = GaussianMixture.grid()
    modes, noise, _ = _exact_and_modes(grid)
    quality = sample_quality(
        grid.centres[modes] + 0.5 * grid.std * noise, grid.sample, mixture=grid
    )
    assert quality.spread == pytest.approx(0.5, abs=0.05)
    assert quality.modes_captured == 25  # PacGAN's figures pass
    assert any(miss.startswith("spread") for miss in quality.misses())


def test_a_dropped_mode_fails_modes_share_and_distance():
    ring = GaussianMixture.ring()
    modes, noise, _ = _exact_and_modes(ring)
    modes = np.where(modes == 3, 4, modes)  # mode 3's samples go to mode 4
    quality = sample_quality(
        ring.centres[modes] + ring.std * noise, ring.sample, mixture=ring
    )
    assert quality.modes_captured == 7
    assert quality.worst_mode_share == np.inf
    assert quality.distance_ratio > 2
    misses = quality.misses(distance_limit=2)
    assert "modes 7/8" in misses and any(m.startswith("distance") for m in misses)


def test_a_rare_mode_dropped_fails_the_share_limit():
    """A mode holding 2 % of the data, left out: PacGAN's `modes captured` counts it
    as missed only through its share; the share ratio names it."""
    centres = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    mixture = GaussianMixture(centres, 0.05, np.array([0.49, 0.49, 0.02]))
    rng = np.random.default_rng(0)
    common = GaussianMixture(centres[:2], 0.05).sample(N, rng)
    quality = sample_quality(common, mixture.sample, mixture=mixture)
    assert quality.worst_mode_share == np.inf
    assert any(m.startswith("worst mode share") for m in quality.misses(share_limit=2))


def test_distance_ratio_needs_no_modes():
    def moons(n, rng):
        angle = rng.uniform(0, np.pi, n)
        upper = rng.integers(2, size=n)
        x = np.where(upper, np.cos(angle), 1 - np.cos(angle))
        y = np.where(upper, np.sin(angle), 0.5 - np.sin(angle))
        return np.stack([x, y], 1) + 0.05 * rng.normal(size=(n, 2))

    rng = np.random.default_rng(3)
    good = sample_quality(moons(N, rng), moons)
    bad = sample_quality(moons(N, rng) * 0.7, moons)
    assert good.spread is None and good.misses(distance_limit=3) == []
    assert bad.distance_ratio > 3


def test_energy_distance_is_a_v_statistic():
    a = np.array([[0.0], [2.0]])
    b = np.array([[1.0]])
    # 2 E|a-b| - E|a-a'| - E|b-b'| = 2*1 - (0+2+2+0)/4 - 0 = 1
    assert energy_distance(a, b) == pytest.approx(1.0)
    assert energy_distance(a, a) == 0.0


def test_bad_input_is_refused():
    ring = GaussianMixture.ring()
    with pytest.raises(
        ValueError, match="`pairs` must be 0 or an int >= 10, received 3"
    ):
        sample_quality(ring.sample(10, np.random.default_rng(0)), ring.sample, pairs=3)
    with pytest.raises(ValueError, match=r"`samples` must have shape \(n, d\)"):
        sample_quality(np.zeros(5), ring.sample)
    assert SampleQuality(None, None, None, None, None, None, 1.0).misses() == []
