"""One JAX process with 4 CPU devices, `keras.distribution.DataParallel`: trains to
step 30 with a JSON-lines sink, checkpoints every 10 steps and a per-batch witness
(Keras's batch logs), resuming from its checkpoints when they exist.

    python jax_four_devices.py OUT [--hang-at STEP] [--model-parallel]

With `--hang-at` it writes OUT/hanging and sleeps at that step, for a test to kill it.
Writes OUT/state.npz (the weights and optimizer variables) and prints one JSON line:
the devices, the step it started from and ended at, and the witness's
(step, running mean of the loss) pairs. With `--model-parallel` it then trains a
model under `ModelParallel` (a `LayoutMap` over a 2 x 2 mesh), restores its
checkpoint into a new one, and adds what the restore kept: the sharding of every
weight and optimizer variable, and their values.
"""

import argparse
import json
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--hang-at", type=int)
parser.add_argument("--model-parallel", action="store_true")
args = parser.parse_args()
os.environ["KERAS_BACKEND"] = "jax"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kerasteps  # noqa: E402
from kerasteps.callbacks import JSONLinesLogger, StepCheckpoint, StopAtStep  # noqa: E402
from kerasteps.data import skip_consumed  # noqa: E402


class Witness(keras.callbacks.Callback):
    """Keras's batch logs at every step: the loss's running mean since the fit
    began; with `hang_at`, writes the marker and sleeps at that step."""

    def __init__(self, hang_at: int | None, marker: str):
        super().__init__()
        self.hang_at, self.marker, self.points = hang_at, marker, []

    def on_train_batch_end(self, batch, logs=None):
        step = kerasteps.global_step(self.model)
        self.points.append((step, float(logs["loss"])))
        if step == self.hang_at:
            open(self.marker, "w").close()
            time.sleep(3600)


keras.distribution.set_distribution(
    keras.distribution.DataParallel(devices=jax.devices())
)
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(8 * 40, 4)).astype("float32")
y = (x @ rng.normal(size=(4, 1))).astype("float32")
model = keras.Sequential(
    [
        keras.Input((4,)),
        keras.layers.Dense(16, activation="tanh"),
        keras.layers.Dense(1),
    ]
)
model.compile(keras.optimizers.Adam(0.01), "mse")
checkpoints = os.path.join(args.out, "ck")
start = StepCheckpoint.restore_latest(model, checkpoints) or 0
witness = Witness(args.hang_at, os.path.join(args.out, "hanging"))
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)  # 2 examples per device
model.fit(
    skip_consumed(data, start),
    epochs=1,
    verbose=0,
    callbacks=[
        JSONLinesLogger(os.path.join(args.out, "log.jsonl"), every=5),
        StepCheckpoint(checkpoints, every=10),
        StopAtStep(30),
        witness,
    ],
)
state = [np.asarray(v) for v in model.weights + model.optimizer.variables]
np.savez(os.path.join(args.out, "state.npz"), *state)
result = {
    "devices": len(jax.devices()),
    "start": start,
    "step": kerasteps.global_step(model),
    "witness": witness.points,
}


def model_parallel() -> dict:
    """Trains under `ModelParallel`, restores into a new model: what it kept."""
    mesh = keras.distribution.DeviceMesh((2, 2), ["batch", "model"], jax.devices())
    layout = keras.distribution.LayoutMap(mesh)
    layout[".*dense_a.*kernel"] = (None, "model")
    layout[".*dense_a.*bias"] = ("model",)
    layout[".*dense_b.*kernel"] = ("model", None)
    keras.distribution.set_distribution(
        keras.distribution.ModelParallel(layout_map=layout, batch_dim_name="batch")
    )

    def build() -> keras.Model:
        keras.utils.set_random_seed(1)
        net = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(16, activation="tanh", name="dense_a"),
                keras.layers.Dense(2, name="dense_b"),
            ]
        )
        net.compile(keras.optimizers.Adam(0.01), "mse")
        return net

    def state(net: keras.Model) -> list:
        return net.weights + net.optimizer.variables

    folder = os.path.join(args.out, "model_parallel")
    trained = build()
    trained.fit(
        x,
        y[:, :1].repeat(2, 1),
        batch_size=8,
        epochs=1,
        verbose=0,
        callbacks=[StepCheckpoint(folder, every=4)],
    )
    restored = build()
    step = StepCheckpoint.restore_latest(restored, folder)
    specs = [
        [str(v.value.sharding.spec) for v in state(n)] for n in (trained, restored)
    ]
    return {
        "step": step,
        "sharded": sum("model" in spec for spec in specs[0]),
        "variables": len(specs[0]),
        "same_sharding": specs[0] == specs[1],
        "same_values": all(
            np.array_equal(np.asarray(a), np.asarray(b))
            for a, b in zip(state(trained), state(restored), strict=True)
        ),
    }


if args.model_parallel:
    result["model_parallel"] = model_parallel()
print(json.dumps(result), flush=True)
