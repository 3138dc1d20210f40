"""Trains under `keras.distribution.DataParallel` on JAX, with every kerasteps sink.

    python jax_data_parallel.py OUT                       # one process, 2 CPU devices
    python jax_data_parallel.py OUT --process I --port P  # process I of 2 (gloo)

Each process writes its sinks' files under `OUT/p<I>` (a sink that acts writes
there) and prints one JSON line with the global step and `is_chief()`.
"""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--process", type=int)
parser.add_argument("--port", type=int)
args = parser.parse_args()
os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
if args.process is None:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax  # noqa: E402

if args.process is not None:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{args.port}",
        num_processes=2,
        process_id=args.process,
    )

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kerasteps  # noqa: E402
from kerasteps.callbacks import (  # noqa: E402
    JSONLinesLogger,
    LogEvery,
    StepCheckpoint,
    StepTensorBoard,
)
from kerasteps.models import (  # noqa: E402
    WGAN,
    build_point_critic,
    build_point_generator,
)

# Each process feeds its own examples. Keras < 3.11 takes this only as the
# constructor's argument, and only a tf.data.Dataset under several processes.
distribution = keras.distribution.DataParallel(
    devices=jax.devices(), auto_shard_dataset=False
)
keras.distribution.set_distribution(distribution)
index = args.process or 0
out = os.path.join(args.out, f"p{index}")
keras.utils.set_random_seed(0)
rng = np.random.default_rng(index)
x = rng.normal(size=(80, 2)).astype("float32")

model = keras.Sequential(
    [keras.Input((2,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)]
)
model.compile(keras.optimizers.Adam(0.01), "mse")
model.fit(
    tf.data.Dataset.from_tensor_slices((x, 2 * x[:, :1])).batch(4),
    epochs=1,
    verbose=0,
    callbacks=[
        LogEvery(10),
        JSONLinesLogger(os.path.join(out, "log.jsonl"), every=5),
        StepTensorBoard(os.path.join(out, "tb"), every=5),
        StepCheckpoint(os.path.join(out, "ckpt"), every=10),
    ],
)
gan = WGAN(
    build_point_generator(2, widths=(8,)),
    build_point_critic(2, widths=(8,)),
    latent_dim=2,
    n_critic=2,
    seed=1,
)
gan.compile()
gan.fit(
    tf.data.Dataset.from_tensor_slices(x).batch(16),
    epochs=2,
    verbose=0,
    callbacks=[StepCheckpoint(os.path.join(out, "gan"), every=5)],
)
print(
    json.dumps(
        {
            "process": index,
            "devices": len(jax.devices()),
            "chief": kerasteps.distribute.is_chief(),
            "step": kerasteps.global_step(model),
            "gan": gan.step_counters(),
        }
    ),
    flush=True,
)
