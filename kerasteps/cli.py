"""The `kerasteps` command-line launcher.

```
kerasteps --version
kerasteps list [--paths]                   recipes and their one-line descriptions
kerasteps run NAME|FILE.py [OPTIONS]...    run a recipe (NAME --help: its options)
kerasteps board LOGDIR [--host] [--port] [-- TENSORBOARD_ARGS...]
kerasteps plot LOGDIR [-o curves.png] [--tag TAG]...
kerasteps summary LOGDIR [--tag TAG]...
```

Recipes are found as described in `kerasteps.recipe`. `plot` and `summary` read the
event files with `kerasteps.events.read_scalars`: a run is each directory under
LOGDIR that holds event files, named by its path relative to LOGDIR (`.` for LOGDIR
itself), and every step is the step the summary was written at (the global step for
kerasteps callbacks).

A user mistake (unknown recipe, unknown option, bad value, missing LOGDIR, LOGDIR
without event files, port in use) prints a one-line click error and exits with
status 2.

Example:

>>> from click.testing import CliRunner
>>> from kerasteps.cli import main
>>> CliRunner().invoke(main, ["--version"]).output  # doctest: +ELLIPSIS
'kerasteps, version ...\\n'
"""

from __future__ import annotations

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

from kerasteps import __version__
from kerasteps import recipe as _recipe

__all__ = ["main"]

_CONTEXT = {"help_option_names": ["-h", "--help"]}

_LOGDIR = click.Path(exists=True, file_okay=False, dir_okay=True)

# Last component of a tag, split into lower-case words, decides "best" (summary).
_LOSS_WORDS = frozenset(
    {"loss", "error", "err", "mse", "mae", "rmse", "msle", "mape", "crossentropy"}
    | {"nll", "perplexity", "ppl", "fid"}
)
_ACCURACY_WORDS = frozenset(
    {"acc", "accuracy", "auc", "precision", "recall", "f1", "iou", "psnr", "ssim"}
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
    recipes = _recipe.find_recipes()
    if not recipes:
        folders = ", ".join(str(path) for path in _recipe.recipe_dirs()) or "none"
        click.echo(f"No recipes found (searched: {folders}).")
        return
    width = max(len(name) for name in recipes)
    for name, path in recipes.items():
        line = f"{name:<{width}}  {_recipe.recipe_description(path)}"
        click.echo(f"{line}  [{path}]" if paths else line)


# ---------------------------------------------------------------------------- run
def _looks_like_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _resolve_recipe(target: str) -> Path:
    if _looks_like_path(target):
        path = Path(target).expanduser()
        if not path.is_file():
            raise click.BadParameter(
                f"recipe file {target!r} does not exist.", param_hint="'RECIPE'"
            )
        return path
    recipes = _recipe.find_recipes()
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
    if _looks_like_path(recipe):
        # Like `python path/to/my_recipe.py`: its folder is importable.
        sys.path.insert(0, str(path.resolve().parent))
    try:
        command = _recipe.load_recipe(path)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'RECIPE'") from None
    except Exception as error:  # noqa: BLE001 - the recipe file's own error
        click.echo(f"Error: the recipe file {str(path)!r} cannot be loaded:", err=True)
        click.echo(_recipe_error(error, path), err=True, nl=False)
        sys.exit(2)
    # Standalone mode, as if the file were run as a script: the recipe's own usage
    # errors exit with status 2, `--help` exits with 0.
    command.main(args=list(recipe_args), prog_name=f"kerasteps run {recipe}")


def _recipe_error(error: BaseException, path: Path) -> str:
    """The error of a recipe file, with its own frames only (not the launcher's)."""
    if isinstance(error, SyntaxError):
        return "".join(traceback.format_exception_only(type(error), error))
    mine = os.path.realpath(path)
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if os.path.realpath(frame.filename) == mine
    ]
    lines = traceback.format_list(frames) if frames else []
    return "".join(lines + traceback.format_exception_only(type(error), error))


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


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@main.command(context_settings=_CONTEXT)
@click.argument("logdir", type=_LOGDIR)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address.")
@click.option("--port", type=click.IntRange(1, 65535), default=6006, show_default=True)
@click.argument("tensorboard_args", nargs=-1, type=click.UNPROCESSED)
def board(logdir: str, host: str, port: int, tensorboard_args: tuple[str, ...]) -> None:
    """Start TensorBoard on LOGDIR and wait (Ctrl-C stops it).

    It listens on 127.0.0.1 (this machine only) unless --host says otherwise.
    Arguments after `--` go to TensorBoard, e.g.
    `kerasteps board logs -- --reload_interval 1`. LOGDIR may still be empty.
    """
    _check_port_free(host, port)
    # The child watches this process and ends with it, even after a `kill -9`.
    command = [sys.executable, "-m", "kerasteps._board_child", str(os.getpid())]
    command += ["--logdir", logdir, "--host", host, "--port", str(port)]
    # TensorBoard needs no Keras backend; with KERAS_BACKEND=torch, importing torch
    # and TensorFlow's TensorBoard into one process ends in a segmentation fault.
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    process = subprocess.Popen([*command, *tensorboard_args], env=env)

    def on_sigterm(signum, frame):  # stop TensorBoard too when we are killed
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    click.echo(f"TensorBoard on {logdir}: {_url(host, port)}  (Ctrl-C to stop)")
    try:
        code = process.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        _stop(process)
        signal.signal(signal.SIGTERM, previous)
    if code:
        click.echo(f"TensorBoard exited with status {code}.", err=True)
        sys.exit(code)


