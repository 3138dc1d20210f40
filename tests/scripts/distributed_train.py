"""Trains tiny models with kerasteps callbacks on one device or under tf.distribute.

Used by tests/test_distribute.py in subprocesses, because logical devices must be set
up before TensorFlow starts.

    python distributed_train.py --mode single,mirrored|multiworker --out DIR
        [--model plain,wgan] [--steps 12] [--checkpoints DIR] [--hang-at STEP]
        [--decide]

Each model (comma-separated) is trained in each mode (comma-separated: `single`
and `mirrored` share a process) in turn, into DIR/<model>/<mode>; `multiworker`
reads TF_CONFIG and writes DIR/<model>/multiworker/worker<index>. Each run writes
result.json there: the final step counters and the number of replicas (and the
final weights in weights.npz); in `mirrored` mode also `restored`: the latest checkpoint
restored into a new model inside the strategy's scope and outside it (the step,
and whether every variable equals the trained model's), then trained on. With
`--checkpoints` every worker saves into and resumes from that one directory; with
`--hang-at` the run writes `hanging` and sleeps at that step, to be killed. With
`--decide` the plain model also validates every 3 steps, keeps its best checkpoint,
cuts its learning rate on a plateau and stops early (`decide_callbacks`); result.json
then holds the deciders' states (`decisions`).
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

GLOBAL_BATCH = 8


def setup_devices(count: int) -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
    )


def make_strategy(mode: str):
    if mode == "single":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    if mode == "mirrored":
        return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    if mode == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise SystemExit(f"unknown --mode {mode!r}")


def build(kind: str, steps: int):
    """The data and the compiled model (in the strategy's scope)."""
    import keras

    rng = np.random.default_rng(0)
    if kind == "plain":
        x = rng.normal(size=(GLOBAL_BATCH * steps, 4)).astype("float32")
        y = (x @ rng.normal(size=(4, 1))).astype("float32")
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(8, activation="tanh"),
                keras.layers.Dense(1),
            ]
        )
        # Momentum: slot variables, which a restore builds in the strategy's scope.
        model.compile(keras.optimizers.SGD(0.05, momentum=0.5), "mse")
        return data, model
    from kerasteps.models import WGAN, build_point_critic, build_point_generator

    n_critic = 2
    x = rng.normal(size=(GLOBAL_BATCH * n_critic * steps, 2)).astype("float32")
    data = WGAN.make_dataset(x, GLOBAL_BATCH, n_critic=n_critic, shuffle=False)
    model = WGAN(
        build_point_generator(4, widths=(16,)),
        build_point_critic(widths=(16,)),
        latent_dim=4,
        n_critic=n_critic,
    )
    model.compile()
    return data, model


def train(kind: str, strategy, out: str, args: argparse.Namespace) -> None:
    import keras

    import kerasteps
    from kerasteps import Every
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        MLflowLogger,
        StepCheckpoint,
        StepTensorBoard,
        StopAtStep,
    )
    from kerasteps.data import skip_consumed

    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    steps = args.steps
    with strategy.scope():
        data, model = build(kind, steps)
    checkpoints = args.checkpoints or os.path.join(out, "ckpt")
    start = StepCheckpoint.restore_latest(model, checkpoints) if args.checkpoints else 0
    decide = args.decide and kind == "plain"
    callbacks = [
        LogEvery(3),
        StepTensorBoard(os.path.join(out, "tb"), every=3),
        JSONLinesLogger(os.path.join(out, "log.jsonl"), every=1),
        # Deciding, it also saves the step where it stops, and ranks by val_loss.
        StepCheckpoint(checkpoints, every=Every(6, last=True), monitor="val_loss")
        if decide
        else StepCheckpoint(checkpoints, every=6),
        StopAtStep(steps),
    ]
    if args.mlflow:
        callbacks.append(MLflowLogger(3, tracking_uri=args.mlflow, experiment=kind))
    if decide:
        callbacks += decide_callbacks(steps)
    if args.hang_at:
        callbacks.append(Hang(args.hang_at, os.path.join(out, "hanging")))
    data = skip_consumed(data, start or 0)
    model.fit(data, epochs=1, verbose=0, shuffle=False, callbacks=callbacks)
    weights = [np.asarray(w) for w in model.weights]
    np.savez(os.path.join(out, "weights.npz"), *weights)
    result = {
        "counters": kerasteps.step_counters(model),
        "replicas": strategy.num_replicas_in_sync,
    }
    deciders = [c for c in callbacks if hasattr(c, "best_step")]
    if deciders:
        result["decisions"] = {type(c).__name__: c.state_dict() for c in deciders}
        result["learning_rate"] = float(model.optimizer.learning_rate.numpy())
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            result["refused"] = clock_refusals(model, data, out)
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        result["restored"] = restore_twice(kind, strategy, out, model, steps)
    with open(os.path.join(out, "result.json"), "w") as handle:
        json.dump(result, handle)
    print("RESULT", out, json.dumps(result))
    sys.stdout.flush()


