"""Tests for the `kerasteps` launcher (kerasteps.cli), recipes (kerasteps.recipe) and
the event-file reader (kerasteps.events).

Recipes come from tests/fixtures/recipes through $KERASTEPS_RECIPES_PATH, so these
tests do not depend on the real recipes/ folder.
"""

from __future__ import annotations

import json
import os
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

import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner
from tensorboard.compat.proto import summary_pb2

import kerasteps
from kerasteps import events, recipe
from kerasteps.cli import best_mode, main

REPO = Path(__file__).resolve().parent.parent
FIXTURE_RECIPES = Path(__file__).resolve().parent / "fixtures" / "recipes"

# Scalars written by the `logdir` fixture: run -> tag -> [(step, value)].
TRAIN_LOSS = [(10, 1.0), (20, 0.25), (30, 0.5)]
TRAIN_ACCURACY = [(10, 0.5), (20, 0.875), (30, 0.75)]
B_LOSS = [(5, 2.0), (15, 1.5)]
B_ACCURACY = [(5, 0.625), (15, 0.5)]
B_LEARNING_RATE = [(5, 0.125)]  # written as a TF1 `simple_value`


def write_scalars(run_dir: Path, tags: dict[str, list[tuple[int, float]]]) -> None:
    """Writes TF2 tensor scalars with tf.summary.scalar."""
    writer = tf.summary.create_file_writer(str(run_dir))
    with writer.as_default():
        for tag, points in tags.items():
            for step, value in points:
                tf.summary.scalar(tag, value, step=step)
    writer.close()


def write_simple_values(run_dir: Path, tag: str, points) -> None:
    """Writes TF1-style `simple_value` scalars."""
    writer = tf.summary.create_file_writer(str(run_dir))
    with writer.as_default():
        for step, value in points:
            proto = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
            )
            tf.summary.experimental.write_raw_pb(proto.SerializeToString(), step=step)
    writer.close()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    """Two runs at different depths ("a/train", "b"), two tags each, plus one
    simple_value tag and a histogram (not a scalar) in run "b"."""
    root = tmp_path_factory.mktemp("logs")
    write_scalars(
        root / "a" / "train", {"loss": TRAIN_LOSS, "accuracy": TRAIN_ACCURACY}
    )
    write_scalars(root / "b", {"loss": B_LOSS, "accuracy": B_ACCURACY})
    write_simple_values(root / "b", "learning_rate", B_LEARNING_RATE)
    writer = tf.summary.create_file_writer(str(root / "b"))
    with writer.as_default():
        tf.summary.histogram("weights", [1.0, 2.0, 3.0], step=5)
    writer.close()
    return root


@pytest.fixture
def fixture_recipes(monkeypatch) -> Path:
    monkeypatch.setenv(recipe.RECIPES_PATH_ENV, str(FIXTURE_RECIPES))
    return FIXTURE_RECIPES


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    extra = tmp_path / "extra"
    extra.mkdir()
    # Importing this file would fail: `list` must read the docstring with `ast`.
    (extra / "boom.py").write_text('"""Explode on import.\n\nDetails."""\nraise 1/0\n')
    (extra / "hello.py").write_text('"""Shadows the fixture hello."""\n')
    (extra / "_helper.py").write_text('"""Not a recipe."""\n')
    (extra / "nodoc.py").write_text("x = 1\n")
    path = os.pathsep.join([str(extra), str(FIXTURE_RECIPES)])
    monkeypatch.setenv(recipe.RECIPES_PATH_ENV, path)
    result = invoke("list")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "boom      Explode on import.",
        "hello     Shadows the fixture hello.",  # the first folder wins
        "nodoc     (no description)",
        "tiny_fit  Fit a one-weight linear model and log its loss every N global "
        "steps (test fixture).",
    ]
    result = invoke("list", "--paths")
    assert f"[{extra / 'boom.py'}]" in result.output


def test_list_without_recipes(tmp_path, monkeypatch):
    monkeypatch.setenv(recipe.RECIPES_PATH_ENV, str(tmp_path))
    result = invoke("list")
    assert result.exit_code == 0
    assert result.output == f"No recipes found (searched: {tmp_path}).\n"


