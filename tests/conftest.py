"""Shared helpers for the tests: tiny models and readers of what was written."""

from __future__ import annotations

import json
import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)

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


def read_jsonl(path: str) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def pytest_collection_modifyitems(config, items):
    """Skips `tensorflow_only` tests on the other backends, saying why."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return
    for item in items:
        mark = item.get_closest_marker("tensorflow_only")
        if mark is not None:
            why = mark.args[0] if mark.args else "TensorFlow's own API"
            item.add_marker(
                pytest.mark.skip(reason=f"TensorFlow only ({why}); backend {backend}")
            )


@pytest.fixture(autouse=True)
def _clear_keras_session():
    yield
    keras.backend.clear_session()


@pytest.fixture
def bundled_recipes():
    """Undo the bundled recipes' logging setup after a test that runs them."""
    logger = logging.getLogger("kerasteps")
    level = logger.level
    yield
    logger.setLevel(level)


def run_recipe(*args: str):
    """Runs `kerasteps run ARGS...` in this process; returns the click Result."""
    from click.testing import CliRunner

    from kerasteps.cli import main

    result = CliRunner().invoke(main, ["run", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result
