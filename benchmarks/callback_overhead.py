"""Steps/s of a bare `fit` against the kerasteps logging sinks and Keras's TensorBoard.

Runs, in one process and in interleaved rounds (the order shuffled each round),
`fit` of an MLP 64-256-256-10 (batch 64) for `--steps` steps with:

- `bare`: no callbacks;
- `kerasteps`: `LogEvery` + `StepTensorBoard` + `JSONLinesLogger`, every=100;
- `keras_tb`: `keras.callbacks.TensorBoard(update_freq=100)`;

and prints the median steps/s of each and its ratio to the bare fit.

Usage:

    python benchmarks/callback_overhead.py [--steps 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasteps.callbacks import JSONLinesLogger, LogEvery, StepTensorBoard  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=2000, help="steps per fit (>= 2000)"
    )
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    logging.basicConfig(level=logging.WARNING)  # LogEvery lines: not on the console
    rng = np.random.default_rng(args.seed)
    batch = 64
    x = rng.normal(size=(batch * args.steps, 64)).astype("float32")
    y = rng.integers(0, 10, size=batch * args.steps)
    keras.utils.set_random_seed(args.seed)
    model = build_model()
    root = tempfile.mkdtemp(prefix="kerasteps-bench-")

    def configs(run: int) -> dict[str, list]:
        return {
            "bare": [],
            "kerasteps": [
                LogEvery(100),
                StepTensorBoard(os.path.join(root, f"ks{run}"), every=100),
                JSONLinesLogger(os.path.join(root, f"ks{run}.jsonl"), every=100),
            ],
            "keras_tb": [
                keras.callbacks.TensorBoard(
                    os.path.join(root, f"tb{run}"), update_freq=100
                )
            ],
        }

    def timed_fit(callbacks: list) -> float:
        start = time.perf_counter()
        model.fit(
            x,
            y,
            batch_size=batch,
            epochs=1,
            verbose=0,
            shuffle=False,
            callbacks=callbacks,
        )
        return args.steps / (time.perf_counter() - start)

    for callbacks in configs(-1).values():  # warm-up: trace and build once
        timed_fit(callbacks)
    results: dict[str, list[float]] = {name: [] for name in configs(-1)}
    order = list(results)
    for run in range(args.rounds):
        random.Random(args.seed + run).shuffle(order)
        cbs = configs(run)
        for name in order:
            results[name].append(timed_fit(cbs[name]))
    bare = statistics.median(results["bare"])
    print(
        f"MLP 64-256-256-10, batch {batch}, {args.steps} steps/fit, "
        f"{args.rounds} interleaved rounds, medians:"
    )
    for name, values in results.items():
        median = statistics.median(values)
        print(f"  {name:10s} {median:8.1f} steps/s   ratio to bare {median / bare:.3f}")


if __name__ == "__main__":
    main()