def test_bundled_recipes_folder_is_the_repository_recipes(monkeypatch):
    monkeypatch.delenv(recipe.RECIPES_PATH_ENV, raising=False)
    if not Path(kerasteps.__file__).resolve().is_relative_to(REPO):
        pytest.skip("kerasteps is not imported from this checkout")
    assert [p.resolve() for p in recipe.recipe_dirs()] == [REPO / "recipes"]


def test_pyproject_ships_every_subpackage_and_the_recipes():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(config["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "kerasteps").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert on_disk <= packages, f"add {sorted(on_disk - packages)} to pyproject"
    assert config["package-dir"] == {"kerasteps._recipes": "recipes"}
    assert (REPO / "recipes" / "__init__.py").is_file()


# ---------------------------------------------------------------------------- run
def test_run_by_name_passes_options(fixture_recipes):
    result = invoke(
        "run", "hello", "--name", "bob", "--times", "2", "--steps", "3", "--resume"
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "hello bob",
        "hello bob",
        "steps=3 log_every=2 logdir=logs/hello seed=0 resume=True",
    ]


def test_run_help_shows_the_recipe_options(fixture_recipes):
    result = invoke("run", "hello", "--help")
    assert result.exit_code == 0
    assert result.output.startswith("Usage: kerasteps run hello [OPTIONS]\n")
    options = [line.split()[0] for line in result.output.splitlines() if "  --" in line]
    assert options[:5] == ["--steps", "--log-every", "--logdir", "--seed", "--resume"]
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
            @common_options(steps=5, log_every=1, logdir="logs/mine")
            @click.option("--who", required=True)
            def main(steps, log_every, logdir, seed, resume, who):
                click.echo(f"{my_helpers.GREETING} {who} {steps} {logdir} {seed}")

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
    run_logdir = tmp_path / "tiny"
    result = invoke(
        "run",
        "tiny-fit",
        "--steps",
        "6",
        "--log-every",
        "2",
        "--logdir",
        str(run_logdir),
    )
    assert result.exit_code == 0, result.output
    assert "global step 6" in result.output
    assert f"view:  kerasteps board {run_logdir}" in result.output
    scalars = events.read_scalars(run_logdir)
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
    env = {**os.environ, recipe.RECIPES_PATH_ENV: str(FIXTURE_RECIPES)}
    process = subprocess.run(
        [sys.executable, "-m", "kerasteps.cli", "run", "nope"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 2
    assert "Traceback" not in process.stderr
    assert "unknown recipe 'nope'. Known recipes: hello, tiny_fit" in process.stderr


# ------------------------------------------------------------------------ events
def test_read_scalars_reads_both_encodings_at_any_depth(logdir):
    scalars = events.read_scalars(logdir)
    assert scalars == {
        "a/train": {"accuracy": TRAIN_ACCURACY, "loss": TRAIN_LOSS},
        "b": {
            "accuracy": B_ACCURACY,
            "learning_rate": B_LEARNING_RATE,
            "loss": B_LOSS,
        },
    }
    assert list(events.find_runs(logdir)) == ["a/train", "b"]
    assert len(events.find_runs(logdir)["b"]) == 3  # three writers, three files
    timed = events.read_scalars(logdir, wall_time=True)["b"]["loss"]
    assert [point[:2] for point in timed] == B_LOSS
    assert all(point[2] > 1e9 for point in timed)


def test_read_scalars_keeps_write_order_and_duplicates(tmp_path):
    write_scalars(tmp_path, {"loss": [(3, 3.0), (1, 1.0), (3, 4.0)]})
    assert events.read_scalars(tmp_path) == {
        ".": {"loss": [(1, 1.0), (3, 3.0), (3, 4.0)]}
    }
    assert events.read_scalars(tmp_path, sort=False) == {
        ".": {"loss": [(3, 3.0), (1, 1.0), (3, 4.0)]}
    }


def test_read_scalars_errors(tmp_path):
    assert events.read_scalars(tmp_path) == {}
    with pytest.raises(FileNotFoundError, match="`logdir` does not exist"):
        events.read_scalars(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="`logdir` must be a directory"):
        events.read_scalars(tmp_path / "file")


# -------------------------------------------------------------------------- plot
def test_plot_writes_one_subplot_per_tag(logdir, tmp_path):
    output = tmp_path / "out" / "curves.png"
    result = invoke("plot", str(logdir), "-o", str(output))
    assert result.exit_code == 0, result.output
    assert result.output == f"Wrote {output} (3 tags, 2 runs).\n"
    image = matplotlib.image.imread(output)
    assert image.shape[:2] == (720, 1200)  # 2 x 2 grid of 6 x 3.6 in at 100 dpi
    assert float(np.std(image[..., :3])) > 0.01

    only = tmp_path / "loss.png"
    result = invoke("plot", str(logdir), "-o", str(only), "--tag", "loss")
    assert result.exit_code == 0, result.output
    assert "(1 tags, 2 runs)" in result.output
    assert matplotlib.image.imread(only).shape[:2] == (360, 600)

    result = invoke(
        "plot", str(logdir), "-o", str(tmp_path / "lr.png"), "--tag", "learning_rate"
    )
    assert "(1 tags, 1 runs)" in result.output  # only run "b" has it


def test_plot_and_summary_usage_errors(logdir, tmp_path):
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
            ["plot", str(logdir), "--tag", "nope"],
            "no scalar tag 'nope' under",
        ),
        (
            ["plot", str(logdir), "-o", str(tmp_path / "curves.xyz")],
            "unsupported image format",
        ),
        (["plot", str(logdir), "--bogus"], "No such option"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert message in result.output, (args, result.output)
    assert (
        "Tags: accuracy, learning_rate, loss."
        in CliRunner().invoke(main, ["plot", str(logdir), "--tag", "nope"]).output
    )


# ----------------------------------------------------------------------- summary
def test_summary_table(logdir):
    result = invoke("summary", str(logdir))
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()]
    assert rows[0] == [
        "RUN", "TAG", "POINTS", "LAST_STEP", "LAST", "BEST", "BEST_STEP", "MODE"
    ]  # fmt: skip
    assert rows[1:] == [
        ["a/train", "accuracy", "3", "30", "0.75", "0.875", "20", "max"],
        ["a/train", "loss", "3", "30", "0.5", "0.25", "20", "min"],
        ["b", "accuracy", "2", "15", "0.5", "0.625", "5", "max"],
        ["b", "learning_rate", "1", "5", "0.125", "-", "-", "-"],
        ["b", "loss", "2", "15", "1.5", "1.5", "15", "min"],
    ]
    result = invoke("summary", str(logdir), "--tag", "loss")
    assert [line.split()[:2] for line in result.output.splitlines()[1:]] == [
        ["a/train", "loss"],
        ["b", "loss"],
    ]


def test_best_mode_rule():
    assert (
        best_mode("loss") == best_mode("val_loss") == best_mode("epoch_loss") == "min"
    )
    assert best_mode("d_loss") == best_mode("train/mean_squared_error") == "min"
    assert best_mode("accuracy") == best_mode("val/binary_accuracy") == "max"
    assert best_mode("auc") == best_mode("epoch_precision") == "max"
    assert best_mode("learning_rate") is None
    assert best_mode("counters/step") is best_mode("wasserstein") is None


# ------------------------------------------------------------------------- board
def test_board_refuses_a_port_in_use(logdir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["board", str(logdir), "--port", str(port)])
    assert result.exit_code == 2
    assert "Invalid value for '--port': cannot listen on 127.0.0.1:" in result.output


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_board_serves_the_runs_over_http(logdir, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "board.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "kerasteps.cli", "board", str(logdir)]
        + ["--port", str(port), "--", "--reload_interval", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
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
        assert f"TensorBoard on {logdir}: {base}/  (Ctrl-C to stop)" in text
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # our own session only
            process.wait(timeout=10)
        log.close()
