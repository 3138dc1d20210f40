"""Tests for kerasteps.callbacks.JSONLinesLogger."""

import json
import math

import keras
import pandas as pd
import pytest

from kerasteps.callbacks import JSONLinesLogger
from tests.helpers import read_jsonl, read_scalar_steps, tiny_data, tiny_model

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def test_records_hold_step_time_metrics_and_counters_and_read_with_pandas(tmp_path):
    path = tmp_path / "sub" / "log.jsonl"
    model = tiny_model(metrics=["mae"])
    x, y = tiny_data(20)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[JSONLinesLogger(str(path), every=5)],
    )
    frame = pd.read_json(path, lines=True)
    assert frame["step"].tolist() == [5, 10]
    assert set(frame.columns) == {"step", "time", "loss", "mae", "learning_rate"}
    rate = float(model.optimizer.learning_rate.numpy())
    assert frame["learning_rate"].tolist() == pytest.approx([rate, rate])
    assert (frame["time"].diff().dropna() >= 0).all()
    assert frame["loss"].gt(0).all() and frame["mae"].gt(0).all()


def test_lines_are_flushed_while_training(tmp_path):
    path = tmp_path / "log.jsonl"
    seen = []

    class Peek(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 7:
                seen.extend(r["step"] for r in read_jsonl(path))

    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[JSONLinesLogger(str(path), every=3), Peek()],
    )
    assert seen == [3, 6]


def test_torn_last_line_of_a_killed_run_is_dropped(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 3, "loss": 1.0}\n{"step": 6, "lo')
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x[:6], y[:6], batch_size=2, epochs=1, verbose=0)  # the model is at step 3
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[JSONLinesLogger(str(path), every=3)],
    )
    records = read_jsonl(path)
    assert [r["step"] for r in records] == [3, 6, 9, 12]
    assert records[0] == {"step": 3, "loss": 1.0}


def test_non_finite_values_stay_valid_json(tmp_path):
    path = tmp_path / "log.jsonl"
    model = tiny_model(optimizer=keras.optimizers.SGD(1e30))
    x, y = tiny_data(20)
    model.fit(
        x * 1e6,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[JSONLinesLogger(str(path), every=1)],
    )
    records = [json.loads(line) for line in path.read_text().splitlines()]
    losses = [r["loss"] for r in records]
    assert any(isinstance(v, str) for v in losses)
    assert all(isinstance(v, float) or v in ("nan", "inf", "-inf") for v in losses)
    assert all(not isinstance(v, float) or math.isfinite(v) for v in losses)


def test_unwritable_path_is_refused_naming_it(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(
        ValueError, match="`path` is not writable: cannot create directory"
    ):
        JSONLinesLogger(str(blocker / "sub" / "log.jsonl"))
    with pytest.raises(
        ValueError, match="`path` must be a file path, received a directory"
    ):
        JSONLinesLogger(str(tmp_path))
    with pytest.raises(TypeError, match="`path` must be a file path, received 3"):
        JSONLinesLogger(3)
    assert blocker.read_text() == "x"


def test_fit_in_a_loop_reads_the_file_only_once(tmp_path, monkeypatch):
    """A loop of `fit(epochs=1)` calls: after the first run the logger knows the
    file's last step, so later runs append without reading it."""
    reads = []
    read_lines = JSONLinesLogger._read_lines

    def counting_read_lines(self):
        reads.append(self.path)
        return read_lines(self)

    monkeypatch.setattr(JSONLinesLogger, "_read_lines", counting_read_lines)
    path = str(tmp_path / "log.jsonl")
    model = tiny_model()
    x, y = tiny_data(20)
    for _ in range(4):
        logger = JSONLinesLogger(path, every=5)  # a new instance each time
        model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[logger])
    assert len(reads) == 1
    assert [r["step"] for r in read_jsonl(path)] == list(range(5, 41, 5))


def test_a_file_changed_by_another_writer_is_read_again(tmp_path):
    path = tmp_path / "log.jsonl"
    model = tiny_model()
    x, y = tiny_data(20)
    logger = JSONLinesLogger(str(path), every=5)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[logger])
    with open(path, "a") as handle:  # another writer appends a later step
        handle.write(json.dumps({"step": 99, "loss": 1.0}) + "\n")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[logger])
    assert [r["step"] for r in read_jsonl(path)] == [5, 10, 15, 20]


