"""Trains slowly with a StepCheckpoint, for the signal and lock tests.

    python tests/scripts/signal_train.py --workdir DIR [--fail-at N] [--after-fail S]

Prints `READY` (flushed) once training has begun. With `--fail-at N`, a callback
raises at step N, the script catches the error, prints `FAILED`, then waits
`--after-fail` seconds (a notebook or sweep that goes on after a failed `fit`). At
the end it prints one JSON line: the final step, whether the checkpoint was
interrupted, by which signal, and the checkpoints on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import kerasteps  # noqa: E402
from kerasteps.callbacks import JSONLinesLogger, StepCheckpoint  # noqa: E402


class Slow(keras.callbacks.Callback):
    def __init__(self, seconds: float, fail_at: int | None):
        super().__init__()
        self.seconds = seconds
        self.fail_at = fail_at

    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            print("READY", flush=True)
        if self.fail_at is not None and batch + 1 == self.fail_at:
            raise RuntimeError("a bug in the user's callback")
        time.sleep(self.seconds)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--sleep", type=float, default=0.02)
    parser.add_argument("--fail-at", type=int, default=None)
    parser.add_argument("--after-fail", type=float, default=30.0)
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.random.default_rng(0).normal(size=(args.steps * 2, 2)).astype("float32")
    checkpoint = StepCheckpoint(os.path.join(args.workdir, "ckpt"), every=1000)
    callbacks = [
        checkpoint,
        JSONLinesLogger(os.path.join(args.workdir, "log.jsonl"), every=10),
        Slow(args.sleep, args.fail_at),
    ]
    try:
        model.fit(x, x[:, :1], batch_size=2, epochs=1, verbose=0, callbacks=callbacks)
    except RuntimeError as error:
        print("FAILED", error, flush=True)
        time.sleep(args.after_fail)
        return 3
    result = {
        "final": kerasteps.global_step(model),
        "interrupted": checkpoint.interrupted,
        "signal": checkpoint.signal_received,
        "checkpoints": [
            info.step for info in StepCheckpoint.list_checkpoints(checkpoint.directory)
        ],
    }
    print(json.dumps(result), flush=True)
    return 128 + checkpoint.signal_received if checkpoint.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
