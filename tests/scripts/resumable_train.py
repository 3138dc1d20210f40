"""A step-planned, resumable training run (tests/callbacks/test_step_checkpoint.py).

Run it again after a kill and it resumes from the newest checkpoint:

    python tests/scripts/resumable_train.py --workdir /tmp/run --max-steps 60

Public kerasteps API only. It prints one JSON line at the end:
`{"start": ..., "final": ..., "interrupted": ...}`.
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
import tensorflow as tf  # noqa: E402

import kerasteps  # noqa: E402
from kerasteps.callbacks import (  # noqa: E402
    JSONLinesLogger,
    MLflowLogger,
    StepCheckpoint,
    StepTensorBoard,
    StopAtStep,
    ValidateEvery,
)
from kerasteps.data import skip_consumed  # noqa: E402

BATCH_SIZE = 8
STEPS_PER_EPOCH = 20


def build_model() -> keras.Model:
    """The tiny model, the same in every run."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "mse", metrics=["mae"])
    return model


def make_data(seed: int = 0, n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0]], dtype="float32") + 0.5).astype("float32")
    return x, y


def make_dataset() -> tf.data.Dataset:
    """A repeatable stream of batches: repeat, then a seeded shuffle (a shuffle
    before the repeat resumes exactly on TensorFlow, not on JAX past the first pass:
    see `kerasteps.data.skip_consumed`)."""
    x, y = make_data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    return dataset.repeat().shuffle(len(x), seed=1).batch(BATCH_SIZE)


class SlowDown(keras.callbacks.Callback):
    """Sleeps after every batch, so a test can kill the run at a known step."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.seconds)


class HangAt(keras.callbacks.Callback):
    """Stops making progress at a global step (after the sinks acted there), so that
    a test can kill the run there."""

    def __init__(self, step: int):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if kerasteps.global_step(self.model) >= self.step:
            time.sleep(600)


def dump_state(model: keras.Model, path: str, step: int | None) -> None:
    """Saves the model's weights and optimizer variables as they are now."""
    arrays = {f"weight_{i}": v.numpy() for i, v in enumerate(model.weights)}
    for i, v in enumerate(model.optimizer.variables):
        arrays[f"optimizer_{i}"] = v.numpy()
    np.savez(path, step=-1 if step is None else step, **arrays)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--max-steps", type=int, default=60)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--validate-every", type=int, default=10)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--hang-at", type=int, help="hang at this global step")
    parser.add_argument("--dump-restored", help="npz file for the restored state")
    parser.add_argument("--dump-final", help="npz file for the final state")
    parser.add_argument("--mlflow", help="also log to this MLflow tracking URI")
    parser.add_argument("--mlflow-run-name", help="the MLflow run's name")
    parser.add_argument("--restore-from", help="restore this checkpoint directory")
    args = parser.parse_args(argv)

    checkpoints = os.path.join(args.workdir, "checkpoints")
    model = build_model()
    # 1. Restore BEFORE fit: the run then continues at the checkpoint's step.
    start = StepCheckpoint.restore_latest(model, args.restore_from or checkpoints)
    if args.dump_restored and start is not None:
        dump_state(model, args.dump_restored, start)

    stop = StopAtStep(args.max_steps)
    if stop.remaining(model) == 0:
        print(json.dumps({"start": start, "final": kerasteps.global_step(model)}))
        return 0

    # 2. Skip the batches the restored steps already trained on.
    dataset = skip_consumed(make_dataset(), start or 0)
    x_val, y_val = make_data(seed=1, n=32)
    checkpoint = StepCheckpoint(checkpoints, every=args.checkpoint_every, keep=3)
    callbacks = [
        checkpoint,
        StepTensorBoard(os.path.join(args.workdir, "tb"), every=args.log_every),
        JSONLinesLogger(os.path.join(args.workdir, "log.jsonl"), every=args.log_every),
        ValidateEvery(args.validate_every, (x_val, y_val)),
        stop,
    ]
    if args.mlflow:
        callbacks.append(
            MLflowLogger(
                every=args.log_every,
                tracking_uri=args.mlflow,
                experiment="resumable",
                run_name=args.mlflow_run_name,
                params={"max_steps": args.max_steps, "batch_size": BATCH_SIZE},
            )
        )
    if args.sleep > 0:
        callbacks.append(SlowDown(args.sleep))
    if args.hang_at:
        callbacks.append(HangAt(args.hang_at))
    model.fit(
        dataset,
        steps_per_epoch=STEPS_PER_EPOCH,
        epochs=10**6,
        shuffle=False,  # the dataset shuffles (seeded)
        verbose=0,
        callbacks=callbacks,
    )
    if args.dump_final:
        dump_state(model, args.dump_final, kerasteps.global_step(model))
    result = {
        "start": start,
        "final": kerasteps.global_step(model),
        "interrupted": checkpoint.interrupted,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
