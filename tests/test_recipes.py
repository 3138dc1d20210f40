"""Tests for the bundled recipes image_classifier and batch_vs_sgd.

Each recipe runs through the launcher (`kerasteps run NAME`, with click's CliRunner)
with tiny settings; the tests read back what it wrote: TensorBoard event files, JSON
lines, checkpoints, the printed table and the PNG.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import keras
import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner
from conftest import read_jsonl, read_scalar_steps
from conftest import run_recipe as run

from kerasteps import events
from kerasteps.callbacks import StepCheckpoint
from kerasteps.cli import main
from kerasteps.formatting import format_value

REPO = Path(__file__).resolve().parent.parent
COMMON_OPTIONS = ("--steps", "--log-every", "--logdir", "--seed", "--resume")
# batch_vs_sgd trains for --epochs epochs: its help lists no --steps.
OPTIONS = {
    "image_classifier": COMMON_OPTIONS,
    "batch_vs_sgd": COMMON_OPTIONS[1:],
}
MODES = ("full_batch", "minibatch_128", "minibatch_32", "sgd")
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


def scalar_steps(logdir: Path, run_name: str, tag: str) -> list[int]:
    """Steps of a tag in write order (so a repeated or backward step shows)."""
    scalars = events.read_scalars(logdir, sort=False)
    return [step for step, _ in scalars[run_name][tag]]


# ------------------------------------------------------------------ help and list
@pytest.mark.parametrize("name", ["image_classifier", "batch_vs_sgd"])
def test_help_lists_the_common_options(name):
    result = CliRunner().invoke(main, ["run", name, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: kerasteps run {name} [OPTIONS]")
    for option in OPTIONS[name]:
        assert f"  {option} " in result.output
    assert ("  --steps " in result.output) == (name != "batch_vs_sgd")
    own = {"image_classifier": "--data DIRECTORY", "batch_vs_sgd": "--epochs"}[name]
    assert own in result.output


@pytest.mark.parametrize("name", ["image_classifier", "batch_vs_sgd"])
def test_recipe_runs_as_a_script(name):
    process = subprocess.run(
        [sys.executable, str(REPO / "kerasteps" / "recipes" / f"{name}.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.startswith(f"Usage: {name}.py [OPTIONS]")
    for option in OPTIONS[name]:
        assert f"  {option} " in process.stdout


def test_list_shows_the_recipes():
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    assert (
        "image_classifier Train and validate a conv image classifier: loss and "
        "top-1 accuracy every N steps." in lines
    )
    assert (
        "batch_vs_sgd Full-batch gradient descent vs per-example SGD vs "
        "mini-batches, measured." in lines
    )


# --------------------------------------------------------------- image_classifier
def test_image_classifier_logs_train_and_validation_at_the_same_steps(tmp_path):
    logdir = tmp_path / "clf"
    result = run(
        "image_classifier",
        *TINY_CLASSIFIER,
        "--steps",
        "10",
        "--log-every",
        "3",
        "--logdir",
        str(logdir),
    )
    assert "Classes ['horizontal', 'vertical']" in result.output
    assert "Global step after training: 10." in result.output
    assert f"view:  kerasteps board {logdir}" in result.output
    folder = logdir / "run-1"  # each run gets its own folder
    assert f"table: kerasteps summary {folder}" in result.output
    model = keras.saving.load_model(folder / "model.keras")
    assert model.optimizer.iterations == 10

    scalars = events.read_scalars(folder)
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


def test_image_classifier_help_imports_neither_keras_nor_numpy():
    """`kerasteps run image_classifier -h` loads the recipe without heavy imports."""
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from kerasteps.cli import main\n"
        "result = CliRunner().invoke(main, ['run', 'image_classifier', '-h'])\n"
        "assert result.exit_code == 0, result.output\n"
        "heavy = ('keras', 'tensorflow', 'numpy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == "[]"


def test_image_classifier_resume_continues_without_repeating_steps(tmp_path):
    logdir = tmp_path / "resumed"
    common = (*TINY_CLASSIFIER, "--log-every", "2", "--logdir", str(logdir))
    first = run("image_classifier", *common, "--steps", "4")
    assert "Global step after training: 4." in first.output
    second = run("image_classifier", *common, "--steps", "8", "--resume")
    folder = logdir / "run-1"
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
        "--logdir",
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
    assert f"New run: {logdir / 'run-2'}" in third.output
    assert [r["step"] for r in read_jsonl(logdir / "run-2" / "log.jsonl")] == [2]
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()} == (
        before
    )
    assert sorted(events.read_scalars(logdir)) == [
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
    logdir = tmp_path / "dir_run"
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
        "--logdir",
        str(logdir),
    )
    assert "Found 16 files belonging to 2 classes." in result.output
    assert "Using 12 files for training." in result.output
    assert "Using 4 files for validation." in result.output
    assert "Classes ['cats', 'dogs']" in result.output
    scalars = events.read_scalars(logdir / "run-1")
    for run_name in ("train", "validation"):
        for tag in ("loss", "accuracy"):
            assert [step for step, _ in scalars[run_name][tag]] == [2, 4]


def test_image_classifier_data_needs_two_class_folders(tmp_path):
    images = tmp_path / "one_class"
    write_png_folders(images, {"cats": 8})
    result = CliRunner().invoke(
        main,
        ["run", "image_classifier", "--data", str(images), "--logdir", str(tmp_path)],
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--data'" in result.output
    assert "at least two" in result.output


# ------------------------------------------------------------------ batch_vs_sgd
def parse_table(output: str) -> dict[str, dict[str, str]]:
    """The printed table: mode -> column -> cell."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("mode "))
    header = lines[start].replace("final MSE", "final_MSE")
    header = header.replace("train s", "train_s").split()
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def test_batch_vs_sgd_table_runs_and_plot(tmp_path):
    logdir = tmp_path / "bvs"
    png = tmp_path / "plot" / "curves.png"
    # The seed's 3000 examples, one epoch; n_fft 16 keeps each update cheap.
    result = run(
        "batch_vs_sgd",
        "--epochs",
        "1",
        "--n-fft",
        "16",
        "--logdir",
        str(logdir),
        "--png",
        str(png),
    )
    run_1 = logdir / "run-1"  # each run gets its own folder
    assert result.output.startswith(f"New run: {run_1}\n")
    table = parse_table(result.output)
    assert list(table) == list(MODES)
    updates = {mode: int(table[mode]["updates"]) for mode in MODES}
    per_epoch = {mode: int(table[mode]["updates/epoch"]) for mode in MODES}
    assert updates == {
        "full_batch": 1,
        "minibatch_128": 24,
        "minibatch_32": 94,
        "sgd": 3000,
    }
    assert per_epoch == updates  # one epoch
    # Per-example SGD: one update per example, 3000x the full-batch updates.
    assert per_epoch["sgd"] == 3000 * per_epoch["full_batch"]
    assert "makes 3000x the updates per epoch of full-batch" in result.output
    scalars = events.read_scalars(run_1)
    for mode in MODES:
        assert table[mode]["epochs"] == "1"
        # The time of the mode's last point, as written: milliseconds, or
        # significant digits below 0.1 s (a fast machine may train the one
        # full-batch update in under a millisecond), never 0.000.
        (_, seconds), *_ = reversed(scalars[f"{mode}/train"]["train_seconds"])
        assert table[mode]["train_s"] == format_value(seconds, precision=3)
        assert float(table[mode]["train_s"]) > 0
        speed = table[mode]["examples/s"]  # throughput: 4 significant digits
        assert float(speed) > 0 and "e" not in speed and "," not in speed
    mse = {mode: float(table[mode]["final_MSE"]) for mode in MODES}
    assert all(0 < value < 1 for value in mse.values())
    assert mse["sgd"] < mse["full_batch"]  # 3000 updates beat one

    # One TensorBoard run per mode, side by side, against the global step.
    assert set(scalars) == {f"{mode}/train" for mode in MODES}
    sgd = scalars["sgd/train"]
    assert [step for step, _ in sgd["loss"]] == list(range(100, 3001, 100))
    # The MSE on all examples also at step 0: the initial network, before training.
    assert [step for step, _ in sgd["full_data_mse"]] == list(range(0, 3001, 100))
    assert sgd["full_data_mse"][-1][1] == pytest.approx(mse["sgd"], abs=1e-6)
    assert [step for step, _ in scalars["full_batch/train"]["loss"]] == [1]
    assert [step for step, _ in scalars["minibatch_32/train"]["loss"]] == [94]
    # Every mode starts from the same step-0 point, the printed initial MSE, in
    # TensorBoard (as its own reader sees it) and in the JSON lines.
    (printed,) = [
        line.rsplit(" ", 1)[1]
        for line in result.output.splitlines()
        if "MSE of the initial network" in line
    ]
    initial = {scalars[f"{mode}/train"]["full_data_mse"][0] for mode in MODES}
    assert len(initial) == 1
    ((step, value),) = initial
    assert step == 0 and format_value(value) == printed
    for mode in MODES:
        assert scalars[f"{mode}/train"]["train_seconds"][0] == (0, 0.0)
        curve = read_scalar_steps(str(run_1 / mode), "train", "full_data_mse")
        assert curve[0] == 0 and curve == sorted(set(curve))
        (first, *_) = read_jsonl(run_1 / mode / "log.jsonl")
        assert first["step"] == 0 and first["full_data_mse"] == pytest.approx(value)
    # One Keras model per mode, loadable with Keras alone.
    for mode in MODES:
        model = keras.saving.load_model(run_1 / mode / "model.keras")
        assert model.input_shape == (None, 16) and model.output_shape == (None, 16)
    # The sgd run fused 100 updates per compiled call.
    assert "sgd: batch 1, 3000 update(s) per epoch, 100 per call" in result.output
    for mode in MODES:
        assert StepCheckpoint.latest(run_1 / mode / "checkpoints").step == updates[mode]

    # The PNG decodes, and is small.
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 300
    assert png.stat().st_size < 200_000
    assert f"Plot written to {png}" in result.output
    assert f"view:  kerasteps board {logdir}\n" in result.output
    assert f"table: kerasteps summary {run_1}\n" in result.output