# ------------------------------------------------------------------ plot, summary
def _read(logdir: str, tags: tuple[str, ...]) -> dict[str, dict[str, list]]:
    """Reads the scalars of LOGDIR, keeping TAGS if given; usage errors exit 2."""
    from kerasteps import events

    hint = "'LOGDIR'"
    if not events.find_runs(logdir):
        raise click.BadParameter(
            f"no TensorBoard event files under {logdir!r}.", param_hint=hint
        )
    scalars = events.read_scalars(logdir)
    if not scalars:
        raise click.BadParameter(
            f"the event files under {logdir!r} hold no scalar summaries.",
            param_hint=hint,
        )
    if tags:
        known = sorted({tag for run in scalars.values() for tag in run})
        unknown = [tag for tag in tags if tag not in known]
        if unknown:
            raise click.BadParameter(
                f"no scalar tag {unknown[0]!r} under {logdir!r}. "
                f"Tags: {', '.join(known)}.",
                param_hint="'--tag'",
            )
        scalars = {
            run: {tag: run_tags[tag] for tag in tags if tag in run_tags}
            for run, run_tags in scalars.items()
        }
        scalars = {run: run_tags for run, run_tags in scalars.items() if run_tags}
    return scalars


def _all_tags(scalars: dict[str, dict[str, list]]) -> list[str]:
    tags: list[str] = []
    for run_tags in scalars.values():
        tags += [tag for tag in run_tags if tag not in tags]
    return sorted(tags)


