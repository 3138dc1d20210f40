"""Tests for kerasteps.callbacks.StepSink and the sinks built on it: TensorBoard,
JSON lines and CSV written by one run hold the same steps and values."""

import csv

import keras
import pytest

from kerasteps.callbacks import (
    JSONLinesLogger,
    StepCheckpoint,
    StepCSVLogger,
    StepSink,
    StepTensorBoard,
    ValidateEvery,
)
from tests.helpers import read_jsonl, read_scalars, tiny_data, tiny_model

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def read_csv(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def as_number(text: str) -> float | None:
    return None if text == "" else float(text)


def test_tensorboard_jsonlines_and_csv_hold_the_same_steps_and_values(tmp_path):
    schedule = keras.optimizers.schedules.ExponentialDecay(0.05, 4, 0.5)
    model = tiny_model(optimizer=keras.optimizers.SGD(schedule), metrics=["mae"])
    x, y = tiny_data(40)
    sinks = [
        StepTensorBoard(tmp_path / "tb", every=3),
        JSONLinesLogger(tmp_path / "log.jsonl", every=3),
        StepCSVLogger(tmp_path / "log.csv", every=3),
    ]
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=2,  # 20 steps: points 3..18, and an epoch end at 10 with validation
        verbose=0,
        validation_data=tiny_data(8, seed=1),
        callbacks=[ValidateEvery(6, validation_data=tiny_data(8, seed=2)), *sinks],
    )
    lines = read_jsonl(tmp_path / "log.jsonl")
    rows = read_csv(tmp_path / "log.csv")
    steps = [line["step"] for line in lines]
    assert steps == [3, 6, 9, 10, 12, 15, 18, 20]  # 10, 20: Keras's validation
    assert [int(row["step"]) for row in rows] == steps

    keys = set().union(*lines) - {"time"}
    assert keys == {
        "step", "loss", "mae", "learning_rate", "val_loss", "val_mae"
    }  # fmt: skip
    assert list(rows[0])[:2] == ["step", "time"] and set(rows[0]) - {"time"} == keys
    rates = [line["learning_rate"] for line in lines if "learning_rate" in line]
    assert len(set(rates)) > 3  # the schedule moves: the values are the step's

    for line, row in zip(lines, rows, strict=True):
        for key in keys:
            expected = line.get(key)
            assert as_number(row[key]) == expected, (line["step"], key)
    # TensorBoard: the same values under its own keys, as float32.
    board = sinks[0]
    for key in keys - {"step"}:
        kind = _kind(key)
        name = "" if kind == "learning_rate" else key  # a plain model's optimizer
        run, tag = board.key(name, kind).split("/", 1)
        written = dict(read_scalars(str(tmp_path / "tb"), run, tag))
        expected = {line["step"]: line[key] for line in lines if key in line}
        assert sorted(written) == sorted(expected), key
        for step, value in expected.items():
            assert written[step] == pytest.approx(value, rel=1e-6), (key, step)
    counters = dict(read_scalars(str(tmp_path / "tb"), "train", "counters/step"))
    assert counters == {s: s for s in (3, 6, 9, 12, 15, 18)}


def _kind(key: str) -> str:
    if key.startswith("val_"):
        return "validation"
    return "learning_rate" if key == "learning_rate" else "train"


def test_one_switch_leaves_learning_rates_and_counters_out_of_every_sink(tmp_path):
    model = tiny_model()
    x, y = tiny_data(12)
    off = {"write_learning_rate": False, "write_counters": False}
    model.fit(
        x,
        y,
        batch_size=2,
        verbose=0,
        callbacks=[
            StepTensorBoard(tmp_path / "tb", every=3, **off),
            JSONLinesLogger(tmp_path / "log.jsonl", every=3, **off),
            StepCSVLogger(tmp_path / "log.csv", every=3, **off),
        ],
    )
    assert {k for line in read_jsonl(tmp_path / "log.jsonl") for k in line} == {
        "step",
        "time",
        "loss",
    }
    assert list(read_csv(tmp_path / "log.csv")[0]) == ["step", "time", "loss"]
    assert read_scalars(str(tmp_path / "tb"), "train", "learning_rate") == []
    assert [s for s, _ in read_scalars(str(tmp_path / "tb"), "train", "loss")] == [
        3,
        6,
    ]


def test_csv_resume_drops_the_rows_after_the_checkpoint_and_writes_the_same(
    tmp_path,
):
    """A run of 12 steps with a checkpoint at 6, then resumed from it: the rows of
    steps 8 and 12 are dropped and written again, and the CSV is the straight
    run's (the window of step 8 spans the checkpoint)."""
    x, y = tiny_data(12)

    def fit(model, folder, initial_epoch=0, checkpoint=None):
        callbacks = [StepCSVLogger(folder / "log.csv", every=4)]
        model.fit(
            x,
            y,
            batch_size=2,
            epochs=2,  # 6 steps an epoch
            initial_epoch=initial_epoch,
            shuffle=False,
            verbose=0,
            callbacks=callbacks + ([checkpoint] if checkpoint else []),
        )

    fit(tiny_model(), tmp_path / "straight")
    folder = tmp_path / "resumed"
    fit(tiny_model(), folder, checkpoint=StepCheckpoint(folder / "ckpt", every=6))
    model = tiny_model()
    assert StepCheckpoint.restore_checkpoint(model, folder / "ckpt" / "ckpt-6") == 6
    fit(model, folder, initial_epoch=1)
    straight = read_csv(tmp_path / "straight" / "log.csv")
    resumed = read_csv(folder / "log.csv")
    assert [r["step"] for r in resumed] == ["4", "8", "12"]
    for a, b in zip(straight, resumed, strict=True):
        assert a["step"] == b["step"]
        assert a["loss"] == b["loss"], a["step"]  # the same float, to the digit


def test_csv_torn_row_of_a_killed_run_is_dropped(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,time,loss\n3,1.0,0.5\n6,2.0")  # killed mid-row
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x[:6], y[:6], batch_size=2, verbose=0)  # the model is at step 3
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[StepCSVLogger(path, every=3)])
    rows = read_csv(path)
    assert [r["step"] for r in rows] == ["3", "6", "9", "12"]
    assert rows[0]["loss"] == "0.5"
    assert (tmp_path / "log.earlier-1.csv").exists()  # the torn file, kept whole


def test_a_sink_needs_only_write():
    written = []

    class ListSink(StepSink):
        def write(self, step, values, time):
            written.append((step, sorted(values)))

    model = tiny_model()
    x, y = tiny_data(8)
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[ListSink(None, every=2)])
    assert written == [
        (2, ["learning_rate", "loss", "step"]),
        (4, ["learning_rate", "loss", "step"]),
    ]


def test_bad_place_is_refused_naming_the_argument(tmp_path):
    with pytest.raises(ValueError, match="`path` must be a file path, received a dir"):
        StepCSVLogger(tmp_path)
    with pytest.raises(TypeError, match="`path` must be a file path, received 5"):
        StepCSVLogger(5)
