"""Tests for the recipe kit `kerasteps.recipe`: options, run folders and settings,
resume lines, warm-up, the training clock, providers, exit status, hints."""

from __future__ import annotations

import json
import os
import re
import signal

import click
import keras
import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner

from kerasteps import event_files, global_step
from kerasteps.callbacks import JSONLinesLogger, StepCheckpoint, StepTensorBoard
from kerasteps.checkpoint.store import CheckpointStore
from kerasteps.recipe import (
    ProvideEvery,
    Run,
    TrainingClock,
    common_options,
    exit_if_interrupted,
    print_log_hint,
    resume_from_checkpoint,
    start_run,
    warm_up,
)
from tests.helpers import read_jsonl

pytestmark = pytest.mark.neutral


def test_each_new_run_gets_the_next_folder(tmp_path):
    log_dir = tmp_path / "logs" / "wgan"  # created on demand
    assert start_run(log_dir, resume=False) == Run(str(log_dir / "run-1"), 1, False)
    assert start_run(log_dir, resume=False).number == 2
    (log_dir / "run-10").mkdir()  # numbers, not names, are compared
    (log_dir / "run-x").mkdir()
    (log_dir / "notes.txt").write_text("a file is no run")
    assert start_run(log_dir, resume=False).folder == str(log_dir / "run-11")
    assert sorted(os.listdir(log_dir)) == [
        "notes.txt",
        "run-1",
        "run-10",
        "run-11",
        "run-2",
        "run-x",
    ]


def test_resume_continues_the_latest_run_or_starts_the_first(tmp_path):
    assert start_run(tmp_path / "a", resume=True) == Run(
        str(tmp_path / "a" / "run-1"), 1, False
    )
    start_run(tmp_path / "a", resume=False)  # run-2
    assert start_run(tmp_path / "a", resume=True) == Run(
        str(tmp_path / "a" / "run-2"), 2, True
    )


def test_a_run_folder_given_as_log_dir(tmp_path):
    run = tmp_path / "run-3"
    assert start_run(run, resume=False) == Run(str(run), 3, False)  # empty: ok
    (run / "log.jsonl").write_text("{}\n")
    assert start_run(run, resume=True) == Run(str(run), 3, True)
    with pytest.raises(click.UsageError, match="holds an earlier run. Give --resume"):
        start_run(run, resume=False)
    assert (run / "log.jsonl").read_text() == "{}\n"


def tiny_model() -> keras.Model:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def test_start_run_says_new_or_resumed_from_which_checkpoint(tmp_path, capsys):
    model = tiny_model()
    run = start_run(tmp_path, False, model=model, steps=4)
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
    again = start_run(tmp_path, True, model=tiny_model(), steps=10)
    path = os.path.join(checkpoints, "ckpt-4")
    assert capsys.readouterr().out == f"Resumed from step 4 (checkpoint {path})\n"
    assert (again.folder, again.start, again.stop.max_steps) == (run.folder, 4, 10)

    done = start_run(tmp_path, True, model=tiny_model(), steps=4)
    out = capsys.readouterr().out
    assert done.stop is None
    assert "Already at step 4 >= --steps 4; nothing to train." in out


def test_resume_of_a_run_without_checkpoint_says_so(tmp_path, capsys):
    start_run(tmp_path, False, model=tiny_model(), steps=4)
    capsys.readouterr()
    run = start_run(tmp_path, True, model=tiny_model(), steps=4)
    checkpoints = os.path.join(tmp_path, "run-1", "checkpoints")
    assert capsys.readouterr().out == (
        f"No checkpoint in {checkpoints} yet: starting at step 0.\n"
    )
    assert run.start == 0