def folder_state(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `folder`: its modification time and its bytes."""
    return {
        str(path.relative_to(folder)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_batch_vs_sgd_resume_extends_each_mode_exactly(tmp_path):
    small = ("--examples", "256", "--n-fft", "16", "--log-every", "64")
    straight = tmp_path / "straight"
    run("batch_vs_sgd", *small, "--epochs", "2", "--logdir", str(straight))
    logdir = tmp_path / "resumed"
    run("batch_vs_sgd", *small, "--epochs", "1", "--logdir", str(logdir))
    # A second run without --resume gets its own folder; the first is untouched.
    run_1, run_2 = logdir / "run-1", logdir / "run-2"
    before = folder_state(run_1)
    result = run("batch_vs_sgd", *small, "--epochs", "1", "--logdir", str(logdir))
    assert result.output.startswith(f"New run: {run_2}\n")
    # --resume continues the latest run, run-2.
    result = run(
        "batch_vs_sgd", *small, "--epochs", "2", "--logdir", str(logdir), "--resume"
    )
    assert "New run" not in result.output
    checkpoint = run_2 / "sgd" / "checkpoints" / "ckpt-256"
    assert f"sgd: resumed from step 256 (checkpoint {checkpoint})\n" in result.output
    assert (
        "sgd: batch 1, 256 update(s) per epoch, 64 per call; global step 256 -> 512"
        in (result.output)
    )
    assert sorted(os.listdir(logdir)) == ["run-1", "run-2"]
    assert folder_state(run_1) == before
    table = parse_table(result.output)
    assert {mode: table[mode]["updates"] for mode in MODES} == {
        "full_batch": "2",
        "minibatch_128": "4",
        "minibatch_32": "16",
        "sgd": "512",
    }

    def assert_same_as_straight(modes):
        expected = events.read_scalars(straight / "run-1")
        got = events.read_scalars(run_2, sort=False)
        for mode in modes:
            curve = got[f"{mode}/train"]["full_data_mse"]
            steps = [step for step, _ in curve]
            assert steps[0] == 0  # the initial network's point, written once
            assert steps == sorted(set(steps))  # each step once, in order
            want = expected[f"{mode}/train"]["full_data_mse"]
            assert steps == [step for step, _ in want]
            assert [v for _, v in curve] == pytest.approx([v for _, v in want])
            seconds = [value for _, value in got[f"{mode}/train"]["train_seconds"]]
            assert seconds == sorted(seconds)  # the clock continues across resumes
            lines = [line["step"] for line in read_jsonl(run_2 / mode / "log.jsonl")]
            assert lines == steps

    assert_same_as_straight(MODES)
    # Without a checkpoint a resumed mode starts again at step 0; its step-0 point,
    # already there, is kept and not written twice.
    for path in sorted((run_2 / "sgd" / "checkpoints").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    result = run(
        "batch_vs_sgd", *small, "--epochs", "2", "--logdir", str(logdir), "--resume"
    )
    checkpoints = run_2 / "sgd" / "checkpoints"
    assert f"sgd: no checkpoint in {checkpoints} yet: starting at step 0.\n" in (
        result.output
    )
    assert "full_batch: already at step 2; nothing to train." in result.output
    assert_same_as_straight(["sgd"])

    # Resuming with other data is refused before training.
    result = CliRunner().invoke(
        main,
        ["run", "batch_vs_sgd", *small, "--logdir", str(logdir), "--resume"]
        + ["--n-fft", "32"],
    )
    assert result.exit_code == 2, result.output
    assert "n_fft: 16 -> 32" in result.output
    assert json.loads((run_2 / "run.json").read_text())["n_fft"] == 16
    assert sorted(os.listdir(logdir)) == ["run-1", "run-2"]
    assert os.path.exists(run_2 / "batch_vs_sgd.png")


def test_batch_vs_sgd_reads_pairs_from_an_npz_file(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(40, 8)).astype("float32")
    pairs = tmp_path / "pairs.npz"
    np.savez(pairs, x=x, y=x[:, ::-1] * 0.5 + 0.25)
    logdir = tmp_path / "npz"
    result = run(
        "batch_vs_sgd", "--data", str(pairs), "--epochs", "1", "--logdir", str(logdir)
    )
    assert "40 data pairs of 8 points" in result.output
    table = parse_table(result.output)
    assert list(table) == list(MODES)
    # 40 examples: batch 128 is the whole set; per-example SGD makes 40 updates.
    assert {mode: table[mode]["batch"] for mode in MODES} == {
        "full_batch": "40",
        "minibatch_128": "40",
        "minibatch_32": "32",
        "sgd": "1",
    }
    assert {mode: table[mode]["updates"] for mode in MODES} == {
        "full_batch": "1",
        "minibatch_128": "1",
        "minibatch_32": "2",
        "sgd": "40",
    }
    assert "makes 40x the updates per epoch of full-batch" in result.output
    # Each mode's model.keras is its trained model: loaded with Keras alone, its MSE
    # on the pairs is the mode's last logged full_data_mse.
    y = x[:, ::-1] * 0.5 + 0.25
    scalars = events.read_scalars(logdir / "run-1")
    for mode in MODES:
        model = keras.saving.load_model(logdir / "run-1" / mode / "model.keras")
        mse = float(np.mean((np.asarray(model.predict(x, verbose=0)) - y) ** 2))
        (_, logged), *_ = reversed(scalars[f"{mode}/train"]["full_data_mse"])
        assert mse == pytest.approx(logged, rel=1e-5)

    np.savez(pairs, x=x, y=x * 2.0)  # targets a sigmoid cannot reach
    result = CliRunner().invoke(
        main, ["run", "batch_vs_sgd", "--data", str(pairs), "--logdir", str(logdir)]
    )
    assert result.exit_code == 2, result.output
    assert "y must lie in [0, 1]" in result.output
    assert sorted(os.listdir(logdir)) == ["run-1"]  # refused: no new run folder
