"""The recipe kit's common options: what every recipe's command line takes."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from kerasteps import _startup
from kerasteps._files._paths import creatable_problem
from kerasteps._validate import check_int, check_that

__all__ = ["common_options", "load_arrays", "log_to_console", "option_callbacks"]

F = TypeVar("F", bound=Callable[..., Any])


def common_options(
    *,
    steps: int | None = 1000,
    log_every: int | None = 100,
    log_dir: str | None = "logs",
    seed: int | None = 0,
    validates: bool = False,
) -> Callable[[F], F]:
    """Adds the options every recipe takes, with per-recipe defaults.

    The decorated function receives five keyword arguments: `steps` (int >= 1),
    `log_every` (int >= 1), `log_dir` (str), `seed` (int) and `resume` (bool), from
    the options `--steps`, `--log-every`, `--log-dir`, `--seed` and `--resume`,
    listed in that order before the recipe's own options in `--help`, followed by
    `--mlflow URI` (the run's values and options also go to that MLflow tracking
    server), `--max-time SECONDS` (this process's limit: a scheduler's slot),
    `--time-budget SECONDS` (training time across `--resume`; both stop early
    enough to save the final checkpoint: `StopAtTime`), all three through
    `option_callbacks`, and `--verbose`. A recipe that does not validate
    (`validates=False`) refuses `--keep-best` and `--early-stopping` with one line
    and status 2; one that does declares them itself. `log_dir` is the folder of the
    recipe's runs: `start_run` picks the run's own folder
    `LOG_DIR/run-N` in it.

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
        seed: Default of `--seed`, the random seed. Default 0.
        validates: Whether the recipe validates (and takes `--keep-best` and
            `--early-stopping` of its own). Default False.

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
    options.append(click.option("--resume", is_flag=True, help=_RESUME_HELP))
    options += [_MLFLOW_OPTION, *_TIME_OPTIONS]
    if not validates:
        options += [_refused(name) for name in ("--keep-best", "--early-stopping")]
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
        return check_int("seed", value, None)
    ok = isinstance(value, (str, os.PathLike)) and bool(str(value).strip())
    check_that("log_dir", value, ok, "a non-empty path", wrong_type=ValueError)
    return str(value)


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
    """Keeps `--mlflow URI` for `option_callbacks`; refuses it without MLflow."""
    if value is None:
        return
    from kerasteps import _tracking

    if not value.strip():
        raise click.BadParameter("must be a tracking URI, received ''.")
    try:
        _tracking.require_mlflow("--mlflow")
    except ImportError as error:
        raise click.BadParameter(str(error)) from None
    problem = _tracking.uri_problem(value)  # else the run trains and logs nothing
    if problem is not None:
        raise click.BadParameter(problem)
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


def option_callbacks(folder: str | os.PathLike, every: int) -> list[Any]:
    """The callbacks that the common options `--mlflow`, `--max-time` and
    `--time-budget` ask for, or `[]` without them.

    With `--mlflow URI`, one `kerasteps.callbacks.MLflowLogger(every)`: in the
    experiment named after the recipe (`kerasteps-<name>`), a run named after
    `folder` (`run-3`), with the recipe's options as its params (`--mlflow`,
    `--verbose` and `--resume` left out). A `--resume` continues the same MLflow
    run (its id is in the checkpoints). With `--max-time S`, a
    `StopAtTime(S, carry=False)` counting from the launch; with `--time-budget
    S`, a `StopAtTime(S)`, whose time carries across `--resume`. Call it inside
    the recipe's click command.

    Args:
        folder: The run's folder (`Run.folder`).
        every: Log every N global steps (the recipe's `--log-every`).

    Returns:
        A list of callbacks to add to `fit()`'s.

    Example:

    >>> import click
    >>> from click.testing import CliRunner
    >>> from kerasteps.recipe import common_options, option_callbacks
    >>> @click.command()
    ... @common_options(steps=20, log_every=5, log_dir="logs/demo")
    ... def main(steps, log_every, log_dir, seed, resume):
    ...     stops = option_callbacks("logs/demo/run-1", log_every)
    ...     click.echo([(s.max_seconds, s.carry) for s in stops])
    >>> CliRunner().invoke(main, []).output
    '[]\\n'
    >>> CliRunner().invoke(main, ["--time-budget", "3600", "--max-time", "60"]).output
    '[(60.0, False), (3600.0, True)]\\n'
    """
    context = click.get_current_context(silent=True)
    meta = {} if context is None else context.find_root().meta
    mlflow = _mlflow_callbacks(context, meta.get(_MLFLOW_KEY), every, folder)
    return mlflow + _time_callbacks(meta)


def _mlflow_callbacks(
    context: click.Context | None, uri: str | None, every: int, folder: Any
) -> list[Any]:
    if context is None or uri is None:
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


def _keep_time(
    context: click.Context, parameter: click.Parameter, value: float | None
) -> None:
    """Keeps `--max-time` (with the time now: the launch) or `--time-budget` for
    `option_callbacks` (Keras is not imported yet: `StopAtTime` is made there)."""
    if value is not None:
        context.meta[f"kerasteps.{parameter.name}"] = (value, time.monotonic())


