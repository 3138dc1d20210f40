"""What every bundled recipe shares: the common options in its help, running as a
script, and `kerasteps list`."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from kerasteps._compat import shuffles_before_repeat
from kerasteps.cli import main
from kerasteps.data import skip_consumed
from tests import zygote
from tests.helpers import (
    ROOT,
    as_a_fresh_jax_fit_sees,
    load_script,
    script_environment,
)
from tests.recipes.test_image_classifier import write_png_folders

COMMON_OPTIONS = ("--steps", "--log-every", "--log-dir", "--seed", "--resume")

# batch_vs_sgd trains for --epochs epochs: its help lists no --steps.
OPTIONS = {
    "image_classifier": COMMON_OPTIONS,
    "batch_vs_sgd": COMMON_OPTIONS[1:],
}

pytestmark = pytest.mark.usefixtures("bundled_recipes")


# ------------------------------------------------------------------ help and list
@pytest.mark.parametrize("name", ["image_classifier", "batch_vs_sgd"])
def test_help_lists_the_common_options(name):
    result = CliRunner().invoke(main, ["run", name, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: kerasteps run {name} [OPTIONS]")
    for option in OPTIONS[name]:
        assert f"  {option} " in result.output
    assert ("  --steps " in result.output) == (name != "batch_vs_sgd")
    assert "--logdir" not in result.output  # one spelling: --log-dir
    own = {"image_classifier": "--data DIRECTORY", "batch_vs_sgd": "--epochs"}[name]
    assert own in result.output


@pytest.mark.parametrize("name", ["global_step", "batch_vs_sgd", "wgan", "wgan_images"])
@pytest.mark.parametrize("option", ["--keep-best", "--early-stopping"])
def test_a_recipe_that_does_not_validate_refuses_model_selection(name, option):
    """One line, status 2, before anything is made."""
    result = CliRunner().invoke(main, ["run", name, option, "2"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {option} needs a recipe that validates (image_classifier); "
        f"{name} does not.\n"
    )


def test_the_time_options_stop_the_run_and_a_spent_budget_trains_no_more(
    tmp_path, caplog
):
    """--max-time and --time-budget on a recipe (global_step, the cheapest): the
    run stops itself; resumed with the same budget, nothing is trained."""
    log_dir = str(tmp_path / "logs")
    common = ["run", "global_step", "--steps", "10000000", "--log-dir", log_dir]
    for flag in ("--max-time", "--time-budget"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="kerasteps"):
            result = CliRunner().invoke(main, [*common, flag, "2", "--resume"])
        assert result.exit_code == 0, result.output
        (line,) = [r.message for r in caplog.records if "StopAtTime: st" in r.message]
        step = int(line.split()[4])
        assert f"Global step after training: {step} (" in result.output
    again = CliRunner().invoke(main, [*common, "--time-budget", "2", "--resume"])
    assert again.exit_code == 0, again.output
    assert "--time-budget 2 s is spent; nothing to train." in again.output
    bad = CliRunner().invoke(main, [*common, "--max-time", "0"])
    assert bad.exit_code == 2
    assert "Invalid value for '--max-time': 0.0 is not in the range x>0." in bad.output


def test_help_imports_neither_keras_nor_numpy():
    """`kerasteps run NAME -h` stays fast: the recipe files import heavy modules
    inside their functions, so loading one for its help imports none of them."""
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from kerasteps.cli import main\n"
        "names = ('wgan', 'wgan_images', 'global_step', 'image_classifier',\n"
        "         'batch_vs_sgd')\n"
        "for name in names:\n"
        "    result = CliRunner().invoke(main, ['run', name, '-h'])\n"
        "    assert result.exit_code == 0, result.output\n"
        "heavy = ('keras', 'tensorflow', 'numpy', 'matplotlib')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["image_classifier", "batch_vs_sgd"])
def test_recipe_runs_as_a_script(name):
    process = subprocess.run(
        [sys.executable, str(ROOT / "recipes" / f"{name}.py"), "--help"],
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


# ------------------------------------------------------------------ exit status
# Two recipes, each long enough that the signal lands mid-training: one model
# through the recipe kit (global_step), several models each with its checkpoint
# (batch_vs_sgd). The others end through the same `recipe.exit_if_interrupted`
# (checked below without running them: a SIGTERM run of each took 15-44 s).
LONG = {
    "global_step": ["--steps", "100000"],
    "batch_vs_sgd": ["--epochs", "100000"],
}


def test_every_recipe_ends_through_exit_if_interrupted():
    for path in sorted((ROOT / "recipes").glob("[a-z]*.py")):
        main = path.read_text().split("\ndef main(", 1)[1]
        assert "recipe.exit_if_interrupted(" in main, path.name


@pytest.mark.parametrize("name", sorted(LONG))
def test_a_recipe_stopped_by_sigterm_says_how_to_resume_and_exits_143(tmp_path, name):
    """SIGTERM mid-training, as a scheduler sends it: the recipe saves, prints the
    line that resumes it, and exits 128 + 15, so that a scheduler that requeues
    failed jobs requeues it."""
    import signal
    import time

    command = [sys.executable, "-m", "kerasteps.cli", "run", name, *LONG[name]]
    process = zygote.Popen(
        [*command, "--log-dir", str(tmp_path / "logs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=script_environment(),
    )
    try:  # training began: its checkpoint's lock is taken, its handlers installed
        deadline = time.monotonic() + 120
        while not any((tmp_path / "logs").rglob("checkpoints/.kerasteps.lock")):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("Interrupted") and last.endswith(
        "; run again with --resume to continue."
    ), err[-3000:]


# ------------------------------------------------------------------ the data stream
def training_streams(tmp_path):
    """Each recipe's training batches from step `start` on: `build(start)`."""
    x = np.arange(60, dtype="float32").reshape(30, 2)
    y = np.arange(30, dtype="float32")
    recipes = ROOT / "recipes"
    global_step = load_script("global_step", recipes)
    batch_vs_sgd = load_script("batch_vs_sgd", recipes)
    classifier = load_script("image_classifier", recipes)
    write_png_folders(tmp_path / "images", {"a": 6, "b": 6})
    folder = str(tmp_path / "images")
    yield "global_step", lambda start: global_step.batches(x, y, 4, 1, start)
    for batch in (1, 4):  # per-example and mini-batch SGD
        yield (
            f"batch_vs_sgd {batch}",
            lambda s, b=batch: batch_vs_sgd.pipeline(x, y, b, 1, s),
        )
    images = classifier.make_images(30, 8, 1)
    yield (
        "image_classifier",
        lambda start: skip_consumed(
            classifier.split_images(*images, 0.2, 4, 1)[0], start
        ),
    )
    yield (
        "image_classifier --data",
        lambda start: skip_consumed(
            classifier.read_directory(folder, 8, 0.25, 2, 1)[0], start
        ),
    )


def test_every_recipe_repeats_then_shuffles_so_a_jax_resume_is_exact(tmp_path):
    """Keras's JAX `fit()` in a fresh process draws a first element from one
    iterator, then trains from a second; a resume at step 17 (a later pass) must
    see what the uninterrupted run saw from there."""
    for name, build in training_streams(tmp_path):
        assert not shuffles_before_repeat(build(0)), name
        uninterrupted = as_a_fresh_jax_fit_sees(build(0), 25)
        resumed = as_a_fresh_jax_fit_sees(build(17), 8)
        assert len(resumed) == 8, name
        for ours, theirs in zip(resumed, uninterrupted[17:], strict=True):
            np.testing.assert_array_equal(ours, theirs, err_msg=name)