@main.command(context_settings=_CONTEXT)
@click.argument("logdir", type=_LOGDIR)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="curves.png",
    show_default=True,
    help="Image file; its extension picks the format (png, pdf, svg, ...).",
)
@click.option("--tag", "tags", multiple=True, help="Plot only this tag (repeatable).")
def plot(logdir: str, output: str, tags: tuple[str, ...]) -> None:
    """Plot scalar curves of LOGDIR against the global step.

    One subplot per tag, one line per run (each directory under LOGDIR holding
    event files).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    scalars = _read(logdir, tags)
    tag_list = list(tags) if tags else _all_tags(scalars)
    columns = min(2, len(tag_list))
    rows = math.ceil(len(tag_list) / columns)
    figure = Figure(figsize=(6 * columns, 3.6 * rows), layout="constrained")
    canvas = FigureCanvasAgg(figure)
    extension = Path(output).suffix.lstrip(".").lower()
    formats = canvas.get_supported_filetypes()
    if extension not in formats:
        raise click.BadParameter(
            f"unsupported image format {output!r}; use one of "
            f"{', '.join('.' + name for name in sorted(formats))}.",
            param_hint="'--output'",
        )
    for index, tag in enumerate(tag_list):
        axes = figure.add_subplot(rows, columns, index + 1)
        for color, (run, run_tags) in enumerate(scalars.items()):
            points = run_tags.get(tag)
            if points:
                steps = [point[0] for point in points]
                values = [point[1] for point in points]
                marker = "." if len(points) <= 50 else None
                # One color per run in every subplot.
                axes.plot(steps, values, f"C{color % 10}", marker=marker, label=run)
        axes.set_title(tag)
        axes.set_xlabel("global step")
        axes.xaxis.set_major_locator(
            MaxNLocator(integer=True, min_n_ticks=1, steps=[1, 2, 5, 10])
        )
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize="small")
    try:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(output, format=extension)
    except OSError as error:
        raise click.BadParameter(
            f"cannot write {output!r}: {error.strerror or error}.",
            param_hint="'--output'",
        ) from None
    click.echo(f"Wrote {output} ({len(tag_list)} tags, {len(scalars)} runs).")


def best_mode(tag: str) -> str | None:
    """Says whether the best value of a scalar tag is its minimum or maximum.

    The rule: split the last `/`-component of the tag into lower-case words (on
    any non-alphanumeric character). A loss-like word (`loss`, `error`, `mse`,
    `mae`, `rmse`, `crossentropy`, `nll`, `perplexity`, `fid`, ...) means min;
    otherwise an accuracy-like word (`acc`, `accuracy`, `auc`, `precision`,
    `recall`, `f1`, `iou`, `psnr`, `ssim`) means max; otherwise there is no best
    (learning rate, step counters, throughput, a Wasserstein estimate).

    Args:
        tag: A scalar tag, e.g. `"val_loss"` or `"epoch_accuracy"`.

    Returns:
        `"min"`, `"max"` or `None`.

    Example:

    >>> from kerasteps.cli import best_mode
    >>> [best_mode(t) for t in ("d_loss", "val/accuracy", "learning_rate")]
    ['min', 'max', None]
    """
    words = set(re.split(r"[^a-z0-9]+", tag.rsplit("/", 1)[-1].lower()))
    if words & _LOSS_WORDS:
        return "min"
    if words & _ACCURACY_WORDS:
        return "max"
    return None


@main.command(context_settings=_CONTEXT)
@click.argument("logdir", type=_LOGDIR)
@click.option("--tag", "tags", multiple=True, help="Show only this tag (repeatable).")
def summary(logdir: str, tags: tuple[str, ...]) -> None:
    """Print a table of runs x tags: last step, last value, best value.

    BEST is the minimum for loss-like tags (a word such as loss, error, mse,
    mae, crossentropy in the tag's last component), the maximum for
    accuracy-like tags (acc, accuracy, auc, precision, recall, f1, iou, psnr,
    ssim), and `-` for others (learning rate, counters, ...); MODE says which.
    """
    scalars = _read(logdir, tags)
    header = ("RUN", "TAG", "POINTS", "LAST_STEP", "LAST", "BEST", "BEST_STEP", "MODE")
    rows = [header]
    for run, run_tags in scalars.items():
        for tag, points in run_tags.items():
            last_step, last = points[-1][0], points[-1][1]
            mode = best_mode(tag)
            if mode is None:
                best, best_step = "-", "-"
            else:
                pick = min if mode == "min" else max
                step, value = pick(
                    ((p[0], p[1]) for p in points if not math.isnan(p[1])),
                    key=lambda point: point[1],
                    default=(None, math.nan),
                )
                best, best_step = f"{value:.6g}", "-" if step is None else str(step)
            rows.append(
                (
                    run,
                    tag,
                    str(len(points)),
                    str(last_step),
                    f"{last:.6g}",
                    best,
                    best_step,
                    mode or "-",
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        click.echo(
            "  ".join(
                cell.ljust(w) for cell, w in zip(row, widths, strict=True)
            ).rstrip()
        )


if __name__ == "__main__":
    main()
