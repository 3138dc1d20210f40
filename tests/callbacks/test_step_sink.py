"""Tests for kerasteps.callbacks.StepSink and the sinks built on it: TensorBoard,
JSON lines and CSV written by one run hold the same steps and values."""

import csv

import keras
import pytest

from kerasteps.callbacks import (
    JSONLinesLogger,
    StepCallback,
    StepCheckpoint,
    StepCSVLogger,
    StepSink,
    StepTensorBoard,
    ValidateEvery,
)
from tests.helpers import (
    Witness,
    fit_steps,
    read_jsonl,
    read_scalars,
    tiny_data,
    tiny_model,
)

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def read_csv(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def as_number(text: str) -> float | None:
    return None if text == "" else float(text)


#: Each key of the JSON lines and its TensorBoard run/tag, spelled out.
TAGS = {
    "loss": "train/loss",
    "mae": "train/mae",
    "learning_rate": "train/learning_rate",
    "val_loss": "validation/loss",
    "val_mae": "validation/mae",
}


class WeightsAt(keras.callbacks.Callback):
    """The model's weights at every `every`-th step, to evaluate after `fit`."""

    def __init__(self, every):
        super().__init__()
        self.every, self.weights = every, {}

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.every == 0:
            self.weights[step] = self.model.get_weights()


def test_tensorboard_jsonlines_and_csv_hold_the_steps_values_and_rates_of_the_run(
    tmp_path,
):
    """Every sink holds, at each point, the mean of Keras's per-batch values since
    the previous point (from a witness of Keras's batch logs), the learning rate
    the schedule gave the point's update, and the validation values of Keras's
    own `evaluate` (ValidateEvery) and of `fit`'s `validation_data` (epoch ends)."""
    schedule = keras.optimizers.schedules.ExponentialDecay(0.05, 4, 0.5)
    model = tiny_model(optimizer=keras.optimizers.SGD(schedule), metrics=["mae"])
    x, y = tiny_data(40)
    witness, weights = Witness(), WeightsAt(6)
    sinks = [
        StepTensorBoard(tmp_path / "tb", every=3),
        JSONLinesLogger(tmp_path / "log.jsonl", every=3),
        StepCSVLogger(tmp_path / "log.csv", every=3),
    ]
    history = model.fit(
        x,
        y,
        batch_size=4,
        epochs=2,  # 20 steps: points 3..18, and an epoch end at 10 with validation
        verbose=0,
        validation_data=tiny_data(8, seed=1),
        callbacks=[
            witness,
            weights,
            ValidateEvery(6, validation_data=tiny_data(8, seed=2)),
            *sinks,
        ],
    )
    lines = read_jsonl(tmp_path / "log.jsonl")
    steps = [line["step"] for line in lines]
    assert steps == [3, 6, 9, 10, 12, 15, 18, 20]  # 10, 20: Keras's validation
    assert set().union(*lines) - {"time"} == {"step", *TAGS}

    expected = {step: {} for step in steps}
    for prev, step in zip([0, 3, 6, 9, 12, 15], [3, 6, 9, 12, 15, 18], strict=True):
        expected[step]["loss"] = witness.window("loss", prev, step)
        expected[step]["mae"] = witness.window("mae", prev, step)
        expected[step]["learning_rate"] = float(schedule(step - 1))  # its update's
    for step, at_step in weights.weights.items():  # Keras's evaluate, afterwards
        model.set_weights(at_step)
        values = model.evaluate(*tiny_data(8, seed=2), verbose=0, return_dict=True)
        expected[step].update(val_loss=values["loss"], val_mae=values["mae"])
    for epoch, step in enumerate((10, 20)):
        expected[step].update(
            val_loss=history.history["val_loss"][epoch],
            val_mae=history.history["val_mae"][epoch],
        )
    for line in lines:
        written = {k: v for k, v in line.items() if k not in ("step", "time")}
        assert written == pytest.approx(expected[line["step"]], rel=1e-5), line

    # The CSV: the same steps and values, in columns.
    rows = read_csv(tmp_path / "log.csv")
    assert list(rows[0])[:2] == ["step", "time"]
    assert [int(row["step"]) for row in rows] == steps
    for row, line in zip(rows, lines, strict=True):
        for key in TAGS:
            assert as_number(row[key]) == line.get(key), (line["step"], key)
    # TensorBoard: the same values under the tags a user sees, as float32.
    for key, tag in TAGS.items():
        run, name = tag.split("/", 1)
        written = dict(read_scalars(str(tmp_path / "tb"), run, name))
        want = {step: values[key] for step, values in expected.items() if key in values}
        assert written == pytest.approx(want, rel=1e-5), tag
    counters = dict(read_scalars(str(tmp_path / "tb"), "train", "counters/step"))
    assert counters == {s: s for s in (3, 6, 9, 12, 15, 18)}


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


# Issue 46, finding 7: arguments that were accepted and failed at the run's begin or
# first write, or did the wrong thing, are refused when the sink is made.
@pytest.mark.parametrize("sink", [JSONLinesLogger, StepCSVLogger, StepTensorBoard])
def test_a_sink_without_its_place_is_refused_when_made(sink):
    name = "log_dir" if sink is StepTensorBoard else "path"
    with pytest.raises(TypeError, match=f"`{name}` must be a .*path, received None"):
        sink(None)


@pytest.mark.parametrize("sink", [JSONLinesLogger, StepCSVLogger, StepTensorBoard])
@pytest.mark.parametrize("flag", ["write_learning_rate", "write_counters"])
@pytest.mark.parametrize("value", ["False", "no", 2, None, 0])
def test_a_flag_is_true_or_false(tmp_path, sink, flag, value):
    with pytest.raises(ValueError, match=f"`{flag}` must be True or False, received"):
        sink(tmp_path / "place", **{flag: value})


@pytest.mark.parametrize("separator", ["", "ab", 5, None, '"', "\n", "\r"])
def test_csv_separator_that_cannot_write_a_readable_file_is_refused(
    tmp_path, separator
):
    with pytest.raises(ValueError, match="`separator` must be one character"):
        StepCSVLogger(tmp_path / "log.csv", separator=separator)


def test_csv_written_with_another_separator_is_refused_before_training(tmp_path):
    path = tmp_path / "log.csv"
    model = tiny_model()
    x, y = tiny_data(8)
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[StepCSVLogger(path, every=2)])
    written = path.read_text()
    other = StepCSVLogger(path, every=2, separator=";")
    with pytest.raises(ValueError, match="separator ',', and `separator` is ';'"):
        model.fit(x, y, batch_size=2, verbose=0, callbacks=[other])
    assert int(model.optimizer.iterations.numpy()) == 4  # nothing trained
    assert path.read_text() == written
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[StepCSVLogger(path, every=2)])
    assert [row["step"] for row in read_csv(path)] == ["2", "4", "6", "8"]


