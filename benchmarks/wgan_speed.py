"""Generator steps per second of `kerasteps.models.WGAN` vs a common WGAN-GP subclass.

The baseline is written the common way (as in the Keras WGAN-GP example): a
`keras.Model` subclass whose `train_step` runs a Python loop of `n_critic` critic
`GradientTape`s, reusing one real batch for every critic step, then one generator
step. Both use the same MLPs, batch size, `n_critic` and `Adam(1e-4, 0.5, 0.9)`;
kerasteps's WGAN draws a fresh real batch for every critic step (same compute).

The last row applies `steps_per_execution` and XLA to the common subclass too, to
show how much of the gain comes from those Keras knobs rather than from the step.

All variants are built in one process, warmed up (traced and, for XLA, compiled),
then timed in interleaved rounds; the script prints medians of generator steps/s
on the wall clock, the best round, and the median per CPU-second of this process
(the latter is less sensitive to other processes sharing the machine), each with
its ratio to the baseline. On a 2-core machine TensorFlow runs some `fit` calls on
one busy core and others on two, for both implementations alike, so single rounds
fall near either rate; the best round shows the two-core rate.

To bound what any implementation of the same computation can reach, run it on one
thread (`--inter-op-threads 1 --intra-op-threads 1`): with perfect scaling, a
machine with C cores is at most C times that rate.

`--backend jax,torch` also times kerasteps's WGAN on those Keras backends, each in a
process of its own (a backend is chosen once per process), against the same TF
baseline; the TensorFlow process always runs. On JAX the step is compiled with
`jax.jit` whatever `--no-jit` says (Keras's JAX trainer always compiles); the JAX
process also reports XLA's count of floating-point operations in one training step,
and the TensorFlow process the float32 matrix-product rate of this machine at the
step's shapes and at 2048 x 2048, the roofline against which g-steps/s are read.

Usage:

    python benchmarks/wgan_speed.py                    # 128 wide, batch 256
    python benchmarks/wgan_speed.py --width 32 --batch 64 --rounds 7
    python benchmarks/wgan_speed.py --backend jax,torch --no-jit
    python benchmarks/wgan_speed.py --no-jit --inter-op-threads 1 --intra-op-threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _common_wgan_class():
    """Returns the baseline class (defined lazily so `--help` needs no TF)."""
    import keras
    import tensorflow as tf

    class CommonWGAN(keras.Model):
        """WGAN-GP written the common way: a Python loop of critic tapes."""

        def __init__(self, critic, generator, latent_dim, d_steps=5, gp_weight=10.0):
            super().__init__()
            self.critic = critic
            self.generator = generator
            self.latent_dim = latent_dim
            self.d_steps = d_steps
            self.gp_weight = gp_weight

        def compile(self, d_optimizer, g_optimizer, **kwargs):
            super().compile(**kwargs)
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer

        def gradient_penalty(self, batch_size, real, fake):
            alpha = tf.random.uniform([batch_size, 1], 0.0, 1.0)
            interpolated = real + alpha * (fake - real)
            with tf.GradientTape() as gp_tape:
                gp_tape.watch(interpolated)
                pred = self.critic(interpolated, training=True)
            grads = gp_tape.gradient(pred, [interpolated])[0]
            norm = tf.sqrt(tf.reduce_sum(tf.square(grads), axis=[1]))
            return tf.reduce_mean((norm - 1.0) ** 2)

        def train_step(self, real):
            batch_size = tf.shape(real)[0]
            for _ in range(self.d_steps):
                z = tf.random.normal(shape=(batch_size, self.latent_dim))
                with tf.GradientTape() as tape:
                    fake = self.generator(z, training=True)
                    fake_logits = self.critic(fake, training=True)
                    real_logits = self.critic(real, training=True)
                    d_cost = tf.reduce_mean(fake_logits) - tf.reduce_mean(real_logits)
                    gp = self.gradient_penalty(batch_size, real, fake)
                    d_loss = d_cost + gp * self.gp_weight
                grads = tape.gradient(d_loss, self.critic.trainable_variables)
                self.d_optimizer.apply_gradients(
                    zip(grads, self.critic.trainable_variables, strict=True)
                )
            z = tf.random.normal(shape=(batch_size, self.latent_dim))
            with tf.GradientTape() as tape:
                generated = self.generator(z, training=True)
                g_loss = -tf.reduce_mean(self.critic(generated, training=True))
            grads = tape.gradient(g_loss, self.generator.trainable_variables)
            self.g_optimizer.apply_gradients(
                zip(grads, self.generator.trainable_variables, strict=True)
            )
            return {"d_loss": d_loss, "g_loss": g_loss}

    return CommonWGAN


def mlp(inputs: int, outputs: int, width: int, depth: int):
    import keras

    hidden = [keras.layers.Dense(width, activation="relu") for _ in range(depth)]
    return keras.Sequential(
        [keras.Input((inputs,)), *hidden, keras.layers.Dense(outputs)]
    )


def adam():
    import keras

    return keras.optimizers.Adam(1e-4, beta_1=0.5, beta_2=0.9)


def build(kind: str, args: argparse.Namespace, spe: int, jit: bool, x):
    """Returns (model, dataset) for one benchmark variant."""
    import tensorflow as tf

    from kerasteps.models import WGAN

    g = mlp(args.latent_dim, 2, args.width, args.depth)
    c = mlp(2, 1, args.width, args.depth)
    if kind == "common":
        model = _common_wgan_class()(c, g, args.latent_dim, d_steps=args.n_critic)
        ds = tf.data.Dataset.from_tensor_slices(x).batch(
            args.batch, drop_remainder=True
        )
        ds = ds.repeat().prefetch(tf.data.AUTOTUNE)
    else:
        model = WGAN(g, c, args.latent_dim, n_critic=args.n_critic)
        ds = WGAN.make_dataset(x, args.batch, args.n_critic, repeat=True)
    model.compile(adam(), adam(), steps_per_execution=spe, jit_compile=jit)
    return model, ds


def variants(backend: str, args: argparse.Namespace) -> list[tuple]:
    """(label, kind, steps_per_execution, jit) of the variants one backend runs."""
    if backend == "jax":  # Keras's JAX trainer always compiles the step
        return [
            ("kerasteps WGAN on JAX (spe=1, jit)", "ours", 1, True),
            (f"kerasteps WGAN on JAX (spe={args.spe}, jit)", "ours", args.spe, True),
        ]
    if backend == "torch":  # Keras's torch trainer runs one step per call
        return [("kerasteps WGAN on torch (spe=1, eager)", "ours", 1, False)]
    out = [
        ("common (spe=1, jit off)", "common", 1, False),
        ("kerasteps WGAN (spe=1, jit off)", "ours", 1, False),
        (f"kerasteps WGAN (spe={args.spe}, jit off)", "ours", args.spe, False),
    ]
    if not args.no_jit:
        out += [
            ("common (spe=1, jit on)", "common", 1, True),
            ("kerasteps WGAN (spe=1, jit on)", "ours", 1, True),
            (f"kerasteps WGAN (spe={args.spe}, jit on)", "ours", args.spe, True),
            # For reference: the same knobs applied to the common subclass.
            (f"common (spe={args.spe}, jit on)", "common", args.spe, True),
        ]
    return out


def matmul_rates(args: argparse.Namespace) -> dict[str, float]:
    """GFLOP/s of float32 matrix products in TensorFlow: at the step's widest
    shape (batch x width times width x width) and at 2048 x 2048."""
    import tensorflow as tf

    out = {}
    for label, (m, k, n) in {
        f"{args.batch}x{args.width}x{args.width}": (args.batch, args.width, args.width),
        "2048x2048x2048": (2048, 2048, 2048),
    }.items():
        a = tf.random.normal((m, k))
        b = tf.random.normal((k, n))
        repeats = max(1, int(2e10 // (2 * m * k * n)))

        @tf.function
        def products(a=a, b=b, repeats=repeats):
            total = tf.zeros((a.shape[0], b.shape[1]))
            for _ in tf.range(repeats):
                total += tf.matmul(a, b)
            return total

        products().numpy()  # trace
        best = 0.0
        for _ in range(3):
            start = time.perf_counter()
            products().numpy()
            seconds = time.perf_counter() - start
            best = max(best, 2 * m * k * n * repeats / seconds / 1e9)
        out[label] = best
    return out


def jax_step_flops(model, ds) -> float | None:
    """XLA's count of floating-point operations in one WGAN training step."""
    import jax

    data = next(iter(ds.take(1).as_numpy_iterator()))
    state = model._get_jax_state(True, True, True, True)
    try:
        compiled = jax.jit(model.train_step).lower(state, data).compile()
        analysis = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - a JAX without cost analysis
        return None
    if isinstance(analysis, list):
        analysis = analysis[0]
    return float(analysis.get("flops", 0.0)) or None


