"""The recipe authoring kit: what every recipe shares.

A **recipe** is one Python file that trains something with kerasteps and can be run
three ways, with the same options:

```
kerasteps run global_step --steps 500                # a bundled recipe, by name
python -m kerasteps.recipes.global_step --steps 500  # the same, as a module
kerasteps run path/to/my_recipe.py --steps 500       # a user's own file, by path
python path/to/my_recipe.py --steps 500              # the same, as a script
```

The recipe-file contract
------------------------

A recipe file

1. has a module docstring whose **first line is its one-line description** (shown by
   `kerasteps list`, which reads it with `ast` without importing the file);
2. defines a click command named **`main`**, decorated with `@click.command()`;
3. takes the common options through `@common_options(...)` (below `@click.command()`),
   so that its function receives `steps`, `log_every`, `log_dir`, `seed` and `resume`
   keyword arguments (less those it leaves out: `common_options(steps=None)`), plus
   any options of its own;
4. ends with `if __name__ == "__main__": main()`;
5. imports only kerasteps's public API (and keras, tensorflow, numpy, click, ...);
   heavy imports may go inside `main` so that `--help` stays fast.

Minimal example (`hello.py`):

```python
\"\"\"Fit a line and log the loss every N global steps.

Longer help text, shown by `--help` after the first line.
\"\"\"

import click

from kerasteps.recipe import common_options, print_log_hint


@click.command()
@common_options(steps=200, log_every=50, log_dir="logs/hello")
@click.option("--lr", type=float, default=0.1, show_default=True, help="SGD rate.")
def main(steps, log_every, log_dir, seed, resume, lr):
    \"\"\"Fit a line and log the loss every N global steps.\"\"\"
    import keras
    keras.utils.set_random_seed(seed)
    ...  # build, compile, fit until the global step reaches `steps`
    print_log_hint(log_dir)


if __name__ == "__main__":
    main()
```

Meaning of the common options: `--steps` is the global step to train to (a resumed
run continues up to it, it does not add `steps` more); `--log-every` the period of
the `kerasteps.Every` schedule the recipe's callbacks share; `--log-dir` the folder of
the recipe's runs: each run writes its event files, JSON lines, checkpoints and model
to its own `LOG_DIR/run-N` (`start_run`, `open_run`); `--seed` the seed for
`keras.utils.set_random_seed`; `--resume` continue the latest run from its newest
checkpoint (without it a new run starts at step 0); `--mlflow URI` also log the run
to an MLflow tracking server, through the callbacks `tracking_callbacks(run.folder,
every)` returns (a recipe adds them to its own); `--verbose` show TensorFlow's
start-up lines, which are held back otherwise.

A recipe's `main` body typically reads:

```python
model = ...  # built and compiled
run = start_run(model, log_dir, steps, resume)  # prints "New run: ..." or "Resumed ..."
if run.stop is None:
    return  # already at --steps
callbacks = [StepTensorBoard(run.folder, ...), ..., run.stop]
model.fit(..., callbacks=callbacks + tracking_callbacks(run.folder, log_every))
model.save(os.path.join(run.folder, "model.keras"))
print_log_hint(run.folder)
```

The rest of the kit serves recipes that train several models in one run, or time
their training (`batch_vs_sgd`): `begin_run` opens the run and refuses a `--resume`
with other settings (`LOG_DIR/run-N/run.json`); `resume_from_checkpoint` restores one
model and says from where; `ProvideEvery` hands a recipe's own measurement to the
sinks; `TrainingClock` sums the time inside `fit`'s training calls, after `warm_up`
compiled them; `exit_if_interrupted` ends a run that SIGTERM or Ctrl-C stopped with
the status a signalled process has.

Where recipes are found
-----------------------

The bundled recipes are the files of the package `kerasteps.recipes`; `kerasteps list`
shows them and `kerasteps run NAME` runs one (a `-` in `NAME` is read as `_`). Finding
and loading recipe files is the launcher's concern (`kerasteps/recipes/_files.py`);
`find_recipes`, `recipe_description` and `load_recipe` stay importable from here.
"""

from __future__ import annotations

import functools
import inspect
import logging
import numbers
import os
import re
import shlex
import signal
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click
from click.core import ParameterSource

