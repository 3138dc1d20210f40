"""What `kerasteps plot` draws: which tags, in what order, on which step axis (private).

The rules, also in `kerasteps plot --help`:

- **Order.** Panels go loss-like tags first (`loss` itself first, then the other
  losses), then accuracy-like tags, then every other tag, then learning rates,
  then throughput and timing, then step counters. Within a group tags are in
  natural name order, a tag with a `val_` prefix right after the tag without
  it. The kind is read from the last `/`-component of the tag, without a leading
  `val_`, `epoch_` or `batch_` (Keras's own TensorBoard callback writes
  `epoch_loss`): a word such as loss, error, mse, mae, crossentropy, nll or
  penalty makes it loss-like; acc, accuracy, auc, precision, recall, f1, iou,
  psnr or ssim accuracy-like; `learning_rate` or `lr` (as the whole name, or a
  `learning_rate/` group) a learning rate; second(s), time or throughput timing;
  a `counters/` group a step counter.
- **Left out.** Unless tags are named or everything is asked for, the figure
  leaves out step counters (`counters/step` of a plain model is the line y = x)
  and tags whose values are constant in every run (a constant learning rate): all
  values of each run are finite and equal, and some run has two or more. If that
  would leave nothing, nothing is left out.
- **Step axis.** `auto` picks a log axis when the runs' last steps differ by more
  than a factor of `LOG_RATIO` (20): a full-batch run of 20 steps beside an SGD
  run of 60000 is then not squashed against x = 0. The log axis is symmetric
  log, linear below step 1, so that step 0 shows.
- **Not finite.** NaN and inf points are not drawn; the panel says how many there
  were, and a series with no finite point gets a centred note instead of an empty
  panel.

Example:

>>> from kerasteps.cli._plot import choose_tags
>>> scalars = {"train": {"counters/step": [(1, 1.0), (2, 2.0)],
...                      "learning_rate": [(1, 0.1), (2, 0.1)],
...                      "accuracy": [(1, 0.5), (2, 0.75)],
...                      "val_loss": [(1, 0.9), (2, 0.7)],
...                      "loss": [(1, 1.0), (2, 0.5)]}}
>>> choose_tags(scalars)  # doctest: +NORMALIZE_WHITESPACE
(['loss', 'val_loss', 'accuracy'],
 [('learning_rate', 'constant'), ('counters/step', 'step counter')])
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: `{run: {tag: [(step, value), ...]}}`, as `kerasteps.event_files.read_scalars`
#: returns.
Scalars = Mapping[str, Mapping[str, Sequence[tuple]]]

#: `auto` picks a log step axis when the largest last step of a run exceeds
#: LOG_RATIO times the smallest (a last step of 0 counts as 1).
LOG_RATIO = 20
XSCALES = ("auto", "linear", "log")

_LOSS_WORDS = frozenset(
    {"loss", "losses", "error", "err", "mse", "mae", "rmse", "msle", "mape"}
    | {"crossentropy", "nll", "perplexity", "ppl", "penalty"}
)
_ACCURACY_WORDS = frozenset(
    {"acc", "accuracy", "auc", "precision", "recall", "f1", "iou", "psnr", "ssim"}
)
_TIME_WORDS = frozenset({"second", "seconds", "sec", "secs", "time", "throughput"})
_LEARNING_RATE_NAMES = frozenset({"learning_rate", "lr"})

# Groups in figure order.
_LOSS, _ACCURACY, _OTHER, _LEARNING_RATE, _TIMING, _COUNTER = range(6)
# The groups a tag's words decide, the first that matches winning.
_WORD_GROUPS = {_TIMING: _TIME_WORDS, _LOSS: _LOSS_WORDS, _ACCURACY: _ACCURACY_WORDS}


def _natural(text: str) -> tuple:
    """Sort key that puts `output_2` before `output_10`."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.split(r"(\d+)", text)
        if part
    )


