"""What saving a checkpoint every 25 steps costs a training run, per saver.

Runs, in one process and in interleaved rounds (the order shuffled each round),
`fit` of an MLP of 5 x 2048 units (21 M parameters, Adam: 240 MiB of state with the
optimizer's slots; batch 64) for `--steps` steps, with:

- `bare`: no callbacks;
- `kerasteps_async`: `StepCheckpoint(every=25)` (async saves, the default);
- `kerasteps_blocking`: `StepCheckpoint(every=25, async_save=False)`;
- `keras_modelcheckpoint`: `keras.callbacks.ModelCheckpoint(save_weights_only=True,
  save_freq=25)` (the 80 MiB of weights only);
- `keras_backup`: `keras.callbacks.BackupAndRestore(save_freq=25)`.

For each it prints:

- **the stall**: how much longer the training thread takes for a step where a save
  happened than for a normal step (the mean of the batch-end intervals that hold a
  save, minus the median interval of the same fit), in ms;
- the median steps/s, and the ratio to the bare fit of the same round (median, and
  the lowest and highest over the rounds);
- the in-fit ratio: each fit's median step time over its mean step time, divided by
  the same figure of the bare fit of that round. It is what the saves cost against
  the fit's own normal steps, and it does not move with the speed at which
  TensorFlow runs a whole fit: on 2 cores some fits run on one busy core and others
  on two, whatever the callbacks, which spreads the steps/s ratios;
- the cores the process kept busy (CPU seconds of all its threads per second).

Then it measures the CPU cost of one kerasteps save outside training: the host copy
(training thread) and the write (HDF5, fsync, CRC-32; background thread), and the
floor that the write sets on the ratio when training keeps every core busy.

With `--lag`, it measures instead how far behind its step an async save commits,
for the `wgan` recipe's point models (two 3x128 MLPs, both Adams; batch 128,
n_critic 5): interleaved fits of `--steps` steps without a checkpoint and with
`StepCheckpoint(every=20)`, the time from each saving step's batch end to the
save's commit (median and highest per fit), and the floor of that time: one save
(host copy and write) on the idle machine, the median of 20.

TensorFlow's thread pools are fixed (`--threads`, default 2 intra-op and 2 inter-op
threads) so that rounds compare. The figures in docs/benchmarks.md come from:

    python benchmarks/checkpoint_overhead.py --rounds 3 --steps 100
    python benchmarks/checkpoint_overhead.py --lag --rounds 5 --steps 400

Usage:

    python benchmarks/checkpoint_overhead.py [--lag] [--steps 100] [--rounds 9]
        [--threads 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from kerasteps.callbacks import StepCheckpoint  # noqa: E402
from kerasteps.checkpoint.store import CheckpointStore  # noqa: E402

EVERY = 25
WIDTH = 2048
BATCH = 64


def build_model() -> keras.Model:
    model = keras.Sequential(
        [keras.Input((WIDTH,))]
        + [keras.layers.Dense(WIDTH, activation="relu") for _ in range(4)]
        + [keras.layers.Dense(WIDTH)]
    )
    model.compile(keras.optimizers.Adam(1e-4), "mse")
    return model


class Clock(keras.callbacks.Callback):
    """Records the time of every batch end (listed first: before any saver runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())


def savers(root: str, run: int) -> dict[str, list]:
    folder = os.path.join(root, f"r{run}")
    return {
        "bare": [],
        "kerasteps_async": [StepCheckpoint(f"{folder}/async", every=EVERY, keep=2)],
        "kerasteps_blocking": [
            StepCheckpoint(f"{folder}/blocking", every=EVERY, keep=2, async_save=False)
        ],
        "keras_modelcheckpoint": [
            keras.callbacks.ModelCheckpoint(
                f"{folder}/mc.weights.h5", save_weights_only=True, save_freq=EVERY
            )
        ],
        "keras_backup": [
            keras.callbacks.BackupAndRestore(f"{folder}/backup", save_freq=EVERY)
        ],
    }