from kerasteps import _startup
from kerasteps._deprecation import renamed_keyword, warn_renamed
from kerasteps._files._paths import creatable_problem
from kerasteps._validate import check_int

if TYPE_CHECKING:  # imported with Keras on first use, by `__getattr__` below
    from kerasteps.recipes._callbacks import ProvideEvery, TrainingClock

__all__ = [
    "ProvideEvery",
    "Run",
    "RunFolder",
    "TrainingClock",
    "begin_run",
    "common_options",
    "exit_if_interrupted",
    "log_to_console",
    "open_run",
    "print_log_hint",
    "resume_from_checkpoint",
    "resume_run",
    "start_run",
    "tracking_callbacks",
    "warm_up",
]

#: A run folder's name: `run-<N>`, N = 1, 2, ...
_RUN_NAME = re.compile(r"run-([1-9][0-9]*)")
#: The file in a run's folder that holds its settings (`begin_run`).
SETTINGS_FILE = "run.json"

F = TypeVar("F", bound=Callable[..., Any])


@renamed_keyword("logdir", "log_dir")
def common_options(
    *,
    steps: int | None = 1000,
    log_every: int | None = 100,
    log_dir: str | None = "logs",
    seed: int | None = 0,
) -> Callable[[F], F]:
    """Adds the options every recipe takes, with per-recipe defaults.

    The decorated function receives five keyword arguments: `steps` (int >= 1),
    `log_every` (int >= 1), `log_dir` (str), `seed` (int) and `resume` (bool), from
    the options `--steps`, `--log-every`, `--log-dir`, `--seed` and `--resume`,
    listed in that order before the recipe's own options in `--help`, followed by
    `--mlflow URI` (the run's values and options also go to that MLflow tracking
    server: `tracking_callbacks`) and `--verbose`. `log_dir` is the folder of the
    recipe's runs: `start_run` (or `open_run`) picks the run's own folder
    `LOG_DIR/run-N` in it.

    Old spellings, until the next release: `--logdir` (hidden from `--help`) is
    `--log-dir`, with a warning on stderr; `common_options(logdir=...)` and a
    function whose parameter is named `logdir` (it then receives the option as
    `logdir`) work, with a `DeprecationWarning`.

    A default of `None` leaves that option out, and the function does not receive
    it: `steps=None` for a recipe that trains for a number of epochs, so that its
    help lists no `--steps` that would do nothing.

    Before the function runs, TensorFlow and Keras are imported with
    `kerasteps.quiet_startup()`, so TensorFlow's start-up log lines do not show;
    `--verbose` (or `KERASTEPS_VERBOSE=1` in the environment) keeps them.

    Args:
        steps: Default of `--steps`, the global step to train to. Default 1000.
        log_every: Default of `--log-every`, the logging period in global steps.
            Default 100.
        log_dir: Default of `--log-dir`, where logs and checkpoints go (relative to
            the working directory). Default `"logs"`; use `"logs/<recipe name>"`.
            `logdir=` is its deprecated spelling.
        seed: Default of `--seed`, the random seed. Default 0.

    Returns:
        A decorator to place between `@click.command()` and the function.

    Raises:
        ValueError: if `steps` or `log_every` is < 1, or `log_dir` is empty.
        TypeError: if `steps`, `log_every` or `seed` is not an int.

    Example:

    >>> import click
    >>> from click.testing import CliRunner
    >>> from kerasteps.recipe import common_options
    >>> @click.command()
    ... @common_options(steps=20, log_every=5, log_dir="logs/demo")
    ... def main(steps, log_every, log_dir, seed, resume):
    ...     click.echo(f"{steps} {log_every} {log_dir} {seed} {resume}")
    >>> CliRunner().invoke(main, ["--steps", "40", "--resume"]).output
    '40 5 logs/demo 0 True\\n'
    >>> @click.command()
    ... @common_options(steps=None, log_dir="logs/epochs")
    ... def by_epochs(log_every, log_dir, seed, resume):
    ...     click.echo(f"{log_every} {log_dir}")
    >>> CliRunner().invoke(by_epochs, []).output
    '100 logs/epochs\\n'
    >>> "--steps" in CliRunner().invoke(by_epochs, ["--help"]).output
    False
    """
    defaults = {
        "steps": steps,
        "log_every": log_every,
        "log_dir": log_dir,
        "seed": seed,
    }
    options = [
        click.option(
            "--" + name.replace("_", "-"),
            default=_checked_default(name, default),
            show_default=True,
            **_COMMON_OPTIONS[name],
        )
        for name, default in defaults.items()
        if default is not None
    ]
    if log_dir is not None:
        options.append(_LOGDIR_ALIAS)
    options.append(click.option("--resume", is_flag=True, help=_RESUME_HELP))
    options.append(_MLFLOW_OPTION)
    options.append(
        click.option(
            "--verbose",
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=_set_verbose,
            help=f"Show TensorFlow's start-up log lines (or set {_startup.VERBOSE_ENV}"
            "=1).",
        )
    )

    def decorator(function: F) -> F:
        if log_dir is not None:
            function = _log_dir_as_logdir(function)
        # click lists options in the order their decorators are written, i.e. the
        # reverse of the order they are applied.
        for option in reversed(options):
            function = option(function)
        return _after_quiet_startup(function)

    return decorator


