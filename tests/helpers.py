"""Shared helpers of the tests: tiny models and data, readers of what was written,
the launcher, and the small event files of the launcher's tests.

Import them as `from tests.helpers import tiny_model, read_jsonl`; fixtures live in
`tests/conftest.py`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import socket
import time
import types
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import summary_pb2

from kerasteps.cli import main

#: The repository, the tests and the scripts the tests run in subprocesses.
ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SCRIPTS = TESTS / "scripts"
FIXTURE_RECIPES = TESTS / "fixtures" / "recipes"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition, processes=(), timeout: float = 300.0) -> None:
    """Polls `condition()` every 0.1 s until it holds; fails at once when one of
    `processes` (Popen, text mode) exits first, with the end of its output."""
    deadline = time.monotonic() + timeout
    while not condition():
        for process in processes:
            if process.poll() is not None:
                out, err = process.communicate()
                output = (out or "") + (err or "")
                pytest.fail(
                    f"exited with {process.returncode} first:\n{output[-3000:]}"
                )
        if time.monotonic() > deadline:
            pytest.fail(f"not so after {timeout} s")
        time.sleep(0.1)


def as_a_fresh_jax_fit_sees(dataset: tf.data.Dataset, count: int) -> list:
    """The first `count` elements that Keras's JAX `fit()` in a fresh process trains
    on, each flattened into one array: it draws one element from a first iterator
    (to build the metrics), then trains from a second one."""
    next(iter(dataset))
    return [
        np.concatenate([np.ravel(t) for t in tf.nest.flatten(element)])
        for element in dataset.take(count)
    ]


@functools.cache
def load_script(name: str, folder: Path = SCRIPTS) -> types.ModuleType:
    """A script of `tests/scripts` (or of `folder`) as a module, to run its functions
    in this process (where the process boundary is not what a test checks)."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Keras's PyTorch trainer runs one step per call (`steps_per_execution=1` only).

MAX_STEPS_PER_EXECUTION = 1 if keras.backend.backend() == "torch" else None


def needs_steps_per_execution(steps_per_execution: int) -> None:
    """Skips the calling test where the backend cannot run `steps_per_execution`."""
    if MAX_STEPS_PER_EXECUTION and steps_per_execution > MAX_STEPS_PER_EXECUTION:
        pytest.skip(
            f"steps_per_execution={steps_per_execution}: Keras's "
            f"{keras.backend.backend()} trainer runs one step per call"
        )


def tiny_model(seed: int = 0, steps_per_execution: int = 1, **compile_kwargs):
    """A compiled 2-in, 1-out dense model (deterministic for a seed)."""
    needs_steps_per_execution(steps_per_execution)
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(4, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    compile_kwargs.setdefault("optimizer", keras.optimizers.SGD(0.05))
    compile_kwargs.setdefault("loss", "mse")
    model.compile(steps_per_execution=steps_per_execution, **compile_kwargs)
    return model


def tiny_wgan(seed: int = 0, noise_seed: int = 5):
    """A compiled WGAN of 8-unit point networks, 2 critic steps per generator step."""
    from kerasteps.models import WGAN, build_point_critic, build_point_generator

    keras.utils.set_random_seed(seed)
    gan = WGAN(
        build_point_generator(2, widths=(8,)),
        build_point_critic(2, widths=(8,)),
        latent_dim=2,
        n_critic=2,
        seed=noise_seed,
    )
    gan.compile()
    return gan


class NanAtStep(keras.Model):
    """`d_loss` becomes NaN at global step `nan_step` (and the weights after it);
    `g_loss`, the error before the update, becomes NaN one step later.

    Backend-neutral: it changes only `compute_loss`, which every Keras trainer
    calls (statelessly on JAX), and counts its steps in a variable of its own.
    """

    def __init__(self, nan_step):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.nan_step = nan_step
        self.calls = self.add_weight(
            shape=(), initializer="zeros", trainable=False, name="calls"
        )
        self.d_tracker = keras.metrics.Mean(name="d_loss")
        self.g_tracker = keras.metrics.Mean(name="g_loss")

    def call(self, x):
        return self.dense(x)

    @property
    def metrics(self):
        return [self.d_tracker, self.g_tracker]

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        error = keras.ops.mean(keras.ops.square(y_pred - y))
        if not training:
            return error
        step = self.calls + 1.0
        self.calls.assign(step)
        d_loss = error * keras.ops.where(step >= self.nan_step, float("nan"), 1.0)
        self.d_tracker.update_state(d_loss)
        self.g_tracker.update_state(error)
        return d_loss


def tiny_data(n: int = 20, seed: int = 0):
    """`n` examples of a noisy linear target."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0]], dtype="float32") + 0.1).astype("float32")
    return x, y


def read_scalar_steps(log_dir: str, run: str, tag: str) -> list[int]:
    """Steps of one scalar tag, read back with TensorBoard's EventAccumulator."""
    return [step for step, _ in read_scalars(log_dir, run, tag)]


def read_scalars(log_dir: str, run: str, tag: str) -> list[tuple[int, float]]:
    accumulator = EventAccumulator(
        os.path.join(log_dir, run), size_guidance={"scalars": 0}
    )
    accumulator.Reload()
    if tag not in accumulator.Tags()["scalars"]:
        return []
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def user_environment(**extra: str) -> dict[str, str]:
    """This process's environment as a user's shell has it: without the
    `TF_CPP_MIN_LOG_LEVEL` this conftest sets and without `KERASTEPS_VERBOSE`."""
    dropped = ("TF_CPP_MIN_LOG_LEVEL", "KERASTEPS_VERBOSE")
    environment = {k: v for k, v in os.environ.items() if k not in dropped}
    environment.update(extra)
    return environment


def script_environment(**extra: str) -> dict[str, str]:
    """The environment of the tests' training scripts in subprocesses: this one's,
    with TensorFlow quiet, on the CPU, this checkout importable and unbuffered output
    (then `extra`). One for all of them, so that they share a zygote per worker
    (`tests/zygote.py`)."""
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}
    environment["CUDA_VISIBLE_DEVICES"] = ""
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    environment.update(extra)
    return environment