def _order_key(tag: str) -> tuple:
    """Sort key of a tag: its group first, then plain `loss` before the group's other
    tags, the natural order of its name without `val_`, and `val_x` after `x`."""
    *folders, last = tag.lower().split("/")
    validation = last.startswith("val_")
    last = last.removeprefix("val_")
    base = re.sub(r"^(epoch|batch)_", "", last)
    top = folders[0] if folders else ""
    if top == "counters":
        group = _COUNTER
    elif base in _LEARNING_RATE_NAMES or top in _LEARNING_RATE_NAMES:
        group = _LEARNING_RATE
    else:
        words = set(re.split(r"[^a-z0-9]+", base))
        group = next((g for g, kind in _WORD_GROUPS.items() if words & kind), _OTHER)
    first = 0 if group == _LOSS and base == "loss" else 1
    return group, first, _natural("/".join([*folders, last])), validation, tag


def order_tags(tags: Iterable[str]) -> list[str]:
    """Sorts tags in figure order: losses, accuracies, others, bookkeeping.

    Args:
        tags: Scalar tags.

    Returns:
        A new list: loss-like tags (`loss` first), accuracy-like tags, every other
        tag, learning rates, throughput and timing, step counters; natural name
        order within each group, `val_x` right after `x`.

    Example:

    >>> from kerasteps.cli._plot import order_tags
    >>> order_tags(["wasserstein", "learning_rate/g", "g_loss", "d_loss",
    ...             "counters/g_step", "steps_per_second", "val_accuracy",
    ...             "accuracy", "val_loss", "loss"])  # doctest: +NORMALIZE_WHITESPACE
    ['loss', 'val_loss', 'd_loss', 'g_loss', 'accuracy', 'val_accuracy',
     'wasserstein', 'learning_rate/g', 'steps_per_second', 'counters/g_step']
    """
    return sorted(tags, key=_order_key)


def _left_out_reason(scalars: Scalars, tag: str) -> str | None:
    """`"step counter"`, `"constant"` (each run's values finite and equal, and some
    run has two or more) or None: why the figure leaves `tag` out by default."""
    if _order_key(tag)[0] == _COUNTER:
        return "step counter"
    runs = [[p[1] for p in run_tags.get(tag, ())] for run_tags in scalars.values()]
    constant = any(len(values) > 1 for values in runs) and all(
        math.isfinite(value) and value == values[0]
        for values in runs
        for value in values
    )
    return "constant" if constant else None


def choose_tags(
    scalars: Scalars, tags: Sequence[str] = (), show_all: bool = False
) -> tuple[list[str], list[tuple[str, str]]]:
    """Says which tags `kerasteps plot` draws, in which order, and what it leaves out.

    Args:
        scalars: `{run: {tag: [(step, value), ...]}}`.
        tags: Tags the user named; when given they are drawn, all and in this order.
        show_all: Bool, default False. Leave nothing out.

    Returns:
        `(tags to draw, [(tag, reason), ...] left out)`; a reason is
        `"step counter"` or `"constant"`.

    Example: see the module docstring.
    """
    if tags:
        return list(dict.fromkeys(tags)), []
    every = order_tags({tag for run_tags in scalars.values() for tag in run_tags})
    reasons = {tag: _left_out_reason(scalars, tag) for tag in every}
    drawn = [tag for tag, reason in reasons.items() if reason is None]
    if show_all or not drawn:  # leaving out every tag leaves out none
        return every, []
    return drawn, [(tag, reason) for tag, reason in reasons.items() if reason]