def _checked_default(name: str, value: Any) -> Any:
    """A common option's default, checked; the type `--help` shows it as."""
    if name in ("steps", "log_every"):
        return check_int(name, value)
    if name == "seed":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"`seed` must be an int, received {value!r}.")
        return int(value)
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ValueError(f"`log_dir` must be a non-empty path, received {value!r}.")
    return str(value)


def _log_dir_as_logdir(function: F) -> F:
    """`function`, or, when it names a parameter `logdir` and none `log_dir` (a
    recipe written before the rename), `function` taking `log_dir` as `logdir`,
    with a `DeprecationWarning` now."""
    parameters = inspect.signature(function).parameters
    if "logdir" not in parameters or "log_dir" in parameters:
        return function
    warn_renamed(
        f"The parameter `logdir` of the recipe function {function.__qualname__}()",
        "`log_dir` (the name common_options passes)",
        stacklevel=4,
    )

    @functools.wraps(function)
    def with_old_name(*args: Any, **kwargs: Any) -> Any:
        kwargs["logdir"] = kwargs.pop("log_dir")
        return function(*args, **kwargs)

    return with_old_name  # type: ignore[return-value]


def _after_quiet_startup(function: F) -> F:
    """`function`, called after `kerasteps.quiet_startup()`."""

    @functools.wraps(function)
    def quietly(*args: Any, **kwargs: Any) -> Any:
        _startup.quiet_startup()
        return function(*args, **kwargs)

    return quietly  # type: ignore[return-value]


def _set_verbose(
    context: click.Context, parameter: click.Parameter, value: bool
) -> None:
    if value:
        os.environ[_startup.VERBOSE_ENV] = "1"


def _set_mlflow(
    context: click.Context, parameter: click.Parameter, value: str | None
) -> None:
    """Keeps `--mlflow URI` for `tracking_callbacks`; refuses it without MLflow."""
    if value is None:
        return
    from kerasteps import _tracking

    if not value.strip():
        raise click.BadParameter("must be a tracking URI, received ''.")
    try:
        _tracking.require_mlflow("--mlflow")
    except ImportError as error:
        raise click.BadParameter(str(error)) from None
    context.meta[_MLFLOW_KEY] = value


_MLFLOW_KEY = "kerasteps.mlflow"
_MLFLOW_OPTION = click.option(
    "--mlflow",
    metavar="URI",
    expose_value=False,
    callback=_set_mlflow,
    help="Also log the run's values and options to this MLflow tracking server "
    "(http://host:5000; needs kerasteps[mlflow]). A resumed run continues the same "
    "MLflow run.",
)


