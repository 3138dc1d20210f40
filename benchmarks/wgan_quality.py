"""Two-sided quality of the plain point WGAN on PacGAN's ring and grid, and others.

The model is the one a user builds from the README: `kerasteps.models.WGAN` with
`build_point_generator(2, data=x)` and `build_point_critic(data=x)` (3 x 128 ReLU
MLPs that work in the data's standardized units), the WGAN's defaults (`n_critic` 5,
gradient penalty 1, 2-D noise) and its default `compile(total_steps=6000)` (Adam,
beta (0.5, 0.9), 2e-3 decaying linearly to 1e-5), trained on
`WGAN.make_dataset(x, 128, n_critic=5)` for 6000 generator steps with
`steps_per_execution=50`.

The data are the two mixtures of PacGAN (Lin et al., 2018, Table 1): a ring of 8
Gaussians of radius 1 with sigma 0.01, and a 5 x 5 grid of Gaussians with spacing 2
and sigma 0.05, 100,000 points each, and the same scaled by `--scales` (positions
and sigmas alike). Each run scores 2500 of the generator's own samples (nothing
post-processes them) with `sample_quality.py`'s two-sided figures: modes captured
(PacGAN's rule: at least one sample within 3 sigma of the mode), the share within 3
sigma (exact samples give 98.9 %; more means cut tails), the spread (median
nearest-mode distance over exact samples'), and the distance ratio (energy distance
to exact samples over its median between exact pairs, reported, not a target). The
targets (issue #44): every mode, 85 % <= within 3 sigma <= 99.5 %, spread in
[0.8, 1.25].

Beside each data set it prints the same figures for 2500 exact samples (what a
faithful generator gets) and, with `--baseline old`, for the defaults before issue
#44 (3 x 64 nets of 2 layers, a leaky-ReLU critic, no data scaling, penalty 10,
constant Adam 1e-4), trained the same number of steps: the model that collapsed.

The default seeds, 100-104, are the test seeds: the settings were chosen on 0-4
(`benchmarks/wgan_candidates.py`). `--mixture held-out` trains, with the same
settings, on data nothing was chosen on: `unequal` (6 Gaussians on a hexagon,
sigma 0.1, one holding 2 % of the data), `moons`, `spiral`, `mix5d` and `mix10d` (10
equal Gaussians, sigma 0.1, at fixed random places in 5-D and 10-D); what they miss
is reported (mode share within x2, spread 0.8-1.25, distance ratio <= 3).

Usage:

    python benchmarks/wgan_quality.py    # test seeds: ring and grid x1, x10; held-out
    python benchmarks/wgan_quality.py --mixture ring --scales 1 --seeds 0 1
    python benchmarks/wgan_quality.py --mixture both --baseline old
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sample_quality import GaussianMixture, sample_quality  # noqa: E402

# ------------------------------------------------------------------ held-out data
#
# Data that no setting was tuned on (`--mixture held-out`), each an exact sampler
# `(n, rng) -> points` and, where it has modes, its `GaussianMixture`.


def _mixture(centres: Any, std: float, weights: Any = None) -> GaussianMixture:
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    return GaussianMixture(np.asarray(centres, dtype=np.float64), std, w)


#: 6 modes on a hexagon of radius 1.5, sigma 0.1, one of them with 2 % of the data.
UNEQUAL = _mixture(
    [[1.5 * np.cos(a), 1.5 * np.sin(a)] for a in np.arange(6) * np.pi / 3],
    0.1,
    [0.35, 0.25, 0.18, 0.12, 0.08, 0.02],
)


def _random_centres(d: int, n: int, seed: int) -> np.ndarray:
    """`n` centres uniform in [-2, 2]^d, at least 1 apart (fixed by `seed`)."""
    rng = np.random.default_rng(seed)
    centres: list[np.ndarray] = []
    while len(centres) < n:
        c = rng.uniform(-2.0, 2.0, d)
        if all(np.linalg.norm(c - o) >= 1.0 for o in centres):
            centres.append(c)
    return np.stack(centres)


#: 10 equal Gaussians, sigma 0.1, at random places in 5-D and in 10-D.
MIXTURE_5D = _mixture(_random_centres(5, 10, seed=5), 0.1)
MIXTURE_10D = _mixture(_random_centres(10, 10, seed=10), 0.1)


def two_moons(n: int, rng: np.random.Generator) -> np.ndarray:
    """scikit-learn's two interleaving half circles, with Gaussian noise 0.05."""
    upper = rng.random(n) < 0.5
    t = rng.uniform(0.0, np.pi, n)
    x = np.where(upper, np.cos(t), 1.0 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    return np.stack([x, y], 1) + 0.05 * rng.standard_normal((n, 2))


def spiral(n: int, rng: np.random.Generator) -> np.ndarray:
    """An Archimedean spiral over two turns (radius t / 2pi for t in [pi/2, 4pi]),
    with Gaussian noise 0.05, points spread evenly along its length."""
    t = np.sqrt(rng.uniform((np.pi / 2) ** 2, (4 * np.pi) ** 2, n))
    r = t / (2 * np.pi)
    return np.stack([r * np.cos(t), r * np.sin(t)], 1) + 0.05 * rng.standard_normal(
        (n, 2)
    )


def held_out_misses(quality: Any) -> list[str]:
    """What a held-out run misses: every mode's share within x2 of its data share,
    spread 0.8-1.25 where there are modes, distance ratio <= 3."""
    missed = []
    if quality.spread is not None:
        if quality.worst_mode_share > 2.0:
            missed.append(f"mode share off x{quality.worst_mode_share:.2f} > x2")
        if not 0.8 <= quality.spread <= 1.25:
            missed.append(f"spread {quality.spread:.2f} outside [0.8, 1.25]")
    if quality.distance_ratio > 3.0:
        missed.append(f"distance ratio {quality.distance_ratio:.2f} > 3")
    return missed


#: PacGAN's scoring sample count (its `num_log_figure_sample`).
SAMPLES = 2500
#: The run's length, batch and calls, as the README trains it.
STEPS, BATCH, STEPS_PER_EXECUTION = 6000, 128, 50


class Case(NamedTuple):
    """One data set: its name, an exact sampler, and its mixture where it has modes."""

    name: str
    sample: Any  # (n, rng) -> points
    mixture: GaussianMixture | None
    pacgan: bool  # PacGAN's 2-D ring or grid: the targets apply


HELD_OUT = {
    "unequal": Case("unequal", UNEQUAL.sample, UNEQUAL, False),
    "moons": Case("moons", two_moons, None, False),
    "spiral": Case("spiral", spiral, None, False),
    "mix5d": Case("mix5d", MIXTURE_5D.sample, MIXTURE_5D, False),
    "mix10d": Case("mix10d", MIXTURE_10D.sample, MIXTURE_10D, False),
}


def case_of(name: str, scale: float) -> Case:
    """The data set `name`, PacGAN's scaled by `scale`."""
    if name in HELD_OUT:
        return HELD_OUT[name]
    mixture = GaussianMixture.pacgan(name, scale)
    return Case(name, mixture.sample, mixture, True)


def training_points(case: Case, scale: float, seed: int) -> np.ndarray:
    """100,000 training points of `case` (PacGAN's own draws for ring and grid)."""
    from kerasteps import mixtures

    if case.pacgan:
        return mixtures.pacgan_mixture(case.name, 100_000, seed=seed)[0] * scale
    return case.sample(100_000, np.random.default_rng(seed)).astype("float32")


def score(samples: np.ndarray, case: Case) -> dict:
    """The two-sided figures of `samples` and what they miss."""
    quality = sample_quality(samples, case.sample, mixture=case.mixture)
    return {
        "modes": quality.modes_captured,
        "n_modes": quality.n_modes,
        "within": quality.within_3_sigma,
        "spread": quality.spread,
        "share": quality.worst_mode_share,
        "distance": quality.distance_ratio,
        "misses": quality.misses() if case.pacgan else held_out_misses(quality),
    }


def default_wgan(x: np.ndarray, seed: int) -> Any:
    """The README's point WGAN, compiled with its defaults."""
    from kerasteps.models import WGAN, build_point_critic, build_point_generator

    generator = build_point_generator(2, data=x)
    gan = WGAN(generator, build_point_critic(data=x), latent_dim=2, seed=seed)
    gan.compile(total_steps=STEPS, steps_per_execution=STEPS_PER_EXECUTION)
    return gan


def old_wgan(x: np.ndarray, seed: int) -> Any:
    """The point WGAN of the defaults before issue #44, the one that collapsed."""
    import keras

    from kerasteps.models import WGAN, build_mlp

    d = x.shape[1]
    generator = build_mlp(2, (64, 64), d, "relu", name="generator")
    critic = build_mlp(d, (64, 64), 1, "leaky_relu", name="critic")
    gan = WGAN(generator, critic, latent_dim=2, gradient_penalty=10.0, seed=seed)

    def adam() -> Any:
        return keras.optimizers.Adam(1e-4, beta_1=0.5, beta_2=0.9)

    gan.compile(adam(), adam(), steps_per_execution=STEPS_PER_EXECUTION)
    return gan


MODELS = {"defaults": default_wgan, "old": old_wgan}


def trace(case: Case, seed: int, every: int) -> Any:
    """A callback that prints the generator's figures every `every` steps."""
    import keras

    class Trace(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            step = int(keras.ops.convert_to_numpy(self.model.g_step))
            if step % every == 0:
                r = score(self.model.generate(SAMPLES, seed=seed + 1000), case)
                print(f"  step {step}: {figures_text(r)}", flush=True)

    return Trace()


def train_and_score(
    model: str, case: Case, scale: float, seed: int, every: int | None = None
) -> dict:
    """Trains one point WGAN on a data set and scores 2500 of its samples (with
    `every`, also every `every` steps)."""
    import keras

    from kerasteps.models import WGAN

    keras.utils.set_random_seed(seed)
    x = training_points(case, scale, seed)
    gan = MODELS[model](x, seed)
    batches = WGAN.make_dataset(x, BATCH, gan.n_critic, seed=seed, repeat=True)
    callbacks = [trace(case, seed, every)] if every else []
    start, cpu = time.perf_counter(), time.process_time()
    gan.fit(batches, steps_per_epoch=STEPS, verbose=0, callbacks=callbacks)
    times = {"fit_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}
    return {**score(gan.generate(SAMPLES, seed=seed + 1000), case), **times}


def exact_figures(case: Case, seed: int) -> dict:
    """The figures of 2500 exact samples: what a faithful generator gets."""
    return score(case.sample(SAMPLES, np.random.default_rng(seed + 2000)), case)


def figures_text(r: dict) -> str:
    """One run's figures, those that its data set has."""
    parts = []
    if r["modes"] is not None:
        parts += [
            f"{r['modes']}/{r['n_modes']} modes",
            f"{r['within']:.1%} within 3 sigma",
            f"spread {r['spread']:.2f}",
            f"share {r['share']:.2f}",
        ]
    return ", ".join([*parts, f"distance {r['distance']:.2f}"])


def summary(label: str, results: list[dict]) -> str:
    """One line: the range over the seeds and the runs that miss a target."""

    def span(key: str, form: str) -> str:
        values = [r[key] for r in results]
        return f"{min(values):{form}}-{max(values):{form}}"

    parts = []
    if results[0]["modes"] is not None:
        parts += [
            f"modes {min(r['modes'] for r in results)}/{results[0]['n_modes']} (worst)",
            f"within 3 sigma {span('within', '.1%')}",
            f"spread {span('spread', '.2f')}",
        ]
    parts.append(f"distance {span('distance', '.2f')}")
    missed = sum(bool(r["misses"]) for r in results)
    line = f"{label:18s} {', '.join(parts)} | {missed} of {len(results)} miss"
    if "fit_s" in results[0]:
        line += (
            f" | fit {min(r['fit_s'] for r in results):.1f}-"
            f"{max(r['fit_s'] for r in results):.1f} s"
        )
    return line


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--mixture",
        choices=["all", "ring", "grid", "both", "held-out", *HELD_OUT],
        default="all",
        help="all: ring and grid at --scales, then the held-out data sets",
    )
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[100, 101, 102, 103, 104],
        help="the test seeds by default; the settings were chosen on 0-4",
    )
    parser.add_argument(
        "--baseline",
        choices=["exact", "old"],
        default="exact",
        help="exact: 2500 exact samples beside each data set; old: also train "
        "the defaults before issue #44",
    )
    parser.add_argument(
        "--trace",
        type=int,
        metavar="N",
        help="also print the generator's figures every N steps (a multiple of 50)",
    )
    parser.add_argument(
        "--backend",
        choices=["tensorflow", "jax", "torch"],
        help="the Keras backend (default: KERAS_BACKEND, else TensorFlow)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.backend and args.backend != os.environ.get("KERAS_BACKEND", "tensorflow"):
        env = {**os.environ, "KERAS_BACKEND": args.backend}
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)
    import keras

    models = ["defaults"] + (["old"] if args.baseline == "old" else [])
    print(f"backend {keras.backend.backend()}, {STEPS} steps, seeds {args.seeds}")
    names = {
        "all": ["ring", "grid", *HELD_OUT],
        "both": ["ring", "grid"],
        "held-out": list(HELD_OUT),
    }.get(args.mixture, [args.mixture])
    lines, missed, runs = [], [], 0
    for name in names:
        for scale in args.scales if name in ("ring", "grid") else [1.0]:
            case = case_of(name, scale)
            label = f"{name} x{scale:g}"
            for model in models:
                results = []
                for seed in args.seeds:
                    r = train_and_score(model, case, scale, seed, args.trace)
                    results.append(r)
                    print(
                        f"{label} {model} seed {seed}: {figures_text(r)}; misses "
                        f"{r['misses'] or 'none'}; fit {r['fit_s']:.1f} s "
                        f"({r['cpu_s']:.0f} s CPU)",
                        flush=True,
                    )
                    if model == "defaults" and case.pacgan:
                        runs += 1
                        if r["misses"]:
                            missed.append(f"{label} seed {seed}: {r['misses']}")
                lines.append(summary(f"{label} {model}", results))
                print(lines[-1], flush=True)
            exact = [exact_figures(case, seed) for seed in args.seeds]
            lines.append(summary(f"{label} exact", exact))
            print(lines[-1], flush=True)
    print("\n".join(["", "Summary:", *lines]))
    print(
        f"{runs - len(missed)} of {runs} ring and grid runs meet every target", end=""
    )
    print("; the others:" if missed else "", *missed, sep="\n  ")


if __name__ == "__main__":
    main()