def decide_callbacks(steps: int) -> list:
    """Validation every 3 steps on 4 global batches of held-out data, a cut of the
    learning rate after one validation without an improvement of 1e-3, and a stop
    after two: the cuts and the stop depend on the values every worker holds."""
    from kerasteps.callbacks import (
        StepEarlyStopping,
        StepReduceLROnPlateau,
        ValidateEvery,
    )

    rng = np.random.default_rng(1)
    x = rng.normal(size=(GLOBAL_BATCH * 4, 4)).astype("float32")
    y = rng.normal(size=(GLOBAL_BATCH * 4, 1)).astype("float32")
    held_out = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    return [
        ValidateEvery(3, held_out),
        StepReduceLROnPlateau(factor=0.5, patience=1, min_delta=1e-3),
        StepEarlyStopping(patience=2, min_delta=1e-3),
    ]


def clock_refusals(model, data, out: str) -> list[str]:
    """The messages of two fits refused before training because they would stop or
    save by each worker's own clock: `StopAtTime`, `StepCheckpoint(every_seconds=)`."""
    from kerasteps.callbacks import StepCheckpoint, StopAtTime

    refused = []
    for callback in (
        StopAtTime(3600),
        StepCheckpoint(os.path.join(out, "timed"), every_seconds=60),
    ):
        try:
            model.fit(data, epochs=1, verbose=0, callbacks=[callback])
        except ValueError as error:
            refused.append(str(error))
    return refused


class Hang(keras.callbacks.Callback):
    """Writes `marker` and sleeps at the end of `step`: a test kills the process
    there, while the steps after the last checkpoint are unsaved."""

    def __init__(self, step: int, marker: str):
        super().__init__()
        self.step, self.marker = step, marker

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == self.step:
            open(self.marker, "w").close()
            time.sleep(3600)


def restore_twice(kind: str, strategy, out: str, trained, steps: int) -> dict:
    """Restores the latest checkpoint into new models, inside `strategy.scope()`
    and outside it, as a resume does; each then trains one step more."""
    import kerasteps
    from kerasteps.callbacks import StepCheckpoint

    def values(model) -> list[np.ndarray]:  # a WGAN's optimizers build later
        slots = model.optimizer.variables if kind == "plain" else []
        return [np.asarray(v) for v in model.weights + slots]

    found = {}
    for where in ("inside", "outside"):
        with strategy.scope():
            data, model = build(kind, steps)
            if where == "inside":
                step = StepCheckpoint.restore_latest(model, os.path.join(out, "ckpt"))
        if where == "outside":
            step = StepCheckpoint.restore_latest(model, os.path.join(out, "ckpt"))
        same = all(
            np.array_equal(a, b)
            for a, b in zip(values(model), values(trained), strict=True)
        )
        model.fit(data.take(1), epochs=1, verbose=0)
        found[where] = {"step": step, "equal": same}
        found[where]["then"] = kerasteps.step_counters(model)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="plain")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--mlflow", help="also log to this MLflow tracking URI")
    parser.add_argument(
        "--checkpoints", help="one checkpoint directory for every worker, resumed"
    )
    parser.add_argument("--hang-at", type=int, help="hang at this step (to be killed)")
    parser.add_argument(
        "--decide", action="store_true", help="the plain model also decides"
    )
    args = parser.parse_args()

    modes = args.mode.split(",")
    if "mirrored" in modes:
        setup_devices(2)
    strategies = {mode: make_strategy(mode) for mode in modes}

    from kerasteps.distribute import patch_keras_multi_worker

    patch_keras_multi_worker()  # Keras 3 fit() under MultiWorkerMirroredStrategy
    task_index = (
        json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index")
    )
    for kind in args.model.split(","):
        for mode, strategy in strategies.items():
            out = os.path.join(args.out, kind, mode)
            if task_index is not None:
                out = os.path.join(out, f"worker{task_index}")
            os.makedirs(out, exist_ok=True)
            train(kind, strategy, out, args)


if __name__ == "__main__":
    main()