def tracking_callbacks(folder: str | os.PathLike, every: int) -> list[Any]:
    """The callbacks that log a recipe's run to the tracking server the user named
    with `--mlflow URI`, or `[]` without it.

    One `kerasteps.callbacks.MLflowLogger(every)`: in the experiment named after
    the recipe (`kerasteps-<name>`), a run named after `folder` (`run-3`), with the
    recipe's options as its params (`--mlflow`, `--verbose` and `--resume` left
    out). A `--resume` continues the same MLflow run (its id is in the
    checkpoints). Call it inside the recipe's click command.

    Args:
        folder: The run's folder (`Run.folder`).
        every: Log every N global steps (the recipe's `--log-every`).

    Returns:
        A list of callbacks to add to `fit()`'s.

    Example:

    >>> import click
    >>> from click.testing import CliRunner
    >>> from kerasteps.recipe import common_options, tracking_callbacks
    >>> @click.command()
    ... @common_options(steps=20, log_every=5, log_dir="logs/demo")
    ... def main(steps, log_every, log_dir, seed, resume):
    ...     click.echo(tracking_callbacks("logs/demo/run-1", log_every))
    >>> CliRunner().invoke(main, []).output
    '[]\\n'
    """
    context = click.get_current_context(silent=True)
    uri = None if context is None else context.find_root().meta.get(_MLFLOW_KEY)
    if uri is None:
        return []
    from kerasteps.callbacks import MLflowLogger

    params = {
        name: value
        for name, value in context.params.items()
        if name not in ("resume",) and value is not None
    }
    return [
        MLflowLogger(
            every,
            tracking_uri=uri,
            experiment=f"kerasteps-{_recipe_name(context)}",
            run_name=os.path.basename(os.path.normpath(folder)),
            params=params,
        )
    ]


def _recipe_name(context: click.Context) -> str:
    """`wgan` for `kerasteps run wgan`, `my_recipe` for `python my_recipe.py`."""
    name = (context.find_root().info_name or "recipe").split()[-1]
    return os.path.splitext(os.path.basename(name))[0] or "recipe"


def _check_log_dir(
    context: click.Context, parameter: click.Parameter, value: str
) -> str:
    """`--log-dir` must be a directory this process can create and write.

    Nothing is created here: a run refused for another option leaves no folder.
    A `--logdir` given instead (`_deprecated_logdir`, processed before) is used.
    """
    given = context.meta.pop(_LOGDIR_GIVEN, None)
    if given is not None:
        if context.meta.get(_LOG_DIR_SOURCE) is ParameterSource.COMMANDLINE:
            raise _both_spellings(context)
        return given
    problem = creatable_problem(value)
    if problem:
        raise click.BadParameter(problem)
    return value


def _deprecated_logdir(
    context: click.Context, parameter: click.Parameter, value: str | None
) -> None:
    """`--logdir DIR`, the old spelling of `--log-dir DIR`: warns on stderr, checks
    DIR as `--log-dir` does and hands it to `--log-dir` (whose callback runs after
    this one when `--log-dir` is not given: click processes the options given
    first, in command-line order)."""
    if value is None:
        return
    click.echo(
        "Warning: --logdir is deprecated and will be removed in the next release; "
        "use --log-dir.",
        err=True,
    )
    if context.meta.get(_LOG_DIR_SOURCE) is ParameterSource.COMMANDLINE:
        raise _both_spellings(context)
    problem = creatable_problem(value)
    if problem:
        raise click.BadParameter(problem)
    context.meta[_LOGDIR_GIVEN] = value


def _both_spellings(context: click.Context) -> click.UsageError:
    return click.UsageError(
        "--logdir is the deprecated spelling of --log-dir: give --log-dir only.",
        ctx=context,
    )


#: Where `--logdir`'s value waits for `--log-dir` (`context.meta`).
_LOGDIR_GIVEN = "kerasteps.recipe.logdir"
#: Where `--log-dir`'s value came from (`context.meta`), set before its callback.
_LOG_DIR_SOURCE = "kerasteps.recipe.log_dir_source"


class _LogDirOption(click.Option):
    """`--log-dir`, which records where its value came from before its callback
    runs: `context.get_parameter_source` is set after the callback on click 8.4
    and before it on 8.1-8.3 and 8.5, so the callbacks cannot rely on it."""

    def consume_value(
        self, ctx: click.Context, opts: Mapping[str, Any]
    ) -> tuple[Any, ParameterSource]:
        value, source = super().consume_value(ctx, opts)
        ctx.meta[_LOG_DIR_SOURCE] = source
        return value, source


