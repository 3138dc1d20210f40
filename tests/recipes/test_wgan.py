"""Tests for the bundled `wgan` recipe, run through the launcher."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import kerasteps
from kerasteps.cli import main
from kerasteps.mixtures import pacgan_mixture
from tests.helpers import read_jsonl, read_scalar_steps
from tests.helpers import run_recipe as run

COMMON_OPTIONS = ("--steps", "--log-every", "--log-dir", "--seed", "--resume")

pytestmark = pytest.mark.usefixtures("bundled_recipes")


def assert_png(path: Path, size: tuple[int, int]) -> None:
    """`path` is a PNG image of `size` (width, height) pixels."""
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == size


def load_in_fresh_process(path: Path) -> str:
    """Loads `path` with `kerasteps.load_model` in a new Python: only `import
    kerasteps`, no `kerasteps.models`; returns the model's class and counters."""
    code = (
        "import sys, kerasteps\n"
        "model = kerasteps.load_model(sys.argv[1])\n"
        "c = kerasteps.step_counters(model)\n"
        'print(f\'{type(model).__name__} g_step={c["g_step"]} d_step={c["d_step"]}\')'
    )
    process = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr
    return process.stdout.strip()


@pytest.mark.parametrize("name", ["wgan", "wgan_images", "global_step"])
def test_help_lists_the_common_options(name):
    result = CliRunner().invoke(main, ["run", name, "--help"])
    assert result.exit_code == 0, result.output
    for option in COMMON_OPTIONS:
        assert f"  {option} " in result.output


def test_wgan_settings_are_the_defaults_with_the_options_in_their_place():
    from kerasteps.recipes import wgan

    # WGAN-GP: WGAN's defaults and its default schedule (no constant rate).
    assert wgan.choose_settings("gp") == wgan.Settings(
        latent_dim=2,
        batch_size=128,
        n_critic=5,
        steps=6000,
        gradient_penalty=0.1,
        clip_value=None,
        learning_rate=None,
    )
    given = wgan.choose_settings(
        "gp",
        steps=500,
        n_critic=4,
        batch_size=64,
        gradient_penalty=5.0,
        learning_rate=3e-3,
        clip_value=None,
    )
    assert given == wgan.Settings(2, 64, 4, 500, 5.0, None, 3e-3)
    # Clipping: no penalty, clip 0.01, RMSprop's constant 5e-5 unless --lr.
    assert wgan.choose_settings("clip", steps=None)[4:] == (None, 0.01, 5e-5)
    assert wgan.choose_settings("clip", learning_rate=2e-3).learning_rate == 2e-3
    # What a --resume keeps: the length too where the rate decays over it.
    assert wgan.run_settings("ring", "gp", wgan.DEFAULTS)["steps"] == 6000
    clipped = wgan.choose_settings("clip")
    assert "steps" not in wgan.run_settings("ring", "clip", clipped)


def coverage_by_hand(samples, centres, std):
    """Modes captured (a fifth of the uniform share of the samples within 3 sigma),
    the share within 3 sigma, and the reverse KL of the modes' shares from the
    uniform one, computed here without kerasteps."""
    distance = np.linalg.norm(samples[:, None, :] - centres[None], axis=-1) / std
    nearest, close = distance.argmin(1), distance.min(1) < 3.0
    counts = np.bincount(nearest[close], minlength=len(centres))
    share = counts[counts > 0] / close.sum()
    kl = float(np.sum(share * np.log(share * len(centres))))
    return int((counts >= close.sum() / len(centres) / 5).sum()), close.mean(), kl


