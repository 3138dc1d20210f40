"""Tests for the bundled recipe image_classifier.

The recipe runs through the launcher (`kerasteps run NAME`, with click's CliRunner)
with tiny settings; the tests read back what it wrote."""

from __future__ import annotations

import math
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner

import kerasteps
from kerasteps import event_files
from kerasteps.callbacks import StepCheckpoint
from kerasteps.cli import main
from tests.helpers import read_jsonl, read_scalar_steps
from tests.helpers import run_recipe as run

# A classifier small enough for a CPU test: 16x16 images, two tiny conv blocks.
TINY_CLASSIFIER = (
    "--image-size",
    "16",
    "--batch-size",
    "8",
    "--examples",
    "80",
    "--filters",
    "4,8",
)

pytestmark = pytest.mark.usefixtures("bundled_recipes")


def scalar_steps(log_dir: Path, run_name: str, tag: str) -> list[int]:
    """Steps of a tag in write order (so a repeated or backward step shows)."""
    scalars = event_files.read_scalars(log_dir, sort=False)
    return [step for step, _ in scalars[run_name][tag]]


# --------------------------------------------------------------- image_classifier
def test_image_classifier_logs_train_and_validation_at_the_same_steps(tmp_path):
    log_dir = tmp_path / "clf"
    result = run(
        "image_classifier",
        *TINY_CLASSIFIER,
        "--steps",
        "10",
        "--log-every",
        "3",
        "--log-dir",
        str(log_dir),
    )
    assert "Classes ['horizontal', 'vertical']" in result.output
    assert "Global step after training: 10." in result.output
    assert f"view:  kerasteps board {log_dir}" in result.output
    folder = log_dir / "run-1"  # each run gets its own folder
    assert f"table: kerasteps summary {folder}" in result.output
    model = keras.saving.load_model(folder / "model.keras")
    assert model.optimizer.iterations == 10

    scalars = event_files.read_scalars(folder)
    assert set(scalars) == {"train", "validation"}
    for run_name in ("train", "validation"):
        for tag in ("loss", "accuracy"):
            # N, 2N, 3N: not the final step 10, which is not a multiple of 3.
            assert [step for step, _ in scalars[run_name][tag]] == [3, 6, 9]
            # TensorBoard's own reader sees the same steps.
            assert read_scalar_steps(str(folder), run_name, tag) == [3, 6, 9]
        for _, accuracy in scalars[run_name]["accuracy"]:
            assert 0.0 <= accuracy <= 1.0
        for _, loss in scalars[run_name]["loss"]:
            assert math.isfinite(loss) and loss > 0
    assert set(scalars["validation"]) == {"loss", "accuracy"}

    # The JSON lines hold the same values at the same steps.
    records = read_jsonl(folder / "log.jsonl")
    assert [r["step"] for r in records] == [3, 6, 9]
    for record, (step, value) in zip(
        records, scalars["validation"]["loss"], strict=True
    ):
        assert record["step"] == step
        assert record["val_loss"] == pytest.approx(value, rel=1e-6)
    assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(records[0])
    # The final step is checkpointed (Every(N, last=True)).
    assert StepCheckpoint.latest(folder / "checkpoints").step == 10
    # The best validation loss of the run is `best.keras` (--keep-best 2).
    best_step = min(records, key=lambda r: r["val_loss"])["step"]
    assert f"Best val_loss at step {best_step}: saved as best.keras." in result.output
    assert kerasteps.global_step(kerasteps.load_model(folder / "best.keras")) == (
        best_step
    )


