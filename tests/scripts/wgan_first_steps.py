"""Trains a tiny WGAN for a few steps with fixed weights, data and noise.

Run under one Keras backend (`KERAS_BACKEND`); prints one JSON object with the
logs after every step and the counters. With the same arguments every backend
starts from the same weights, sees the same data and the same noise (drawn from
fixed tables instead of the backend's own random generator), so their losses
must agree up to float32 rounding.

    python wgan_first_steps.py [--save gp.keras] [--load other.keras]

WGAN-GP 3+1 steps, clipping 3 steps; `--save` writes the WGAN-GP after its third
step; `--load` also trains one step on from a saved model of any backend. The tests
import `run` to train under TensorFlow in their own process.
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasteps.models import WGAN  # noqa: E402

LATENT, BATCH = 3, 16


def noise_tables(n_critic: int) -> dict[str, list[np.ndarray]]:
    """The draws of one step: a latent batch per critic update and one for the
    generator update, a uniform batch per critic update (gradient penalty)."""
    rng = np.random.default_rng(7)
    return {
        "latent": [
            rng.standard_normal((BATCH, LATENT)).astype("float32")
            for _ in range(n_critic + 1)
        ],
        "uniform": [
            rng.uniform(size=(BATCH, 1)).astype("float32") for _ in range(n_critic)
        ],
    }


@keras.saving.register_keras_serializable(package="kerasteps_tests")
class TableNoiseWGAN(WGAN):
    """A WGAN whose k-th latent (or uniform) draw of a step is row k of a table."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._tables = noise_tables(self.n_critic)
        self._draws = {"latent": 0, "uniform": 0}

    def _next(self, kind: str) -> np.ndarray:
        table = self._tables[kind]
        value = table[self._draws[kind] % len(table)]
        self._draws[kind] += 1
        return value

    def _draw_latent(self, size):
        return keras.ops.convert_to_tensor(self._next("latent"))

    def _draw_uniform(self, size, dtype):
        return keras.ops.cast(keras.ops.convert_to_tensor(self._next("uniform")), dtype)


def build(n_critic: int, clip: bool) -> WGAN:
    def mlp(inputs, outputs):
        return keras.Sequential(
            [
                keras.Input((inputs,)),
                keras.layers.Dense(8, activation="tanh"),
                keras.layers.Dense(outputs),
            ]
        )

    kwargs = {"gradient_penalty": None, "clip_value": 0.05} if clip else {}
    gan = TableNoiseWGAN(
        mlp(LATENT, 2), mlp(2, 1), latent_dim=LATENT, n_critic=n_critic, **kwargs
    )
    rng = np.random.default_rng(3)
    for v in gan.trainable_variables:
        v.assign(rng.normal(scale=0.5, size=v.shape).astype("float32"))
    gan.compile()
    return gan


class Record(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append({k: float(v) for k, v in logs.items()})


def train(gan: WGAN, steps: int) -> dict:
    """Trains `steps` steps, one per epoch (so each log is that step's own value)."""
    x = np.random.default_rng(1).normal(size=(gan.n_critic * BATCH, 2))
    start = gan.step_counters()
    record = Record()
    gan.fit(
        x.astype("float32"),
        batch_size=gan.n_critic * BATCH,
        epochs=steps,
        shuffle=False,
        verbose=0,
        callbacks=[record],
    )
    return {
        "start": start,
        "steps": record.steps,
        "counters": gan.step_counters(),
        "iterations": {
            "d": int(keras.ops.convert_to_numpy(gan.d_optimizer.iterations)),
            "g": int(keras.ops.convert_to_numpy(gan.g_optimizer.iterations)),
        },
        "weights": [
            np.asarray(keras.ops.convert_to_numpy(v)).tolist()
            for v in gan.trainable_variables
        ],
    }


def run(save: str | None = None, load: str | None = None) -> dict:
    """WGAN-GP 3+1 steps (saved after the third to `save`), clipping 3 steps,
    and one step on from the file `load` (of any backend)."""
    out = {"backend": keras.backend.backend()}
    gan = build(2, clip=False)
    out["gp"] = train(gan, 3)
    if save:
        gan.save(save)
    out["gp4"] = train(gan, 1)  # the 4th step, as if never saved
    out["clip"] = train(build(3, clip=True), 3)
    if load:
        out["resumed"] = train(keras.saving.load_model(load), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", help="where to save the WGAN-GP after 3 steps")
    parser.add_argument("--load", help="also train one step on from this file")
    args = parser.parse_args()
    print(json.dumps(run(args.save, args.load)))


if __name__ == "__main__":
    main()
