"""Tests for kerasteps.callbacks.StopOnNonFinite: the non-finite loss guard."""

from __future__ import annotations

import logging
import math

import keras
import numpy as np
import pytest

import kerasteps
from kerasteps import Every
from kerasteps.callbacks import (
    JSONLinesLogger,
    StepCheckpoint,
    StopOnNonFinite,
)
from kerasteps.checkpoint.store import CheckpointStore
from tests.helpers import (
    NanAtStep,
    fit_on_tiny_data,
    read_jsonl,
)

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def _nan_model(nan_step=7):
    keras.utils.set_random_seed(0)
    model = NanAtStep(nan_step)
    model(np.zeros((1, 2), "float32"))
    model.compile(keras.optimizers.SGD(0.01))
    return model


class RecordWeights(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.by_step = {}

    def on_train_batch_end(self, batch, logs=None):
        step = kerasteps.global_step(self.model)
        self.by_step[step] = [w.numpy().copy() for w in self.model.weights]


def test_stop_on_non_finite_names_the_step_and_the_key(tmp_path, caplog):
    model = _nan_model(7)
    stop = StopOnNonFinite()
    path = tmp_path / "log.jsonl"
    with caplog.at_level(logging.ERROR, logger="kerasteps"):
        fit_on_tiny_data(model, 40, [stop, JSONLinesLogger(path, every=1)])
    assert kerasteps.global_step(model) == 7
    assert (stop.stopped_step, stop.stopped_key) == (7, "d_loss")
    assert (
        stop.message == "StopOnNonFinite: d_loss is nan at step 7; stopping training."
    )
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [stop.message]
    assert errors[0].name == "kerasteps"
    records = read_jsonl(path)  # the NaN step is still logged
    assert [r["step"] for r in records] == list(range(1, 8))
    assert records[-1]["d_loss"] == "nan" and math.isfinite(records[-1]["g_loss"])


def test_stop_on_non_finite_keys_and_every():
    only_g = StopOnNonFinite(keys=["g_loss"])
    model = _nan_model(7)
    fit_on_tiny_data(model, 40, [only_g])
    # g_loss is computed before the update, so it is NaN one step later.
    assert (only_g.stopped_step, only_g.stopped_key) == (8, "g_loss")

    every_3 = StopOnNonFinite(every=3)
    model = _nan_model(7)
    fit_on_tiny_data(model, 40, [every_3])
    assert (every_3.stopped_step, every_3.stopped_key) == (9, "d_loss")


def test_stop_on_non_finite_saves_the_last_finite_state(tmp_path):
    model = _nan_model(7)
    recorder = RecordWeights()
    checkpoint = StepCheckpoint(tmp_path, every=Every(7))  # scheduled at the NaN step
    stop = StopOnNonFinite(checkpoint=checkpoint)
    fit_on_tiny_data(model, 40, [recorder, stop, checkpoint])

    assert stop.stopped_step == 7
    assert not np.isfinite(model.dense.kernel.numpy()).all()  # the model is left as is
    assert stop.checkpoint_saved.step == 6
    # Step 7 (non-finite) was not saved by the scheduled StepCheckpoint.
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [6]
    fresh = _nan_model(7)
    assert StepCheckpoint.restore_latest(fresh, tmp_path) == 6
    for saved, restored in zip(recorder.by_step[6], fresh.weights, strict=True):
        assert np.isfinite(saved).all()
        np.testing.assert_array_equal(restored.numpy(), saved)


@pytest.mark.parametrize("given", ["directory", "store"])
def test_stop_on_non_finite_with_a_checkpoint_directory(tmp_path, given):
    model = _nan_model(4)
    directory = str(tmp_path / "nan")
    checkpoint = directory if given == "directory" else CheckpointStore(directory)
    stop = StopOnNonFinite(every=2, checkpoint=checkpoint)
    fit_on_tiny_data(model, 40, [stop])
    assert stop.stopped_step == 4
    assert stop.checkpoint_saved.step == 2
    assert StepCheckpoint.latest(tmp_path / "nan").step == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"every": 0}, ValueError, "`every`.*received 0"),
        ({"keys": "loss"}, TypeError, "`keys`.*'loss'"),
        ({"keys": []}, ValueError, r"`keys`.*\[\]"),
        ({"checkpoint": 5}, TypeError, "`checkpoint`.*5"),
    ],
)
def test_stop_on_non_finite_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        StopOnNonFinite(**kwargs)


def test_stop_on_non_finite_unwritable_checkpoint_directory(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(ValueError, match="`checkpoint` is not writable.*file/x"):
        StopOnNonFinite(checkpoint=str(a_file / "x"))