def left_out_line(
    left_out: Sequence[tuple[str, str]], scalars: Scalars | None = None
) -> str:
    """One line naming what was left out and how to show it ("" if nothing).

    Args:
        left_out: `[(tag, reason), ...]` as `choose_tags` returns.
        scalars: Optional; with it, a constant tag whose runs all hold the same
            value is shown with it (`learning_rate = 0.05`).

    Returns:
        E.g. `"Left out: learning_rate (constant); counters/step (step counter).
        --all shows them."`, tags grouped by reason in the order given.

    Example:

    >>> from kerasteps.cli._plot import left_out_line
    >>> scalars = {"train": {"learning_rate": [(1, 0.05), (2, 0.05)]}}
    >>> print(left_out_line([("learning_rate", "constant"),
    ...                      ("counters/step", "step counter")], scalars))
    Left out: learning_rate = 0.05 (constant); counters/step (step counter). \
--all shows them.
    """
    if not left_out:
        return ""
    runs = (scalars or {}).values()
    reasons: dict[str, list[str]] = {}
    for tag, reason in left_out:
        values = {p[1] for run_tags in runs for p in run_tags.get(tag, ())}
        if reason == "constant" and len(values) == 1:
            tag = f"{tag} = {values.pop():.6g}"
        reasons.setdefault(reason, []).append(tag)
    plural = {"step counter": "step counters"}
    parts = [
        f"{', '.join(tags)} ({plural.get(reason, reason) if len(tags) > 1 else reason})"
        for reason, tags in reasons.items()
    ]
    them = "them" if len(left_out) > 1 else "it"
    return f"Left out: {'; '.join(parts)}. --all shows {them}."


def run_ends(scalars: Scalars, tags: Sequence[str]) -> dict[str, int]:
    """The last step of each run among `tags` (runs without them are left out)."""
    steps = {
        run: [point[0] for tag in tags for point in run_tags.get(tag, ())]
        for run, run_tags in scalars.items()
    }
    return {run: max(run_steps) for run, run_steps in steps.items() if run_steps}


def choose_xscale(scalars: Scalars, tags: Sequence[str], xscale: str = "auto") -> str:
    """Picks the step axis: `"log"` when runs' last steps differ a lot, else `"linear"`.

    Args:
        scalars: `{run: {tag: [(step, value), ...]}}`.
        tags: The tags drawn.
        xscale: `"auto"`, `"linear"` or `"log"`; only `"auto"` decides.

    Returns:
        `"linear"` or `"log"`: `auto` gives `"log"` when the largest last step of a
        run exceeds `LOG_RATIO` (20) times the smallest (a last step of 0 counts
        as 1).

    Raises:
        ValueError: if `xscale` is not one of `XSCALES`.

    Example:

    >>> from kerasteps.cli._plot import choose_xscale
    >>> runs = {"full_batch": {"loss": [(0, 1.0), (20, 0.5)]},
    ...         "sgd": {"loss": [(0, 1.0), (60000, 0.1)]}}
    >>> choose_xscale(runs, ["loss"]), choose_xscale(runs, ["loss"], "linear")
    ('log', 'linear')
    """
    if xscale not in XSCALES:
        raise ValueError(
            f"`xscale` must be one of {', '.join(XSCALES)}; received {xscale!r}."
        )
    if xscale != "auto":
        return xscale
    ends = run_ends(scalars, tags).values()  # a single run is linear
    return "log" if ends and max(ends) > LOG_RATIO * max(min(ends), 1) else "linear"