def run_backend(args: argparse.Namespace) -> dict:
    """Times the variants of this process's backend; returns them as a dict."""
    import keras

    from kerasteps import mixtures

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        # Thread pools are fixed at TensorFlow's first op, so set them before any.
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    keras.utils.set_random_seed(0)
    x, _ = mixtures.ring_of_gaussians(args.batch * args.n_critic * 64, seed=0)
    runs = {}
    extra: dict = {}
    for label, kind, spe, jit in variants(backend, args):
        model, ds = build(kind, args, spe, jit, x)
        start = time.perf_counter()
        model.fit(ds, steps_per_epoch=2 * spe, verbose=0)  # trace / compile
        print(f"  warm-up {label}: {time.perf_counter() - start:.1f}s", flush=True)
        runs[label] = (model, ds, [], [])
        if backend == "jax" and "flops" not in extra:
            extra["flops"] = jax_step_flops(model, ds)
    for _ in range(args.rounds):
        for model, ds, wall, cpu in runs.values():
            w0, c0 = time.perf_counter(), time.process_time()
            model.fit(ds, steps_per_epoch=args.steps, verbose=0)
            wall.append(args.steps / (time.perf_counter() - w0))
            cpu.append(args.steps / (time.process_time() - c0))
    if backend == "tensorflow":
        extra["matmul"] = matmul_rates(args)
    return {
        "backend": backend,
        "versions": {"keras": keras.__version__, backend: _version(backend)},
        "runs": {label: (wall, cpu) for label, (_, _, wall, cpu) in runs.items()},
        **extra,
    }


