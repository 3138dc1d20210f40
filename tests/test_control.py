"""Tests for the step-control callbacks: ValidateEvery, StopAtStep, StopOnNonFinite,
Throughput, StepProgressBar, and kerasteps.data.skip_consumed."""

from __future__ import annotations

import logging
import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import NanAtStep, read_jsonl, read_scalars, tiny_data, tiny_model

import kerasteps
from kerasteps import Every
from kerasteps.callbacks import (
    JSONLinesLogger,
    LogEvery,
    StepCheckpoint,
    StepProgressBar,
    StepTensorBoard,
    StopAtStep,
    StopOnNonFinite,
    Throughput,
    ValidateEvery,
)
from kerasteps.checkpoint_store import CheckpointStore
from kerasteps.data import skip_consumed

pytestmark = pytest.mark.neutral


class RecordBatchLogs(keras.callbacks.Callback):
    """Keeps the training logs of every batch (forces synchronous callbacks)."""

    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append({k: float(v) for k, v in logs.items()})


def _fit(model, n, callbacks, batch_size=2, epochs=1, **kwargs):
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


# -- ValidateEvery ---------
def test_validate_every_leaves_training_losses_identical(tmp_path, caplog):
    x_val, y_val = tiny_data(10, seed=1)

    baseline = tiny_model(metrics=["mae"])
    plain = RecordBatchLogs()
    _fit(baseline, 40, [plain], epochs=2)

    model = tiny_model(metrics=["mae"])
    recorded = RecordBatchLogs()
    path = tmp_path / "log.jsonl"
    validate = ValidateEvery(4, (x_val, y_val), batch_size=4)
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        _fit(
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
    _fit(tiny_model(metrics=["mae"]), 40, [plain])
    _fit(tiny_model(metrics=["mae"]), 40, [naive, NaiveValidate()])
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
    _fit(
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
    _fit(
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
    _fit(model, 20, callbacks)
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


# -- StopAtStep ---------
def test_stop_at_step_ends_at_max_steps_and_after_a_resume(tmp_path):
    model = tiny_model()
    stop = StopAtStep(30)
    _fit(model, 20, [stop, StepCheckpoint(tmp_path, every=10)], epochs=100)
    assert kerasteps.global_step(model) == 30
    assert stop.stopped_step == 30 and stop.remaining(model) == 0

    resumed = tiny_model(seed=4)
    StepCheckpoint.restore_latest(resumed, tmp_path)
    later = StopAtStep(45)
    assert later.remaining(resumed) == 15
    _fit(resumed, 20, [later], epochs=100)
    assert kerasteps.global_step(resumed) == 45 and later.remaining(resumed) == 0


def test_stop_at_step_with_steps_per_execution_stops_at_the_next_boundary(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model(steps_per_execution=4)
    stop = StopAtStep(30)
    _fit(model, 40, [stop], epochs=10)
    assert kerasteps.global_step(model) == stop.stopped_step == 32
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "StopAtStep(max_steps=30): with steps_per_execution=4 the step moves 4 at a "
        "time from 0, so training stops at step 32, the first execution boundary "
        "past 30 (an epoch end can move the boundaries)." in messages
    )
    assert (
        "StopAtStep: reached global step 32 (max_steps=30, 2 past it: "
        "steps_per_execution=4); stopping training." in messages
    )
    caplog.clear()
    exact = tiny_model(steps_per_execution=4)
    _fit(exact, 40, [StopAtStep(28)], epochs=10)
    assert kerasteps.global_step(exact) == 28
    assert [r.getMessage() for r in caplog.records] == [
        "StopAtStep: reached global step 28 (max_steps=28); stopping training."
    ]


def _repeated_tiny_data(n=64):
    x, y = tiny_data(n)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat()


def test_epochs_of_whole_executions_are_labelled_with_the_true_step(tmp_path):
    """steps_per_epoch=200, K=7: Keras trains 203 steps an epoch; so do the labels."""

    class Steps(kerasteps.callbacks.StepCallback):
        def __init__(self):
            super().__init__(every=1)
            self.seen = []

        def on_step(self, event):
            self.seen.append((event.step, kerasteps.global_step(self.model)))

    model = tiny_model(steps_per_execution=7)
    steps, jsonl = Steps(), str(tmp_path / "log.jsonl")
    model.fit(
        _repeated_tiny_data(),
        steps_per_epoch=200,
        epochs=3,
        verbose=0,
        callbacks=[steps, JSONLinesLogger(jsonl, every=100)],
    )
    assert kerasteps.global_step(model) == 609
    assert all(told == true for told, true in steps.seen), steps.seen[-5:]
    assert [s for s, _ in steps.seen] == list(range(7, 610, 7))
    assert [r["step"] for r in read_jsonl(jsonl)] == [105, 203, 301, 406, 504, 602]


def test_stop_at_step_reports_the_true_step_past_an_epoch_end(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model(steps_per_execution=7)
    stop = StopAtStep(200)
    model.fit(
        _repeated_tiny_data(),
        steps_per_epoch=200,
        epochs=3,
        verbose=0,
        callbacks=[stop],
    )
    assert kerasteps.global_step(model) == stop.stopped_step == 203
    assert "reached global step 203 (max_steps=200, 3 past it" in caplog.text
    assert "so training stops at step 203" in caplog.text


def test_stop_at_step_refuses_a_run_that_starts_at_or_after_max_steps(tmp_path):
    model = tiny_model()
    _fit(model, 10, [StopAtStep(5)], epochs=3)
    assert kerasteps.global_step(model) == 5
    stop = StopAtStep(5)
    assert stop.remaining(model) == 0
    sink = JSONLinesLogger(tmp_path / "log.jsonl", every=1)
    with pytest.raises(RuntimeError, match=r"max_steps=5.*global step 5.*remaining"):
        _fit(model, 10, [sink, stop])
    assert kerasteps.global_step(model) == 5  # not a single step was trained
    assert sink._file is None  # the sink that already began was closed


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-3, ValueError), (2.5, TypeError), ("10", TypeError)],
)
def test_stop_at_step_bad_max_steps(value, error):
    with pytest.raises(error, match=f"`max_steps`.*{re.escape(repr(value))}"):
        StopAtStep(value)


# -- StopOnNonFinite ---------
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
        _fit(model, 40, [stop, JSONLinesLogger(path, every=1)])
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
    _fit(model, 40, [only_g])
    # g_loss is computed before the update, so it is NaN one step later.
    assert (only_g.stopped_step, only_g.stopped_key) == (8, "g_loss")

    every_3 = StopOnNonFinite(every=3)
    model = _nan_model(7)
    _fit(model, 40, [every_3])
    assert (every_3.stopped_step, every_3.stopped_key) == (9, "d_loss")


def test_stop_on_non_finite_saves_the_last_finite_state(tmp_path):
    model = _nan_model(7)
    recorder = RecordWeights()
    checkpoint = StepCheckpoint(tmp_path, every=Every(7))  # scheduled at the NaN step
    stop = StopOnNonFinite(checkpoint=checkpoint)
    _fit(model, 40, [recorder, stop, checkpoint])

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
    _fit(model, 40, [stop])
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


# -- Throughput ---------
@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_throughput_values_are_positive_and_finite(tmp_path, steps_per_execution):
    model = tiny_model(steps_per_execution=steps_per_execution)
    speed = Throughput(every=8, batch_size=2)
    path = tmp_path / "log.jsonl"
    _fit(
        model,
        32,
        [
            JSONLinesLogger(path, every=8),
            StepTensorBoard(tmp_path / "tb", every=8),
            speed,
        ],
        epochs=2,
    )
    records = read_jsonl(path)
    assert [r["step"] for r in records] == [8, 16, 24, 32]
    for record in records:
        steps, examples = record["steps_per_second"], record["examples_per_second"]
        assert math.isfinite(steps) and steps > 0
        assert examples == pytest.approx(2 * steps)
    tags = read_scalars(str(tmp_path / "tb"), "train", "steps_per_second")
    assert [s for s, _ in tags] == [8, 16, 24, 32]
    assert all(v > 0 and math.isfinite(v) for _, v in tags)


def test_throughput_without_batch_size_gives_steps_only():
    speed = Throughput(every=5)
    _fit(tiny_model(), 20, [speed])
    assert list(speed.last_values) == ["steps_per_second"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"every": 0}, "`every`.*received 0"), ({"batch_size": 0}, "`batch_size`.*0")],
)
def test_throughput_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Throughput(**kwargs)


