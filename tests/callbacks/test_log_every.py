"""Tests for kerasteps.callbacks.LogEvery: the text of the log lines."""

import logging
import re

import keras
import numpy as np
import pytest

from kerasteps import Every
from kerasteps.callbacks import LogEvery, Throughput
from tests.helpers import tiny_data, tiny_model

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def kerasteps_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "kerasteps"]


def test_default_line_is_tf1_style(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model(metrics=["mae"])
    x, y = tiny_data(20)
    model.fit(
        x, y, batch_size=2, epochs=1, verbose=0, callbacks=[LogEvery(Every(4, start=1))]
    )
    lines = kerasteps_lines(caplog)
    assert len(lines) == 3
    for line, step in zip(lines, [1, 5, 9], strict=True):
        assert line.startswith("loss=") and line.endswith(f" at step {step}")
        name_values = line[: -len(f" at step {step}")].split()
        assert [nv.split("=")[0] for nv in name_values] == ["loss", "mae"]
        for nv in name_values:
            value = nv.split("=")[1]
            assert len(value.split(".")[1]) == 6  # 1.396970: six decimals
            assert float(value) >= 0


def test_custom_format_keys_and_precision(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model(metrics=["mae"])
    x, y = tiny_data(20)
    log = LogEvery(5, fmt="[{step:04d}] {metrics}", keys=["mae"], precision=2)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[log])
    lines = kerasteps_lines(caplog)
    assert [line.split("]")[0] for line in lines] == ["[0005", "[0010"]
    assert all(line.split("] ")[1].startswith("mae=") for line in lines)
    assert all(
        len(line.split("=")[1]) == len("0.00") + (len(line.split("=")[1]) - 4)
        for line in lines
    )
    assert all(len(line.split("=")[1].split(".")[1]) == 2 for line in lines)


def test_callable_format(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model()
    x, y = tiny_data(8)
    log = LogEvery(2, fmt=lambda step, values: f"s={step} n={len(values)}")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[log])
    assert kerasteps_lines(caplog) == ["s=2 n=1", "s=4 n=1"]


def test_format_line_matches_the_seed_output():
    assert (
        LogEvery().format_line(101, {"loss": 1.22139704}) == "loss=1.221397 at step 101"
    )
    assert LogEvery().format_line(5, {"d_loss": 0.5, "d_step": 25}) == (
        "d_loss=0.500000 d_step=25 at step 5"
    )


def test_named_fields_read_as_in_metrics_unless_given_a_spec():
    log = LogEvery(fmt="{step}: {loss} {loss:.3f} {loss!r} {d_step} {d_step:>4}")
    values = {"loss": -3.2e-07, "d_step": 25}
    assert log.format_line(7, values) == "7: -3.2e-07 -0.000 -3.2e-07 25   25"
    log = LogEvery(fmt="{steps_per_second} {val_loss}", precision=2)
    assert log.format_line(7, {"steps_per_second": 16.2667}) == "16.27 -"


def test_fit_lines_show_tiny_values_their_signs_and_readable_throughput(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    keras.utils.set_random_seed(0)
    # Every prediction is -3.2e-07: the loss (their mean) is tiny and negative, the
    # mse metric (their square) tinier and positive; `.6f` printed both as zeros.
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(
                1,
                use_bias=False,
                kernel_initializer=keras.initializers.Constant(-1.6e-7),
            ),
        ]
    )
    model.compile(
        keras.optimizers.SGD(0.0),
        loss=lambda y_true, y_pred: keras.ops.mean(y_pred),
        metrics=["mse"],
    )
    x, y = np.ones((16, 2), "float32"), np.zeros((16, 1), "float32")
    speed = Throughput(4, batch_size=2)
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[speed, LogEvery(4)])
    lines = kerasteps_lines(caplog)
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["4", "8"]
    for line in lines:
        values = dict(pair.split("=") for pair in line.split(" at step ")[0].split())
        assert list(values) == [
            "loss", "mse", "steps_per_second", "examples_per_second"
        ]  # fmt: skip
        assert values["loss"] == "-3.2e-07"
        assert values["mse"] == "1.024e-13"
        for name in ("steps_per_second", "examples_per_second"):
            text = values[name]
            # 4 significant digits, no exponent: 16.27, 520.5, 52053
            assert re.fullmatch(r"[0-9]+(\.[0-9]+)?", text), line
            digits = text.replace(".", "").lstrip("0")
            assert len(digits) >= 4 and ("." not in text or len(digits) == 4), line
        ratio = float(values["examples_per_second"]) / float(values["steps_per_second"])
        assert ratio == pytest.approx(2, rel=2e-3)


def test_other_logger_and_level(caplog):
    caplog.set_level(logging.DEBUG, logger="my.train")
    model = tiny_model()
    x, y = tiny_data(8)
    log = LogEvery(4, logger="my.train", level=logging.WARNING)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[log])
    records = [r for r in caplog.records if r.name == "my.train"]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert records[0].getMessage().endswith("at step 4")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"precision": -1}, ValueError, "`precision` must be an int >= 0, received -1"),
        (
            {"fmt": 3},
            TypeError,
            "`fmt` must be a format string or a callable, received 3",
        ),
        (
            {"keys": "loss"},
            TypeError,
            "`keys` must be a sequence of names, received 'loss'",
        ),
        (
            {"every": -5},
            ValueError,
            "`every` must be a positive int or a kerasteps.Every, received -5",
        ),
        # Issue 46, finding 7: these were accepted, or failed without the name.
        (
            {"keys": [1]},
            TypeError,
            r"`keys` must be a sequence of names, received \[1\]",
        ),
        ({"keys": 5}, TypeError, "`keys` must be a sequence of names, received 5"),
        (
            {"logger": None},
            ValueError,
            "`logger` must be a non-empty string (a logger's name) or a "
            "logging.Logger, received None",
        ),
        ({"logger": ""}, ValueError, "`logger` must be a non-empty string"),
        (
            {"level": -5},
            ValueError,
            "`level` must be a logging level int >= 0, received -5",
        ),
        ({"fmt": ""}, ValueError, "`fmt` must be a non-empty format string"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        LogEvery(**kwargs)


def test_a_resumed_run_marks_where_its_lines_supersede_the_ones_above(tmp_path, caplog):
    """A stream cannot take back the lines an interrupted run printed after its
    checkpoint: the resumed run's first line says where the resume begins. A second
    `fit()` that goes on in the same process marks nothing."""
    from kerasteps.callbacks import StepCheckpoint
    from tests.helpers import fit_steps

    caplog.set_level(logging.INFO, logger="kerasteps")
    fit_steps(tiny_model(), 6, [StepCheckpoint(tmp_path, every=3)])
    (kept,) = [i for i in StepCheckpoint.list_checkpoints(tmp_path) if i.step == 6]
    model = tiny_model(seed=1)
    StepCheckpoint.restore_latest(model, tmp_path)
    caplog.clear()
    fit_steps(model, 2, [LogEvery(1)])
    fit_steps(model, 1, [LogEvery(1)])
    lines = kerasteps_lines(caplog)
    assert lines[0] == (
        f"resumed at step 6 from {kept.path}: lines above of steps after 6 are "
        "superseded by the lines below"
    )
    assert [line.split(" at step ")[-1] for line in lines[1:]] == ["7", "8", "9"]
