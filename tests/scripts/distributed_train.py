"""Trains a tiny model with kerasteps callbacks on one device or under tf.distribute.

Used by tests/test_distribute.py in subprocesses, because logical devices must be set
up before TensorFlow starts.

    python distributed_train.py --mode single|mirrored|multiworker --out DIR
        [--model plain|wgan] [--steps 12]

`multiworker` reads TF_CONFIG. Writes DIR/result.json: the final step counters and
the per-step losses of the JSON lines (chief only) and the final weights' checksum.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

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
        setup_devices(2)
        return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    if mode == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise SystemExit(f"unknown --mode {mode!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="plain")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()

    strategy = make_strategy(args.mode)
    import keras

    from kerasteps.distribute import patch_keras_multi_worker

    patch_keras_multi_worker()  # Keras 3 fit() under MultiWorkerMirroredStrategy

    import kerasteps
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepTensorBoard,
        StopAtStep,
    )

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    with strategy.scope():
        if args.model == "plain":
            x = rng.normal(size=(GLOBAL_BATCH * args.steps, 4)).astype("float32")
            y = (x @ rng.normal(size=(4, 1))).astype("float32")
            data = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
            model = keras.Sequential(
                [
                    keras.Input((4,)),
                    keras.layers.Dense(8, activation="tanh"),
                    keras.layers.Dense(1),
                ]
            )
            model.compile(keras.optimizers.SGD(0.05), "mse")
        else:
            from kerasteps.models import WGAN, build_point_critic, build_point_generator

            n_critic = 2
            x = rng.normal(size=(GLOBAL_BATCH * n_critic * args.steps, 2)).astype(
                "float32"
            )
            data = WGAN.make_dataset(x, GLOBAL_BATCH, n_critic=n_critic, shuffle=False)
            model = WGAN(
                build_point_generator(4, widths=(16,)),
                build_point_critic(widths=(16,)),
                latent_dim=4,
                n_critic=n_critic,
            )
            model.compile()
    out = args.out
    task_index = (
        json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index")
    )
    if task_index is not None:
        out = os.path.join(out, f"worker{task_index}")
    callbacks = [
        LogEvery(3),
        StepTensorBoard(os.path.join(out, "tb"), every=3),
        JSONLinesLogger(os.path.join(out, "log.jsonl"), every=1),
        StepCheckpoint(os.path.join(out, "ckpt"), every=6),
        StopAtStep(args.steps),
    ]
    model.fit(data, epochs=1, verbose=0, shuffle=False, callbacks=callbacks)
    weights = [np.asarray(w) for w in model.weights]
    result = {
        "counters": kerasteps.step_counters(model),
        "checksum": float(sum(np.abs(w).sum() for w in weights)),
        "replicas": strategy.num_replicas_in_sync,
    }
    with open(os.path.join(out, "result.json"), "w") as handle:
        json.dump(result, handle)
    print("RESULT", json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
