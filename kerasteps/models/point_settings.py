"""`PointSettings`: what `WGAN.for_points` builds and trains a point WGAN with."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["PointSettings"]


class PointSettings(NamedTuple):
    """The settings of a WGAN-GP for points `(N, d)`, as `WGAN.for_points` uses them.

    The defaults are the ones measured best on the 2-D ring and grid mixtures
    (`benchmarks/wgan_quality.py`; docs/benchmarks.md has the figures).
    They hold in the units of the *standardized* data (mean 0, one standard
    deviation of 1 over all coordinates), which `WGAN.for_points` trains in,
    so they do not depend on the data's scale.

    Attributes:
        components: About how many Gaussians the generator draws from
            (`GaussianComponents` on `MixtureLatent.grid`: 100 on a 10x10 grid
            for 2-D points, 125 for 3-D, 2**d from 6-D up). Default 100.
        widths: Hidden layer widths of both MLPs (ReLU); the generator's MLP
            gives each component its mean and shape. Default `(64, 64, 64)`.
        n_critic: Critic updates per generator update. Default 3.
        batch_size: Examples per critic batch and per generator batch.
            Default 128.
        gradient_penalty: Penalty weight, in standardized units. Default 0.1.
        learning_rate: Adam's learning rate (beta_1 0.5, beta_2 0.9) at the
            start. Default 2e-3.
        final_learning_rate: Reached linearly at `steps`. Default 1e-5.
        steps: Generator steps of a run, and of the learning-rate schedule.
            Default 10000.
        energy_weight: Weight of the energy distance between generated and real
            batches in the generator's loss (`WGAN`'s "Energy term"; 0 for none).
            Default 1.0.
        energy_exponent: Its exponent of the distances, in (0, 2). Default 0.75.
        real_gradient_penalty: Weight of the zero-centred gradient penalty on
            the real points (`WGAN`'s "Real-gradient penalty"), in standardized
            units. Default 0.0: none (the likelihood term now makes the
            components as wide as the data; the penalty widened them further).
        likelihood_weight: Weight of the real batch's negative log-density
            under the generator's mixture in the generator's loss (`WGAN`'s
            "Likelihood term"; 0 for none), in standardized units.
            Default 0.0035.
        anchor_weight: Weight of the distance from each component's mean to
            the nearest real point of the batch in the generator's loss
            (`WGAN`'s "Anchor term"; 0 for none). Default 1.0.
        learn_weights: Whether the likelihood term also trains the components'
            probabilities (`GaussianComponents(learn_weights=True)`), rather
            than keeping them equal: with the likelihood phase, a component
            left between modes then ends with almost no probability. Default
            True.
        likelihood_phase: The share in [0, 1) of `steps`, at their end, that
            trains the generator by maximum likelihood alone (`WGAN`'s
            "Likelihood phase"; 0 for none). Default 0.1: the last 1000 of
            10000.

    Example:

    >>> from kerasteps.models import PointSettings
    >>> PointSettings().n_critic, PointSettings(steps=3000).steps
    (3, 3000)
    """

    components: int = 100
    widths: tuple[int, ...] = (64, 64, 64)
    n_critic: int = 3
    batch_size: int = 128
    gradient_penalty: float = 0.1
    learning_rate: float = 2e-3
    final_learning_rate: float = 1e-5
    steps: int = 10000
    energy_weight: float = 1.0
    energy_exponent: float = 0.75
    real_gradient_penalty: float = 0.0
    likelihood_weight: float = 0.0035
    anchor_weight: float = 1.0
    learn_weights: bool = True
    likelihood_phase: float = 0.1
