"""Tests for the recipe kit `kerasteps.recipe`: run folders, resume lines, hints."""

from __future__ import annotations

import os

import click
import keras
import numpy as np
import pytest
from click.testing import CliRunner

from kerasteps.callbacks import StepCheckpoint
from kerasteps.recipe import (
    RunFolder,
    common_options,
    open_run,
    print_log_hint,
    start_run,
)

pytestmark = pytest.mark.neutral


def test_each_new_run_gets_the_next_folder(tmp_path):
    logdir = tmp_path / "logs" / "wgan"  # created on demand
    assert open_run(logdir, resume=False) == RunFolder(str(logdir / "run-1"), 1, False)
    assert open_run(logdir, resume=False).number == 2
    (logdir / "run-10").mkdir()  # numbers, not names, are compared
    (logdir / "run-x").mkdir()
    (logdir / "notes.txt").write_text("a file is no run")
    assert open_run(logdir, resume=False).path == str(logdir / "run-11")
    assert sorted(os.listdir(logdir)) == [
        "notes.txt",
        "run-1",
        "run-10",
        "run-11",
        "run-2",
        "run-x",
    ]


def test_resume_continues_the_latest_run_or_starts_the_first(tmp_path):
    assert open_run(tmp_path / "a", resume=True) == RunFolder(
        str(tmp_path / "a" / "run-1"), 1, False
    )
    open_run(tmp_path / "a", resume=False)  # run-2
    assert open_run(tmp_path / "a", resume=True) == RunFolder(
        str(tmp_path / "a" / "run-2"), 2, True
    )


def test_a_run_folder_given_as_logdir(tmp_path):
    run = tmp_path / "run-3"
    assert open_run(run, resume=False) == RunFolder(str(run), 3, False)  # empty: ok
    (run / "log.jsonl").write_text("{}\n")
    assert open_run(run, resume=True) == RunFolder(str(run), 3, True)
    with pytest.raises(click.UsageError, match="holds an earlier run. Give --resume"):
        open_run(run, resume=False)
    assert (run / "log.jsonl").read_text() == "{}\n"


def tiny_model() -> keras.Model:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def test_start_run_says_new_or_resumed_from_which_checkpoint(tmp_path, capsys):
    model = tiny_model()
    run = start_run(model, tmp_path, steps=4, resume=False)
    assert capsys.readouterr().out == f"New run: {tmp_path / 'run-1'}\n"
    assert (run.folder, run.start, run.stop.max_steps) == (
        str(tmp_path / "run-1"),
        0,
        4,
    )
    checkpoints = os.path.join(run.folder, "checkpoints")
    model.fit(
        np.ones((8, 2)),
        np.ones((8, 1)),
        batch_size=2,
        verbose=0,
        callbacks=[StepCheckpoint(checkpoints, every=4), run.stop],
    )
    again = start_run(tiny_model(), tmp_path, steps=10, resume=True)
    path = os.path.join(checkpoints, "ckpt-4")
    assert capsys.readouterr().out == f"Resumed from step 4 (checkpoint {path})\n"
    assert (again.folder, again.start, again.stop.max_steps) == (run.folder, 4, 10)

    done = start_run(tiny_model(), tmp_path, steps=4, resume=True)
    out = capsys.readouterr().out
    assert done.stop is None
    assert "Already at step 4 >= --steps 4; nothing to train." in out


def test_resume_of_a_run_without_checkpoint_says_so(tmp_path, capsys):
    start_run(tiny_model(), tmp_path, steps=4, resume=False)
    capsys.readouterr()
    run = start_run(tiny_model(), tmp_path, steps=4, resume=True)
    checkpoints = os.path.join(tmp_path, "run-1", "checkpoints")
    assert capsys.readouterr().out == (
        f"No checkpoint in {checkpoints} yet: starting at step 0.\n"
    )
    assert run.start == 0


def test_log_hint_points_board_and_plot_at_the_runs_side_by_side(capsys):
    print_log_hint("logs/my runs/run-12")
    assert capsys.readouterr().out.splitlines() == [
        "Logs written to logs/my runs/run-12",
        "  view:  kerasteps board 'logs/my runs'",
        "  plot:  kerasteps plot 'logs/my runs' -o curves.png",
        "  table: kerasteps summary 'logs/my runs/run-12'",
    ]


def test_verbose_option_sets_the_environment(monkeypatch):
    monkeypatch.setenv("KERASTEPS_VERBOSE", "0")  # restored after the test

    @click.command()
    @common_options(steps=2, log_every=1, logdir="logs/demo")
    def main(steps, log_every, logdir, seed, resume):
        click.echo(os.environ.get("KERASTEPS_VERBOSE", "unset"))

    assert CliRunner().invoke(main, []).output == "0\n"
    assert CliRunner().invoke(main, ["--verbose"]).output == "1\n"