#: `--logdir`, the old spelling of `--log-dir`: hidden, for one release.
_LOGDIR_ALIAS = click.option(
    "--logdir",
    type=click.Path(file_okay=False, dir_okay=True),
    hidden=True,
    expose_value=False,
    callback=_deprecated_logdir,
    help="Deprecated spelling of --log-dir.",
)


#: The common options with a default (see `common_options`): their click settings.
_COMMON_OPTIONS: dict[str, dict[str, Any]] = {
    "steps": {
        "type": click.IntRange(min=1),
        "help": "Train until the global step reaches STEPS (a resumed run continues "
        "up to it).",
    },
    "log_every": {"type": click.IntRange(min=1), "help": "Log every N global steps."},
    "log_dir": {
        "cls": _LogDirOption,
        "type": click.Path(file_okay=False, dir_okay=True),
        "callback": _check_log_dir,
        "help": "Directory for event files, logs and checkpoints.",
    },
    "seed": {"type": int, "help": "Random seed (keras.utils.set_random_seed)."},
}
_RESUME_HELP = (
    "Continue the latest run in LOG_DIR (LOG_DIR/run-N) from its latest checkpoint, "
    "instead of starting a new run at step 0."
)


@renamed_keyword("logdir", "log_dir")
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


def log_to_console(level: int = logging.INFO) -> None:
    """Shows kerasteps's log lines at `level`, and only warnings from other loggers.

    Lines read `INFO:kerasteps:loss=1.396970 at step 101`, like TF1's `tf.logging`.

    Args:
        level: Level of the `kerasteps` logger, default `logging.INFO`.

    Example:

    >>> import logging
    >>> from kerasteps.recipe import log_to_console
    >>> log_to_console(logging.WARNING)
    >>> logging.getLogger("kerasteps").level == logging.WARNING
    True
    """
    logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")
    logging.getLogger("kerasteps").setLevel(level)


class RunFolder(NamedTuple):
    """The folder of one run of a recipe, from `open_run`.

    Attributes:
        path: `LOG_DIR/run-N`.
        number: N.
        resumed: True when it continues an earlier run (`--resume`), False for a
            new run.
    """

    path: str
    number: int
    resumed: bool


class Run(NamedTuple):
    """A run, planned by `start_run`.

    Attributes:
        folder: The run's folder, `LOG_DIR/run-N`: event files, JSON lines,
            checkpoints and what the recipe saves go there.
        start: The global step training starts from (0 for a new run).
        stop: The `StopAtStep(steps)` callback to pass to `fit()`, or None when
            the model is already at `steps` (nothing to train).
    """

    folder: str
    start: int
    stop: Any


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


@renamed_keyword("logdir", "log_dir")
def open_run(log_dir: str | os.PathLike, resume: bool) -> RunFolder:
    """Picks the folder of this run under `log_dir`, as Lightning's `version_N`.

    Each run gets its own folder, so a new run never touches an earlier run's logs
    and checkpoints: a new run creates `LOG_DIR/run-N` with N one more than the
    largest existing one (starting at 1); `resume` continues the run with the
    largest N, or creates `run-1` when there is none. A `log_dir` that is itself
    named `run-N` is taken as the run's folder: `resume` continues it, and a new
    run there is allowed only while it is empty (else `click.UsageError`).

    Args:
        log_dir: The recipe's `--log-dir`, the parent of its runs.
        resume: Continue the latest run (`--resume`) instead of starting one.

    Returns:
        A `RunFolder`; its folder exists.

    Raises:
        click.UsageError: if `log_dir` is an earlier `run-N` folder and not
            `resume`.

    Example:

    >>> import tempfile
    >>> from kerasteps.recipe import open_run
    >>> log_dir = tempfile.mkdtemp()
    >>> open_run(log_dir, resume=False).number, open_run(log_dir, resume=False).number
    (1, 2)
    >>> open_run(log_dir, resume=True).number
    2
    """
    log_dir = os.fspath(log_dir)
    own = _RUN_NAME.fullmatch(os.path.basename(os.path.normpath(log_dir)))
    if own:
        os.makedirs(log_dir, exist_ok=True)
        if not resume and os.listdir(log_dir):
            raise click.UsageError(
                f"--log-dir {log_dir} holds an earlier run. Give --resume to continue "
                f"it, or the parent folder {os.path.dirname(log_dir) or '.'} to start "
                "a new run beside it."
            )
        return RunFolder(log_dir, int(own.group(1)), resume)
    numbers = _run_numbers(log_dir)
    if resume and numbers:
        path = os.path.join(log_dir, f"run-{numbers[-1]}")
        return RunFolder(path, numbers[-1], True)
    os.makedirs(log_dir, exist_ok=True)
    number = numbers[-1] + 1 if numbers else 1
    while True:  # another process may take a number at the same moment
        path = os.path.join(log_dir, f"run-{number}")
        try:
            os.mkdir(path)
        except FileExistsError:
            number += 1
            continue
        return RunFolder(path, number, False)