def test_wgan_recipe_on_a_ring_counts_d_and_g_steps(tmp_path):
    log_dir = tmp_path / "wgan"
    result = run(
        "wgan",
        "--steps",
        "40",
        "--log-every",
        "20",
        "--n-critic",
        "3",
        "--batch-size",
        "32",
        "--log-dir",
        str(log_dir),
    )
    folder = log_dir / "run-1"
    records = read_jsonl(folder / "log.jsonl")
    assert [(r["step"], r["g_step"], r["d_step"]) for r in records] == [
        (20, 20, 60),
        (40, 40, 120),
    ]
    for record in records:
        assert {
            "d_loss",
            "g_loss",
            "wasserstein",
            "gradient_penalty",
            "modes_captured",
            "high_quality",
            "reverse_kl",
        } <= set(record)
    assert read_scalar_steps(str(folder), "train", "counters/d_step") == [20, 40]
    assert read_scalar_steps(str(folder), "train", "modes_captured") == [20, 40]
    accumulator = EventAccumulator(str(folder / "train"), size_guidance={"tensors": 0})
    accumulator.Reload()
    assert [e.step for e in accumulator.Tensors("samples")] == [20, 40]
    assert (
        "WGAN-GP (gradient penalty 0.1) on ring: n_critic 3, batch 32, g_step 0 -> 40."
        in result.output
    )
    assert "Trained to g_step 40 with d_step 120" in result.output
    # The figures printed are those of the saved model, the generator alone:
    # counted again here, by hand.
    model = kerasteps.load_model(folder / "model.keras")
    _, centres, std = pacgan_mixture("ring", 1)
    modes, within, kl = coverage_by_hand(model.generate(2500, seed=0), centres, std)
    assert (
        f"The generator alone, 2500 samples: {modes}/8 modes, {within:.1%} within "
        f"3 sigma (exact samples: 98.9%), reverse KL {kl:.6f}." in result.output
    )
    # What a user wants at the end: the model, loadable with kerasteps.load_model
    # in a fresh process (no kerasteps.models import), and the samples' picture.
    assert f"Model: {folder}/model.keras; samples: {folder}/samples.png" in (
        result.output
    )
    assert_png(folder / "samples.png", (500, 500))
    loaded = load_in_fresh_process(folder / "model.keras")
    assert loaded == "WGAN g_step=40 d_step=120"


def test_wgan_images_recipe_clipping_and_resume(tmp_path):
    log_dir = tmp_path / "wgan_images"
    common = (
        "--variant",
        "clip",
        "--n-critic",
        "2",
        "--log-every",
        "5",
        "--steps-per-execution",
        "5",
        "--log-dir",
        str(log_dir),
    )
    run("wgan_images", "--steps", "5", *common)
    result = run("wgan_images", "--steps", "10", "--resume", *common)
    folder = log_dir / "run-1"
    checkpoint = folder / "checkpoints" / "ckpt-5"
    assert f"Resumed from step 5 (checkpoint {checkpoint})" in result.output
    assert (
        "WGAN with weight clipping (0.01) on discs: n_critic 2, batch 64, "
        "g_step 5 -> 10." in result.output
    )
    assert "Trained to g_step 10 with d_step 20" in result.output
    records = read_jsonl(folder / "log.jsonl")
    assert [(r["g_step"], r["d_step"]) for r in records] == [(5, 10), (10, 20)]
    assert "gradient_penalty" not in records[0]
    assert_png(folder / "samples.png", (3 * (6 * 29 + 1),) * 2)
    accumulator = EventAccumulator(str(folder / "train"), size_guidance={"tensors": 0})
    accumulator.Reload()
    events = accumulator.Tensors("samples")
    assert [e.step for e in events] == [5, 10]
    width, height = (int(v) for v in events[0].tensor_proto.string_val[:2])
    assert (width, height) == (6 * 29 + 1, 6 * 29 + 1)  # a 6x6 grid of 28x28 samples