def test_csv_with_another_separator_goes_on_with_it(tmp_path):
    path = tmp_path / "log.csv"
    model = tiny_model()
    x, y = tiny_data(8)
    for _ in range(2):
        sink = StepCSVLogger(path, every=2, separator="\t")
        model.fit(x, y, batch_size=2, verbose=0, callbacks=[sink])
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert [row["step"] for row in rows] == ["2", "4", "6", "8"]


class InitialPoint(StepCallback):
    """Hands the sinks a point at the run's start step (`StepSink.log_point`)."""

    reads_values = False

    def __init__(self, sinks, values, at=None):
        super().__init__(every=1)
        self.sinks, self.values, self.at, self.errors = sinks, values, at, []

    def on_run_begin(self, start_step):
        for sink in self.sinks:
            sink.log_point(start_step if self.at is None else self.at, self.values)

    def on_step(self, event):
        if event.step == 2:  # after training began: refused
            try:
                self.sinks[0].log_point(event.step, self.values)
            except RuntimeError as error:
                self.errors.append(str(error))


def test_log_point_writes_the_start_step_in_every_sink(tmp_path):
    model = tiny_model()
    x, y = tiny_data(8)
    sinks = [
        StepTensorBoard(tmp_path / "tb", every=2, write_learning_rate=False),
        JSONLinesLogger(tmp_path / "log.jsonl", every=2, write_learning_rate=False),
        StepCSVLogger(tmp_path / "log.csv", every=2, write_learning_rate=False),
    ]
    initial = InitialPoint(sinks, {"mse": 2.5, "val_mse": 3.5})
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[*sinks, initial])
    lines = read_jsonl(tmp_path / "log.jsonl")
    assert [line["step"] for line in lines] == [0, 2, 4]
    assert {k: v for k, v in lines[0].items() if k != "time"} == {
        "step": 0, "mse": 2.5, "val_mse": 3.5
    }  # fmt: skip
    rows = read_csv(tmp_path / "log.csv")
    assert [(row["step"], row["mse"]) for row in rows] == [
        ("0", "2.5"),
        ("2", ""),
        ("4", ""),
    ]
    assert read_scalars(str(tmp_path / "tb"), "train", "mse") == [(0, 2.5)]
    assert read_scalars(str(tmp_path / "tb"), "validation", "mse") == [(0, 3.5)]
    assert initial.errors == [
        "StepTensorBoard.log_point() writes before training; the run is at step 2 "
        "already."
    ]
    # A second fit() continues the run at step 4: the place holds its points up to
    # there, and nothing is written again.
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[*sinks, initial])
    assert [line["step"] for line in read_jsonl(tmp_path / "log.jsonl")] == [
        0, 2, 4, 6, 8
    ]  # fmt: skip