@renamed_keyword("logdir", "log_dir")
def begin_run(
    log_dir: str | os.PathLike,
    resume: bool,
    settings: Mapping[str, Any] | None = None,
) -> RunFolder:
    """Opens the run's folder, keeps its settings, and says when it is a new run.

    `open_run` picks the folder; a new run prints `New run: LOG_DIR/run-N`.
    `settings`, the options a resumed run must not change (the data, a learning
    rate, a seed), are saved in the run's `run.json`; a `--resume` whose settings
    differ from the saved ones is refused with a `click.UsageError` naming each
    change (`n_fft: 16 -> 32`), before anything is written or trained. Call it
    after every option is checked.

    Args:
        log_dir: The recipe's `--log-dir` (see `open_run`).
        resume: Continue the latest run (`--resume`).
        settings: Optional JSON-serialisable `{name: value}`, saved in order.

    Returns:
        The `RunFolder`.

    Raises:
        click.UsageError: a `--resume` with other settings, or a `log_dir` that is
            an earlier run's `run-N` folder without `--resume` (`open_run`).

    Example:

    >>> import tempfile, click
    >>> from kerasteps.recipe import begin_run
    >>> log_dir = tempfile.mkdtemp()
    >>> run = begin_run(log_dir, False, {"lr": 0.3})  # doctest: +ELLIPSIS
    New run: .../run-1
    >>> begin_run(log_dir, True, {"lr": 0.3}).number
    1
    >>> try:
    ...     begin_run(log_dir, True, {"lr": 0.1})
    ... except click.UsageError as error:
    ...     print(error.message)  # doctest: +ELLIPSIS
    --resume needs the settings of the run in .../run-1, but lr: 0.3 -> 0.1.
    """
    folder = open_run(log_dir, resume)
    if settings is not None:
        _save_settings(folder, settings)
    if not folder.resumed:
        click.echo(f"New run: {folder.path}")
    return folder


def _save_settings(folder: RunFolder, settings: Mapping[str, Any]) -> None:
    """Writes `run.json`, after checking a resumed run's saved settings."""
    import json

    from kerasteps._files import _atomic

    path = os.path.join(folder.path, SETTINGS_FILE)
    if folder.resumed and os.path.exists(path):
        with open(path) as handle:
            saved = json.load(handle)
        changed = [
            f"{name}: {saved.get(name)!r} -> {value!r}"
            for name, value in settings.items()
            if saved.get(name) != value
        ]
        if changed:
            raise click.UsageError(
                f"--resume needs the settings of the run in {folder.path}, but "
                f"{', '.join(changed)}."
            )
    _atomic.write_text(path, json.dumps(dict(settings)))


