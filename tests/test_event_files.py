"""Tests for the event-file reader, kerasteps.event_files.read_scalars."""

from __future__ import annotations

import pytest

from kerasteps import event_files
from tests.helpers import (
    B_ACCURACY,
    B_LEARNING_RATE,
    B_LOSS,
    TRAIN_ACCURACY,
    TRAIN_LOSS,
    write_scalars,
)

# Scalars written by the `log_dir` fixture: run -> tag -> [(step, value)].


# ------------------------------------------------------------------------ events
def test_read_scalars_reads_both_encodings_at_any_depth(log_dir):
    scalars = event_files.read_scalars(log_dir)
    assert scalars == {
        "a/train": {"accuracy": TRAIN_ACCURACY, "loss": TRAIN_LOSS},
        "b": {
            "accuracy": B_ACCURACY,
            "learning_rate": B_LEARNING_RATE,
            "loss": B_LOSS,
        },
    }
    assert list(event_files.find_runs(log_dir)) == ["a/train", "b"]
    assert len(event_files.find_runs(log_dir)["b"]) == 3  # three writers, three files
    timed = event_files.read_scalars(log_dir, wall_time=True)["b"]["loss"]
    assert [point[:2] for point in timed] == B_LOSS
    assert all(point[2] > 1e9 for point in timed)


def test_read_scalars_keeps_write_order_and_duplicates(tmp_path):
    write_scalars(tmp_path, {"loss": [(3, 3.0), (1, 1.0), (3, 4.0)]})
    assert event_files.read_scalars(tmp_path) == {
        ".": {"loss": [(1, 1.0), (3, 3.0), (3, 4.0)]}
    }
    assert event_files.read_scalars(tmp_path, sort=False) == {
        ".": {"loss": [(3, 3.0), (1, 1.0), (3, 4.0)]}
    }


def test_read_scalars_errors(tmp_path):
    assert event_files.read_scalars(tmp_path) == {}
    with pytest.raises(FileNotFoundError, match="`log_dir` does not exist"):
        event_files.read_scalars(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="`log_dir` must be a directory"):
        event_files.read_scalars(tmp_path / "file")
