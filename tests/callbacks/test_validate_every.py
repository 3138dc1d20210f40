"""Tests for kerasteps.callbacks.ValidateEvery: validation every N steps that leaves
training untouched."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasteps import Every
from kerasteps.callbacks import (
    JSONLinesLogger,
    LogEvery,
    StepTensorBoard,
    StopAtStep,
    ValidateEvery,
)
from tests.helpers import (
    fit_on_tiny_data,
    read_jsonl,
    read_scalars,
    tiny_data,
    tiny_model,
)

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


class RecordBatchLogs(keras.callbacks.Callback):
    """Keeps the training logs of every batch (forces synchronous callbacks)."""

    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append({k: float(v) for k, v in logs.items()})


def test_validate_every_leaves_training_losses_identical(tmp_path, caplog):
    x_val, y_val = tiny_data(10, seed=1)

    baseline = tiny_model(metrics=["mae"])
    plain = RecordBatchLogs()
    fit_on_tiny_data(baseline, 40, [plain], epochs=2)

    model = tiny_model(metrics=["mae"])
    recorded = RecordBatchLogs()
    path = tmp_path / "log.jsonl"
    validate = ValidateEvery(4, (x_val, y_val), batch_size=4)
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        fit_on_tiny_data(
            model,
            40,
            [
                JSONLinesLogger(path, every=1),
                StepTensorBoard(tmp_path / "tb", every=2),
                LogEvery(every=5),
                recorded,
                validate,  # listed last: still reaches every sink at its step
            ],
            epochs=2,
        )

    assert len(recorded.logs) == 40
    assert recorded.logs == plain.logs  # bit-identical loss and mae at every step
    for a, b in zip(baseline.weights, model.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    validated = list(range(4, 41, 4))
    records = read_jsonl(path)
    assert [r["step"] for r in records] == list(range(1, 41))
    assert [r["step"] for r in records if "val_loss" in r] == validated
    assert all("val_mae" in r for r in records if "val_loss" in r)
    assert [s for s, _ in read_scalars(str(tmp_path / "tb"), "validation", "loss")] == (
        validated
    )
    assert [s for s, _ in read_scalars(str(tmp_path / "tb"), "validation", "mae")] == (
        validated
    )
    lines = [r.getMessage() for r in caplog.records if "val_loss=" in r.getMessage()]
    assert [int(line.rsplit(" ", 1)[1]) for line in lines] == validated

    # The value is the model's validation loss at that step (here: the last one).
    expected = model.evaluate(x_val, y_val, batch_size=4, verbose=0, return_dict=True)
    assert records[-1]["val_loss"] == pytest.approx(expected["loss"], rel=1e-6)
    assert validate.last_step == 40
    assert validate.last_values["val_mae"] == pytest.approx(expected["mae"], rel=1e-6)


def test_plain_evaluate_in_a_callback_would_change_the_losses():
    """The control for the test above: Keras's evaluate() corrupts training logs."""
    x_val, y_val = tiny_data(10, seed=1)

    class NaiveValidate(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if (batch + 1) % 4 == 0:
                self.model.evaluate(x_val, y_val, verbose=0)

    plain, naive = RecordBatchLogs(), RecordBatchLogs()
    fit_on_tiny_data(tiny_model(metrics=["mae"]), 40, [plain])
    fit_on_tiny_data(tiny_model(metrics=["mae"]), 40, [naive, NaiveValidate()])
    assert plain.logs[:4] == naive.logs[:4]
    assert plain.logs[4]["loss"] != naive.logs[4]["loss"]


def test_keras_validation_and_validate_every_share_no_step(tmp_path, caplog):
    """One value per tag and step; a WARNING says the `val_` series mix two sources."""
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model()
    x_val, y_val = tiny_data(10, seed=1)
    x_other, y_other = tiny_data(12, seed=2)
    validate = ValidateEvery(5, validation_data=(x_val, y_val))
    tb, jsonl = str(tmp_path / "tb"), str(tmp_path / "log.jsonl")
    fit_on_tiny_data(
        model,
        20,
        [
            validate,
            StepTensorBoard(tb, every=5),
            JSONLinesLogger(jsonl, every=5),
            StopAtStep(15),
        ],
        epochs=3,
        validation_data=(x_other, y_other),
    )
    # Keras validated at 10 (epoch end) and 15 (the stop); ValidateEvery at 5, 10, 15.
    points = read_scalars(tb, "validation", "loss")
    assert [s for s, _ in points] == [5, 10, 15]
    records = {r["step"]: r for r in read_jsonl(jsonl)}
    assert points[-1][1] == pytest.approx(records[15]["val_loss"], rel=1e-6)
    assert records[15]["val_loss"] == pytest.approx(
        validate.last_values["val_loss"], rel=1e-6
    )  # ValidateEvery's value won the shared step
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "logs val_loss at epoch ends, and ValidateEvery logs the same keys" in (
        warnings[0].getMessage()
    )


def test_validate_every_prefix_keeps_the_series_apart(tmp_path, caplog):
    model = tiny_model()
    x_val, y_val = tiny_data(10, seed=1)
    validate = ValidateEvery(5, (x_val, y_val), prefix="val_holdout_")
    tb, jsonl = str(tmp_path / "tb"), str(tmp_path / "log.jsonl")
    fit_on_tiny_data(
        model,
        20,
        [validate, StepTensorBoard(tb, every=5), JSONLinesLogger(jsonl, every=5)],
        epochs=2,
        validation_data=tiny_data(12, seed=2),
    )
    assert [s for s, _ in read_scalars(tb, "validation", "holdout_loss")] == [
        5,
        10,
        15,
        20,
    ]
    assert [s for s, _ in read_scalars(tb, "validation", "loss")] == [10, 20]
    records = read_jsonl(jsonl)
    assert [r["step"] for r in records if "val_holdout_loss" in r] == [5, 10, 15, 20]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    with pytest.raises(ValueError, match="`prefix` must be a non-empty str"):
        ValidateEvery(5, (x_val, y_val), prefix="")


def test_validate_every_has_no_values_before_its_first_validation():
    validate = ValidateEvery(5, tiny_data(4, seed=2))
    assert validate.last_values == {}
    assert validate.last_step is None


def test_validate_every_accepts_datasets_and_sample_weights(tmp_path):
    x_val, y_val = tiny_data(12, seed=2)
    weights = np.linspace(0.5, 1.5, 12).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(5)
    infinite = dataset.repeat()
    model = tiny_model()
    callbacks = [
        ValidateEvery(Every(5), dataset),
        ValidateEvery(10, infinite, steps=2),
        ValidateEvery(10, (x_val, y_val, weights)),
    ]
    fit_on_tiny_data(model, 20, callbacks)
    assert [cb.last_step for cb in callbacks] == [10, 10, 10]
    loss = model.evaluate(dataset, verbose=0)
    assert callbacks[0].last_values["val_loss"] == pytest.approx(loss, rel=1e-6)
    two_batches = model.evaluate(infinite, steps=2, verbose=0)
    assert callbacks[1].last_values["val_loss"] == pytest.approx(two_batches, rel=1e-6)
    weighted = model.evaluate(x_val, y_val, sample_weight=weights, verbose=0)
    assert callbacks[2].last_values["val_loss"] == pytest.approx(weighted, rel=1e-6)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"x": np.ones((4, 2))}, "validation_data.*dict"),
        (np.ones((4, 2)), "validation_data.*ndarray"),
        ((np.ones((4, 2)),), "validation_data.*tuple of 1"),
        ((np.ones((4, 2)),) * 4, "validation_data.*tuple of 4"),
        ((np.ones((4, 2)), None), "both `x` and `y`"),
        ((np.ones((4, 2)), np.ones((5, 1))), r"same number.*'x': 4, 'y': 5"),
        ((np.ones((4, 2)), np.ones((4, 1)), np.ones(3)), "'sample_weight': 3"),
        ((np.ones((0, 2)), np.ones((0, 1))), "no examples"),
        (tf.data.Dataset.from_tensors((1, 2, 3, 4)), "dataset of 4-tuples"),
        (tf.data.Dataset.from_tensors((1, 2)).repeat(), "infinite.*steps=None"),
    ],
)
def test_validate_every_rejects_bad_validation_data(data, match):
    with pytest.raises(ValueError, match=match):
        ValidateEvery(5, data)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"every": 0}, ValueError, "`every`.*received 0"),
        ({"every": -2}, ValueError, "`every`.*received -2"),
        ({"every": 2.5}, TypeError, "`every`.*2.5"),
        ({"every": 5, "steps": 0}, ValueError, "`steps`.*received 0"),
        ({"every": 5, "batch_size": 0}, ValueError, "`batch_size`.*received 0"),
    ],
)
def test_validate_every_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        ValidateEvery(validation_data=tiny_data(4), **kwargs)