# -- StepProgressBar ---------
def _bar_counts(text: str) -> list[tuple[int, int]]:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) ", plain)]


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_progress_bar_counts_global_steps_over_the_run(capsys, steps_per_execution):
    model = tiny_model(steps_per_execution=steps_per_execution)
    bar = StepProgressBar(total_steps=25, interval=0)
    _fit(model, 20, [bar, StopAtStep(25)], epochs=5)
    final = kerasteps.global_step(model)
    assert final == (25 if steps_per_execution == 1 else 26)
    counts = _bar_counts(capsys.readouterr().out)
    assert counts[-1] == (final, 25)
    assert bar.count == final
    assert all(total == 25 for _, total in counts)
    assert [c for c, _ in counts] == sorted(c for c, _ in counts)  # one bar, no reset


def test_progress_bar_of_a_resumed_run_starts_at_its_step(capsys):
    model = tiny_model()
    _fit(model, 20, [])  # steps 1-10
    capsys.readouterr()
    bar = StepProgressBar(total_steps=30, interval=0)
    _fit(model, 20, [bar, StopAtStep(30)], epochs=5)
    output = capsys.readouterr().out
    counts = _bar_counts(output)
    assert counts[0] == (11, 30) and counts[-1] == (30, 30)
    assert "loss:" in output
    assert bar.count == 30


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"total_steps": 0}, "`total_steps`.*received 0"),
        ({"total_steps": 10, "every": 0}, "`every`.*received 0"),
        ({"total_steps": 10, "interval": -1}, "`interval`.*-1"),
    ],
)
def test_progress_bar_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StepProgressBar(**kwargs)


# -- skip_consumed ---------
def test_skip_consumed_skips_the_batches_of_the_restored_steps():
    batches = tf.data.Dataset.range(100).batch(10).repeat()
    assert next(iter(skip_consumed(batches, 3)))[0] == 30
    assert next(iter(skip_consumed(batches, 2, batches_per_step=2)))[0] == 40
    model = tiny_model()
    _fit(model, 8, [])  # step 4
    assert next(iter(skip_consumed(batches, model)))[0] == 40
    assert skip_consumed(batches, 0) is batches


def test_skip_consumed_bad_arguments():
    finite = tf.data.Dataset.range(100).batch(10)
    with pytest.raises(ValueError, match="`step`=10 skips 10 batches.*only 10"):
        skip_consumed(finite, 10)
    with pytest.raises(ValueError, match="`step`.*-1"):
        skip_consumed(finite, -1)
    with pytest.raises(ValueError, match="`batches_per_step`.*0"):
        skip_consumed(finite, 1, batches_per_step=0)
    with pytest.raises(TypeError, match="`dataset`.*ndarray"):
        skip_consumed(np.ones(3), 1)