def test_a_resume_that_would_start_over_stops_and_says_where_the_steps_are(
    tmp_path, capsys
):
    """--resume never trains from 0 while checkpoints wait elsewhere: run-1 trained
    to 4, a run-2 started without --resume stopped before it saved; and a run
    whose checkpoints a fresh start set aside into `earlier-1`. Exit 2, one line."""
    run = start_run(tmp_path, False, model=(model := tiny_model()), steps=4)
    checkpoints = os.path.join(run.folder, "checkpoints")
    x = np.ones((8, 2))
    model.fit(
        x,
        x[:, :1],
        batch_size=2,
        verbose=0,
        callbacks=[StepCheckpoint(checkpoints, every=4)],
    )
    start_run(tmp_path, False, model=tiny_model(), steps=4)  # run-2, nothing saved
    with pytest.raises(click.UsageError) as refused:
        start_run(tmp_path, True, model=tiny_model(), steps=8)
    run_2 = os.path.join(tmp_path, "run-2")
    assert refused.value.exit_code == 2
    assert refused.value.message == (
        f"--resume continues the latest run, {run_2}, which holds no checkpoint, "
        f"but {run.folder} has checkpoints up to step 4. To continue that one: "
        f"--log-dir {run.folder} --resume"
    )
    store = CheckpointStore(checkpoints)
    kept = store.keep_aside([entry.name for entry in store.entries()])
    with pytest.raises(click.UsageError) as refused:
        start_run(run.folder, True, model=tiny_model(), steps=8)
    assert refused.value.message == (
        f"--resume found no checkpoint in {checkpoints}, but {kept} holds the "
        "checkpoints of steps [4], set aside by a run that began there without "
        "--resume. To resume from them, move them back, then run again with "
        f"--resume: mv {kept}/ckpt-* {checkpoints}/"
    )


def test_start_run_takes_a_model_with_steps_only(tmp_path):
    for kwargs in ({"model": tiny_model()}, {"steps": 4}):
        with pytest.raises(ValueError, match="`model` and `steps` go together"):
            start_run(tmp_path, False, **kwargs)
    assert os.listdir(tmp_path) == []  # refused before a folder was made


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
    @common_options(steps=2, log_every=1, log_dir="logs/demo")
    def main(steps, log_every, log_dir, seed, resume):
        click.echo(os.environ.get("KERASTEPS_VERBOSE", "unset"))

    assert CliRunner().invoke(main, []).output == "0\n"
    assert CliRunner().invoke(main, ["--verbose"]).output == "1\n"


# -- common options ------------------------------------------------------------------
def test_a_default_of_none_leaves_an_option_out():
    @click.command()
    @common_options(steps=None, log_every=7, log_dir="logs/epochs")
    def main(log_every, log_dir, seed, resume):
        click.echo(f"{log_every} {log_dir} {seed} {resume}")

    assert CliRunner().invoke(main, ["--seed", "3"]).output == "7 logs/epochs 3 False\n"
    help_text = CliRunner().invoke(main, ["--help"]).output
    assert "--steps" not in help_text
    for option in ("--log-every", "--log-dir", "--seed", "--resume", "--verbose"):
        assert f"  {option} " in help_text
    result = CliRunner().invoke(main, ["--steps", "5"])
    assert result.exit_code == 2
    # click 8.1.x says "No such option: --steps", later ones "No such option '--steps'"
    assert re.search(r"No such option:? '?--steps", result.output), result.output


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"steps": 0}, ValueError, "`steps`"),
        ({"log_every": 2.5}, TypeError, "`log_every`"),
        ({"seed": True}, TypeError, "`seed` must be an int, received True"),
        ({"log_dir": ""}, ValueError, "`log_dir` must be a non-empty path"),
    ],
)
def test_common_option_defaults_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        common_options(**kwargs)


