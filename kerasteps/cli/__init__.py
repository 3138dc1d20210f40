"""The `kerasteps` command-line launcher.

```
kerasteps --version
kerasteps list [--paths]                   recipes and their one-line descriptions
kerasteps run NAME|FILE.py [OPTIONS]...    run a recipe (NAME --help: its options)
kerasteps board LOG_DIR [--host] [--port] [-- TENSORBOARD_ARGS...]
kerasteps plot LOG_DIR [-o curves.png] [--tag TAG]... [--all] [--xscale auto|linear|log]
kerasteps summary LOG_DIR [--tag TAG]...
```

`list` and `run NAME` show and run the bundled recipes, the package
`kerasteps.recipes` (see `kerasteps.cli._recipes`). `plot` and `summary` read the
event files with `kerasteps.event_files.read_scalars`: a run is each directory under
LOG_DIR that holds event files, named by its path relative to LOG_DIR (`.` for LOG_DIR
itself), and every step is the step the summary was written at (the global step for
kerasteps callbacks).

A user mistake (unknown recipe, unknown option, bad value, missing LOG_DIR, LOG_DIR
without event files, the file system's root as LOG_DIR, port in use) prints a
one-line click error and exits with status 2. A damaged event file is read up to
the damage, with a WARNING naming it (see `kerasteps.event_files`), and the other files
are shown as usual.

Example:

>>> from click.testing import CliRunner
>>> from kerasteps.cli import main
>>> CliRunner().invoke(main, ["--version"]).output  # doctest: +ELLIPSIS
'kerasteps, version ...\\n'
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import traceback
from pathlib import Path

import click

from kerasteps import __version__, _startup
from kerasteps.cli import _plot, _recipes

__all__ = ["main"]

_CONTEXT = {"help_option_names": ["-h", "--help"]}


def _log_dir_to_read(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """LOG_DIR of `board`, `plot`, `summary`: not the file system's root, whose walk
    would read every event file of the machine (and take minutes)."""
    from kerasteps._files._paths import is_file_system_root

    if is_file_system_root(value):
        raise click.BadParameter(
            f"{value!r} is the root of the file system: give the folder of your runs."
        )
    return value


_LOG_DIR = click.Path(exists=True, file_okay=False, dir_okay=True)

# Last component of a tag, split into lower-case words, decides "best" (summary):
# the figure's loss-like words (a penalty has no best) and its accuracy-like ones.
_LOSS_WORDS = (_plot._LOSS_WORDS - {"losses", "penalty"}) | {"fid"}
# A word of a GAN player anywhere in a tag: its loss is not minimised (adversarial).
_GAN_ROLE_WORDS = frozenset(
    {"d", "g", "gen", "disc", "generator", "discriminator", "critic"}
    | {"adversarial", "adv"}
)


@click.group(context_settings=_CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="kerasteps")
def main() -> None:
    """kerasteps: step-centred training for Keras 3.

    Run recipes, and look at the curves they log against the global step.
    """


# --------------------------------------------------------------------------- list
@main.command("list", context_settings=_CONTEXT)
@click.option("--paths", is_flag=True, help="Also show each recipe's file.")
def list_command(paths: bool) -> None:
    """List the recipes with their one-line descriptions."""
    recipes = _recipes.find_recipes()
    if not recipes:
        click.echo(f"No recipes found (searched: {_recipes.BUNDLED}).")
        return
    width = max(len(name) for name in recipes)
    for name, path in recipes.items():
        line = f"{name:<{width}}  {_recipes.recipe_description(path)}"
        click.echo(f"{line}  [{path}]" if paths else line)


# ---------------------------------------------------------------------------- run
def _resolve_recipe(target: str) -> Path:
    """The file of the recipe TARGET, a name or a path. As with `python
    path/to/my_recipe.py`, the folder of a path becomes importable."""
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = Path(target).expanduser()
        if not path.is_file():
            raise click.BadParameter(
                f"recipe file {target!r} does not exist.", param_hint="'RECIPE'"
            )
        sys.path.insert(0, str(path.resolve().parent))
        return path
    recipes = _recipes.find_recipes()
    name = target.replace("-", "_")
    if name in recipes:
        return recipes[name]
    known = ", ".join(recipes) if recipes else "none found"
    raise click.BadParameter(
        f"unknown recipe {target!r}. Known recipes: {known} "
        "(or give the path of a recipe file).",
        param_hint="'RECIPE'",
    )


@main.command(
    context_settings={**_CONTEXT, "allow_interspersed_args": False},
    short_help="Run a recipe by name or file.",
)
@click.argument("recipe")
@click.argument("recipe_args", nargs=-1, type=click.UNPROCESSED)
def run(recipe: str, recipe_args: tuple[str, ...]) -> None:
    """Run the recipe RECIPE with its options RECIPE_ARGS.

    RECIPE is a name from `kerasteps list` or the path of a recipe file
    (`my_recipe.py`). Everything after RECIPE goes to the recipe:
    `kerasteps run RECIPE --help` shows its options.
    """
    path = _resolve_recipe(recipe)
    try:
        # A recipe file that imports TensorFlow at its top prints TensorFlow's
        # start-up lines here; they are held back (`--verbose` keeps them).
        if "--verbose" in recipe_args:
            os.environ[_startup.VERBOSE_ENV] = "1"
        with _startup.filtered_stderr():
            command = _recipes.load_recipe(path)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'RECIPE'") from None
    except Exception as error:  # noqa: BLE001 - the recipe file's own error
        click.echo(f"Error: the recipe file {str(path)!r} cannot be loaded:", err=True)
        click.echo(_recipe_error(error, path), err=True, nl=False)
        sys.exit(2)
    # Standalone mode, as if the file were run as a script: the recipe's own usage
    # errors exit with status 2, `--help` exits with 0.
    command.main(
        args=list(recipe_args), prog_name=f"kerasteps run {recipe}", **_CONTEXT
    )


def _recipe_error(error: BaseException, path: Path) -> str:
    """The error of a recipe file, with its own frames only (not the launcher's)."""
    message = traceback.format_exception_only(error)
    if isinstance(error, SyntaxError):
        return "".join(message)
    mine = os.path.realpath(path)
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if os.path.realpath(frame.filename) == mine
    ]
    return "".join(traceback.format_list(frames) + message)


