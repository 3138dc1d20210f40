"""Tests for the bundled recipe batch_vs_sgd.

The recipe runs through the launcher (`kerasteps run NAME`, with click's CliRunner)
with tiny settings; the tests read back what it wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

import keras
import matplotlib.image
import numpy as np
import pytest
from click.testing import CliRunner

from kerasteps import event_files
from kerasteps.callbacks import StepCheckpoint
from kerasteps.cli import main
from kerasteps.formatting import format_value
from tests.helpers import read_jsonl, read_scalar_steps
from tests.helpers import run_recipe as run

MODES = ("full_batch", "minibatch_128", "minibatch_32", "sgd")

pytestmark = pytest.mark.usefixtures("bundled_recipes")


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
    log_dir = tmp_path / "bvs"
    png = tmp_path / "plot" / "curves.png"
    # The seed's 3000 examples, one epoch; n_fft 16 keeps each update cheap.
    result = run(
        "batch_vs_sgd",
        "--epochs",
        "1",
        "--n-fft",
        "16",
        "--log-dir",
        str(log_dir),
        "--png",
        str(png),
    )
    run_1 = log_dir / "run-1"  # each run gets its own folder
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
    scalars = event_files.read_scalars(run_1)
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
    assert f"view:  kerasteps board {log_dir}\n" in result.output
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
    run("batch_vs_sgd", *small, "--epochs", "2", "--log-dir", str(straight))
    log_dir = tmp_path / "resumed"
    run("batch_vs_sgd", *small, "--epochs", "1", "--log-dir", str(log_dir))
    # A second run without --resume gets its own folder; the first is untouched.
    run_1, run_2 = log_dir / "run-1", log_dir / "run-2"
    before = folder_state(run_1)
    result = run("batch_vs_sgd", *small, "--epochs", "1", "--log-dir", str(log_dir))
    assert result.output.startswith(f"New run: {run_2}\n")
    # --resume continues the latest run, run-2.
    result = run(
        "batch_vs_sgd", *small, "--epochs", "2", "--log-dir", str(log_dir), "--resume"
    )
    assert "New run" not in result.output
    checkpoint = run_2 / "sgd" / "checkpoints" / "ckpt-256"
    assert f"sgd: resumed from step 256 (checkpoint {checkpoint})\n" in result.output
    assert (
        "sgd: batch 1, 256 update(s) per epoch, 64 per call; global step 256 -> 512"
        in (result.output)
    )
    assert sorted(os.listdir(log_dir)) == ["run-1", "run-2"]
    assert folder_state(run_1) == before
    table = parse_table(result.output)
    assert {mode: table[mode]["updates"] for mode in MODES} == {
        "full_batch": "2",
        "minibatch_128": "4",
        "minibatch_32": "16",
        "sgd": "512",
    }

    def assert_same_as_straight(modes):
        expected = event_files.read_scalars(straight / "run-1")
        got = event_files.read_scalars(run_2, sort=False)
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
    # Without a checkpoint a resumed mode starts again at step 0, a new run: the
    # points of the one before are kept whole aside, and the curve is written anew,
    # its step-0 point once.
    for path in sorted((run_2 / "sgd" / "checkpoints").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    earlier = read_jsonl(run_2 / "sgd" / "log.jsonl")
    result = run(
        "batch_vs_sgd", *small, "--epochs", "2", "--log-dir", str(log_dir), "--resume"
    )
    checkpoints = run_2 / "sgd" / "checkpoints"
    assert f"sgd: no checkpoint in {checkpoints} yet: starting at step 0.\n" in (
        result.output
    )
    assert "full_batch: already at step 2; nothing to train." in result.output
    assert_same_as_straight(["sgd"])
    assert read_jsonl(run_2 / "sgd" / "log.earlier-1.jsonl") == earlier
    earlier_run = event_files.read_scalars(run_2 / "sgd" / "earlier-1")
    kept = earlier_run["train"]["full_data_mse"]
    assert [step for step, _ in kept] == [line["step"] for line in earlier]

    # Resuming with other data is refused before training.
    result = CliRunner().invoke(
        main,
        ["run", "batch_vs_sgd", *small, "--log-dir", str(log_dir), "--resume"]
        + ["--n-fft", "32"],
    )
    assert result.exit_code == 2, result.output
    assert "n_fft: 16 -> 32" in result.output
    assert json.loads((run_2 / "run.json").read_text())["n_fft"] == 16
    assert sorted(os.listdir(log_dir)) == ["run-1", "run-2"]
    assert os.path.exists(run_2 / "batch_vs_sgd.png")


def test_batch_vs_sgd_reads_pairs_from_an_npz_file(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(40, 8)).astype("float32")
    pairs = tmp_path / "pairs.npz"
    np.savez(pairs, x=x, y=x[:, ::-1] * 0.5 + 0.25)
    log_dir = tmp_path / "npz"
    result = run(
        "batch_vs_sgd", "--data", str(pairs), "--epochs", "1", "--log-dir", str(log_dir)
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
    scalars = event_files.read_scalars(log_dir / "run-1")
    for mode in MODES:
        model = keras.saving.load_model(log_dir / "run-1" / mode / "model.keras")
        mse = float(np.mean((np.asarray(model.predict(x, verbose=0)) - y) ** 2))
        (_, logged), *_ = reversed(scalars[f"{mode}/train"]["full_data_mse"])
        assert mse == pytest.approx(logged, rel=1e-5)

    np.savez(pairs, x=x, y=x * 2.0)  # targets a sigmoid cannot reach
    result = CliRunner().invoke(
        main, ["run", "batch_vs_sgd", "--data", str(pairs), "--log-dir", str(log_dir)]
    )
    assert result.exit_code == 2, result.output
    assert "y must lie in [0, 1]" in result.output
    assert sorted(os.listdir(log_dir)) == ["run-1"]  # refused: no new run folder