def test_wgan_recipe_rejects_bad_data(tmp_path):
    result = CliRunner().invoke(
        main, ["run", "wgan", "--data", "moons", "--log-dir", str(tmp_path / "w")]
    )
    assert result.exit_code == 2
    assert "expected ring, grid or a .npy file, received 'moons'" in result.output
    line = tmp_path / "line.npy"
    np.save(line, np.zeros((1000, 1), dtype="float32"))
    result = CliRunner().invoke(
        main, ["run", "wgan", "--data", str(line), "--log-dir", str(tmp_path / "w")]
    )
    assert result.exit_code == 2
    assert "points must have shape (N, d), d >= 2; received (1000, 1)" in result.output
    assert not (tmp_path / "w").exists()
    # The images recipe: its own names, and images of 3 or 4 axes only.
    for data, message in [
        ("moons", "expected discs or a .npy file, received 'moons'"),
        (str(line), "images must have shape (N, H, W[, C]); received (1000, 1)"),
    ]:
        result = CliRunner().invoke(
            main,
            ["run", "wgan_images", "--data", data, "--log-dir", str(tmp_path / "w")],
        )
        assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "w").exists()


def test_wgan_recipe_trains_points_of_3_dimensions(tmp_path):
    path = tmp_path / "points.npy"
    np.save(path, np.random.default_rng(0).normal(size=(1000, 3)).astype("float32"))
    log_dir = tmp_path / "w3"
    result = run(
        "wgan",
        *("--data", str(path), "--steps", "4", "--batch-size", "16"),
        *("--steps-per-execution", "2"),
        *("--log-dir", str(log_dir)),
    )
    assert "WGAN-GP (gradient penalty 0.1) on " in result.output
    assert "Trained to g_step 4 with d_step 20" in result.output
    assert "Mode coverage" not in result.output  # no known modes
    records = read_jsonl(log_dir / "run-1" / "log.jsonl")
    assert [r["step"] for r in records] == [2, 4]  # --log-every: a tenth, at least 1
    assert_png(log_dir / "run-1" / "samples.png", (500, 500))


def test_wgan_recipe_calls_end_on_every_log_step_and_the_last(tmp_path):
    from kerasteps.recipe import steps_per_call

    # Without --steps-per-execution: the most steps per call, up to 50, that
    # divide --log-every and the steps left.
    assert steps_per_call(None, 600, 6000) == 50  # the default run
    assert steps_per_call(None, 20, 40) == 20
    assert steps_per_call(None, 100, 2000 - 1234) == 2  # resumed from step 1234
    assert steps_per_call(None, 7, 10) == 1
    assert steps_per_call(10, 1000, 10000) == 10  # --steps-per-execution 10
    log_dir = tmp_path / "w"
    result = run(
        "wgan",
        *("--steps", "6", "--log-every", "4", "--batch-size", "16"),
        *("--log-dir", str(log_dir)),
    )
    # Calls of 2 steps: logged at step 4 (not at a boundary past it), and
    # stopped at step 6 exactly (a call of 4 or 10 steps would have run past it).
    assert [r["step"] for r in read_jsonl(log_dir / "run-1" / "log.jsonl")] == [4, 6]
    assert "Trained to g_step 6 with d_step 30" in result.output
    assert "execution boundary" not in result.output


def test_wgan_recipe_refuses_a_gradient_penalty_with_clipping(tmp_path):
    log_dir = tmp_path / "w"
    result = CliRunner().invoke(
        main,
        ["run", "wgan", "--variant", "clip", "--gradient-penalty", "5"]
        + ["--log-dir", str(log_dir)],
    )
    assert result.exit_code == 2
    assert "'--gradient-penalty': is for --variant gp" in result.output
    assert not log_dir.exists()


def test_wgan_recipe_resumes_points_only_with_the_length_of_their_schedule(tmp_path):
    """The rate decays over --steps: a --resume that changed it would train on
    another schedule than the one it was planned with, so it is refused."""
    log_dir = tmp_path / "w"
    common = ("--batch-size", "16", "--log-every", "2", "--log-dir", str(log_dir))
    run("wgan", "--steps", "2", *common)
    result = CliRunner().invoke(
        main, ["run", "wgan", "--steps", "4", "--resume", *common]
    )
    assert result.exit_code == 2, result.output
    assert "steps: 2 -> 4" in result.output
    assert [r["step"] for r in read_jsonl(log_dir / "run-1" / "log.jsonl")] == [2]