def _version(backend: str) -> str:
    module = __import__(backend)
    return getattr(module, "__version__", "?")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--width", type=int, default=128, help="MLP width")
    parser.add_argument("--depth", type=int, default=3, help="hidden layers per MLP")
    parser.add_argument("--batch", type=int, default=256, help="critic batch size")
    parser.add_argument("--n-critic", type=int, default=5, help="critic steps")
    parser.add_argument("--latent-dim", type=int, default=2, help="latent size")
    parser.add_argument("--steps", type=int, default=60, help="g-steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--spe", type=int, default=10, help="steps_per_execution of the tuned run"
    )
    parser.add_argument("--no-jit", action="store_true", help="skip TF's XLA variants")
    parser.add_argument(
        "--backend",
        default="tensorflow",
        help="comma-separated Keras backends to time (tensorflow always runs)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--inter-op-threads",
        type=int,
        default=0,
        help="TensorFlow inter-op threads (0: TensorFlow's default)",
    )
    parser.add_argument(
        "--intra-op-threads",
        type=int,
        default=0,
        help="TensorFlow intra-op threads (0: TensorFlow's default)",
    )
    args = parser.parse_args(argv)
    if args.steps % args.spe:
        parser.error(f"--steps ({args.steps}) must be a multiple of --spe ({args.spe})")
    backends = ["tensorflow"] + [
        b for b in args.backend.split(",") if b and b != "tensorflow"
    ]
    unknown = sorted(set(backends) - {"tensorflow", "jax", "torch"})
    if unknown:
        parser.error(f"--backend: unknown {unknown}; allowed tensorflow, jax, torch")
    if args.child:
        print("RESULT " + json.dumps(run_backend(args)), flush=True)
        return
    print(
        f"MLP {args.depth}x{args.width}, batch {args.batch}, n_critic {args.n_critic}, "
        f"{args.steps} g-steps x {args.rounds} rounds, {os.cpu_count()} CPUs, "
        f"TF threads inter-op {args.inter_op_threads or 'default'} intra-op "
        f"{args.intra_op_threads or 'default'}",
        flush=True,
    )
    results = [_child(backend, argv) for backend in backends]
    report(results, args)


def _child(backend: str, argv: list[str] | None) -> dict:
    """Runs this script for one backend in a process of its own."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv)]
    done = subprocess.run(
        [*command, "--child"], env=env, capture_output=True, text=True, check=False
    )
    lines = done.stdout.splitlines()
    for line in lines:
        if not line.startswith("RESULT "):
            print(line, flush=True)
    result = [line for line in lines if line.startswith("RESULT ")]
    if done.returncode or not result:
        sys.exit(f"the {backend} run failed:\n{done.stderr[-3000:]}")
    return json.loads(result[-1][len("RESULT ") :])


def report(results: list[dict], args: argparse.Namespace) -> None:
    base_wall, base_cpu = results[0]["runs"]["common (spe=1, jit off)"]
    base = statistics.median(base_wall), max(base_wall), statistics.median(base_cpu)
    header = ("variant", "g-steps/s", "ratio", "best", "ratio", "/cpu-s", "ratio")
    print("\n{:44s} {:>10s} {:>6s} {:>7s} {:>6s} {:>8s} {:>6s}".format(*header))
    for result in results:
        for label, (wall, cpu) in result["runs"].items():
            w, b, c = statistics.median(wall), max(wall), statistics.median(cpu)
            print(
                f"{label:44s} {w:10.1f} {w / base[0]:5.2f}x {b:7.1f} "
                f"{b / base[1]:5.2f}x {c:8.1f} {c / base[2]:5.2f}x"
            )
    print(
        "versions: "
        + ", ".join(f"{k} {v}" for r in results for k, v in r["versions"].items())
    )
    rates = results[0].get("matmul", {})
    if rates:
        print(
            "float32 matmul in TF on this machine: "
            + ", ".join(
                f"{shape} {gflops:.0f} GFLOP/s" for shape, gflops in rates.items()
            )
        )
    for result in results:
        flops = result.get("flops")
        if not flops:
            continue
        best = max(max(wall) for wall, _ in result["runs"].values())
        print(
            f"XLA counts {flops / 1e9:.3f} GFLOP per training step on "
            f"{result['backend']}; at the best {best:.1f} g-steps/s that is "
            f"{flops * best / 1e9:.1f} GFLOP/s"
            + (
                f", {flops * best / 1e9 / max(rates.values()):.0%} of the best "
                "matmul rate"
                if rates
                else ""
            )
        )


if __name__ == "__main__":
    main()
