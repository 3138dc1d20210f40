"""A resumable run with async checkpoints, on any Keras backend (test fixture).

Run by tests/test_checkpoint_store.py in subprocesses, under `KERAS_BACKEND=...`:

    python tests/scripts/async_checkpoint_train.py --directory D --epochs 8 \
        --dump final.npz [--dump-restored start.npz] \
        [--slow-write-at 20 --slow-seconds 30]

Five steps per epoch, a checkpoint every five steps: a resumed run restores the
newest checkpoint and continues at its epoch, on the same data, so it ends with the
same state as an uninterrupted run. `--slow-write-at N` makes the background write
of the checkpoint of step N print `WRITING N` and sleep first (a test kills or
signals the process then). Exits 128 + the signal after a signal stopped it. The
tests also import `train` to run it in their own process.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasteps.callbacks import StepCheckpoint  # noqa: E402
from kerasteps.checkpoint import _model_state  # noqa: E402

STEPS_PER_EPOCH = 5
BATCH = 4


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dropout(0.3, seed=1),  # torch: unseeded is global RNG
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS_PER_EPOCH * BATCH, 3)).astype("float32")
    return x, (x.sum(axis=1, keepdims=True) ** 2).astype("float32")


def slow_write(step: int, seconds: float) -> None:
    original = _model_state.write_arrays

    def write(target, arrays):
        if f"ckpt-{step}-" in str(target):
            print(f"WRITING {step}", flush=True)
            time.sleep(seconds)
        original(target, arrays)

    _model_state.write_arrays = write


def train(
    directory: str, epochs: int, restored: str | None = None
) -> tuple[keras.Model, int, StepCheckpoint]:
    """Restores the newest checkpoint of `directory` (its state saved to the npz
    file `restored`, if given), trains on to `epochs` with a checkpoint every epoch;
    returns the model, the start step and the checkpoint callback."""
    model = build_model()
    start = StepCheckpoint.restore_latest(model, directory) or 0
    if restored:
        save(model, restored)
    checkpoint = StepCheckpoint(directory, every=STEPS_PER_EPOCH, keep=3)
    x, y = data()
    model.fit(
        x,
        y,
        batch_size=BATCH,
        shuffle=False,
        epochs=epochs,
        initial_epoch=start // STEPS_PER_EPOCH,
        verbose=0,
        callbacks=[checkpoint],
    )
    return model, start, checkpoint


def save(model: keras.Model, path: str) -> None:
    """Every state variable of the model, by structure key (`/` written `.`)."""
    state = _model_state.Snapshot().take(model)
    np.savez(path, **{key.replace("/", "."): v for key, v in state.items()})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--directory", required=True)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--dump", required=True)
    parser.add_argument("--dump-restored", help="npz file for the restored state")
    parser.add_argument("--slow-write-at", type=int, default=None)
    parser.add_argument("--slow-seconds", type=float, default=30.0)
    args = parser.parse_args()
    if args.slow_write_at is not None:
        slow_write(args.slow_write_at, args.slow_seconds)
    model, start, checkpoint = train(args.directory, args.epochs, args.dump_restored)
    print(f"START {start}", flush=True)
    save(model, args.dump)
    print(f"FINAL {int(keras.ops.convert_to_numpy(model.optimizer.iterations))}")
    sys.stdout.flush()
    if checkpoint.interrupted:
        return 128 + checkpoint.signal_received
    return 0


if __name__ == "__main__":
    sys.exit(main())
