"""kerasteps's checkpoint store beside Keras's `OrbaxCheckpoint` (orbax-checkpoint).

`keras.callbacks.OrbaxCheckpoint` (Keras 3.14+) needs orbax-checkpoint, which
kerasteps does not install:

    python -m pip install "orbax-checkpoint==0.12.8"

The figures in docs/benchmarks.md come from (JAX, orbax's own backend, and
TensorFlow):

    KERAS_BACKEND=jax python benchmarks/orbax_store.py
    KERAS_BACKEND=tensorflow python benchmarks/orbax_store.py

One model: an MLP of 256 inputs and 4 x 1024 units (3.4 M parameters; Adam, so
39 MiB of state with its slots), batch 64, saves every 25 steps keeping 2; each
saver in its default (background) mode and in its blocking one. Five measures:

1. **stall**: in `--rounds` interleaved rounds of `--steps` steps, the extra ms of
   the training thread at a saving step (the mean of the batch-end intervals that
   hold a save, minus the median interval of the same fit), and the fit's steps/s
   over the bare fit's of the same round (the median over the rounds);
2. **bytes** on disk of one checkpoint;
3. **kill -9 during a save**: a child process that saves every 2 steps is killed
   `--kills` times per saver, a seeded random time (0.5 to 3 s) after its first
   step; then: the newest checkpoint restored into a new model (the step, or the
   error), what the kill left beside the checkpoints, and whether a new run saves
   into the same folder;
4. **resume exactness**: 40 steps straight against 20, a restore into a new model
   in a new process and 20 more on the batches after the 20th: the largest
   difference of any variable (the optimizer's included); then a restore into a
   second model of the same process, whose variables Keras names `sequential_1/...`;
5. **the best checkpoint at step level**: validation every 10 steps on noisy data
   that the model overfits, 30 steps, a restart (a new callback, the newest
   checkpoint restored), 30 more; the steps on disk at the end beside the step of
   the best `val_loss`. kerasteps: `ValidateEvery(10)` and
   `StepCheckpoint(monitor="val_loss", keep_best=1)`. Orbax at step level
   (`save_freq=10, save_best_only=True`): Keras validates at epoch ends only, so
   epochs of 10 steps with `validation_data` and `save_freq="epoch"` (its batch
   level never sees a `val_loss`: counted, with its warnings).

Usage:

    python benchmarks/orbax_store.py [--rounds 5] [--steps 100] [--kills 5]
        [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

# A script beside this one (benchmarks/ is the first entry of sys.path).
from checkpoint_overhead import EVERY, Clock, stall_ms  # noqa: E402

from kerasteps.callbacks import StepCheckpoint, ValidateEvery  # noqa: E402

BATCH, INPUTS, WIDTH = 64, 256, 1024
SAVERS = ("kerasteps", "kerasteps_blocking", "orbax", "orbax_blocking")


def build_model(width: int = WIDTH) -> keras.Model:
    model = keras.Sequential(
        [keras.Input((INPUTS,))]
        + [keras.layers.Dense(width, activation="relu") for _ in range(4)]
        + [keras.layers.Dense(1)]
    )
    model.compile(keras.optimizers.Adam(1e-4), "mse")
    model.optimizer.build(model.trainable_variables)  # a restore needs its slots
    return model


def data(steps: int, seed: int = 0, noise: float = 0.0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(steps * BATCH, INPUTS)).astype("float32")
    w = np.random.default_rng(99).normal(size=(INPUTS, 1)) / INPUTS**0.5
    y = np.tanh(x @ w) + noise * rng.normal(size=(len(x), 1))
    return x, y.astype("float32")


def saver(name: str, folder: str, every: int = EVERY, keep: int = 2) -> list:
    if name.startswith("kerasteps"):
        blocking = name.endswith("blocking")
        return [StepCheckpoint(folder, every=every, keep=keep, async_save=not blocking)]
    return [
        keras.callbacks.OrbaxCheckpoint(
            folder,
            save_freq=every,
            max_to_keep=keep,
            save_on_background=not name.endswith("blocking"),
        )
    ]


def restore(name: str, model: keras.Model, folder: str) -> int:
    """Restores the newest checkpoint of `folder` into `model`; its step."""
    if name.startswith("kerasteps"):
        return StepCheckpoint.restore_latest(model, folder)
    from keras.src.saving.orbax_util import find_latest_orbax_checkpoint

    model.load_weights(folder)  # the newest step's folder
    return int(os.path.basename(find_latest_orbax_checkpoint(folder)))


def stall(args: argparse.Namespace, root: str) -> None:
    x, y = data(args.steps)
    model = build_model()
    model.fit(x[: 4 * BATCH], y[: 4 * BATCH], batch_size=BATCH, verbose=0)  # trace
    found: dict[str, list[tuple[float, float]]] = {n: [] for n in ("bare", *SAVERS)}
    sizes = {}
    for run in range(args.rounds):
        for name in random.Random(args.seed + run).sample(list(found), len(found)):
            folder = os.path.join(root, f"{name}-{run}")
            clock = Clock()
            callbacks = [clock] + ([] if name == "bare" else saver(name, folder))
            # kerasteps saves at global steps (they go on from fit to fit), Orbax
            # every 25 batches of each fit.
            first = int(model.optimizer.iterations) if "kerasteps" in name else 0
            start = time.perf_counter()
            model.fit(x, y, batch_size=BATCH, verbose=0, callbacks=callbacks)
            speed = args.steps / (time.perf_counter() - start)
            extra, _ = stall_ms(clock, first)
            found[name].append((extra, speed))
            if name != "bare":
                sizes[name] = one_checkpoint_bytes(folder)
    bare = [speed for _, speed in found.pop("bare")]
    print(f"1-2. {args.rounds} rounds of {args.steps} steps, a save every {EVERY}:")
    print(f"  {'saver':<20}{'stall ms':>9}{'x bare':>8}{'MiB on disk':>13}")
    for name, runs in found.items():
        ratio = statistics.median(s / b for (_, s), b in zip(runs, bare, strict=True))
        extra = statistics.median(e for e, _ in runs)
        mib = sizes[name] / 2**20
        print(f"  {name:<20}{extra:>9.1f}{ratio:>8.3f}{mib:>13.1f}")


def one_checkpoint_bytes(folder: str) -> int:
    """The bytes of the newest checkpoint in `folder`."""
    steps = [p for p in Path(folder).iterdir() if p.is_dir() and p.name[-1].isdigit()]
    newest = max(steps, key=lambda p: int(p.name.rsplit("-", 1)[-1]))
    return sum(f.stat().st_size for f in newest.rglob("*") if f.is_file())


def child(role: str, name: str, folder: str) -> None:
    """One process of measures 3-5 (`--child`): every restore happens in a fresh
    process, as a resume does (orbax restores by the variables' paths, which a
    second model in one process does not share: `sequential_1/...`). Prints
    `READY` after its first step and `RESULT <json>` at its end."""
    import json

    restored = None
    if role.startswith("best"):
        best(name, folder, part=int(role[-1]))
        return
    keras.utils.set_random_seed(0)
    model = build_model()
    if role in ("resume", "second"):
        restored = restore(name, model, folder)
    total, every = {"train": (400, 2), "resume": (None, 2)}.get(role, (20, 20))
    if role in ("straight", "second"):
        total = 40
    start = restored or 0
    total = total or start + 4
    x, y = data(total)

    class Ready(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                print("READY", flush=True)

    callbacks = [Ready()] + ([] if role == "straight" else saver(name, folder, every))
    rows = slice(start * BATCH, total * BATCH)
    model.fit(
        x[rows],
        y[rows],
        batch_size=BATCH,
        verbose=0,
        shuffle=False,
        callbacks=callbacks,
    )
    if role in ("straight", "second"):
        values = model.weights + model.optimizer.variables
        np.savez(f"{folder}-{role}.npz", *map(np.asarray, values))
    print("RESULT", json.dumps({"restored": restored}), flush=True)


def run_child(role: str, name: str, folder: str) -> dict:
    """Runs `child` to its end; its result, or `{"error": ...}`."""
    import json

    done = subprocess.run(
        [sys.executable, __file__, "--child", role, name, folder],
        capture_output=True,
        text=True,
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    last = done.stderr.strip().splitlines()[-1:] or ["no output"]
    return {"error": last[0][:160]}


def kills(args: argparse.Namespace, root: str) -> None:
    print(f"3. kill -9 during saves every 2 steps ({args.kills} kills per saver):")
    rng = random.Random(args.seed)
    for name in ("kerasteps", "orbax"):
        for kill in range(args.kills):
            folder = os.path.join(root, f"kill-{name}-{kill}")
            process = subprocess.Popen(
                [sys.executable, __file__, "--child", "train", name, folder],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert process.stdout.readline().strip() == "READY"
            time.sleep(rng.uniform(0.5, 3.0))
            process.send_signal(signal.SIGKILL)
            process.wait()
            left = leftovers(name, folder)
            resumed = run_child("resume", name, folder)
            outcome = (
                f"resumed from step {resumed['restored']}, 4 steps, saved"
                if "error" not in resumed
                else f"resume failed: {resumed['error']}"
            )
            print(f"  {name:<10} kill {kill}: left {left}; {outcome}")


def leftovers(name: str, folder: str) -> list[str]:
    """What lies in `folder` besides its complete checkpoints and their index."""
    names = sorted(p.name for p in Path(folder).iterdir())
    if name.startswith("kerasteps"):
        kept = {info.name for info in StepCheckpoint.list_checkpoints(folder)}
        kept |= {"checkpoint.json", ".kerasteps.lock"}
    else:
        kept = {n for n in names if n.isdigit()}
    return [n for n in names if n not in kept]


def exactness(root: str) -> None:
    print("4. 40 steps straight against 20, a resume in a new process, 20 more:")
    for name in ("kerasteps", "orbax"):
        folder = os.path.join(root, f"exact-{name}")
        for role in ("straight", "first", "second"):
            found = run_child(role, name, folder)
            if "error" in found:
                print(f"  {name:<10} {role}: {found['error']}")
                break
        else:
            a, b = (np.load(f"{folder}-{r}.npz") for r in ("straight", "second"))
            worst = max(float(np.max(np.abs(a[k] - b[k]))) for k in a.files)
            print(
                f"  {name:<10} resumed from step {found['restored']}: largest "
                f"difference {worst:.3g}"
            )
    print("   and into a second model of the same process (its variables auto-named")
    print("   sequential_1/...), 20 steps after the first:")
    x, y = data(20)
    for name in ("kerasteps", "orbax"):
        folder = os.path.join(root, f"same-{name}")
        first, second = build_model(), build_model()
        first.fit(x, y, batch_size=BATCH, verbose=0, callbacks=saver(name, folder, 20))
        try:
            step = restore(name, second, folder)
        except Exception as error:  # noqa: BLE001 - the outcome is the figure
            print(f"  {name:<10} refused: {type(error).__name__}: {error}"[:150])
            continue
        pairs = zip(first.weights, second.weights, strict=True)
        worst = max(float(np.max(np.abs(np.asarray(a) - b))) for a, b in pairs)
        count = int(second.optimizer.iterations)
        print(
            f"  {name:<10} restored step {step} without an error: largest "
            f"difference {worst:.3g}, optimizer.iterations {count}"
        )


def best(name: str, folder: str, part: int) -> None:
    """Half `part` of measure 5: 30 steps validated every 10 (the second resumed
    from the newest checkpoint of the first); prints `RESULT` with the val_loss of
    each validation, the steps of the checkpoints kept as best, and the warnings
    of a best saver that saw no val_loss. Orbax's run has two savers, as its
    callback keeps either the latest or the best: the newest epoch in
    `folder/latest` (resumed from) and the best in `folder/best`."""
    import json

    x, y = (np.tile(a, (15, 1)) for a in data(4, noise=2.0))  # overfit: 4 batches
    vx, vy = data(8, seed=7, noise=2.0)
    keras.utils.set_random_seed(0)
    model = build_model(width=256)
    model.optimizer.learning_rate = 1e-3
    latest = folder if name == "kerasteps" else os.path.join(folder, "latest")
    if part:
        restore(name, model, latest)
    rows = slice(part * 30 * BATCH, (part + 1) * 30 * BATCH)
    values = {}
    fit = dict(batch_size=BATCH, verbose=0, shuffle=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if name == "kerasteps":
            validate = ValidateEvery(10, (vx, vy), batch_size=BATCH)
            ckpt = StepCheckpoint(
                folder, every=10, keep=1, monitor="val_loss", keep_best=1
            )
            record = keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda batch, logs: values.update(
                    {validate.last_step: validate.last_values.get("val_loss")}
                )
            )
            callbacks = [validate, ckpt, record]
            model.fit(x[rows], y[rows], callbacks=callbacks, **fit)
            index = json.loads(Path(folder, "checkpoint.json").read_text())
            kept = [entry["step"] for entry in index["best"]["checkpoints"]]
        else:
            record = keras.callbacks.LambdaCallback(
                on_epoch_end=lambda epoch, logs: values.update(
                    {int(model.optimizer.iterations): logs["val_loss"]}
                )
            )
            freq = 10 if name == "orbax_batch_level" else "epoch"
            savers = [
                keras.callbacks.OrbaxCheckpoint(latest, max_to_keep=1),
                keras.callbacks.OrbaxCheckpoint(
                    os.path.join(folder, "best"),
                    monitor="val_loss",
                    save_best_only=True,
                    save_freq=freq,
                    max_to_keep=1,
                ),
            ]
            model.fit(
                x[rows],
                y[rows],
                epochs=3 * (part + 1),
                initial_epoch=3 * part,  # the saved steps are epochs
                steps_per_epoch=10,
                validation_data=(vx, vy),
                callbacks=[record, *savers],
                **fit,
            )
            best_dir = Path(folder, "best")
            found = best_dir.iterdir() if best_dir.is_dir() else []
            kept = sorted(10 * (int(p.name) + 1) for p in found if p.name.isdigit())
    values.pop(None, None)
    warned = sum("Can save best model only" in str(w.message) for w in caught)
    found = {"values": values, "kept": kept, "warned": warned}
    print("RESULT", json.dumps(found), flush=True)


def best_at_step_level(root: str) -> None:
    print("5. validation every 10 steps, 30 steps, a restart, 30 more:")
    for name in ("kerasteps", "orbax", "orbax_batch_level"):
        folder = os.path.join(root, f"best-{name}")
        values, warned, kept = {}, 0, []
        for part in (0, 1):
            found = run_child(f"best{part}", name, folder)
            if "error" in found:
                print(f"  {name}: part {part}: {found['error']}")
                break
            values.update({int(k): v for k, v in found["values"].items()})
            warned, kept = warned + found["warned"], found["kept"]
        top = min(values, key=values.get) if values else None
        print(
            f"  {name:<18} kept as best: steps {kept}; the best val_loss: step {top}; "
            f"warnings 'Can save best model only': {warned}"
        )
    listed = ", ".join(f"{k}: {v:.4f}" for k, v in sorted(values.items()))
    print(f"  val_loss by step: {listed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-stall", action="store_true", help="measures 3-5 only")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    import orbax.checkpoint

    print(
        f"Keras {keras.__version__} on {keras.backend.backend()}, orbax-checkpoint "
        f"{orbax.checkpoint.__version__}"
    )
    with tempfile.TemporaryDirectory() as root:
        if not args.skip_stall:
            stall(args, root)
        kills(args, root)
        exactness(root)
        best_at_step_level(root)


if __name__ == "__main__":
    main()
