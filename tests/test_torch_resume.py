"""Exact resume with an unseeded `Dropout`, and the generator states a checkpoint holds.

On PyTorch an unseeded `keras.layers.Dropout` draws from torch's global generator,
which no Keras variable holds: the checkpoint saves it under `rng/torch/...` keys
(issue 27). Backend-neutral: on TensorFlow and JAX the Dropout's `SeedGenerator` is
in the model, and the same tests hold with no generator state in the checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasteps
from kerasteps.callbacks import StepCheckpoint, StopAtStep
from kerasteps.checkpoint._format import read_state
from kerasteps.checkpoint.store import CheckpointStore
from kerasteps.data import skip_consumed
from tests.helpers import tiny_data

pytestmark = pytest.mark.neutral

BACKEND = keras.backend.backend()
TORCH_CPU = "rng/torch/cpu"
STEPS, SAVED_AT, BATCH = 10, 4, 2


def dropout_model() -> keras.Model:
    """A compiled dense model with an unseeded Dropout (no `seed=`), as
    keras-io's mnist_convnet has."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.SGD(0.05), "mse")
    return model


def fit(model: keras.Model, x: np.ndarray, y: np.ndarray, callbacks=()) -> None:
    model.fit(
        x, y, batch_size=BATCH, shuffle=False, verbose=0, callbacks=list(callbacks)
    )


def new_process_generators() -> None:
    """Moves every global generator (Python, NumPy, TF, torch) away from where
    the checkpointed run left it, as a new process would find them."""
    keras.utils.set_random_seed(12345)


def weights(model: keras.Model) -> list[np.ndarray]:
    return [np.array(keras.ops.convert_to_numpy(w)) for w in model.weights]


def saved_model(tmp_path: Path) -> tuple[keras.Model, CheckpointStore]:
    model = dropout_model()
    fit(model, *tiny_data(SAVED_AT * BATCH))
    return model, CheckpointStore(tmp_path / "ckpts")


def assert_same_weights(straight: keras.Model, resumed: keras.Model) -> None:
    for a, b, variable in zip(
        weights(straight), weights(resumed), straight.weights, strict=True
    ):
        assert np.array_equal(a, b), (variable.path, float(np.max(np.abs(a - b))))


def test_resume_with_an_unseeded_dropout_is_exact_to_the_bit(tmp_path):
    """10 steps straight == stopped at step 4, new model, restore, 6 steps."""
    x, y = tiny_data(STEPS * BATCH)
    straight = dropout_model()
    fit(straight, x, y)

    first = dropout_model()  # stopped mid-epoch, as a SIGTERM or a kill would
    fit(first, x, y, [StepCheckpoint(tmp_path, every=SAVED_AT), StopAtStep(SAVED_AT)])
    resumed = dropout_model()
    new_process_generators()
    assert StepCheckpoint.restore_latest(resumed, tmp_path) == SAVED_AT
    cut = SAVED_AT * BATCH  # the batches that skip_consumed would skip
    fit(resumed, x[cut:], y[cut:])

    assert kerasteps.global_step(resumed) == STEPS
    assert_same_weights(straight, resumed)


def test_resume_from_an_epoch_end_with_validation_is_exact_to_the_bit(tmp_path):
    """docs/long-runs.md's pattern: one iterator (`steps_per_epoch`), `skip_consumed`;
    checkpoints at epoch ends, after Keras's validation has drawn from torch's
    generator (its data loader seeds itself from it)."""
    x, y = tiny_data(40)

    def run(model, epochs, callbacks=()):
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).repeat()
        model.fit(
            skip_consumed(data, model),
            steps_per_epoch=5,
            epochs=epochs,
            validation_data=(x[:4], y[:4]),
            shuffle=False,
            verbose=0,
            callbacks=list(callbacks),
        )

    straight = dropout_model()
    run(straight, 4)
    first = dropout_model()
    run(first, 2, [StepCheckpoint(tmp_path, every=5)])
    resumed = dropout_model()
    new_process_generators()
    assert StepCheckpoint.restore_latest(resumed, tmp_path) == 10
    run(resumed, 2)

    assert kerasteps.global_step(resumed) == 20
    assert_same_weights(straight, resumed)


def test_the_checkpoint_lists_the_generator_states_it_holds(tmp_path):
    model, store = saved_model(tmp_path)
    info = store.save(model)

    meta = json.loads((Path(info.path) / "meta.json").read_text())
    keys = sorted(k for k in read_state(info.path) if k.startswith("rng/"))
    assert meta["generator_states"] == keys
    assert keys[:1] == ([TORCH_CPU] if BACKEND == "torch" else [])
    if BACKEND == "torch":
        import torch

        state = read_state(info.path)[TORCH_CPU]
        assert state.dtype == np.uint8
        assert np.array_equal(state, torch.get_rng_state().numpy())


def test_generator_states_do_not_break_a_restore_on_any_backend(tmp_path):
    """A PyTorch checkpoint's `rng/torch/...` arrays are outside the model's keys:
    TensorFlow and JAX restore it and leave them; PyTorch sets its generator."""
    model, store = saved_model(tmp_path)
    capture = store.capture(model)
    if BACKEND != "torch":  # as a PyTorch run on a GPU writes it
        capture.arrays[TORCH_CPU] = (np.arange(5056) % 256).astype("uint8")
        capture.arrays["rng/torch/cuda/0"] = np.arange(16, dtype="uint8")
        capture.meta["backend"] = "torch"
    saved_generators = {k: v.copy() for k, v in capture.arrays.items() if "rng/" in k}
    info = store.write(capture)
    expected = weights(model)
    fresh = dropout_model()
    new_process_generators()

    assert store.restore(fresh, info) == SAVED_AT

    for a, b in zip(expected, weights(fresh), strict=True):
        assert np.array_equal(a, b)
    if BACKEND == "torch":
        import torch

        assert np.array_equal(
            torch.get_rng_state().numpy(), saved_generators[TORCH_CPU]
        )


def test_a_damaged_torch_generator_state_is_refused_on_torch_only(tmp_path):
    model, store = saved_model(tmp_path)
    capture = store.capture(model)
    capture.arrays[TORCH_CPU] = np.zeros(3, "uint8")
    info = store.write(capture)
    fresh = dropout_model()
    before = weights(fresh)

    if BACKEND != "torch":
        assert store.restore(fresh, info) == SAVED_AT  # not theirs: ignored
        return
    with pytest.raises(ValueError, match="'rng/torch/cpu' is a uint8 array of sha"):
        store.restore(fresh, info)
    for a, b in zip(before, weights(fresh), strict=True):
        assert np.array_equal(a, b)  # the model is as it was