@renamed_keyword("logdir", "log_dir")
def start_run(
    model: Any,
    log_dir: str | os.PathLike,
    steps: int,
    resume: bool,
    settings: Mapping[str, Any] | None = None,
) -> Run:
    """Opens the run's folder, restores it when resuming, and plans it to `steps`.

    Call it before `fit()`, after every option is checked, with the compiled
    model in its initial state. It prints one line saying which run this is:
    `New run: logs/wgan/run-3`, `Resumed from step 1001 (checkpoint
    logs/wgan/run-3/checkpoints/ckpt-1001)`, or why a `--resume` starts at 0.
    Checkpoints are those of `StepCheckpoint` in `FOLDER/checkpoints`.

    Args:
        model: The compiled model, in its initial state.
        log_dir: The recipe's `--log-dir` (see `open_run`).
        steps: The global step to train to (`--steps`).
        resume: Continue the latest run from its newest checkpoint (`--resume`).
        settings: Optional settings a `--resume` must keep (see `begin_run`).

    Returns:
        A `Run`: its folder, the step training starts from, and the `StopAtStep`
        to pass to `fit()` (None when there is nothing left to train; the logs
        are then pointed to).

    Example:

    >>> import tempfile, keras
    >>> from kerasteps.recipe import start_run
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> log_dir = tempfile.mkdtemp()
    >>> run = start_run(model, log_dir, 100, resume=False)  # doctest: +ELLIPSIS
    New run: .../run-1
    >>> run.start, run.stop.max_steps
    (0, 100)
    """
    folder = begin_run(log_dir, resume, settings)
    start, stop = resume_run(model, folder.path, steps, folder.resumed)
    return Run(folder.path, start, stop)


@renamed_keyword("logdir", "log_dir")
def resume_run(
    model: Any,
    log_dir: str | os.PathLike,
    steps: int,
    resume: bool,
    step_name: str = "global step",
) -> tuple[int, Any]:
    """Restores the newest checkpoint of one run folder, and plans it to `steps`.

    `start_run` does this after picking the run's folder; call this one for a
    folder of your own. The checkpoints are those of `StepCheckpoint` in
    `LOG_DIR/checkpoints`. Call it before `fit()`, which must continue from the
    step it returns. When `resume`, it prints `Resumed from step N (checkpoint
    PATH)`, or that there is no checkpoint to resume from.

    Args:
        model: The compiled model, in its initial state.
        log_dir: The run's folder.
        steps: The global step to train to (`--steps`).
        resume: Whether to restore the newest checkpoint (`--resume`).
        step_name: How the "already there" message names the global step,
            default `"global step"`; it uses its last word.

    Returns:
        `(start, stop)`: the step training starts from, and the `StopAtStep(steps)`
        callback to pass to `fit()`; `stop` is None when the model is already at
        `steps` (the logs are then pointed to and there is nothing to train).

    Example:

    >>> import tempfile, keras
    >>> from kerasteps.recipe import resume_run
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> start, stop = resume_run(model, tempfile.mkdtemp(), 100, resume=True)
    ... # doctest: +ELLIPSIS
    No checkpoint in .../checkpoints yet: starting at step 0.
    >>> start, stop.max_steps
    (0, 100)
    """
    from kerasteps.callbacks import StopAtStep

    checkpoints = os.path.join(log_dir, "checkpoints")
    start = resume_from_checkpoint(model, checkpoints) if resume else 0
    stop = StopAtStep(steps)
    if stop.remaining(model) == 0:
        short = step_name.split()[-1]  # "global step" -> "step"
        click.echo(f"Already at {short} {start} >= --steps {steps}; nothing to train.")
        print_log_hint(log_dir)
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

    restored = StepCheckpoint.restore_latest(model, checkpoints)
    if restored is None:
        line = f"No checkpoint in {checkpoints} yet: starting at step 0."
    else:
        path = os.path.join(checkpoints, f"ckpt-{restored}")
        line = f"Resumed from step {restored} (checkpoint {path})"
    click.echo(f"{label}: {line[0].lower()}{line[1:]}" if label else line)
    return restored or 0


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
        checkpoint: The run's `StepCheckpoint`, or None (nothing was trained).
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


#: The kit's callbacks, imported (with Keras) on first use.
_CALLBACKS = ("ProvideEvery", "TrainingClock")


def __getattr__(name: str) -> Any:
    # The kit's callbacks, and the launcher's recipe-file functions (importable
    # from here as before).
    if name in _CALLBACKS:
        from kerasteps.recipes import _callbacks as _recipe_callbacks

        return getattr(_recipe_callbacks, name)
    if name in ("find_recipes", "recipe_description", "load_recipe"):
        from kerasteps.recipes import _files as _recipe_files

        return getattr(_recipe_files, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