# -------------------------------------------------------------------------- board
def _check_port_free(host: str, port: int) -> None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise click.BadParameter(
            f"cannot resolve host {host!r}: {error}", param_hint="'--host'"
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as error:
            raise click.BadParameter(
                f"cannot listen on {host}:{port} ({error.strerror or error}).",
                param_hint="'--port'",
            ) from None


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _wait_until_serving(process: subprocess.Popen, host: str, port: int) -> bool:
    """True once TensorBoard answers on `host:port`; False if it exits first (or
    takes more than 5 minutes)."""
    import time
    import urllib.request

    probe = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(_url(probe, port) + "data/runs", timeout=2):
                return True
        except OSError:  # urllib's URLError included
            time.sleep(0.2)
    return False


@main.command(context_settings=_CONTEXT)
@click.argument("log_dir", type=_LOG_DIR, default="logs", callback=_log_dir_to_read)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address.")
@click.option("--port", type=click.IntRange(1, 65535), default=6006, show_default=True)
@click.argument("tensorboard_args", nargs=-1, type=click.UNPROCESSED)
def board(
    log_dir: str, host: str, port: int, tensorboard_args: tuple[str, ...]
) -> None:
    """Start TensorBoard on LOG_DIR (default: logs) and wait (Ctrl-C stops it).

    Its address is printed once TensorBoard answers there; it opens on the loss
    (train and validation in one chart: clear the tag filter for every tag). It
    listens on 127.0.0.1
    (this machine only) unless --host says otherwise.
    Arguments after `--` go to TensorBoard, e.g.
    `kerasteps board logs -- --reload_interval 1`. LOG_DIR may still be empty.
    """
    _check_port_free(host, port)
    # The child watches this process and ends with it, even after a `kill -9`.
    command = [sys.executable, "-m", "kerasteps.cli._board_child", str(os.getpid())]
    command += ["--logdir", log_dir, "--host", host, "--port", str(port)]
    # TensorBoard needs no Keras backend; with KERAS_BACKEND=torch, importing torch
    # and TensorFlow's TensorBoard into one process ends in a segmentation fault.
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    process = subprocess.Popen([*command, *tensorboard_args], env=env)

    def on_sigterm(signum, frame):  # stop TensorBoard too when we are killed
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    click.echo(f"Starting TensorBoard on {log_dir} ...")
    try:
        if _wait_until_serving(process, host, port):
            # Its first view: the loss, train and validation in one chart (the
            # filter box shows `loss`; clear it for every tag).
            url = _url(host, port) + "?tagFilter=loss#timeseries"
            click.echo(f"TensorBoard on {log_dir}: {url}  (Ctrl-C to stop)")
        code = process.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        process.terminate()  # nothing if it has ended
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        signal.signal(signal.SIGTERM, previous)
    if code:
        click.echo(f"TensorBoard exited with status {code}.", err=True)
        sys.exit(code)


# ------------------------------------------------------------------ plot, summary
def _read(log_dir: str, tags: tuple[str, ...]) -> dict[str, dict[str, list]]:
    """Reads the scalars of LOG_DIR, keeping TAGS if given; usage errors exit 2.

    TensorBoard's event reader runs on its own TensorFlow stub unless TensorFlow is
    imported already: TensorBoard imports TensorFlow, when it is installed, for its
    record reader, with TensorFlow's start-up lines. `kerasteps summary` of a small
    run took 4.1 s with it, 0.36 s without (2 CPU cores), and the stub reads the same
    files as fast (200,000 scalars: 10.5 s with TensorFlow, 9.5 s with the stub).
    TensorBoard's own switch is a module (see `kerasteps._compat.use_tensorboard_stub`).
    """
    from kerasteps import _compat, event_files

    if "tensorflow" not in sys.modules:
        _compat.use_tensorboard_stub()

    scalars = event_files.read_scalars(log_dir)
    if not scalars:  # the folder is walked again only to say why
        message = (
            f"the event files under {log_dir!r} hold no scalar summaries."
            if event_files.find_runs(log_dir)
            else f"no TensorBoard event files under {log_dir!r}."
        )
        raise click.BadParameter(message, param_hint="'LOG_DIR'")
    if tags:
        known = sorted({tag for run in scalars.values() for tag in run})
        unknown = [tag for tag in tags if tag not in known]
        if unknown:
            raise click.BadParameter(
                f"no scalar tag {unknown[0]!r} under {log_dir!r}. "
                f"Tags: {', '.join(known)}.",
                param_hint="'--tag'",
            )
        scalars = {
            run: {tag: run_tags[tag] for tag in tags if tag in run_tags}
            for run, run_tags in scalars.items()
            if not run_tags.keys().isdisjoint(tags)
        }
    return scalars


@main.command(context_settings=_CONTEXT)
@click.argument("log_dir", type=_LOG_DIR, callback=_log_dir_to_read)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="curves.png",
    show_default=True,
    help="Image file; its extension picks the format (png, pdf, svg, ...).",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Plot only this tag, always, in the order given (repeatable).",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also plot step counters and tags that are constant in every run.",
)
@click.option(
    "--xscale",
    type=click.Choice(_plot.XSCALES),
    default="auto",
    show_default=True,
    help="Step axis; auto is log when the runs' last steps differ more than 20x.",
)
def plot(
    log_dir: str, output: str, tags: tuple[str, ...], show_all: bool, xscale: str
) -> None:
    """Plot scalar curves of LOG_DIR against the global step.

    One panel per tag, one line per run (each directory under LOG_DIR holding
    event files, at any depth), one colour per run in every panel.

    Order: loss-like tags first (loss itself, then the others), then
    accuracy-like tags, then the rest, then learning rates, throughput and
    timing, and step counters; names in natural order within each group, val_x
    right after x. The kind comes from the tag's last /-component without a
    val_, epoch_ or batch_ prefix: a word such as loss, error, mse, mae,
    crossentropy, nll or penalty is loss-like; acc, accuracy, auc, precision,
    recall, f1, iou, psnr or ssim accuracy-like.

    Left out unless --all or --tag: counters/* (a plain model's counters/step
    is the line y = x) and tags whose values are constant in every run (a
    constant learning rate). The output says what was left out.

    Step axis (--xscale auto): log when the largest last step of a run is more
    than 20 times the smallest (full-batch vs per-example SGD), else linear. The
    log axis is linear below step 1, so step 0 shows.

    NaN and inf points are not drawn; their panel says how many there were.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    extension = Path(output).suffix.lstrip(".").lower()
    formats = FigureCanvasAgg.get_supported_filetypes()
    if extension not in formats:
        raise click.BadParameter(
            f"unsupported image format {output!r}; use one of "
            f"{', '.join('.' + name for name in sorted(formats))}.",
            param_hint="'--output'",
        )
    scalars = _read(log_dir, tags)
    tag_list, left_out = _plot.choose_tags(scalars, tags, show_all)
    scale = _plot.choose_xscale(scalars, tag_list, xscale)
    figure = _plot.make_figure(scalars, tag_list, scale)
    try:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(output, format=extension)
    except OSError as error:
        raise click.BadParameter(
            f"cannot write {output!r}: {error.strerror or error}.",
            param_hint="'--output'",
        ) from None
    ends = _plot.run_ends(scalars, tag_list)
    counts = f"{_plot.count(len(tag_list), 'tag')}, {_plot.count(len(ends), 'run')}"
    click.echo(f"Wrote {output} ({counts}).")
    if left_out:
        click.echo(_plot.left_out_line(left_out, scalars))
    if xscale == "auto" and scale == "log":
        click.echo(
            f"Log step axis: the runs end between step {min(ends.values())} and "
            f"step {max(ends.values())}; --xscale linear for a linear one."
        )


def best_mode(tag: str) -> str | None:
    """Says whether the best value of a scalar tag is its minimum or maximum.

    The rule: split the tag into lower-case words (on `/` and any other
    non-alphanumeric character). A tag has no known direction, and so no best, if
    it is a learning rate or a step counter (`learning_rate`, `learning_rate/*`,
    `counters/*`), an early stop's patience count (`patience/*`), a throughput
    (`*_per_second`), or if any of its words names a
    GAN player (`d`, `g`, `gen`, `disc`, `generator`, `discriminator`, `critic`,
    `adversarial`, `adv`): adversarial losses are not minimised. Otherwise a
    loss-like word in the tag's last `/`-component (`loss`, `error`, `mse`,
    `mae`, `rmse`, `crossentropy`, `nll`, `perplexity`, `fid`, ...) means min, an
    accuracy-like word there (`acc`, `accuracy`, `auc`, `precision`, `recall`,
    `f1`, `iou`, `psnr`, `ssim`) means max, and anything else (a Wasserstein
    estimate, a gradient penalty, mode coverage) has no best. `val_` and
    `epoch_` forms follow their metric.

    Args:
        tag: A scalar tag, e.g. `"val_loss"` or `"epoch_accuracy"`.

    Returns:
        `"min"`, `"max"` or `None`.

    Example:

    >>> from kerasteps.cli import best_mode
    >>> [best_mode(t) for t in ("val_loss", "val/accuracy", "d_loss", "wasserstein")]
    ['min', 'max', None, None]
    >>> best_mode("patience/val_loss")
    """
    lower = tag.lower()
    # No direction whatever the words: learning rates, step counters, throughput
    # (kerasteps.callbacks.Throughput) and a GAN player's tags.
    if (
        lower.split("/", 1)[0] in ("learning_rate", "counters", "patience")
        or lower.endswith("_per_second")
        or set(re.split(r"[^a-z0-9]+", lower)) & _GAN_ROLE_WORDS
    ):
        return None
    words = set(re.split(r"[^a-z0-9]+", lower.rsplit("/", 1)[-1]))
    if words & _LOSS_WORDS:
        return "min"
    if words & _plot._ACCURACY_WORDS:
        return "max"
    return None


_SUMMARY_HEADER = (
    "RUN", "TAG", "POINTS", "LAST_STEP", "LAST", "BEST", "BEST_STEP", "MIN", "MAX"
)  # fmt: skip
_NOT_APPLICABLE = "-"


def _summary_row(run: str, tag: str, points: list) -> tuple[str, ...]:
    """One row of `kerasteps summary`: BEST and BEST_STEP, or MIN and MAX."""
    from kerasteps.formatting import format_value

    text = functools.partial(format_value, name=tag)
    # NaN points are left out; without any point left, the value is nan, at no step.
    values = [(step, value) for step, value, *_ in points if not math.isnan(value)]
    values = values or [(_NOT_APPLICABLE, math.nan)]
    mode = best_mode(tag)
    if mode is None:
        low = min(value for _, value in values)
        high = max(value for _, value in values)
        cells = (_NOT_APPLICABLE, _NOT_APPLICABLE, text(low), text(high))
    else:  # the first step that reached the best value
        step, value = (min if mode == "min" else max)(values, key=lambda p: p[1])
        cells = (text(value), str(step), _NOT_APPLICABLE, _NOT_APPLICABLE)
    last_step, last = points[-1][:2]
    return (run, tag, str(len(points)), str(last_step), text(last), *cells)


@main.command(context_settings=_CONTEXT)
@click.argument("log_dir", type=_LOG_DIR, callback=_log_dir_to_read)
@click.option("--tag", "tags", multiple=True, help="Show only this tag (repeatable).")
def summary(log_dir: str, tags: tuple[str, ...]) -> None:
    """Print a table of runs x tags: last value, and best or min and max.

    \b
    One row per run and tag:
      POINTS     how many points the tag has
      LAST_STEP  the step of its last point; LAST its value
      BEST       for a tag whose direction is known, its best value: the
                 minimum for loss-like tags (loss, error, mse, mae,
                 crossentropy, ... in the tag's last component), the maximum
                 for accuracy-like tags (acc, accuracy, auc, precision,
                 recall, f1, iou, psnr, ssim), `val_` forms included;
                 BEST_STEP the first step that reached it
      MIN, MAX   for every other tag (learning rates, counters, throughput,
                 a GAN's d_loss and g_loss, a Wasserstein estimate, ...):
                 its smallest and largest value
    `-` marks a column that does not apply; NaN points are left out of BEST,
    MIN and MAX. Numbers are printed as LogEvery prints them (1.396970,
    1.0995e-05, throughput with 4 significant digits).

    \b
    Below the table, one line per StepCheckpoint directory under LOG_DIR that
    judges its checkpoints (`monitor`, `--keep-best`): its best checkpoint's
    name, step and value, from the best table of its index.
    """
    from kerasteps.formatting import format_table

    rows = [_SUMMARY_HEADER]
    for run, run_tags in _read(log_dir, tags).items():
        rows.extend(_summary_row(run, tag, points) for tag, points in run_tags.items())
    click.echo(format_table(rows))
    for line in _best_checkpoints(log_dir):
        click.echo(line)


def _best_checkpoints(log_dir: str) -> list[str]:
    """`best checkpoint: DIR/ckpt-120 (step 120, val_loss=0.312400)`, one line per
    checkpoint index under `log_dir` with a best table (`summary`)."""
    from kerasteps.formatting import format_value

    lines = []
    for folder, _, files in sorted(os.walk(log_dir)):
        if "checkpoint.json" not in files:
            continue
        try:
            with open(os.path.join(folder, "checkpoint.json")) as handle:
                best = json.load(handle)["best"]
            monitor, first = best["monitor"], best["checkpoints"][0]
            where = os.path.join(folder, first["name"])
            value = format_value(float(first["value"]), name=monitor)
            lines.append(
                f"best checkpoint: {where} (step {first['step']}, {monitor}={value})"
            )
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue  # no best table (yet), or not one of ours
    return lines


if __name__ == "__main__":
    main()