def test_image_classifier_stops_early_and_a_resume_does_not_train_again(tmp_path):
    """--early-stopping 1: training stops at the first validation that does not
    improve on the best, and `best.keras` holds the best checkpoint's weights."""
    log_dir = tmp_path / "early"
    common = (*TINY_CLASSIFIER, "--log-every", "2", "--log-dir", str(log_dir))
    common += ("--steps", "400", "--early-stopping", "1", "--lr", "0.05")
    result = run("image_classifier", *common)
    folder = log_dir / "run-1"
    losses = [(r["step"], r["val_loss"]) for r in read_jsonl(folder / "log.jsonl")]
    stop = next(
        step
        for i, (step, loss) in enumerate(losses)
        if i and loss >= min(value for _, value in losses[:i])
    )
    assert losses[-1][0] == stop < 400
    assert f"Global step after training: {stop}." in result.output
    best = kerasteps.load_model(folder / "best.keras")
    best_step, _ = min(losses, key=lambda item: item[1])
    assert kerasteps.global_step(best) == best_step
    reference = keras.saving.load_model(folder / "model.keras")
    StepCheckpoint.restore_best(reference, folder / "checkpoints")
    for ours, theirs in zip(best.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    again = run("image_classifier", *common, "--resume")
    assert f"StepEarlyStopping: the run stopped at step {stop}: val_loss = " in (
        again.output
    )
    assert again.output.count("; nothing to train.") == 1


def test_image_classifier_resume_continues_without_repeating_steps(tmp_path):
    log_dir = tmp_path / "resumed"
    common = (*TINY_CLASSIFIER, "--log-every", "2", "--log-dir", str(log_dir))
    first = run("image_classifier", *common, "--steps", "4")
    assert "Global step after training: 4." in first.output
    second = run("image_classifier", *common, "--steps", "8", "--resume")
    folder = log_dir / "run-1"
    checkpoint = folder / "checkpoints" / "ckpt-4"
    assert f"Resumed from step 4 (checkpoint {checkpoint})" in second.output
    assert "Global step after training: 8." in second.output

    records = read_jsonl(folder / "log.jsonl")
    assert [r["step"] for r in records] == [2, 4, 6, 8]
    for run_name in ("train", "validation"):
        for tag in ("loss", "accuracy"):
            assert scalar_steps(folder, run_name, tag) == [2, 4, 6, 8]
    assert StepCheckpoint.latest(folder / "checkpoints").step == 8

    # Exact resume: the same values as one uninterrupted run of 8 steps.
    straight = tmp_path / "straight"
    run(
        "image_classifier",
        *TINY_CLASSIFIER,
        "--log-every",
        "2",
        "--log-dir",
        str(straight),
        "--steps",
        "8",
    )
    expected = read_jsonl(straight / "run-1" / "log.jsonl")
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        assert [r[key] for r in records] == pytest.approx(
            [r[key] for r in expected], rel=1e-5
        )

    # Launched again at the end: nothing to train, nothing rewritten.
    again = run("image_classifier", *common, "--steps", "8", "--resume")
    assert "Already at step 8 >= --steps 8; nothing to train." in again.output
    assert [r["step"] for r in read_jsonl(folder / "log.jsonl")] == [2, 4, 6, 8]

    # Without --resume, a new run goes beside it: run-1 is left as it was.
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    third = run("image_classifier", *common, "--steps", "2")
    assert f"New run: {log_dir / 'run-2'}" in third.output
    assert [r["step"] for r in read_jsonl(log_dir / "run-2" / "log.jsonl")] == [2]
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()} == (
        before
    )
    assert sorted(event_files.read_scalars(log_dir)) == [
        "run-1/train",
        "run-1/validation",
        "run-2/train",
        "run-2/validation",
    ]


def write_png_folders(root: Path, classes: dict[str, int], size: int = 12) -> None:
    """Writes `count` random PNG images into `root/<class name>/` per class."""
    rng = np.random.default_rng(0)
    for name, count in classes.items():
        (root / name).mkdir(parents=True)
        for index in range(count):
            pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
            png = tf.io.encode_png(pixels)
            tf.io.write_file(str(root / name / f"{index}.png"), png)


def test_image_classifier_reads_a_directory_of_class_folders(tmp_path):
    images = tmp_path / "images"
    write_png_folders(images, {"cats": 8, "dogs": 8})
    log_dir = tmp_path / "dir_run"
    result = run(
        "image_classifier",
        "--data",
        str(images),
        "--image-size",
        "16",
        "--batch-size",
        "4",
        "--filters",
        "4,8",
        "--validation-split",
        "0.25",
        "--steps",
        "4",
        "--log-every",
        "2",
        "--log-dir",
        str(log_dir),
    )
    assert "Found 16 files belonging to 2 classes." in result.output
    assert "Using 12 files for training." in result.output
    assert "Using 4 files for validation." in result.output
    assert "Classes ['cats', 'dogs']" in result.output
    scalars = event_files.read_scalars(log_dir / "run-1")
    for run_name in ("train", "validation"):
        for tag in ("loss", "accuracy"):
            assert [step for step, _ in scalars[run_name][tag]] == [2, 4]


def test_image_classifier_data_needs_two_class_folders(tmp_path):
    images = tmp_path / "one_class"
    write_png_folders(images, {"cats": 8})
    result = CliRunner().invoke(
        main,
        ["run", "image_classifier", "--data", str(images), "--log-dir", str(tmp_path)],
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--data'" in result.output
    assert "at least two" in result.output
