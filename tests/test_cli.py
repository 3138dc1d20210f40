"""Tests for the `kerasteps` launcher (kerasteps.cli): list, run, board, summary.

Recipes come from tests/fixtures/recipes (the fixture `fixture_recipes` points the
launcher's bundled folder there), so these tests do not depend on the real recipes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner

import kerasteps
from kerasteps import event_files, recipe
from kerasteps.cli import _recipes, best_mode, main
from tests.helpers import (
    FIXTURE_RECIPES,
    ROOT,
    free_port,
    invoke,
    run_recipe,
    user_environment,
    write_scalars,
)

# Scalars written by the `log_dir` fixture: run -> tag -> [(step, value)].


@pytest.fixture
def fixture_recipes(monkeypatch) -> Path:
    monkeypatch.setattr(_recipes, "BUNDLED", FIXTURE_RECIPES)
    return FIXTURE_RECIPES


# ------------------------------------------------------------------ version, help
def test_version_and_help():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output == f"kerasteps, version {kerasteps.__version__}\n"
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("list", "run", "board", "plot", "summary"):
        assert f"  {command} " in result.output


# --------------------------------------------------------------------------- list
def test_list_shows_first_docstring_line_without_importing(tmp_path, monkeypatch):
    # Importing this file would fail: `list` must read the docstring with `ast`.
    boom = '"""Explode on import.\n\nDetails."""\nraise 1/0\n'
    (tmp_path / "boom.py").write_text(boom)
    (tmp_path / "hello.py").write_text('"""Say hello."""\n')
    (tmp_path / "_helper.py").write_text('"""Not a recipe."""\n')
    (tmp_path / "nodoc.py").write_text("x = 1\n")
    monkeypatch.setattr(_recipes, "BUNDLED", tmp_path)
    result = invoke("list")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "boom   Explode on import.",
        "hello  Say hello.",
        "nodoc  (no description)",
    ]
    result = invoke("list", "--paths")
    assert f"[{tmp_path / 'boom.py'}]" in result.output


def test_list_without_recipes(tmp_path, monkeypatch):
    monkeypatch.setattr(_recipes, "BUNDLED", tmp_path)
    result = invoke("list")
    assert result.exit_code == 0
    assert result.output == f"No recipes found (searched: {tmp_path}).\n"


def test_bundled_recipes_are_the_package_kerasteps_recipes():
    import kerasteps.recipes

    folder = Path(kerasteps.recipes.__file__).resolve().parent
    assert _recipes.BUNDLED == folder == ROOT / "recipes"  # the clone's own files
    assert list(_recipes.find_recipes()) == [
        "batch_vs_sgd",
        "global_step",
        "image_classifier",
        "wgan",
        "wgan_images",
    ]
    # The authoring kit does not reach up into the launcher.
    assert not hasattr(recipe, "find_recipes")


# ---------------------------------------------------------------------------- run
def test_run_by_name_passes_options(fixture_recipes):
    result = invoke(
        "run", "hello", "--name", "bob", "--times", "2", "--steps", "3", "--resume"
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "hello bob",
        "hello bob",
        "steps=3 log_every=2 log_dir=logs/hello seed=0 resume=True",
    ]


def test_run_help_shows_the_recipe_options(fixture_recipes):
    result = invoke("run", "hello", "--help")
    assert result.exit_code == 0
    assert result.output.startswith("Usage: kerasteps run hello [OPTIONS]\n")
    options = [
        re.search(r"--[\w-]+", line).group()
        for line in result.output.splitlines()
        if re.match(r"  (-\w, )?--", line)
    ]
    assert options[:5] == ["--steps", "--log-every", "--log-dir", "--seed", "--resume"]
    assert {"--name", "--times", "--help"} <= set(options)
    assert "[default: 7; x>=1]" in " ".join(result.output.split())  # its default


def test_run_user_file_by_path(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # `run FILE` extends it
    (tmp_path / "my_helpers.py").write_text("GREETING = 'hi'\n")
    script = tmp_path / "my_recipe.py"
    script.write_text(
        textwrap.dedent(
            '''\
            """My own recipe."""
            import click
            import my_helpers  # a module next to the recipe, as with `python FILE`
            from kerasteps.recipe import common_options

            @click.command()
            @common_options(steps=5, log_every=1, log_dir="logs/mine")
            @click.option("--who", required=True)
            def main(steps, log_every, log_dir, seed, resume, who):
                click.echo(f"{my_helpers.GREETING} {who} {steps} {log_dir} {seed}")

            if __name__ == "__main__":
                main()
            '''
        )
    )
    result = invoke("run", str(script), "--who", "ann", "--seed", "4")
    assert result.exit_code == 0, result.output
    assert result.output == "hi ann 5 logs/mine 4\n"

    result = invoke("run", str(script), "--help")
    assert result.exit_code == 0
    usage = " ".join(result.output.split())
    assert usage.startswith(f"Usage: kerasteps run {script} [OPTIONS]")
    assert "--who TEXT" in result.output

    result = invoke("run", str(script))  # a missing required recipe option
    assert result.exit_code == 2
    assert "Error: Missing option '--who'." in result.output


def test_run_training_recipe_logs_at_global_steps(fixture_recipes, tmp_path):
    run_log_dir = tmp_path / "tiny"
    result = invoke(
        "run",
        "tiny-fit",
        "--steps",
        "6",
        "--log-every",
        "2",
        "--log-dir",
        str(run_log_dir),
    )
    assert result.exit_code == 0, result.output
    assert "global step 6" in result.output
    assert f"view:  kerasteps board {run_log_dir}" in result.output
    scalars = event_files.read_scalars(run_log_dir)
    assert list(scalars) == ["train"]
    assert [step for step, _ in scalars["train"]["loss"]] == [2, 4, 6]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["run", "nope"],
            "Error: Invalid value for 'RECIPE': unknown recipe 'nope'. "
            "Known recipes: hello, tiny_fit (or give the path of a recipe file).",
        ),
        (["run", "hello", "--bogus"], "Error: No such option"),
        (
            ["run", "hello", "--steps", "0"],
            "Error: Invalid value for '--steps': 0 is not in the range x>=1.",
        ),
        (
            ["run", "missing/recipe.py"],
            "Error: Invalid value for 'RECIPE': recipe file 'missing/recipe.py' "
            "does not exist.",
        ),
        (["run"], "Error: Missing argument 'RECIPE'."),
        # Issue 46, finding 8: a traceback (rc 1), and runs that logged nothing.
        (
            ["run", "hello", "--log-dir", ""],
            "Error: Invalid value for '--log-dir': must be a folder, received ''.",
        ),
        (
            ["run", "hello", "--mlflow", "ftp://nowhere"],
            "Error: Invalid value for '--mlflow': 'ftp://nowhere' has the scheme "
            "'ftp', which MLflow does not serve",
        ),
        (
            ["run", "hello", "--mlflow", "http://u:pw@[::1"],
            "Error: Invalid value for '--mlflow': 'http://***@[::1' does not parse "
            "as a URI",
        ),
        (["list", "--bogus"], "Error: No such option"),
        (["frobnicate"], "Error: No such command 'frobnicate'."),
    ],
)
def test_usage_errors_exit_2_with_one_line(fixture_recipes, args, message):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    error_lines = [line for line in result.output.splitlines() if "Error" in line]
    assert len(error_lines) == 1
    assert error_lines[0].startswith(message)


def test_recipe_file_without_main_is_a_usage_error(tmp_path):
    script = tmp_path / "not_a_recipe.py"
    script.write_text('"""No main here."""\nmain = 3\n')
    result = CliRunner().invoke(main, ["run", str(script)])
    assert result.exit_code == 2
    assert "defines no click command named `main`" in result.output


def test_console_script_usage_error_has_no_traceback(tmp_path):
    process = subprocess.run(
        [sys.executable, "-m", "kerasteps.cli", "run", "nope"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 2
    assert "Traceback" not in process.stderr
    assert (
        "unknown recipe 'nope'. Known recipes: batch_vs_sgd, global_step, "
        "image_classifier, wgan, wgan_images" in process.stderr
    )


def test_plot_and_summary_usage_errors(log_dir, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    no_scalars = tmp_path / "no_scalars"
    writer = tf.summary.create_file_writer(str(no_scalars))
    with writer.as_default():
        tf.summary.histogram("weights", [1.0], step=1)
    writer.close()
    cases = [
        (["plot", str(tmp_path / "missing")], "does not exist"),
        (["summary", str(tmp_path / "missing")], "does not exist"),
        (["board", str(tmp_path / "missing")], "does not exist"),
        (["plot", str(empty)], f"no TensorBoard event files under '{empty}'."),
        (["summary", str(empty)], f"no TensorBoard event files under '{empty}'."),
        (["summary", str(no_scalars)], "hold no scalar summaries"),
        (
            ["plot", str(log_dir), "--tag", "nope"],
            "no scalar tag 'nope' under",
        ),
        (
            ["plot", str(log_dir), "-o", str(tmp_path / "curves.xyz")],
            "unsupported image format",
        ),
        (["plot", str(log_dir), "--bogus"], "No such option"),
        (["plot", str(log_dir), "--xscale", "symlog"], "Invalid value for '--xscale'"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert message in result.output, (args, result.output)
    assert (
        "Tags: accuracy, learning_rate, loss."
        in CliRunner().invoke(main, ["plot", str(log_dir), "--tag", "nope"]).output
    )


# ----------------------------------------------------------------------- summary
SUMMARY_HEADER = [
    "RUN", "TAG", "POINTS", "LAST_STEP", "LAST", "BEST", "BEST_STEP", "MIN", "MAX"
]  # fmt: skip


def test_summary_table(log_dir):
    result = invoke("summary", str(log_dir))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    rows = [line.split() for line in lines]
    assert rows[0] == SUMMARY_HEADER
    assert rows[1:] == [
        ["a/train", "accuracy", "3", "30", "0.750000", "0.875000", "20", "-", "-"],
        ["a/train", "loss", "3", "30", "0.500000", "0.250000", "20", "-", "-"],
        ["b", "accuracy", "2", "15", "0.500000", "0.625000", "5", "-", "-"],
        ["b", "learning_rate", "1", "5", "0.125000", "-", "-", "0.125000", "0.125000"],
        ["b", "loss", "2", "15", "1.500000", "1.500000", "15", "-", "-"],
    ]
    # Names left-aligned, numbers right-aligned, two spaces apart.
    assert lines[0].startswith("RUN      TAG            POINTS  LAST_STEP      LAST")
    assert lines[4] == (
        "b        learning_rate       1          5  0.125000         -          -"
        "  0.125000  0.125000"
    )
    result = invoke("summary", str(log_dir), "--tag", "loss")
    assert [line.split()[:2] for line in result.output.splitlines()[1:]] == [
        ["a/train", "loss"],
        ["b", "loss"],
    ]


def test_summary_shows_best_only_where_the_direction_is_known(tmp_path):
    """A real WGAN fit and a real plain fit with validation, read back by the CLI."""
    from kerasteps.callbacks import (
        StepCheckpoint,
        StepTensorBoard,
        Throughput,
        ValidateEvery,
    )
    from kerasteps.formatting import format_value
    from kerasteps.mixtures import ring_of_gaussians
    from kerasteps.models import WGAN
    from tests.helpers import tiny_model, tiny_wgan

    x, _ = ring_of_gaussians(2 * 16 * 6, seed=0)
    gan = tiny_wgan()
    gan.fit(
        WGAN.make_dataset(x, 16, n_critic=2, seed=1, repeat=True),
        steps_per_epoch=6,
        epochs=1,
        verbose=0,
        callbacks=[
            Throughput(3, batch_size=16),
            StepTensorBoard(tmp_path / "gan", every=3),
        ],
    )
    model = tiny_model(metrics=["mae"])
    rng = np.random.default_rng(0)
    xs, ys = rng.normal(size=(24, 2)), rng.normal(size=(24, 1))
    model.fit(
        xs[:16],
        ys[:16],
        batch_size=2,
        verbose=0,
        callbacks=[
            ValidateEvery(4, (xs[16:], ys[16:])),
            StepTensorBoard(tmp_path / "plain", every=4),
            StepCheckpoint(tmp_path / "ckpts", every=100, monitor="val_loss"),
        ],
    )

    result = invoke("summary", str(tmp_path))
    assert result.exit_code == 0, result.output
    *lines, best_line = result.output.splitlines()
    assert lines[0].split() == SUMMARY_HEADER
    val = event_files.read_scalars(str(tmp_path))["plain/validation"]["loss"]
    step, value = min(val, key=lambda point: point[1])[:2]
    assert best_line == (
        f"best checkpoint: {tmp_path / 'ckpts' / f'ckpt-{step}'} (step {step}, "
        f"val_loss={format_value(value, name='val_loss')})"
    )
    table = {tuple(line.split()[:2]): line.split()[2:] for line in lines[1:]}
    scalars = event_files.read_scalars(str(tmp_path))
    directed = {
        ("plain/train", "loss"): "min",
        ("plain/train", "mae"): "min",
        ("plain/validation", "loss"): "min",
        ("plain/validation", "mae"): "min",
    }
    undirected = [
        ("gan/train", "d_loss"),
        ("gan/train", "g_loss"),
        ("gan/train", "wasserstein"),
        ("gan/train", "learning_rate/d"),
        ("gan/train", "counters/d_step"),
        ("gan/train", "steps_per_second"),
        ("gan/train", "examples_per_second"),
        ("plain/train", "learning_rate"),
        ("plain/train", "counters/step"),
    ]
    assert set(directed) | set(undirected) <= set(table)
    assert len(table) == sum(len(tags) for tags in scalars.values())
    for (run, tag), cells in table.items():
        points = scalars[run][tag]
        values = [value for _, value in points]
        points_, last_step, last, best, best_step, low, high = cells
        assert (points_, last_step) == (str(len(points)), str(points[-1][0]))
        assert last == format_value(values[-1], name=tag)
        if (run, tag) in directed:
            value = min(values)
            assert (best, best_step) == (
                format_value(value, name=tag),
                str(points[values.index(value)][0]),
            )
            assert (low, high) == ("-", "-"), (run, tag)
        else:
            assert best_mode(tag) is None, tag
            assert (best, best_step) == ("-", "-"), (run, tag)
            assert (low, high) == (
                format_value(min(values), name=tag),
                format_value(max(values), name=tag),
            )
    # Counters are exact; throughput has 4 significant digits and no exponent.
    assert table[("gan/train", "counters/d_step")][2:] == ["12", "-", "-", "6", "12"]
    for text in table[("gan/train", "steps_per_second")][2:]:
        if text != "-":
            assert "e" not in text and len(text.replace(".", "").lstrip("0")) >= 4


def test_summary_of_nan_and_inf(tmp_path):
    nan, inf = float("nan"), float("inf")
    write_scalars(
        tmp_path,
        {
            "loss": [(1, nan), (2, nan)],
            "reverse_kl": [(1, inf), (2, inf)],
            "val_accuracy": [(1, 0.5), (2, nan)],
            "gradient_penalty": [(1, 2.5e-7), (2, nan), (3, -0.0)],
        },
    )
    result = invoke("summary", str(tmp_path))
    assert result.exit_code == 0, result.output
    rows = {row[1]: row[2:] for row in map(str.split, result.output.splitlines()[1:])}
    assert rows == {
        "gradient_penalty": ["3", "3", "0.000000", "-", "-", "0.000000", "2.5e-07"],
        "loss": ["2", "2", "nan", "nan", "-", "-", "-"],
        "reverse_kl": ["2", "2", "inf", "-", "-", "inf", "inf"],
        "val_accuracy": ["2", "2", "nan", "0.500000", "1", "-", "-"],
    }


def test_best_mode_rule():
    for tag in ("loss", "val_loss", "epoch_loss", "train/mean_squared_error"):
        assert best_mode(tag) == "min", tag
    for tag in ("mae", "val_mae", "error", "val/sparse_categorical_crossentropy"):
        assert best_mode(tag) == "min", tag
    for tag in ("accuracy", "val_accuracy", "val/binary_accuracy", "auc"):
        assert best_mode(tag) == "max", tag
    assert best_mode("epoch_precision") == best_mode("Val_Accuracy") == "max"
    # GAN players' losses are adversarial: no direction.
    gan = ["d_loss", "g_loss", "val_d_loss", "gen_loss", "disc_loss", "critic_loss"]
    gan += ["generator_loss", "discriminator/loss", "adversarial_loss", "adv_loss"]
    gan += ["loss_d", "d_accuracy"]
    # Nor have estimates, coverage, rates, counters and throughput.
    other = ["wasserstein", "gradient_penalty", "gp", "high_quality"]
    other += ["modes_captured", "reverse_kl", "learning_rate", "learning_rate/d"]
    other += ["learning_rate/loss", "counters/step", "counters/d_step"]
    other += ["steps_per_second", "examples_per_second", "loss_per_second"]
    for tag in gan + other:
        assert best_mode(tag) is None, tag


# ------------------------------------------------------------------------- board
def test_board_refuses_a_port_in_use(log_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["board", str(log_dir), "--port", str(port)])
    assert result.exit_code == 2
    assert "Invalid value for '--port': cannot listen on 127.0.0.1:" in result.output


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_board_reads_logs_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["board"])
    assert result.exit_code == 2
    assert "Directory 'logs' does not exist" in result.output


def test_board_serves_the_runs_over_http(log_dir, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "board.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "kerasteps.cli", "board", str(log_dir)]
        + ["--port", str(port), "--", "--reload_interval", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"{base}/?tagFilter=loss#timeseries"  # the loss first
    line = f"TensorBoard on {log_dir}: {url}  (Ctrl-C to stop)"
    try:
        # The address is printed once TensorBoard answers there: from then on a
        # request needs no retry.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and line not in open(log.name).read():
            assert process.poll() is None, (tmp_path / "board.log").read_text()
            time.sleep(0.1)
        assert get_json(f"{base}/data/runs") is not None
        with urllib.request.urlopen(url, timeout=10) as page:  # TensorBoard's page
            assert page.status == 200 and b"<tb-webapp>" in page.read()
        runs, deadline = [], time.monotonic() + 60
        while time.monotonic() < deadline and sorted(runs) != ["a/train", "b"]:
            assert process.poll() is None, (tmp_path / "board.log").read_text()
            try:
                runs = get_json(f"{base}/data/runs")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        assert sorted(runs) == ["a/train", "b"], (tmp_path / "board.log").read_text()

        query = urllib.parse.urlencode({"run": "a/train", "tag": "loss"})
        points = get_json(f"{base}/data/plugin/scalars/scalars?{query}")
        assert [step for _, step, _ in points] == [10, 20, 30]
        assert [value for _, _, value in points] == pytest.approx([1.0, 0.25, 0.5])
        tags = get_json(f"{base}/data/plugin/scalars/tags")
        assert set(tags["b"]) == {"accuracy", "learning_rate", "loss"}

        # SIGTERM to the launcher stops TensorBoard too: the port closes.
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            get_json(f"{base}/data/runs")
        text = (tmp_path / "board.log").read_text()
        assert text.index(f"Starting TensorBoard on {log_dir} ...") < text.index(line)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # our own session only
            process.wait(timeout=10)
        log.close()


# ------------------------------------------------------ what a terminal user sees
def launcher(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`kerasteps ARGS...` in a new process, with the environment a user has."""
    return subprocess.run(
        [sys.executable, "-m", "kerasteps.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=user_environment(),
    )


def test_summary_and_plot_print_nothing_but_their_output(tmp_path, monkeypatch):
    """summary and plot read the event files without TensorFlow: quiet and fast.
    (That a recipe run prints no TensorFlow start-up lines, in a new process as a
    user runs it, test_readme.py's quickstart test checks: its stderr is the
    README's INFO lines, line for line.)"""
    monkeypatch.chdir(tmp_path)
    run_recipe("global_step", "--steps", "3", "--log-every", "1")
    for args in (("summary", "logs/global_step"), ("plot", "logs/global_step")):
        process = launcher(*args, "--tag", "loss", cwd=tmp_path)
        assert process.returncode == 0, process.stderr
        assert process.stderr == ""
        assert process.stdout


def test_summary_and_plot_do_not_import_tensorflow(tmp_path):
    log_dir = tmp_path / "logs"
    write_scalars(log_dir / "train", {"loss": [(1, 0.5), (2, 0.25)]})
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from kerasteps.cli import main\n"
        f"for args in (['summary', {str(log_dir)!r}], "
        f"['plot', {str(log_dir)!r}, '-o', {str(tmp_path / 'c.png')!r}]):\n"
        "    assert CliRunner().invoke(main, args).exit_code == 0\n"
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["False", "False"]


@pytest.mark.usefixtures("bundled_recipes")
@pytest.mark.parametrize(
    "name", ["global_step", "wgan", "wgan_images", "image_classifier", "batch_vs_sgd"]
)
def test_dash_h_is_help_everywhere(name):
    for args in (["-h"], ["run", "-h"], ["run", name, "-h"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, (args, result.output)
        assert result.output.startswith("Usage: "), args
    module = f"kerasteps.recipes.{name}"
    process = subprocess.run(
        [sys.executable, "-m", module, "-h"], capture_output=True, text=True, timeout=60
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.startswith(f"Usage: python -m {module} [OPTIONS]")
    assert "--verbose" in process.stdout