def test_log_point_before_fit_is_written_as_the_run_begins_at_its_step(tmp_path):
    sink = JSONLinesLogger(tmp_path / "log.jsonl", every=2, write_learning_rate=False)
    model = tiny_model()
    x, y = tiny_data(4)
    sink.log_point(0, {"mse": 1.5})  # before fit(): held until the run begins
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[sink])
    lines = read_jsonl(tmp_path / "log.jsonl")
    assert [(line["step"], line.get("mse")) for line in lines] == [
        (0, 1.5), (2, None)
    ]  # fmt: skip
    # A run that begins later (here at step 2) writes no start point again.
    sink.log_point(0, {"mse": 9.0})
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[sink])
    lines = read_jsonl(tmp_path / "log.jsonl")
    assert [(line["step"], line.get("mse")) for line in lines] == [
        (0, 1.5), (2, None), (4, None)
    ]  # fmt: skip
    # A point after the start step is refused as the run begins; nothing written.
    other = JSONLinesLogger(tmp_path / "other.jsonl", every=2)
    other.log_point(5, {"mse": 1.0})
    with pytest.raises(ValueError, match="`step` must be the run's start step 0, "):
        tiny_model().fit(x, y, batch_size=2, verbose=0, callbacks=[other])
    assert (
        not (tmp_path / "other.jsonl").exists()
        or read_jsonl(tmp_path / "other.jsonl") == []
    )


def test_a_sink_that_raises_costs_the_others_nothing_and_keeps_no_lock(
    tmp_path, caplog
):
    """A user's sink raises at step 10: the other sinks and the checkpoint still
    record step 10, every lock is given back, `fit()` raises the sink's error with
    its name, and the next `fit()` finds the checkpoints as they were written."""
    from kerasteps._files import _lock

    class Broken(StepSink):
        def __init__(self):
            super().__init__(None, every=5)

        def write(self, step, values, time):
            if step == 10:
                raise RuntimeError("the user's sink broke")

    held = dict(_lock._HELD)
    jsonl, folder = tmp_path / "log.jsonl", tmp_path / "ck"

    def callbacks(*first):
        return [*first, JSONLinesLogger(jsonl, every=5), StepCheckpoint(folder, 5)]

    model = tiny_model()
    with pytest.raises(RuntimeError, match="the user's sink broke") as raised:
        fit_steps(model, 20, callbacks(Broken()))
    assert "Broken" in " ".join(raised.value.__notes__)
    assert "Broken raised RuntimeError at step 10" in caplog.text
    assert [row["step"] for row in read_jsonl(jsonl)] == [5, 10]
    assert [entry.step for entry in StepCheckpoint.list_checkpoints(folder)] == [5, 10]
    assert _lock._HELD == held  # every lock given back, its file removed
    assert sorted(p.name for p in tmp_path.rglob("*.lock")) == []
    caplog.clear()
    assert StepCheckpoint.restore_latest(model, folder) == 10
    fit_steps(model, 10, callbacks())
    assert "WARNING" not in caplog.text, caplog.text
    assert [row["step"] for row in read_jsonl(jsonl)] == [5, 10, 15, 20]