# -- a run's settings ----------------------------------------------------------------
def test_start_run_saves_the_settings_a_resume_must_keep(tmp_path, capsys):
    settings = {"examples": 300, "lr": 0.3, "data": None}
    run = start_run(tmp_path, resume=False, settings=settings)
    assert capsys.readouterr().out == f"New run: {tmp_path / 'run-1'}\n"
    path = tmp_path / "run-1" / "run.json"
    assert path.read_text() == '{"examples": 300, "lr": 0.3, "data": null}'
    again = start_run(tmp_path, resume=True, settings=settings)
    assert again == Run(run.folder, 1, True)
    assert capsys.readouterr().out == ""  # the resumed models say where from

    with pytest.raises(click.UsageError) as refused:
        start_run(tmp_path, resume=True, settings={**settings, "lr": 0.1, "data": "a"})
    assert refused.value.message == (
        f"--resume needs the settings of the run in {run.folder}, but "
        "lr: 0.3 -> 0.1, data: None -> 'a'."
    )
    assert json.loads(path.read_text()) == settings  # untouched
    assert sorted(os.listdir(tmp_path)) == ["run-1"]
    # A new run has nothing to keep: another folder, its own settings.
    other = start_run(tmp_path, resume=False, settings={"lr": 0.1})
    assert json.loads((tmp_path / "run-2" / "run.json").read_text()) == {"lr": 0.1}
    assert other.number == 2


def test_resume_from_checkpoint_names_the_model_it_restores(tmp_path, capsys):
    model = tiny_model()
    checkpoints = tmp_path / "sgd" / "checkpoints"
    assert resume_from_checkpoint(model, checkpoints, label="sgd") == 0
    assert capsys.readouterr().out == (
        f"sgd: no checkpoint in {checkpoints} yet: starting at step 0.\n"
    )
    model.fit(
        np.ones((8, 2)),
        np.ones((8, 1)),
        batch_size=2,
        verbose=0,
        callbacks=[StepCheckpoint(checkpoints, every=4)],
    )
    again = tiny_model()
    assert resume_from_checkpoint(again, checkpoints, label="sgd") == 4
    assert global_step(again) == 4
    path = checkpoints / "ckpt-4"
    assert capsys.readouterr().out == (
        f"sgd: resumed from step 4 (checkpoint {path})\n"
    )
    assert resume_from_checkpoint(tiny_model(), checkpoints) == 4
    assert capsys.readouterr().out.startswith("Resumed from step 4 (")


# -- warm-up, clock, providers ---------------------------------------------------------
def regression_data() -> tf.data.Dataset:
    x = np.linspace(-1, 1, 16, dtype="float32").reshape(8, 2)
    y = x.sum(axis=1, keepdims=True) * 0.5
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat()


def adam_model() -> keras.Model:
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.1), "mse", steps_per_execution=2)
    return model


def fit_4_steps(model: keras.Model) -> None:
    model.fit(regression_data(), steps_per_epoch=4, verbose=0, shuffle=False)