def count(number: int, noun: str) -> str:
    """`count(1, "run")` is "1 run", `count(3, "run")` "3 runs"."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def non_finite_note(values: Sequence[float]) -> str:
    """Says how many of `values` are not finite ("" if all are).

    Example:

    >>> from kerasteps.cli._plot import non_finite_note
    >>> inf = float("inf")
    >>> non_finite_note([inf] * 12), non_finite_note([1.0, inf, float("nan")])
    ('all 12 values are inf', '2 of 3 values are not finite (not drawn)')
    """
    bad = [value for value in values if not math.isfinite(value)]
    if not bad:
        return ""
    kinds = {"NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf") for v in bad}
    kind = kinds.pop() if len(kinds) == 1 else "not finite"
    if len(bad) == len(values):
        if len(values) == 1:
            return f"its only value is {kind}"
        return f"all {count(len(values), 'value')} are {kind}"
    verb = "is" if len(bad) == 1 else "are"
    return f"{len(bad)} of {count(len(values), 'value')} {verb} {kind} (not drawn)"


def make_figure(
    scalars: Scalars, tags: Sequence[str], xscale: str = "linear"
) -> Figure:
    """Draws one panel per tag, one line per run, against the global step.

    Each run keeps one colour in every panel; one legend, above the panels, names
    the runs. NaN and inf points are not drawn and the panel says how many there
    were (the run's name first when several runs are drawn); a panel with no
    finite point shows that note in its centre.

    Args:
        scalars: `{run: {tag: [(step, value), ...]}}`.
        tags: The tags, in panel order (left to right, then down; two columns).
        xscale: `"linear"` or `"log"` (symmetric log, linear below step 1).

    Returns:
        A `matplotlib.figure.Figure` (Agg canvas) of 6 x 3.6 inches per panel;
        `figure.axes[i].get_title()` is `tags[i]`.

    Example:

    >>> from kerasteps.cli._plot import make_figure
    >>> figure = make_figure({"train": {"loss": [(1, 1.0), (2, 0.5)],
    ...                                 "reverse_kl": [(1, float("inf"))] * 2}},
    ...                      ["loss", "reverse_kl"])
    >>> [axes.get_title() for axes in figure.axes]
    ['loss', 'reverse_kl']
    >>> [text.get_text() for text in figure.axes[1].texts]
    ['all 2 values are inf']
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    runs = sorted(run_ends(scalars, tags), key=_natural)
    columns = min(2, len(tags))
    rows = math.ceil(len(tags) / columns)
    figure = Figure(figsize=(6 * columns, 3.6 * rows), layout="constrained")
    FigureCanvasAgg(figure)
    handles: dict[str, object] = {}
    for index, tag in enumerate(tags):
        axes = figure.add_subplot(
            rows, columns, index + 1, sharex=figure.axes[0] if index else None
        )
        _draw_runs(axes, scalars, runs, tag, handles)
        axes.set_title(tag)
        if xscale == "log":
            axes.set_xscale("symlog", linthresh=1, linscale=0.5)
            axes.set_xlabel("global step (log)")
        else:  # integer ticks
            axes.xaxis.set_major_locator(
                MaxNLocator(integer=True, min_n_ticks=1, steps=[1, 2, 5, 10])
            )
            axes.set_xlabel("global step")
        axes.grid(True, alpha=0.3)
    # One legend above the panels naming the drawn runs, read row by row (Matplotlib
    # fills a legend column by column).
    named = [run for run in runs if run in handles]
    if named:
        ncols = min(len(named), 2 * columns)
        named = [named[i] for j in range(ncols) for i in range(j, len(named), ncols)]
        figure.legend(
            [handles[run] for run in named],
            named,
            loc="outside upper center",
            ncols=ncols,
            fontsize="small",
            frameon=False,
        )
    return figure


def _draw_runs(
    axes: Axes, scalars: Scalars, runs: list[str], tag: str, handles: dict[str, object]
) -> None:
    """Draws each run's finite points of `tag`, and notes of the others: centred in
    a panel without a line, else bottom left.

    Adds each run's first line to `handles`, for the one legend.
    """
    # One step range for all panels: shared x, each panel's steps (NaN and
    # inf points included) in its data limits.
    steps = [p[0] for run in runs for p in scalars[run].get(tag, ())]
    axes.update_datalim([(step, 0.0) for step in steps], updatey=False)
    notes = []
    for color, run in enumerate(runs):
        points = scalars[run].get(tag, ())
        finite = [point for point in points if math.isfinite(point[1])]
        note = non_finite_note([point[1] for point in points])
        if note:
            notes.append(f"{run}: {note}" if len(runs) > 1 else note)
        if finite:
            (line,) = axes.plot(
                [point[0] for point in finite],
                [point[1] for point in finite],
                color=f"C{color % 10}",
                marker="." if len(finite) <= 50 else None,
                label=run,
            )
            handles.setdefault(run, line)
    if notes and not axes.lines:
        axes.set_yticks([])
        axes.text(
            0.5, 0.5, "\n".join(notes), transform=axes.transAxes,
            ha="center", va="center", color="0.3",
        )  # fmt: skip
    elif notes:
        axes.text(
            0.02, 0.03, "\n".join(notes), transform=axes.transAxes,
            ha="left", va="bottom", fontsize="small", color="0.3",
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"},
        )  # fmt: skip