def stall_ms(clock: Clock, first_step: int) -> tuple[float, float]:
    """(mean extra ms of the intervals that hold a save, the in-fit speed).

    The in-fit speed is the fit's median step time over its mean step time: what
    fraction of its own normal speed the fit kept, saves and the background
    writes' competition included. Unlike steps/s against another fit, it does not
    move with the speed at which TensorFlow happens to run the whole fit.
    """
    gaps = np.diff(clock.ends)  # gaps[i]: from the end of step i+1 to step i+2
    steps = first_step + 1 + np.arange(len(gaps))  # the step whose end opens gaps[i]
    saving = gaps[steps % EVERY == 0]
    median = float(np.median(gaps))
    return 1e3 * (float(np.mean(saving)) - median), median / float(np.mean(gaps))


def save_cpu_cost(model: keras.Model, root: str, repeats: int = 5) -> tuple[float, ...]:
    """CPU seconds of a host copy, and of a write, of one kerasteps save."""
    store = CheckpointStore(os.path.join(root, "cpu"), keep=1)
    copy, write, wall = [], [], []
    store.write(store.capture(model))  # warm: allocate the host buffers once
    snapshot = store._snapshot
    for _ in range(repeats):
        start = time.process_time()
        capture = store.capture(model, snapshot=snapshot)
        copy.append(time.process_time() - start)
        start, begin = time.process_time(), time.perf_counter()
        store.write(capture)
        write.append(time.process_time() - start)
        wall.append(time.perf_counter() - begin)
    return statistics.median(copy), statistics.median(write), statistics.median(wall)


