"""The plain point WGAN's quality: what the defaults train, against what they replaced.

The one slow test of the WGAN (two short fits, on TensorFlow only: it checks the
defaults' figures, not a backend's arithmetic, which tests/models/test_wgan_backends.py
compares across backends). The full figures over seeds, scales and data sets come from
`benchmarks/wgan_quality.py` (docs/benchmarks.md).
"""

from __future__ import annotations

import keras

from kerasteps.mixtures import mode_coverage, pacgan_mixture
from kerasteps.models import WGAN, build_mlp, build_point_critic, build_point_generator

#: Generator steps of both fits: long enough for the defaults to cover the ring.
STEPS = 1000


def train(gan: WGAN, x, **compile_kwargs) -> int:
    """Fits `gan` for `STEPS` steps on `x` (seed 0); returns the ring modes that 2500
    of its samples cover (`kerasteps.mixtures.mode_coverage`)."""
    gan.compile(steps_per_execution=50, jit_compile=True, **compile_kwargs)
    batches = WGAN.make_dataset(x, 128, gan.n_critic, seed=0, repeat=True)
    gan.fit(batches, steps_per_epoch=STEPS, verbose=0)
    _, centres, std = pacgan_mixture("ring", 1)
    return mode_coverage(gan.generate(2500, seed=0), centres, std).modes_captured


def test_the_defaults_cover_the_ring_where_the_old_ones_collapse():
    """Same data (PacGAN's ring), seed and steps for both. The old defaults: 2x64
    nets with a leaky-ReLU critic and no data scaling, penalty 10, constant Adam
    1e-4 (the WGAN-GP paper's). Reason for its time (about 18 s on 2 cores, both
    fits): fewer steps leave the new defaults short of every mode too, which would
    prove nothing."""
    x, _, _ = pacgan_mixture("ring", 20_000, seed=0)
    keras.utils.set_random_seed(0)
    new = WGAN(build_point_generator(2, data=x), build_point_critic(data=x), 2, seed=0)
    assert train(new, x, total_steps=STEPS) == 8

    keras.utils.set_random_seed(0)
    generator = build_mlp(2, (64, 64), 2, "relu")
    critic = build_mlp(2, (64, 64), 1, "leaky_relu")
    old = WGAN(generator, critic, 2, gradient_penalty=10.0, seed=0)
    adam = [keras.optimizers.Adam(1e-4, beta_1=0.5, beta_2=0.9) for _ in range(2)]
    assert train(old, x, d_optimizer=adam[0], g_optimizer=adam[1]) < 8
