"""What Keras's own callbacks do with steps, measured, and what kerasteps does instead.

Three cases, each on a tiny model (one Dense layer on 8 features, random data,
seed 0), each printing the facts it measured:

- `tensorboard`: `keras.callbacks.TensorBoard(update_freq=50)`, one instance over two
  `fit()` calls of 200 batches on one model, read back with TensorBoard's own
  event-file reader, then `kerasteps.callbacks.StepTensorBoard(every=50)` the same way;
- `checkpoint`: `keras.callbacks.ModelCheckpoint(monitor="val_loss",
  save_best_only=True, save_freq=5)` with `validation_data`: how often the "best"
  file is written (its mtime and bytes, checked after every batch) and what Keras
  warns;
- `earlystopping`: `keras.callbacks.BackupAndRestore` with `EarlyStopping(patience=3)`
  on a validation loss that worsens after the first epoch (flipped targets): training
  raises at an epoch start (as Keras's own tests interrupt it) and is resumed with the
  same model and callbacks; `EarlyStopping`'s `wait`/`best` before and after, and
  the epoch it stops at, against an uninterrupted run.

Usage:

    python benchmarks/keras_builtins.py [tensorboard|checkpoint|earlystopping]
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import tempfile
import warnings

import kerasteps

kerasteps.quiet_startup()  # TensorFlow's start-up lines, before `import keras`

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import (  # noqa: E402
    EventFileLoader,
)

from kerasteps.callbacks import StepTensorBoard  # noqa: E402


def setup(examples: int, flip_validation: bool = False):
    """A compiled Dense(1) model, data and `(x, y)` validation data, seed 0."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.05), "mse")
    w = np.linspace(-1, 1, 8, dtype="float32")[:, None]
    x = np.random.normal(size=(examples, 8)).astype("float32")
    xv = np.random.normal(size=(32, 8)).astype("float32")
    # Flipped targets: a validation loss that gets worse as training improves.
    return model, x, x @ w, (xv, (-1 if flip_validation else 1) * xv @ w)


def steps_of(run_dir: str, tag: str) -> list[int]:
    """The steps of `tag` in a run's event files, in write order (TensorBoard's
    reader; nothing purged or deduplicated)."""
    return [
        int(event.step)
        for path in sorted(glob.glob(os.path.join(run_dir, "*tfevents*")))
        for event in EventFileLoader(path).Load()
        for value in event.summary.value
        if value.tag == tag
    ]


def tensorboard() -> None:
    cases = [
        ("keras.callbacks.TensorBoard(update_freq=50)", "batch_loss",
         lambda log_dir: keras.callbacks.TensorBoard(log_dir, update_freq=50)),
        ("kerasteps StepTensorBoard(every=50)", "loss",
         lambda log_dir: StepTensorBoard(log_dir, every=50)),
    ]  # fmt: skip
    for name, tag, board in cases:
        model, x, y, _ = setup(200 * 8)
        log_dir = tempfile.mkdtemp()
        callback = board(log_dir)  # one callback for both fits
        for _ in range(2):
            model.fit(x, y, batch_size=8, verbose=0, callbacks=[callback])
        steps = steps_of(os.path.join(log_dir, "train"), tag)
        print(f"{name}, 2 fits x 200 batches, '{tag}' at steps {steps}")


class FileWrites(keras.callbacks.Callback):
    """Listed after a checkpoint callback: counts the batch and epoch ends after which
    `path` changed (mtime or bytes), and the batch/epoch ends whose logs hold
    `val_loss`."""

    def __init__(self, path: str):
        super().__init__()
        self.path, self.last, self.writes, self.with_val, self.validations = (
            path, None, 0, 0, 0,
        )  # fmt: skip

    def _check(self, logs) -> None:
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                mark = (os.stat(self.path).st_mtime_ns, hashlib.sha1(f.read()).digest())
            if mark != self.last:
                self.last, self.writes = mark, self.writes + 1
                self.with_val += "val_loss" in (logs or {})

    def on_train_batch_end(self, batch, logs=None) -> None:
        self._check(logs)

    def on_epoch_end(self, epoch, logs=None) -> None:
        self.validations += "val_loss" in (logs or {})
        self._check(logs)


def checkpoint() -> None:
    model, x, y, val = setup(20 * 8)
    path = os.path.join(tempfile.mkdtemp(), "best.keras")
    best = keras.callbacks.ModelCheckpoint(
        path, monitor="val_loss", save_best_only=True, save_freq=5
    )
    writes = FileWrites(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, batch_size=8, epochs=2, validation_data=val, verbose=0,
                  callbacks=[best, writes])  # fmt: skip
    said = [str(w.message) for w in caught if "save best" in str(w.message)]
    print(
        f"ModelCheckpoint(monitor='val_loss', save_best_only=True, save_freq=5), 2 "
        f"epochs x 20 batches: 'best' file written {writes.writes} times, "
        f"{writes.with_val} of them with val_loss known; val_loss computed "
        f"{writes.validations} times (epoch ends), never compared "
        f"(ModelCheckpoint.best is still {best.best})"
    )
    print(f"  Keras warned {len(said)} times: {sorted(set(said))}")


class Interrupt(keras.callbacks.Callback):
    """Raises at the start of `epoch` (0-based), after noting EarlyStopping's state."""

    def __init__(self, epoch: int, stopper: keras.callbacks.EarlyStopping):
        super().__init__()
        self.epoch, self.stopper, self.seen = epoch, stopper, []

    def on_epoch_begin(self, epoch, logs=None) -> None:
        self.seen.append((epoch, self.stopper.wait, self.stopper.best))
        if epoch == self.epoch:
            raise RuntimeError("Interrupted")


def earlystopping() -> None:
    patience, stop_at = 3, 3

    def run(interrupt: bool) -> list:
        model, x, y, val = setup(4 * 8, flip_validation=True)
        stopper = keras.callbacks.EarlyStopping("val_loss", patience=patience)
        backup = keras.callbacks.BackupAndRestore(tempfile.mkdtemp())
        probe = Interrupt(stop_at if interrupt else -1, stopper)
        fit = dict(x=x, y=y, batch_size=8, epochs=20, validation_data=val, verbose=0)
        try:
            model.fit(**fit, callbacks=[backup, stopper, probe])
        except RuntimeError:
            probe.epoch = -1  # the same model and callbacks, resumed
            model.fit(**fit, callbacks=[backup, stopper, probe])
        return probe.seen  # (epoch, wait, best) at each epoch start

    plain, seen = run(False)[-1][0] + 1, run(True)
    wait, best = seen[stop_at][1:]
    resumed = seen[stop_at + 1]  # the first epoch start after the resume
    print(
        f"EarlyStopping(monitor='val_loss', patience={patience}) with BackupAndRestore:"
        f" uninterrupted, stopped after {plain} epochs; interrupted before epoch "
        f"{stop_at + 1}, stopped after {seen[-1][0] + 1} epochs"
    )
    print(
        f"  before the interruption: wait={wait}, best={best:.4f}; after the resume "
        f"(at epoch {resumed[0] + 1}): wait={resumed[1]}, best={resumed[2]}"
    )


CASES = {f.__name__: f for f in (tensorboard, checkpoint, earlystopping)}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", nargs="?", choices=[*CASES, "all"], default="all")
    case = parser.parse_args().case
    print(f"Keras {keras.__version__}, backend {keras.backend.backend()}, "
          f"TensorFlow {tf.__version__}")  # fmt: skip
    for name in CASES if case == "all" else [case]:
        CASES[name]()
