"""Mode coverage of `kerasteps.models.WGAN` on the ring and grid Gaussian mixtures.

Trains a WGAN-GP (MLP generator and critic, gradient penalty weight `--gp`,
Adam(beta_1=0.5, beta_2=0.9) with the learning rate decaying linearly from `--lr`
to 1e-5) on a ring of 8 Gaussians (radius 2) and a
5 x 5 grid of Gaussians (spacing 2), both with sigma 0.02, and prints, for each:
modes captured, share of high-quality samples (within 3 sigma of a mode), reverse
KL of the mode histogram to uniform (see `kerasteps.mixtures.mode_coverage`), the
counters and the wall time of training.

`--backend jax` (or `torch`) trains on that Keras backend, in a process of its own;
PyTorch runs one step per call (`--spe` is taken as 1 there).

Usage:

    python benchmarks/wgan_quality.py
    python benchmarks/wgan_quality.py --mixture ring --seeds 0 1 2 3
    python benchmarks/wgan_quality.py --backend jax
"""

from __future__ import annotations

import argparse
import os
import sys
import time

#: Per-mixture defaults of `--width` and `--steps`: the grid needs a wider MLP
#: and more steps (3000 steps at width 128 capture about 22 of its 25 modes).
PRESETS = {"ring": {"width": 64, "steps": 3000}, "grid": {"width": 128, "steps": 6000}}


def train_and_evaluate(mixture: str, seed: int, args: argparse.Namespace) -> dict:
    """Trains one WGAN-GP and returns its mode coverage and timings."""
    import keras

    from kerasteps import mixtures
    from kerasteps.models import WGAN

    keras.utils.set_random_seed(seed)
    if mixture == "ring":
        x, centres = mixtures.ring_of_gaussians(100_000, std=args.std, seed=seed)
    else:
        x, centres = mixtures.grid_of_gaussians(100_000, std=args.std, seed=seed)

    def mlp(inputs: int, outputs: int) -> keras.Model:
        hidden = [
            keras.layers.Dense(args.width, activation="relu") for _ in range(args.depth)
        ]
        return keras.Sequential(
            [keras.Input((inputs,)), *hidden, keras.layers.Dense(outputs)]
        )

    def adam(updates: int) -> keras.optimizers.Optimizer:
        lr = keras.optimizers.schedules.PolynomialDecay(args.lr, updates, 1e-5)
        return keras.optimizers.Adam(lr, beta_1=0.5, beta_2=0.9)

    model = WGAN(
        mlp(args.latent_dim, 2),
        mlp(2, 1),
        latent_dim=args.latent_dim,
        n_critic=args.n_critic,
        gradient_penalty=args.gp,
        seed=seed,
    )
    model.compile(
        adam(args.n_critic * args.steps),
        adam(args.steps),
        steps_per_execution=args.spe,
        # On JAX, Keras compiles the step only with jit_compile on (else: eager).
        jit_compile=args.jit or keras.backend.backend() == "jax",
    )
    ds = WGAN.make_dataset(x, args.batch, args.n_critic, seed=seed, repeat=True)
    start = time.perf_counter()
    model.fit(ds, steps_per_epoch=args.steps, verbose=0)
    wall = time.perf_counter() - start
    coverage = mixtures.mode_coverage(
        model.generate(args.samples, seed=seed + 1), centres, args.std
    )
    return {**coverage.as_dict(), **model.step_counters(), "wall_s": wall}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--mixture", choices=["ring", "grid", "both"], default="both", help="data"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="generator steps (ring 3000, grid 6000)"
    )
    parser.add_argument(
        "--width", type=int, default=None, help="MLP width (ring 64, grid 128)"
    )
    parser.add_argument("--depth", type=int, default=3, help="hidden layers per MLP")
    parser.add_argument("--batch", type=int, default=128, help="critic batch size")
    parser.add_argument("--n-critic", type=int, default=5, help="critic steps")
    parser.add_argument("--latent-dim", type=int, default=2, help="latent size")
    parser.add_argument("--lr", type=float, default=2e-3, help="initial Adam lr")
    parser.add_argument("--gp", type=float, default=1.0, help="penalty weight")
    parser.add_argument("--std", type=float, default=0.02, help="mode std")
    parser.add_argument("--samples", type=int, default=10_000, help="eval samples")
    parser.add_argument("--spe", type=int, default=50, help="steps_per_execution")
    parser.add_argument("--jit", action="store_true", help="jit_compile=True (XLA)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds")
    parser.add_argument(
        "--backend",
        choices=["tensorflow", "jax", "torch"],
        help="the Keras backend (default: KERAS_BACKEND, else TensorFlow)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.backend and args.backend != os.environ.get("KERAS_BACKEND", "tensorflow"):
        env = {**os.environ, "KERAS_BACKEND": args.backend}
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)
    import keras

    if keras.backend.backend() == "torch":
        args.spe = 1  # Keras's torch trainer runs one step per call

    mixtures_to_run = ["ring", "grid"] if args.mixture == "both" else [args.mixture]
    print(
        f"WGAN-GP (penalty {args.gp}), MLP depth {args.depth}, batch {args.batch}, "
        f"n_critic {args.n_critic}, lr {args.lr} -> 1e-5, {args.samples} samples, "
        f"sigma {args.std}, backend {keras.backend.backend()}",
        flush=True,
    )
    header = ("mixture", "seed", "width", "modes", "high-quality", "reverse KL")
    header += ("g_step", "wall")
    print("{:8s} {:>4s} {:>5s} {:>7s} {:>12s} {:>10s} {:>7s} {:>7s}".format(*header))
    for mixture in mixtures_to_run:
        run_args = argparse.Namespace(**vars(args))
        for name, value in PRESETS[mixture].items():
            if getattr(run_args, name) is None:
                setattr(run_args, name, value)
        for seed in args.seeds:
            r = train_and_evaluate(mixture, seed, run_args)
            modes = f"{r['modes_captured']}/{r['n_modes']}"
            print(
                f"{mixture:8s} {seed:4d} {run_args.width:5d} {modes:>7s} "
                f"{r['high_quality']:12.3f} {r['reverse_kl']:10.4f} "
                f"{r['g_step']:7d} {r['wall_s']:6.1f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
