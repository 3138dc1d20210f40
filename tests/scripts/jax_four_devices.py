"""One JAX process with 4 CPU devices, `keras.distribution.DataParallel`: trains to
step 30 with a JSON-lines sink, checkpoints every 10 steps and a per-batch witness
(Keras's batch logs), resuming from its checkpoints when they exist.

    python jax_four_devices.py OUT [--hang-at STEP]

With `--hang-at` it writes OUT/hanging and sleeps at that step, for a test to kill it.
Writes OUT/state.npz (the weights and optimizer variables) and prints one JSON line:
the devices, the step it started from and ended at, and the witness's
(step, running mean of the loss) pairs.
"""

import argparse
import json
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--hang-at", type=int)
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
print(json.dumps(result), flush=True)