def test_warm_up_compiles_and_leaves_no_trace_in_training():
    straight = adam_model()
    fit_4_steps(straight)
    warmed = adam_model()
    before = [np.array(w) for w in warmed.get_weights()]
    warm_up(warmed, regression_data(), steps=2)
    assert warmed.train_function is not None
    assert int(warmed.optimizer.iterations) == 0
    assert all(
        np.array_equal(a, b) for a, b in zip(warmed.get_weights(), before, strict=True)
    )
    # Adam's moments were put back too: the same updates as without a warm-up.
    fit_4_steps(warmed)
    for a, b in zip(warmed.get_weights(), straight.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert int(warmed.optimizer.iterations) == 4
    with pytest.raises(ValueError, match="`steps`"):
        warm_up(warmed, regression_data(), steps=0)


def test_a_provided_clock_is_logged_and_resumed_from(tmp_path):
    model = tiny_model()
    clock = TrainingClock()
    every = 2
    provider = ProvideEvery(every, lambda model: {"train_seconds": clock.seconds})
    model.fit(
        np.ones((12, 2)),
        np.ones((12, 1)),
        batch_size=2,
        verbose=0,
        callbacks=[
            clock,
            StepTensorBoard(tmp_path, every=every),
            JSONLinesLogger(tmp_path / "log.jsonl", every=every),
            provider,  # listed after the sinks, it still provides first
        ],
    )
    logged = event_files.read_scalars(tmp_path)["train"]["train_seconds"]
    assert [step for step, _ in logged] == [2, 4, 6]
    seconds = [value for _, value in logged]
    assert 0 < seconds[0] < seconds[1] < seconds[2]
    assert seconds[2] == pytest.approx(clock.seconds)  # float32 in the event file
    lines = read_jsonl(tmp_path / "log.jsonl")
    assert [line["train_seconds"] for line in lines] == pytest.approx(seconds)
    assert provider.last_values == {"train_seconds": pytest.approx(seconds[2])}
    # A run resumed from step 4 (or 5) counts on from the time logged at step 4.
    assert TrainingClock.resume(tmp_path, 4).seconds == pytest.approx(seconds[1])
    assert TrainingClock.resume(tmp_path, 5).seconds == pytest.approx(seconds[1])
    assert TrainingClock.resume(tmp_path, 1).seconds == 0.0
    assert TrainingClock.resume(tmp_path / "none", 4).seconds == 0.0


def test_provide_every_needs_a_callable():
    with pytest.raises(TypeError, match="`values` must be a callable"):
        ProvideEvery(5, {"a": 1.0})


# -- exit status -----------------------------------------------------------------------
class SendSigterm(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 2:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_run_stopped_by_sigterm_exits_with_143(tmp_path, capsys):
    exit_if_interrupted(None)  # nothing trained: nothing to do
    checkpoint = StepCheckpoint(tmp_path, every=100)
    model = tiny_model()
    model.fit(
        np.ones((40, 2)),
        np.ones((40, 1)),
        batch_size=2,
        verbose=0,
        callbacks=[SendSigterm(), checkpoint],
    )
    assert checkpoint.interrupted
    step = global_step(model)
    with pytest.raises(SystemExit) as stopped:
        exit_if_interrupted(checkpoint, "in mode sgd")
    assert stopped.value.code == 143
    assert capsys.readouterr().err == (
        f"Interrupted in mode sgd at step {step}; run again with --resume to "
        "continue.\n"
    )


def test_load_arrays_reads_numbers_and_refuses_what_cannot_be_trained_on(tmp_path):
    from kerasteps.recipe import load_arrays

    points, pairs = tmp_path / "points.npy", tmp_path / "pairs.npz"
    np.save(points, np.arange(6, dtype="int64").reshape(3, 2))
    np.savez(pairs, x=np.ones((2, 4)), y=np.zeros((2, 4)))
    (x,) = load_arrays(str(points))
    assert x.dtype == np.float32 and x.tolist() == [[0, 1], [2, 3], [4, 5]]
    x, y = load_arrays(str(pairs), ("x", "y"))
    assert (x.shape, float(x.sum()), y.shape) == ((2, 4), 8.0, (2, 4))

    def refusal(path, names=("x",)):
        with pytest.raises(click.BadParameter) as caught:
            load_arrays(str(path), names)
        assert caught.value.param_hint == "'--data'"
        return caught.value.message

    assert refusal(tmp_path / "moons.csv") == (
        f"expected a .npy or .npz file, received {str(tmp_path / 'moons.csv')!r}."
    )
    assert (
        refusal(tmp_path / "none.npy")
        == f"{str(tmp_path / 'none.npy')!r} is not a file."
    )
    assert refusal(pairs, ("x", "target")) == (
        f"{str(pairs)!r} must hold arrays named x and target, it holds ['x', 'y']."
    )
    words = tmp_path / "words.npy"
    np.save(words, np.array(["a", "b"]))
    assert (
        refusal(words)
        == f"{str(words)!r} must hold numbers; it holds <U1 with shape (2,)."
    )
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert refusal(pickled).startswith(
        f"cannot read {str(pickled)!r} as an array file: "
    )
    nan = tmp_path / "nan.npy"
    np.save(nan, np.array([1.0, np.nan]))
    assert refusal(nan) == f"{str(nan)!r} holds NaN or infinite values."