def test_a_new_run_in_a_used_folder_keeps_the_earlier_run_aside(tmp_path, caplog):
    """A run at step 0 (another run) deletes nothing of the run that wrote the
    folder before: its file and event files are kept whole under `earlier-N`
    names, with a WARNING naming them; the new run's files hold only its own."""
    from kerasteps.callbacks import StepTensorBoard

    x, y = tiny_data(20)
    path, log_dir = tmp_path / "log.jsonl", tmp_path / "tb"

    def fit(model, n):
        model.fit(
            x[: 2 * n],
            y[: 2 * n],
            batch_size=2,
            epochs=1,
            verbose=0,
            callbacks=[
                JSONLinesLogger(path, every=2),
                StepTensorBoard(str(log_dir), every=2),
            ],
        )

    fit(tiny_model(), 10)  # steps 1..10: points at 2, 4, ..., 10
    first = path.read_text()
    caplog.set_level("INFO", logger="kerasteps")
    fit(tiny_model(), 6)  # a new model: another run, at step 0 again
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    kept_file, kept_dir = tmp_path / "log.earlier-1.jsonl", log_dir / "earlier-1"
    assert warnings == [
        f"JSONLinesLogger: {path} held the records of another run: they are kept "
        f"whole in {kept_file}, and this run writes {path} anew.",
        f"StepTensorBoard: {log_dir} held the records of another run: they are "
        f"kept whole in {kept_dir}, and this run writes {log_dir} anew.",
    ]
    assert kept_file.read_text() == first
    assert [r["step"] for r in read_jsonl(path)] == [2, 4, 6]
    assert read_scalar_steps(str(kept_dir), "train", "loss") == [2, 4, 6, 8, 10]
    assert read_scalar_steps(str(log_dir), "train", "loss") == [2, 4, 6]
    fit(tiny_model(), 3)  # a third run: the second one's go to earlier-2
    assert [r["step"] for r in read_jsonl(tmp_path / "log.earlier-2.jsonl")] == [
        2,
        4,
        6,
    ]
    assert read_scalar_steps(str(log_dir / "earlier-2"), "train", "loss") == [2, 4, 6]
    assert kept_file.read_text() == first


def test_a_run_resumed_from_another_runs_checkpoint_keeps_this_files_run(tmp_path):
    """The run id travels with the checkpoint: a run resumed from run A's
    checkpoint is run A, and a file written by run B is B's: kept aside whole."""
    from kerasteps.callbacks import StepCheckpoint

    x, y = tiny_data(20)
    a_log, b_log, ckpt = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "ck"
    run_a = tiny_model()
    run_a.fit(
        x,
        y,
        batch_size=2,
        verbose=0,
        callbacks=[JSONLinesLogger(a_log, every=2), StepCheckpoint(ckpt, every=4)],
    )  # run A: steps 1..10, checkpoints at 4 and 8
    run_b = tiny_model(seed=1)
    run_b.fit(
        x, y, batch_size=2, verbose=0, callbacks=[JSONLinesLogger(b_log, every=2)]
    )
    b_lines = b_log.read_text()

    def resume_a(log):
        model = tiny_model()
        assert StepCheckpoint.restore_latest(model, ckpt) == 8
        model.fit(
            x[:8],
            y[:8],
            batch_size=2,
            verbose=0,
            callbacks=[JSONLinesLogger(log, every=2)],
        )

    resume_a(a_log)  # A's own file: the points after 8 are dropped, 10 and 12 written
    assert [r["step"] for r in read_jsonl(a_log)] == [2, 4, 6, 8, 10, 12]
    assert not (tmp_path / "a.earlier-1.jsonl").exists()
    resume_a(b_log)  # B's file: kept whole aside, A writes its points from 9 on
    assert (tmp_path / "b.earlier-1.jsonl").read_text() == b_lines
    assert [r["step"] for r in read_jsonl(b_log)] == [10, 12]
