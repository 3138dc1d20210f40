"""Tests for `kerasteps plot` and its rules (kerasteps.cli._plot)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from kerasteps import event_files
from kerasteps.cli import _plot
from tests.helpers import invoke, write_scalars

# Scalars written by the `log_dir` fixture: run -> tag -> [(step, value)].


# -------------------------------------------------------------------------- plot
def test_plot_writes_one_subplot_per_tag(log_dir, tmp_path):
    output = tmp_path / "out" / "curves.png"
    result = invoke("plot", str(log_dir), "-o", str(output))
    assert result.exit_code == 0, result.output
    # learning_rate has one point: not "constant", so it is drawn.
    assert result.output == f"Wrote {output} (3 tags, 2 runs).\n"
    image = matplotlib.image.imread(output)
    assert image.shape[:2] == (720, 1200)  # 2 x 2 grid of 6 x 3.6 in at 100 dpi
    assert float(np.std(image[..., :3])) > 0.01

    only = tmp_path / "loss.png"
    result = invoke("plot", str(log_dir), "-o", str(only), "--tag", "loss")
    assert result.exit_code == 0, result.output
    assert result.output == f"Wrote {only} (1 tag, 2 runs).\n"
    assert matplotlib.image.imread(only).shape[:2] == (360, 600)

    result = invoke(
        "plot", str(log_dir), "-o", str(tmp_path / "lr.png"), "--tag", "learning_rate"
    )
    assert "(1 tag, 1 run)." in result.output  # only run "b" has it


@pytest.fixture(scope="module")
def plain_runs(tmp_path_factory) -> Path:
    """Two runs of a plain model under run-N folders, as the recipes write them:
    y = x step counters, a constant learning rate, loss and accuracy."""
    root = tmp_path_factory.mktemp("plain")
    for run, steps in (("run-1/train", [10, 20, 30]), ("run-2/train", [10, 20])):
        write_scalars(
            root / run,
            {
                "loss": [(step, 1.0 / step) for step in steps],
                "accuracy": [(step, step / 40) for step in steps],
                "counters/step": [(step, float(step)) for step in steps],
                "learning_rate": [(step, 0.125) for step in steps],
            },
        )
    return root


def test_plot_leaves_out_counters_and_constant_tags(plain_runs, tmp_path):
    output = tmp_path / "curves.png"
    result = invoke("plot", str(plain_runs), "-o", str(output))
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"Wrote {output} (2 tags, 2 runs).\n"
        "Left out: learning_rate = 0.125 (constant); counters/step (step counter)."
        " --all shows them.\n"
    )
    assert matplotlib.image.imread(output).shape[:2] == (360, 1200)  # 1 x 2

    result = invoke("plot", str(plain_runs), "-o", str(output), "--all")
    assert result.output == f"Wrote {output} (4 tags, 2 runs).\n"
    assert matplotlib.image.imread(output).shape[:2] == (720, 1200)  # 2 x 2

    # A tag named with --tag is always drawn, and nothing is said left out.
    result = invoke(
        "plot", str(plain_runs), "-o", str(output), "--tag", "counters/step"
    )
    assert result.output == f"Wrote {output} (1 tag, 2 runs).\n"

    # The figure: panels in order, one line per run, one legend naming the runs.
    scalars = event_files.read_scalars(plain_runs)
    tags, left_out = _plot.choose_tags(scalars)
    assert tags == ["loss", "accuracy"]
    assert left_out == [
        ("learning_rate", "constant"),
        ("counters/step", "step counter"),
    ]
    figure = _plot.make_figure(scalars, tags)
    assert [axes.get_title() for axes in figure.axes] == ["loss", "accuracy"]
    loss_lines = figure.axes[0].get_lines()
    assert [list(line.get_xdata()) for line in loss_lines] == [[10, 20, 30], [10, 20]]
    assert [line.get_label() for line in loss_lines] == ["run-1/train", "run-2/train"]
    (legend,) = figure.legends
    assert [text.get_text() for text in legend.get_texts()] == [
        "run-1/train",
        "run-2/train",
    ]
    assert _plot.choose_tags(scalars, show_all=True) == (
        ["loss", "accuracy", "learning_rate", "counters/step"],
        [],
    )


def test_plot_constant_rule():
    flat = [(1, 0.5), (2, 0.5)]
    # Constant in every run, even at different values: left out, without a value.
    scalars = {
        "a": {"loss": [(1, 1.0), (2, 0.5)], "lr": flat},
        "b": {"lr": [(1, 0.1)] * 2},
    }
    tags, left_out = _plot.choose_tags(scalars)
    assert (tags, left_out) == (["loss"], [("lr", "constant")])
    assert _plot.left_out_line(left_out, scalars) == (
        "Left out: lr (constant). --all shows it."
    )
    # Changes in one run: drawn. One point per run is not "constant". NaN or inf
    # is never constant (the panel says so instead).
    scalars = {
        "a": {"lr": flat},
        "b": {"lr": [(1, 0.1), (2, 0.2)]},
        "c": {"x": [(1, 1.0)]},
    }
    assert _plot.choose_tags(scalars) == (["x", "lr"], [])
    inf = float("inf")
    assert _plot.choose_tags({"a": {"kl": [(1, inf), (2, inf)], "loss": flat}}) == (
        ["kl"],
        [("loss", "constant")],
    )
    # When everything would be left out, nothing is.
    only_bookkeeping = {"a": {"counters/step": [(1, 1.0), (2, 2.0)], "lr": flat}}
    assert _plot.choose_tags(only_bookkeeping) == (["lr", "counters/step"], [])


def test_plot_tag_order():
    # kerasteps's WGAN tags, Keras's TensorBoard names, and user metrics.
    tags = [
        "wasserstein", "steps_per_second", "learning_rate/g", "counters/g_step",
        "reverse_kl", "gradient_penalty", "g_loss", "d_loss", "learning_rate/d",
        "counters/d_step", "examples_per_second", "modes_captured",
        "val_accuracy", "accuracy", "val_loss", "loss", "epoch_learning_rate",
        "output_10_loss", "output_2_loss", "val_mae", "mae", "auc",
    ]  # fmt: skip
    assert _plot.order_tags(tags) == [
        # loss first, then the other loss-like tags, val_x right after x
        "loss", "val_loss", "d_loss", "g_loss", "gradient_penalty", "mae",
        "val_mae", "output_2_loss", "output_10_loss",
        # accuracy-like
        "accuracy", "val_accuracy", "auc",
        # the rest
        "modes_captured", "reverse_kl", "wasserstein",
        # learning rates, throughput, counters
        "epoch_learning_rate", "learning_rate/d", "learning_rate/g",
        "examples_per_second", "steps_per_second",
        "counters/d_step", "counters/g_step",
    ]  # fmt: skip


def test_plot_xscale_rule(tmp_path):
    def runs(*ends):
        return {f"r{i}": {"loss": [(0, 1.0), (end, 0.5)]} for i, end in enumerate(ends)}

    assert _plot.LOG_RATIO == 20
    assert _plot.choose_xscale(runs(20, 400), ["loss"]) == "linear"  # 20x: linear
    assert _plot.choose_xscale(runs(20, 401), ["loss"]) == "log"
    assert _plot.choose_xscale(runs(0, 20), ["loss"]) == "linear"  # 0 counts as 1
    assert _plot.choose_xscale(runs(0, 21), ["loss"]) == "log"
    assert _plot.choose_xscale(runs(60000), ["loss"]) == "linear"  # one run
    assert _plot.choose_xscale(runs(20, 60000), ["loss"], "linear") == "linear"
    assert _plot.choose_xscale(runs(20, 40), ["loss"], "log") == "log"
    with pytest.raises(ValueError, match="`xscale` must be one of auto, linear, log"):
        _plot.choose_xscale(runs(20), ["loss"], "symlog")

    # batch_vs_sgd's shape: full batch ends at step 20, SGD at 60000.
    write_scalars(tmp_path / "full_batch" / "train", {"loss": [(0, 1.0), (20, 0.5)]})
    write_scalars(
        tmp_path / "sgd" / "train",
        {"loss": [(0, 1.0)] + [(step, 0.1) for step in range(100, 60001, 100)]},
    )
    output = tmp_path / "bvs.png"
    result = invoke("plot", str(tmp_path), "-o", str(output))
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"Wrote {output} (1 tag, 2 runs).\n"
        "Log step axis: the runs end between step 20 and step 60000;"
        " --xscale linear for a linear one.\n"
    )
    result = invoke("plot", str(tmp_path), "-o", str(output), "--xscale", "linear")
    assert result.output == f"Wrote {output} (1 tag, 2 runs).\n"
    scalars = event_files.read_scalars(tmp_path)
    axes = _plot.make_figure(scalars, ["loss"], "log").axes[0]
    assert axes.get_xscale() == "symlog"  # linear below 1, so that step 0 shows
    assert axes.get_xlabel() == "global step (log)"
    low, high = axes.get_xlim()
    assert low <= 0 and high >= 60000
    assert _plot.make_figure(scalars, ["loss"], "linear").axes[0].get_xscale() == (
        "linear"
    )


def test_plot_notes_non_finite_values(tmp_path):
    inf, nan = float("inf"), float("nan")
    write_scalars(
        tmp_path / "train",
        {
            "reverse_kl": [(step, inf) for step in range(20, 241, 20)],
            "wasserstein": [(1, 0.5), (2, inf), (3, 0.25), (4, -inf), (5, 0.125)],
            "g_loss": [(1, 1.0), (2, nan), (3, 0.5)],
        },
    )
    output = tmp_path / "curves.png"
    result = invoke("plot", str(tmp_path), "-o", str(output))
    assert result.exit_code == 0, result.output
    assert result.output == f"Wrote {output} (3 tags, 1 run).\n"
    assert matplotlib.image.imread(output).shape[:2] == (720, 1200)

    figure = _plot.make_figure(
        event_files.read_scalars(tmp_path), ["g_loss", "reverse_kl", "wasserstein"]
    )
    g_loss, reverse_kl, wasserstein = figure.axes
    # All inf: no line, a centred note, and the panel spans the steps written.
    assert reverse_kl.get_lines() == []
    (note,) = reverse_kl.texts
    assert note.get_text() == "all 12 values are inf"
    assert note.get_position() == (0.5, 0.5)
    low, high = reverse_kl.get_xlim()
    assert low <= 20 and high >= 240
    # Some not finite: the finite points are drawn, the note counts the others.
    (line,) = wasserstein.get_lines()
    assert list(line.get_xdata()) == [1, 3, 5]
    assert [t.get_text() for t in wasserstein.texts] == [
        "2 of 5 values are not finite (not drawn)"
    ]
    assert [t.get_text() for t in g_loss.texts] == ["1 of 3 values is NaN (not drawn)"]
    # With several runs the note names the run.
    two = {"a": {"kl": [(1, inf)] * 2}, "b": {"kl": [(1, 1.0), (2, nan)]}}
    assert [t.get_text() for t in _plot.make_figure(two, ["kl"]).axes[0].texts] == [
        "a: all 2 values are inf\nb: 1 of 2 values is NaN (not drawn)"
    ]
