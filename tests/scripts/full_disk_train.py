"""A run with async checkpoints whose disk fills up part way (test fixture).

Run by tests/test_nothing_lost.py in a subprocess, and by hand many times over to
catch a crash that happens in some runs only:

    python tests/scripts/full_disk_train.py --directory D [--full-at 12]
        [--how rlimit|fill]

A checkpoint every 5 steps, 20 steps. At step `--full-at`, after the save in flight
committed, the disk becomes full, with a real error of the kernel:

- `--how rlimit` (the default, works anywhere): the file size limit of the process
  (`RLIMIT_FSIZE`) drops below the size of `state.h5`, with SIGXFSZ ignored, so the
  write gets `EFBIG` ("File too large") from the kernel;
- `--how fill`: a ballast file next to `D` fills the file system that holds it (a
  small tmpfs) so that the next `state.h5` does not fit (`ENOSPC`).

The next save fails on the writer thread and `fit()` raises its error. The script
then collects garbage (where a crash would show), prints `DISK ERROR <type> <errno>
<message>` and the steps of the checkpoints committed (`COMMITTED 5 10`), restores
each of them into a new model (`RESTORED 5`, ...), and exits 3: the documented exit
of this script for a disk error. Any other exit is a failure (139: SIGSEGV).
`--then-resume` then makes room and resumes from the newest checkpoint in the same
process (`RESUMED 10 SAVED 15 20`), before that exit.
It exits 0 when no error came (the disk never filled).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasteps.callbacks import StepCheckpoint  # noqa: E402

STEPS = 20
EVERY = 5
DISK_ERROR_EXIT = 3


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    return model


class FillTheDisk(keras.callbacks.Callback):
    """At a step, waits for the save in flight, then makes the disk full."""

    def __init__(self, checkpoint: StepCheckpoint, step: int, how: str):
        super().__init__()
        self.checkpoint = checkpoint
        self.step = step
        self.how = how
        self.ballast = os.path.join(
            os.path.dirname(os.path.abspath(checkpoint.directory)), "ballast"
        )
        self.limit = resource.getrlimit(resource.RLIMIT_FSIZE)

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 != self.step:
            return
        self.checkpoint.store.writer.wait()  # the save before it committed
        state = self.checkpoint.last_saved.state_file
        size = os.path.getsize(state)
        if self.how == "rlimit":
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, self.limit[1]))
        else:
            with open(self.ballast, "wb") as handle:
                free = os.statvfs(self.ballast)
                left = free.f_bavail * free.f_frsize - size // 2
                handle.write(b"\0" * max(0, left))
        print(f"FULL {self.step}", flush=True)

    def free_space(self) -> None:
        """Makes room again (the limit back, the ballast removed)."""
        resource.setrlimit(resource.RLIMIT_FSIZE, self.limit)
        if os.path.exists(self.ballast):
            os.remove(self.ballast)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--directory", required=True)
    parser.add_argument("--full-at", type=int, default=12)
    parser.add_argument("--how", choices=("rlimit", "fill"), default="rlimit")
    parser.add_argument(
        "--then-resume",
        action="store_true",
        help="after the error, make room and resume in this process",
    )
    args = parser.parse_args()
    model = build_model()
    checkpoint = StepCheckpoint(args.directory, every=EVERY, keep=2)
    disk = FillTheDisk(checkpoint, args.full_at, args.how)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * 4, 16)).astype("float32")
    try:
        model.fit(
            x,
            x[:, :1],
            batch_size=4,
            shuffle=False,
            verbose=0,
            callbacks=[checkpoint, disk],
        )
    except Exception as error:  # noqa: BLE001 - the test reads what it was
        gc.collect()
        kind = type(error).__name__
        print(f"DISK ERROR {kind} {getattr(error, 'errno', None)} {error}", flush=True)
    else:
        return 0
    infos = StepCheckpoint.list_checkpoints(args.directory)
    print(f"COMMITTED {' '.join(str(i.step) for i in infos)}", flush=True)
    for info in infos:  # in this process, where the failed write happened
        step = StepCheckpoint.restore_checkpoint(build_model(), info)
        print(f"RESTORED {step}", flush=True)
    if args.then_resume:
        disk.free_space()
        model = build_model()
        start = StepCheckpoint.restore_latest(model, args.directory)
        resumed = StepCheckpoint(args.directory, every=EVERY, keep=2)
        model.fit(
            x[start * 4 :],
            x[start * 4 :, :1],
            batch_size=4,
            verbose=0,
            shuffle=False,
            callbacks=[resumed],
        )
        gc.collect()
        steps = [i.step for i in StepCheckpoint.list_checkpoints(args.directory)]
        print(f"RESUMED {start} SAVED {' '.join(map(str, steps))}", flush=True)
    return DISK_ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
