"""Steps/s of a bare `fit` against the kerasteps logging sinks and Keras's TensorBoard.

Runs, in one process and in interleaved rounds (the order shuffled each round),
`fit` of an MLP 64-256-256-10 (batch 64) for `--steps` steps with:

- `bare`: no callbacks;
- `kerasteps`: `LogEvery` + `StepTensorBoard` + `JSONLinesLogger` + `Throughput`,
  every=100, with the sinks' default `reduce="mean"` (window means from the
  metrics' state). All four are async-safe: on JAX and PyTorch Keras runs batch
  ends on its thread, and kerasteps acts at the next batch begin;
- `ks_full`: the same, with `ValidateEvery(500)` on 20 batches of 64 and
  `StepCheckpoint(every=500)` (async saves, keep 2);
- `ks_stops`: the `kerasteps` set with the callbacks that may stop training, none
  of which stops: `StopOnNonFinite(every=100)`, `StopAtStep` far ahead and
  `StopAtTime` a day ahead. On JAX and PyTorch the ends of the executions where a
  callback acts then run on the training thread, the others on Keras's;
- `keras_tb`: `keras.callbacks.TensorBoard(update_freq=100)`;
- `keras_sync`: a Keras callback whose `on_train_batch_end` does nothing and that is
  not async-safe: on JAX and PyTorch, what any such callback costs (Keras then runs
  batch ends on the training thread and turns the logs into Python numbers at
  every batch, a wait for the device), kerasteps's callbacks included;
- with `--mlflow`, `mlflow`: `MLflowLogger(every=10)` alone, logging to a tracking
  server: `--mlflow URI`, or `--mlflow` alone to start `mlflow server` on this
  machine (SQLite store in a temp folder) for the benchmark. The server shares the
  machine's cores with the fit, as a local server does; and `mlflow_spool`, the
  same logger with its spool (`spool=`), which appends each point to a local file
  before queueing it;

and prints, for each, the median steps/s and its ratio to the bare fit, by wall clock
and per CPU-second of the process (all its threads). On the 2-core machine these
figures come from, TensorFlow runs some whole `fit` calls at about 190 steps/s with
a core idle and others at 300-370, whatever the callbacks (bare fits included), so
wall-clock ratios move by several points from run to run; the CPU-time ratio is the
steadier one. Last, it measures where kerasteps's own time goes, in one more `fit`
with the `kerasteps` set: the Python time inside their batch hooks (a batch's end,
and the next batch's begin where a dispatched end is processed), per batch between
firing steps and per firing step, against the median time of a training step.

`--backend jax` (or `torch`, `tensorflow`) runs it all on that Keras backend, in a
process of its own; the ratios are against a bare `fit` on the same backend.

Usage:

    python benchmarks/callback_overhead.py [--steps 2000] [--rounds 7] [--threads 0]
    python benchmarks/callback_overhead.py --backend jax
    python benchmarks/callback_overhead.py --mlflow
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasteps.callbacks import (  # noqa: E402
    JSONLinesLogger,
    LogEvery,
    MLflowLogger,
    StepCallback,
    StepCheckpoint,
    StepTensorBoard,
    StopAtStep,
    StopAtTime,
    StopOnNonFinite,
    Throughput,
    ValidateEvery,
)

EVERY = 100
MLFLOW_EVERY = 10


class NoOpSync(keras.callbacks.Callback):
    """Does nothing at batch ends; not async-safe (Keras's default)."""

    def on_train_batch_end(self, batch, logs=None):
        pass


def build_model() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def hook_times(model, fit, root: str) -> tuple[float, float, float, bool]:
    """(us per quiet batch, us per firing step, median us per batch end to end,
    whether Keras ran the batch ends on its threads)."""
    calls: list[tuple[int, float]] = []
    ends: list[float] = []
    original = StepCallback.on_train_batch_end, StepCallback.on_train_batch_begin

    def timed(self, batch, logs=None):
        start = time.perf_counter()
        original[0](self, batch, logs)
        calls.append((batch, time.perf_counter() - start))

    def timed_begin(self, batch, logs=None):
        # Where a batch end that Keras dispatched to its thread is processed.
        start = time.perf_counter()
        original[1](self, batch, logs)
        calls.append((batch - 1, time.perf_counter() - start))

    threads: set[int] = set()

    class Clock(keras.callbacks.Callback):
        async_safe = True  # as the sinks: Keras's dispatch stays as it is

        def on_train_batch_begin(self, batch, logs=None):
            ends.append(time.perf_counter())

        def on_train_batch_end(self, batch, logs=None):
            threads.add(threading.get_ident())

    StepCallback.on_train_batch_end = timed
    StepCallback.on_train_batch_begin = timed_begin
    try:
        fit(
            [
                LogEvery(EVERY),
                StepTensorBoard(os.path.join(root, "hooks"), every=EVERY),
                JSONLinesLogger(os.path.join(root, "hooks.jsonl"), every=EVERY),
                Throughput(EVERY),
                Clock(),
            ]
        )
    finally:
        StepCallback.on_train_batch_end, StepCallback.on_train_batch_begin = original
    per_batch: dict[int, float] = {}
    for batch, seconds in calls:
        per_batch[batch] = per_batch.get(batch, 0.0) + seconds
    quiet = [s for b, s in per_batch.items() if (b + 1) % EVERY and b > 0]
    # (a batch's time: its end hooks, and the next batch's begin hooks)
    firing = [s for b, s in per_batch.items() if not (b + 1) % EVERY]
    step = statistics.median(np.diff(ends))
    dispatched = threads != {threading.get_ident()}
    return (
        1e6 * statistics.mean(quiet),
        1e6 * statistics.mean(firing),
        1e6 * step,
        dispatched,
    )


def interleaved(
    names: list[str],
    fit: Callable[[str, int], None],
    steps: int,
    rounds: int,
    seed: int,
) -> dict[str, list[tuple[float, float]]]:
    """Runs `fit(name, run)` for each name once to warm up (run -1: trace and
    build), then `rounds` times, in an order shuffled each round; returns each
    name's `(steps/s by wall clock, steps per CPU-second)` per round."""
    for name in names:
        fit(name, -1)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    order = list(names)
    for run in range(rounds):
        random.Random(seed + run).shuffle(order)
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            fit(name, run)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            results[name].append((steps / wall, steps / cpu))
    return results


def print_medians(results: dict[str, list[tuple[float, float]]]) -> None:
    """Prints each configuration's median steps/s, by wall clock and per CPU-second
    (`results[name]`: one `(wall, cpu)` pair per round), and its ratio to `bare`'s.
    """
    bare_wall = statistics.median(w for w, _ in results["bare"])
    bare_cpu = statistics.median(c for _, c in results["bare"])
    for name, values in results.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(
            f"  {name:10s} {wall:6.1f} steps/s  ratio {wall / bare_wall:.3f}   "
            f"{cpu:6.1f} steps/CPU-s  ratio {cpu / bare_cpu:.3f}"
        )


def start_mlflow_server(root: str) -> tuple[subprocess.Popen, str]:
    """`mlflow server` on a free port of 127.0.0.1, a SQLite store under `root`;
    returns the process and its URI once it answers."""
    from mlflow import MlflowClient

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "mlflow", "server", "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{root}/mlflow.db"]
    command += ["--default-artifact-root", f"{root}/artifacts"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    uri = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            MlflowClient(uri).search_experiments()
            return server, uri
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.2)
    server.kill()
    raise SystemExit("mlflow server did not start within 120 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=2000, help="steps per fit (>= 2000)"
    )
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="TensorFlow intra- and inter-op threads (0: TensorFlow's default)",
    )
    parser.add_argument(
        "--backend",
        choices=["tensorflow", "jax", "torch"],
        help="the Keras backend (default: KERAS_BACKEND, else TensorFlow)",
    )
    parser.add_argument(
        "--mlflow",
        nargs="?",
        const="start",
        metavar="URI",
        help="also time MLflowLogger(every=10) against this tracking server; "
        "without URI, against an `mlflow server` started here",
    )
    args = parser.parse_args()
    if args.backend and args.backend != keras.backend.backend():
        env = {**os.environ, "KERAS_BACKEND": args.backend}
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)
    if args.threads and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    logging.basicConfig(level=logging.WARNING)  # LogEvery lines: not on the console
    rng = np.random.default_rng(args.seed)
    batch = 64
    x = rng.normal(size=(batch * args.steps, 64)).astype("float32")
    y = rng.integers(0, 10, size=batch * args.steps)
    x_val, y_val = x[: 20 * batch], y[: 20 * batch]
    keras.utils.set_random_seed(args.seed)
    model = build_model()
    root = tempfile.mkdtemp(prefix="kerasteps-bench-")
    server, uri = None, args.mlflow
    if args.mlflow == "start":
        server, uri = start_mlflow_server(root)

    def configs(run: int) -> dict[str, list]:
        return {
            "bare": [],
            "kerasteps": [
                LogEvery(EVERY),
                StepTensorBoard(os.path.join(root, f"ks{run}"), every=EVERY),
                JSONLinesLogger(os.path.join(root, f"ks{run}.jsonl"), every=EVERY),
                Throughput(EVERY),
            ],
            "ks_full": [
                LogEvery(EVERY),
                StepTensorBoard(os.path.join(root, f"kf{run}"), every=EVERY),
                JSONLinesLogger(os.path.join(root, f"kf{run}.jsonl"), every=EVERY),
                Throughput(EVERY),
                ValidateEvery(5 * EVERY, (x_val, y_val), batch_size=batch),
                StepCheckpoint(
                    os.path.join(root, f"ckpt{run}"), every=5 * EVERY, keep=2
                ),
            ],
            "ks_stops": [
                LogEvery(EVERY),
                StepTensorBoard(os.path.join(root, f"kst{run}"), every=EVERY),
                JSONLinesLogger(os.path.join(root, f"kst{run}.jsonl"), every=EVERY),
                Throughput(EVERY),
                StopOnNonFinite(every=EVERY),
                StopAtStep(10**9),
                StopAtTime(86400, carry=False),
            ],
            "keras_tb": [
                keras.callbacks.TensorBoard(
                    os.path.join(root, f"tb{run}"), update_freq=EVERY
                )
            ],
            "keras_sync": [NoOpSync()],
            **(
                {
                    "mlflow": [
                        MLflowLogger(
                            MLFLOW_EVERY, tracking_uri=uri, experiment="overhead"
                        )
                    ],
                    # The same with its spool (a StepCheckpoint's directory gives
                    # one; here a file): each point also appended to it.
                    "mlflow_spool": [
                        MLflowLogger(
                            MLFLOW_EVERY,
                            tracking_uri=uri,
                            experiment="overhead",
                            spool=os.path.join(root, f"spool{run}.jsonl"),
                        )
                    ],
                }
                if uri
                else {}
            ),
        }

    def fit(callbacks: list) -> None:
        model.fit(
            x,
            y,
            batch_size=batch,
            epochs=1,
            verbose=0,
            shuffle=False,
            callbacks=callbacks,
        )

    built = {-1: configs(-1)}  # each round's callbacks, made once

    def fit_config(name: str, run: int) -> None:
        if run not in built:
            built[run] = configs(run)
        fit(built[run][name])

    names = list(built[-1])
    results = interleaved(names, fit_config, args.steps, args.rounds, args.seed)
    print(
        f"MLP 64-256-256-10, batch {batch}, {args.steps} steps/fit, "
        f"{args.rounds} interleaved rounds, backend {keras.backend.backend()}, "
        "medians:"
    )
    print_medians(results)
    if server is not None:
        server.terminate()
    quiet, firing, step, dispatched = hook_times(model, fit, root)
    print(
        f"kerasteps hooks (the set, every={EVERY}): {quiet:.1f} us per batch between "
        f"firing steps, {firing:.0f} us per firing step; "
        f"{quiet + firing / EVERY:.1f} us per batch on average, "
        f"{(quiet + firing / EVERY) / step:.1%} of the median step ({step:.0f} us)."
    )
    if dispatched:
        print(
            "  (Keras dispatched the batch ends to its threads: a firing step's time "
            "includes the wait for the steps queued on the device; the time per "
            "batch, the interval between batch begins, is the dispatch's)"
        )


if __name__ == "__main__":
    main()
