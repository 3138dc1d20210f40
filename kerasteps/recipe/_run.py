"""The recipe kit's run: its folder, new or resumed, and what a recipe does with it."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
from collections.abc import Mapping
from typing import Any, NamedTuple

import click

from kerasteps._files import _atomic
from kerasteps._validate import check_int
from kerasteps.recipe import _options

__all__ = [
    "Run",
    "exit_if_interrupted",
    "print_log_hint",
    "resume_from_checkpoint",
    "start_run",
    "warm_up",
]

#: A run folder's name: `run-<N>`, N = 1, 2, ...
_RUN_NAME = re.compile(r"run-([1-9][0-9]*)")
#: The file in a run's folder that holds its settings (`start_run`).
SETTINGS_FILE = "run.json"


def print_log_hint(log_dir: str | os.PathLike) -> None:
    """Prints where a run's logs are and the commands to look at them.

    For a run folder `LOG_DIR/run-N`, TensorBoard and the plot are pointed at
    `LOG_DIR`, so the run shows beside the earlier ones; the table at the run.

    Args:
        log_dir: The run's folder (`Run.folder`), or any log directory.

    Example:

    >>> from kerasteps.recipe import print_log_hint
    >>> print_log_hint("logs/demo/run-2")
    Logs written to logs/demo/run-2
      view:  kerasteps board logs/demo
      plot:  kerasteps plot logs/demo -o curves.png
      table: kerasteps summary logs/demo/run-2
    """
    run = str(log_dir)
    parent = os.path.dirname(run) if _RUN_NAME.fullmatch(os.path.basename(run)) else ""
    runs = parent or run
    click.echo(f"Logs written to {run}")
    click.echo(f"  view:  kerasteps board {shlex.quote(runs)}")
    click.echo(f"  plot:  kerasteps plot {shlex.quote(runs)} -o curves.png")
    click.echo(f"  table: kerasteps summary {shlex.quote(run)}")


class Run(NamedTuple):
    """One run of a recipe, from `start_run`.

    Attributes:
        folder: The run's folder, `LOG_DIR/run-N`: event files, JSON lines,
            checkpoints and what the recipe saves go there.
        number: N.
        resumed: True when it continues an earlier run (`--resume`).
        start: The global step training starts from: 0 for a new run, or without
            a `model`.
        stop: The `StopAtStep(steps)` callback to pass to `fit()`; None when the
            model is already at `steps` (nothing to train), or without a `model`.
    """

    folder: str
    number: int
    resumed: bool
    start: int = 0
    stop: Any = None


def start_run(
    log_dir: str | os.PathLike,
    resume: bool,
    *,
    model: Any = None,
    steps: int | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Run:
    """This run's folder, new or resumed: the recipe kit's one way in.

    Each run gets its own folder, as Lightning's `version_N`, so a new run never
    touches an earlier run's logs and checkpoints: a new run creates
    `LOG_DIR/run-N` with N one more than the largest existing one (from 1) and
    prints `New run: LOG_DIR/run-N`; `resume` continues the run with the largest
    N (or creates `run-1`). A `log_dir` that is itself named `run-N` is that run's
    folder: `resume` continues it, and a new run there is allowed only while it
    is empty.

    `settings`, the options a resumed run must not change (the data, a learning
    rate, a seed), are saved in the run's `run.json`; a `--resume` whose settings
    differ is refused naming each change (`n_fft: 16 -> 32`), before anything is
    written or trained. Call it after every option is checked.

    With a `model` (compiled, in its initial state) and `steps`, a resumed run
    restores the newest checkpoint of `FOLDER/checkpoints` (`StepCheckpoint`'s)
    into it and says from where (`resume_from_checkpoint`), and the run is planned
    to the global step `steps`. A recipe that trains several models in one run
    gives none, and restores each itself.

    Args:
        log_dir: The recipe's `--log-dir`, the parent of its runs.
        resume: Continue the latest run (`--resume`) instead of starting one.
        model: Optional model to restore and plan; needs `steps`.
        steps: The global step to train to (`--steps`).
        settings: Optional JSON-serialisable `{name: value}`, saved in order.

    Returns:
        The `Run`; its folder exists.

    Raises:
        click.UsageError: a `--resume` with other settings, or a `log_dir` that is
            an earlier run's `run-N` folder without `--resume`.
        ValueError: a `model` without `steps`, or `steps` without a `model`.

    Example:

    >>> import tempfile, keras
    >>> from kerasteps.recipe import start_run
    >>> log_dir = tempfile.mkdtemp()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> run = start_run(log_dir, False, model=model, steps=100)  # doctest: +ELLIPSIS
    New run: .../run-1
    >>> run.number, run.start, run.stop.max_steps
    (1, 0, 100)
    >>> start_run(log_dir, True, settings={"lr": 0.3}).number
    1
    >>> try:
    ...     start_run(log_dir, True, settings={"lr": 0.1})
    ... except click.UsageError as error:
    ...     print(error.message)  # doctest: +ELLIPSIS
    --resume needs the settings of the run in .../run-1, but lr: 0.3 -> 0.1.
    """
    if (model is None) != (steps is None):
        raise ValueError(
            "`model` and `steps` go together: give both to restore and plan the "
            f"model, or neither; received model={model!r}, steps={steps!r}."
        )
    if steps is not None:
        steps = check_int("steps", steps)
    folder, number, resumed = _open_folder(os.fspath(log_dir), resume)
    if settings is not None:
        _save_settings(folder, resumed, settings)
    if not resumed:
        click.echo(f"New run: {folder}")
    if model is None:
        return Run(folder, number, resumed)
    return Run(folder, number, resumed, *_plan(model, folder, steps, resumed))


def _run_numbers(log_dir: str) -> list[int]:
    try:
        names = os.listdir(log_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(
        int(match.group(1))
        for name in names
        if (match := _RUN_NAME.fullmatch(name))
        and os.path.isdir(os.path.join(log_dir, name))
    )


def _open_folder(log_dir: str, resume: bool) -> tuple[str, int, bool]:
    """The run's folder, its number and whether it is resumed (`start_run`)."""
    own = _RUN_NAME.fullmatch(os.path.basename(os.path.normpath(log_dir)))
    if own:
        os.makedirs(log_dir, exist_ok=True)
        if not resume and os.listdir(log_dir):
            raise click.UsageError(
                f"--log-dir {log_dir} holds an earlier run. Give --resume to continue "
                f"it, or the parent folder {os.path.dirname(log_dir) or '.'} to start "
                "a new run beside it."
            )
        return log_dir, int(own.group(1)), resume
    numbers = _run_numbers(log_dir)
    if resume and numbers:
        return os.path.join(log_dir, f"run-{numbers[-1]}"), numbers[-1], True
    os.makedirs(log_dir, exist_ok=True)
    number = numbers[-1] + 1 if numbers else 1
    while True:  # another process may take a number at the same moment
        path = os.path.join(log_dir, f"run-{number}")
        try:
            os.mkdir(path)
        except FileExistsError:
            number += 1
            continue
        return path, number, False


def _save_settings(folder: str, resumed: bool, settings: Mapping[str, Any]) -> None:
    """Writes `run.json`, after checking a resumed run's saved settings."""
    path = os.path.join(folder, SETTINGS_FILE)
    if resumed and os.path.exists(path):
        with open(path) as handle:
            saved = json.load(handle)
        changed = [
            f"{name}: {saved.get(name)!r} -> {value!r}"
            for name, value in settings.items()
            if saved.get(name) != value
        ]
        if changed:
            raise click.UsageError(
                f"--resume needs the settings of the run in {folder}, but "
                f"{', '.join(changed)}."
            )
    _atomic.write_text(path, json.dumps(dict(settings)))


def _plan(model: Any, folder: str, steps: int, resumed: bool) -> tuple[int, Any]:
    """`(start, stop)` of a model in the run's folder (`start_run`)."""
    from kerasteps.callbacks import StopAtStep

    checkpoints = os.path.join(folder, "checkpoints")
    if resumed:
        _refuse_an_empty_resume(folder)
    start = resume_from_checkpoint(model, checkpoints) if resumed else 0
    stop = StopAtStep(steps)
    spent = _options.time_spent(model)
    if stop.remaining(model) == 0 or spent:
        reason = spent or f"Already at step {start} >= --steps {steps}"
        click.echo(f"{reason}; nothing to train.")
        print_log_hint(folder)
        return start, None
    return start, stop


def resume_from_checkpoint(
    model: Any, checkpoints: str | os.PathLike, label: str | None = None
) -> int:
    """Restores the newest checkpoint of a directory into `model`, and says so.

    It prints `Resumed from step N (checkpoint PATH)`, or `No checkpoint in
    DIRECTORY yet: starting at step 0.`; with a `label` (one of several models of
    a run), the line starts with it: `sgd: resumed from step N (...)`.

    Args:
        model: The compiled model, in its initial state.
        checkpoints: A `StepCheckpoint` directory (it may not exist yet).
        label: Optional name to start the line with.

    Returns:
        The global step restored, 0 when there is no checkpoint.

    Raises:
        click.UsageError: the directory holds no checkpoint of its own, while an
            `earlier-N` folder of it holds some (a `--resume` would start over).

    Example:

    >>> import tempfile, keras
    >>> from kerasteps.recipe import resume_from_checkpoint
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> resume_from_checkpoint(model, tempfile.mkdtemp(), label="sgd")
    ... # doctest: +ELLIPSIS
    sgd: no checkpoint in ... yet: starting at step 0.
    0
    """
    from kerasteps.callbacks import StepCheckpoint

    _refuse_set_aside(os.fspath(checkpoints))
    restored = StepCheckpoint.restore_latest(model, checkpoints)
    if restored is None:
        line = f"No checkpoint in {checkpoints} yet: starting at step 0."
    else:
        path = os.path.join(checkpoints, f"ckpt-{restored}")
        line = f"Resumed from step {restored} (checkpoint {path})"
    click.echo(f"{label}: {line[0].lower()}{line[1:]}" if label else line)
    return restored or 0


def _refuse_an_empty_resume(folder: str) -> None:
    """A `--resume` of a run without checkpoints, while an earlier run beside it
    has some (a run started by mistake without --resume, stopped before it saved),
    stops (exit 2) instead of training from step 0."""
    from kerasteps.checkpoint.store import CheckpointStore

    def latest(run: str) -> Any:
        return CheckpointStore(os.path.join(run, "checkpoints")).latest()

    if latest(folder) is not None:
        return
    parent = os.path.dirname(folder) or "."
    for number in reversed(_run_numbers(parent)):
        earlier = os.path.join(parent, f"run-{number}")
        found = latest(earlier) if earlier != folder else None
        if found is not None:
            raise click.UsageError(
                f"--resume continues the latest run, {folder}, which holds no "
                f"checkpoint, but {earlier} has checkpoints up to step {found.step}. "
                f"To continue that one: --log-dir {earlier} --resume"
            )


def _refuse_set_aside(checkpoints: str) -> None:
    """A `--resume` that finds no checkpoint while an `earlier-N` folder of the
    directory holds some stops (exit 2) instead of training from step 0: before
    the restore, whose WARNING would give a Python line to a launcher's user."""
    from kerasteps.checkpoint.store import CheckpointStore

    store = CheckpointStore(checkpoints)
    found = store.set_aside() if store.latest() is None else []
    if found:
        path, steps, _ = found[-1]
        raise click.UsageError(
            f"--resume found no checkpoint in {checkpoints}, but {path} holds the "
            f"checkpoints of steps {steps}, set aside by a run that began there "
            "without --resume. To resume from them, move them back, then run "
            f"again with --resume: mv {path}/ckpt-* {checkpoints}/"
        )


def steps_per_call(given: int | None, log_every: int, steps_left: int) -> int:
    """Steps per compiled call (`steps_per_execution`) that end a call on every log
    step and on the last step.

    Keras runs `steps_per_execution` steps per compiled call and calls the callbacks
    at the calls' boundaries; fewer calls cost less. This picks the most, up to 50,
    that divide both `log_every` and the steps left to train, so that no call runs
    past a log step or the planned end. On PyTorch it is 1 (Keras's PyTorch trainer
    runs one step per call).

    Args:
        given: The user's `--steps-per-execution`, returned as it is; or `None`.
        log_every: The period of the run's logging schedule, in steps.
        steps_left: The steps this run trains (its end minus its start).

    Returns:
        The steps per compiled call.

    Example:

    >>> from kerasteps.recipe import steps_per_call
    >>> steps_per_call(None, 600, 6000), steps_per_call(None, 100, 766)
    (50, 2)
    """
    import math

    import keras

    if keras.backend.backend() == "torch":
        return 1
    if given is not None:
        return given
    whole = math.gcd(log_every, steps_left)
    return max(n for n in range(1, 51) if whole % n == 0)


def warm_up(model: Any, data: Any, steps: int) -> None:
    """Traces and compiles the model's training call, then undoes its updates.

    Runs `fit` on `data` for `steps` steps (one compiled call: give the model's
    `steps_per_execution`), then puts back every variable of the model and of
    its optimizer, the global step too, as they were. A clock started after it
    (`TrainingClock`) counts no tracing or compiling: later `fit()` calls reuse
    the compiled call. The model must be built and compiled.

    Args:
        model: The compiled, built model (restored from a checkpoint or not).
        data: What `fit` takes as `x`: a dataset of `(x, y)` batches, with at
            least `steps` batches; give a fresh one to the real `fit()`.
        steps: Positive int, the steps to run.

    Example:

    >>> import numpy as np, keras, tensorflow as tf
    >>> from kerasteps.recipe import warm_up
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("adam", "mse")
    >>> before = model.get_weights()
    >>> data = tf.data.Dataset.from_tensors((np.ones((4, 2)), np.ones((4, 1))))
    >>> warm_up(model, data.repeat(), steps=3)
    >>> int(model.optimizer.iterations), model.train_function is not None
    (0, True)
    >>> all(np.array_equal(a, b) for a, b in zip(model.get_weights(), before))
    True
    """
    from kerasteps.checkpoint import _model_state

    steps = check_int("steps", steps)
    optimizer = model.optimizer
    if not optimizer.built:
        optimizer.build(model.trainable_variables)  # its slots are saved too
    state = _model_state.Snapshot().take(model)
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    _model_state.restore_arrays(model, state)


def exit_if_interrupted(checkpoint: Any, where: str = "") -> None:
    """Exits as a signalled process would, when a signal stopped the run.

    `StepCheckpoint` saves and stops training at a SIGTERM or Ctrl-C (its
    `interrupted` is then True). Call this after the recipe has reported what it
    trained: it prints `Interrupted [where] at step N; run again with --resume to
    continue.` to stderr and exits with status 128 + the signal (143 for SIGTERM,
    130 for Ctrl-C). Otherwise it does nothing.

    Args:
        checkpoint: The run's `StepCheckpoint`, the list of callbacks that holds
            it (a recipe's `step_callbacks`), or None (nothing was trained).
        where: Optional words naming what was stopped, e.g. `"in mode sgd"`.

    Raises:
        SystemExit: with status 128 + the signal number, when interrupted.

    Example:

    >>> import tempfile
    >>> from kerasteps.callbacks import StepCheckpoint
    >>> from kerasteps.recipe import exit_if_interrupted
    >>> checkpoint = StepCheckpoint(tempfile.mkdtemp(), every=100)
    >>> exit_if_interrupted(checkpoint)  # not interrupted: nothing happens
    """
    if isinstance(checkpoint, (list, tuple)):
        checkpoint = next((c for c in checkpoint if hasattr(c, "interrupted")), None)
    if checkpoint is None or not checkpoint.interrupted:
        return
    from kerasteps.steps import global_step

    step = global_step(checkpoint.model)
    words = f" {where}" if where else ""
    click.echo(
        f"Interrupted{words} at step {step}; run again with --resume to continue.",
        err=True,
    )
    raise SystemExit(128 + int(checkpoint.signal_received or signal.SIGTERM))