def read_jsonl(path: str) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def run_recipe(*args: str):
    """Runs `kerasteps run ARGS...` in this process; returns the click Result."""
    from click.testing import CliRunner

    from kerasteps.cli import main

    result = CliRunner().invoke(main, ["run", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def fit_steps(model, steps, callbacks=(), batch_size=2, epochs=1, seed=0):
    """Fits `model` for `steps` batches of `tiny_data` per epoch, in order."""
    x, y = tiny_data(steps * batch_size, seed=seed)
    model.fit(
        x,
        y,
        batch_size=batch_size,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        callbacks=list(callbacks),
    )


def fit_on_tiny_data(model, n, callbacks, batch_size=2, epochs=1, **kwargs):
    x, y = tiny_data(n)
    return model.fit(
        x,
        y,
        batch_size=batch_size,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        callbacks=callbacks,
        **kwargs,
    )


def dense_layers(model: keras.Model) -> list[keras.layers.Dense]:
    return [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]


def activation_name(layer: keras.layers.Layer) -> str:
    return keras.activations.serialize(layer.activation)


def assert_round_trip(model: keras.Model, inputs: np.ndarray, tmp_path) -> None:
    """Saves `model` to .keras, loads it back, and compares predictions."""
    path = tmp_path / f"{model.name}.keras"
    expected = model.predict(inputs, verbose=0)
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.name == model.name
    assert loaded.input_shape == model.input_shape
    assert loaded.output_shape == model.output_shape
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), expected, atol=1e-6)


# Scalars written by the `log_dir` fixture: run -> tag -> [(step, value)].

TRAIN_LOSS = [(10, 1.0), (20, 0.25), (30, 0.5)]

TRAIN_ACCURACY = [(10, 0.5), (20, 0.875), (30, 0.75)]

B_LOSS = [(5, 2.0), (15, 1.5)]

B_ACCURACY = [(5, 0.625), (15, 0.5)]

B_LEARNING_RATE = [(5, 0.125)]  # written as a TF1 `simple_value`


def write_scalars(run_dir: Path, tags: dict[str, list[tuple[int, float]]]) -> None:
    """Writes TF2 tensor scalars with tf.summary.scalar."""
    writer = tf.summary.create_file_writer(str(run_dir))
    with writer.as_default():
        for tag, points in tags.items():
            for step, value in points:
                tf.summary.scalar(tag, value, step=step)
    writer.close()


def write_simple_values(run_dir: Path, tag: str, points) -> None:
    """Writes TF1-style `simple_value` scalars."""
    writer = tf.summary.create_file_writer(str(run_dir))
    with writer.as_default():
        for step, value in points:
            proto = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
            )
            tf.summary.experimental.write_raw_pb(proto.SerializeToString(), step=step)
    writer.close()


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


class Witness(keras.callbacks.Callback):
    """Records (global step, epoch start step, Keras's batch logs) at every call."""

    def __init__(self):
        super().__init__()
        self.points: list[tuple[int, int, dict]] = []
        self._epoch_start = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = int(self.model.optimizer.iterations.numpy())

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        self.points.append((step, self._epoch_start, dict(logs)))

    def sums(self, key: str, square: bool = False) -> dict[int, float]:
        """Cumulative sum of the per-batch values of `key` at every recorded step."""
        out, closed, last = {0: 0.0}, 0.0, None
        for step, start, logs in self.points:
            if last is not None and start != last[1]:
                closed += last[2] * (last[0] - last[1])  # the epoch that ended
            value = logs[key] ** 2 if square else logs[key]
            out[step] = closed + value * (step - start)
            last = (step, start, value)
        return out

    def window(self, key: str, prev: int, step: int, square: bool = False) -> float:
        sums = self.sums(key, square)
        mean = (sums[step] - sums[prev]) / (step - prev)
        return math.sqrt(mean) if square else mean

    def logs_at(self, step: int) -> dict:
        return next(logs for s, _, logs in self.points if s == step)