def _time_callbacks(meta: dict[str, Any]) -> list[Any]:
    """`StopAtTime` for `--max-time` and `--time-budget`, if given."""
    from kerasteps.callbacks import StopAtTime

    out = []
    if "kerasteps.max_time" in meta:
        seconds, launched = meta["kerasteps.max_time"]
        out.append(StopAtTime(seconds, carry=False, since=launched))
    if "kerasteps.time_budget" in meta:
        out.append(StopAtTime(meta["kerasteps.time_budget"][0]))
    return out


def time_spent(model: Any) -> str | None:
    """Why the run of a restored model has no time left (`--time-budget` spent,
    or `--max-time` passed), else None."""
    context = click.get_current_context(silent=True)
    meta = {} if context is None else context.find_root().meta
    for stop in _time_callbacks(meta) if meta else []:
        if stop.remaining(model) == 0:
            kind = "--time-budget" if stop.carry else "--max-time"
            return f"{kind} {stop.max_seconds:g} s is spent"
    return None


_TIME_OPTIONS = [
    click.option(
        "--max-time",
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        expose_value=False,
        callback=_keep_time,
        help="Stop training before SECONDS of wall time since the launch (this "
        "process's limit: a scheduler's slot), leaving time for the final checkpoint.",
    ),
    click.option(
        "--time-budget",
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        expose_value=False,
        callback=_keep_time,
        help="Stop training before SECONDS of training time, counted across "
        "--resume (saved in the checkpoints), leaving time for the final checkpoint.",
    ),
]


def _refused(name: str) -> Callable[[F], F]:
    """A hidden option that a recipe without validation refuses: one line, exit 2."""

    def refuse(context: click.Context, parameter: click.Parameter, value: Any) -> None:
        if value is not None:
            recipe = _recipe_name(context)
            click.echo(
                f"Error: {name} needs a recipe that validates (image_classifier); "
                f"{recipe} does not.",
                err=True,
            )
            context.exit(2)

    return click.option(name, hidden=True, expose_value=False, callback=refuse)


def _recipe_name(context: click.Context) -> str:
    """`wgan` for `kerasteps run wgan`, `my_recipe` for `python my_recipe.py`."""
    name = (context.find_root().info_name or "recipe").split()[-1]
    return os.path.splitext(os.path.basename(name))[0] or "recipe"


def _check_log_dir(
    context: click.Context, parameter: click.Parameter, value: str
) -> str:
    """`--log-dir` must be a directory this process can create and write.

    Nothing is created here: a run refused for another option leaves no folder.
    """
    if not value.strip():
        raise click.BadParameter(f"must be a folder, received {value!r}.")
    problem = creatable_problem(value)
    if problem:
        raise click.BadParameter(problem)
    return value


_COMMON_OPTIONS: dict[str, dict[str, Any]] = {
    "steps": {
        "type": click.IntRange(min=1),
        "help": "Train until the global step reaches STEPS (a resumed run continues "
        "up to it).",
    },
    "log_every": {"type": click.IntRange(min=1), "help": "Log every N global steps."},
    "log_dir": {
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


def load_arrays(path: str, names: tuple[str, ...] = ("x",)) -> list[Any]:
    """Reads a user's data file for `--data`: one `.npy` array, or the arrays
    `names` of an `.npz` file, as float32 arrays of finite numbers.

    A file that cannot be trained on is refused with click's usage error for
    `--data` (status 2, before any run folder is made), naming what was wrong.

    Args:
        path: The `.npy` or `.npz` file.
        names: The arrays to read from an `.npz` file; one for a `.npy` file.

    Returns:
        The arrays, in the order of `names`.

    Example:

    >>> import os, tempfile, numpy as np
    >>> from kerasteps.recipe import load_arrays
    >>> path = os.path.join(tempfile.mkdtemp(), "points.npy")
    >>> np.save(path, np.zeros((3, 2), dtype="int64"))
    >>> [(x.dtype.name, x.shape) for x in load_arrays(path)]
    [('float32', (3, 2))]
    >>> load_arrays(path + ".txt")
    Traceback (most recent call last):
    ...
    click.exceptions.BadParameter: expected a .npy or .npz file, received '...'.
    """
    import numpy as np

    def bad(message: str) -> click.BadParameter:
        return click.BadParameter(message, param_hint="'--data'")

    if not path.endswith((".npy", ".npz")):
        raise bad(f"expected a .npy or .npz file, received {path!r}.")
    if not os.path.isfile(path):
        raise bad(f"{path!r} is not a file.")
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            found = [loaded]
        else:
            with loaded:
                if not all(name in loaded for name in names):
                    raise bad(
                        f"{path!r} must hold arrays named {' and '.join(names)}, it "
                        f"holds {sorted(loaded.files)}."
                    )
                found = [loaded[name] for name in names]
    except (OSError, ValueError) as error:  # not an array file, or pickled objects
        raise bad(f"cannot read {path!r} as an array file: {error}") from None
    for array in found:
        if array.dtype.kind not in "biuf" or not array.size:
            raise bad(
                f"{path!r} must hold numbers; it holds {array.dtype} with shape "
                f"{array.shape}."
            )
    found = [array.astype("float32") for array in found]
    if not all(np.isfinite(array).all() for array in found):
        raise bad(f"{path!r} holds NaN or infinite values.")
    return found
