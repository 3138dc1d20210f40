"""Trains a tiny model with StepProgressBar and LogEvery, for the terminal tests.

    python tests/scripts/progress_terminal.py [--basic-config] [--thread]
        [--steps N] [--every N]

Run with stdout and stderr on a terminal (the tests give it a pseudo-terminal).
Without options the log lines go through `LogEvery`'s own handler; with
`--basic-config`, through the root handler of `logging.basicConfig()`. `--thread`
also logs WARNING lines from another thread while training.

Prints `STATE {...}` before and after training: for each handler of the root and
the `kerasteps` loggers, whether its stream is the original `sys.stderr`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasteps.callbacks import LogEvery, StepProgressBar  # noqa: E402

log = logging.getLogger("kerasteps")


def state(when: str) -> None:
    handlers = logging.getLogger().handlers + log.handlers
    streams = {
        "when": when,
        "handlers": len(handlers),
        "original": [handler.stream is sys.stderr for handler in handlers],
    }
    print("STATE", json.dumps(streams), flush=True)


def chatter(done: threading.Event) -> None:
    count = 0
    while not done.is_set():
        count += 1
        logging.getLogger("kerasteps.writer").warning("from a thread %d", count)
        time.sleep(0.003)


def fit(model, steps: int, every: int) -> None:
    x = np.random.default_rng(0).normal(size=(steps * 2, 2)).astype("float32")
    bar = StepProgressBar(total_steps=steps, interval=0)
    model.fit(
        x,
        x[:, :1],
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[LogEvery(every=every), bar],
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--basic-config", action="store_true")
    parser.add_argument("--thread", action="store_true")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5)
    args = parser.parse_args()
    if args.basic_config:
        logging.basicConfig(level=logging.INFO)

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    state("before")
    done = threading.Event()
    thread = threading.Thread(target=chatter, args=(done,), daemon=True)
    if args.thread:
        thread.start()
    try:
        fit(model, args.steps, args.every)
    finally:
        done.set()
        if args.thread:
            thread.join()  # its last line before the state's, not inside it
    state("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