def commit_lag(args: argparse.Namespace) -> None:
    """Prints the `--lag` figures (see the module docstring)."""
    from kerasteps.models import WGAN, build_point_critic, build_point_generator

    every, batch, n_critic = 20, 128, 5
    points = np.random.default_rng(args.seed).normal(size=(4096, 2)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices(points).repeat().batch(batch * n_critic)
    keras.utils.set_random_seed(args.seed)
    model = WGAN(
        build_point_generator(2, data=points), build_point_critic(data=points), 2
    )
    model.compile(total_steps=10**6)
    ended = [0.0]  # the latest batch end, set before StepCheckpoint's own
    clock = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda *_, **__: ended.__setitem__(0, time.perf_counter())
    )

    def timed_fit(saving: bool) -> tuple[float, list[float]]:
        lags: list[float] = []
        callbacks = [clock]
        if saving:
            ckpt = StepCheckpoint(tempfile.mkdtemp(), every=every, keep=2)
            store, begun = ckpt.store, {}
            capture, write = store.capture, store.write

            def timed_capture(*args, **kwargs):  # on the training thread
                taken = capture(*args, **kwargs)
                begun[id(taken)] = ended[0]
                return taken

            def timed_write(taken):  # on the writer thread
                info = write(taken)
                lags.append(time.perf_counter() - begun.pop(id(taken)))
                return info

            store.capture, store.write = timed_capture, timed_write
            callbacks.append(ckpt)
        start = time.perf_counter()
        model.fit(data, steps_per_epoch=args.steps, verbose=0, callbacks=callbacks)
        return args.steps / (time.perf_counter() - start), lags

    timed_fit(True)  # warm-up: trace, allocate
    runs: dict[bool, list[tuple[float, list[float]]]] = {False: [], True: []}
    for run in range(args.rounds):
        for saving in random.Random(args.seed + run).sample([False, True], 2):
            runs[saving].append(timed_fit(saving))
    store = CheckpointStore(tempfile.mkdtemp(), keep=1)
    store.write(store.capture(model))
    alone = []
    for _ in range(20):
        start = time.perf_counter()
        store.write(store.capture(model, snapshot=store._snapshot))
        alone.append(time.perf_counter() - start)
    floor = statistics.median(alone)
    values = sum(int(np.size(v)) for v in store.capture(model).arrays.values())
    print(
        f"WGAN of 3x128 MLPs ({values:,} values in the checkpoint), batch {batch}, "
        f"n_critic {n_critic}, a save every {every} steps, {args.steps} steps/fit, "
        f"{args.rounds} interleaved rounds, {args.threads}+{args.threads} TF threads:"
    )
    print(f"  floor: one save on the idle machine, {1e3 * floor:.1f} ms")
    for (bare, _), (speed, lags) in zip(runs[False], runs[True], strict=True):
        print(
            f"  {speed:5.1f} steps/s ({speed / bare:.3f}x of {bare:.1f} bare); "
            f"commit {1e3 * statistics.median(lags):4.0f} ms after its step "
            f"({statistics.median(lags) / floor:.2f}x the floor), at most "
            f"{1e3 * max(lags):4.0f} ms ({max(lags) / floor:.2f}x); {len(lags)} saves"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="steps per fit")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=2, help="TF pool sizes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lag", action="store_true", help="the commit lag instead")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)
    if args.lag:
        commit_lag(args)
        return

    rng = np.random.default_rng(args.seed)
    x = rng.normal(size=(BATCH * 16, WIDTH)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, x)).batch(BATCH).repeat()
    keras.utils.set_random_seed(args.seed)
    model = build_model()
    root = tempfile.mkdtemp(prefix="kerasteps-ckpt-bench-")

    def timed_fit(callbacks: list) -> tuple[float, tuple[float, float], float]:
        clock = Clock()
        first = int(model.optimizer.iterations.numpy())
        start, cpu = time.perf_counter(), time.process_time()
        model.fit(
            data,
            steps_per_epoch=args.steps,
            epochs=1,
            verbose=0,
            callbacks=[clock, *callbacks],
        )
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
        return args.steps / seconds, stall_ms(clock, first), cpu / seconds

    names = list(savers(root, -1))
    for callbacks in savers(root, -1).values():  # warm-up: trace, allocate
        timed_fit(callbacks)
    results: dict[str, list[tuple[float, tuple[float, float], float]]] = {
        n: [] for n in names
    }
    for run in range(args.rounds):
        order = names[:]
        random.Random(args.seed + run).shuffle(order)
        configs = savers(root, run)
        for name in order:
            results[name].append(timed_fit(configs[name]))
        shutil.rmtree(os.path.join(root, f"r{run}"), ignore_errors=True)

    bare = [speed for speed, _, _ in results["bare"]]
    state_mib = sum(v.numpy().nbytes for v in model.variables) / 2**20
    state_mib += sum(v.numpy().nbytes for v in model.optimizer.variables) / 2**20
    print(
        f"MLP 5x{WIDTH} ({model.count_params() / 1e6:.1f} M parameters, "
        f"{state_mib:.0f} MiB of state), batch {BATCH}, a save every {EVERY} steps, "
        f"{args.steps} steps/fit, {args.rounds} interleaved rounds, "
        f"{args.threads}+{args.threads} TF threads:"
    )
    print(
        f"  {'saver':22s} {'stall ms':>9s} {'steps/s':>8s} {'ratio':>6s} "
        f"{'(lowest-highest)':>16s} {'in-fit':>7s} {'(lowest-highest)':>16s} "
        f"{'cores':>6s}"
    )
    bare_in_fit = [st[1] for _, st, _ in results["bare"]]
    for name in names:
        speeds = [speed for speed, _, _ in results[name]]
        ratios = [s / b for s, b in zip(speeds, bare, strict=True)]
        stall = statistics.median(st[0] for _, st, _ in results[name])
        in_fit = [
            st[1] / b for (_, st, _), b in zip(results[name], bare_in_fit, strict=True)
        ]
        cores = statistics.median(c for _, _, c in results[name])
        shown = "-" if name == "bare" else f"{stall:9.0f}"
        print(
            f"  {name:22s} {shown:>9s} {statistics.median(speeds):8.2f} "
            f"{statistics.median(ratios):6.3f}  ({min(ratios):.3f}-{max(ratios):.3f}) "
            f"{statistics.median(in_fit):7.3f}  ({min(in_fit):.3f}-{max(in_fit):.3f}) "
            f"{cores:6.2f}"
        )
    copy, write, wall = save_cpu_cost(model, root)
    step = 1.0 / statistics.median(bare)
    interval = EVERY * step
    print(
        f"One kerasteps save: host copy {1e3 * copy:.0f} ms CPU (training thread); "
        f"write {1e3 * write:.0f} ms CPU, {1e3 * wall:.0f} ms wall (background). "
        f"With both cores busy training, the write's CPU costs about half of it in "
        f"wall time every {EVERY} steps ({1e3 * interval:.0f} ms): a floor of "
        f"{interval / (interval + copy + write / 2):.3f}x on the async ratio."
    )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
