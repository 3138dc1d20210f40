"""Tests for kerasteps.callbacks.StepProgressBar: a bar of global steps (what it
counts; tests/test_terminal.py has the bar on a real terminal)."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import types

import keras
import pytest

import kerasteps
from kerasteps.callbacks import (
    LogEvery,
    StepProgressBar,
    StopAtStep,
)
from kerasteps.callbacks.step_progress_bar import _GlobalStepProgbar
from tests.helpers import (
    fit_on_tiny_data,
    tiny_model,
)

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def _bar_counts(text: str) -> list[tuple[int, int]]:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) ", plain)]


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_progress_bar_counts_global_steps_over_the_run(capsys, steps_per_execution):
    model = tiny_model(steps_per_execution=steps_per_execution)
    bar = StepProgressBar(total_steps=25, interval=0)
    fit_on_tiny_data(model, 20, [bar, StopAtStep(25)], epochs=5)
    final = kerasteps.global_step(model)
    assert final == (25 if steps_per_execution == 1 else 26)
    counts = _bar_counts(capsys.readouterr().out)
    assert counts[-1] == (final, 25)
    assert bar.count == final
    assert all(total == 25 for _, total in counts)
    assert [c for c, _ in counts] == sorted(c for c, _ in counts)  # one bar, no reset


def test_progress_bar_of_a_resumed_run_starts_at_its_step(capsys):
    model = tiny_model()
    fit_on_tiny_data(model, 20, [])  # steps 1-10
    capsys.readouterr()
    bar = StepProgressBar(total_steps=30, interval=0)
    fit_on_tiny_data(model, 20, [bar, StopAtStep(30)], epochs=5)
    output = capsys.readouterr().out
    counts = _bar_counts(output)
    # Step 11 (tracing) starts the bar's clock: the first line is at step 12.
    assert counts[0] == (12, 30) and counts[-1] == (30, 30)
    assert "loss:" in output
    assert bar.count == 30


def _lines(screen: str) -> list[str]:
    """The bar's lines as drawn, one per redraw, without colours."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen.replace("\b", ""))
    return [line.rstrip() for line in re.split(r"[\r\n]", plain) if line.strip()]


def _fake_clock(monkeypatch) -> list[float]:
    """Keras's `Progbar` reads the time from this list's one item."""
    now = [0.0]
    module = sys.modules[keras.utils.Progbar.__module__]
    monkeypatch.setattr(module, "time", types.SimpleNamespace(time=lambda: now[0]))
    return now


def test_progress_bar_eta_comes_from_the_steady_rate_not_the_first_step(monkeypatch):
    now = _fake_clock(monkeypatch)
    progbar = _GlobalStepProgbar(3000, initial=0, width=10, interval=0)
    screen = io.StringIO()
    with contextlib.redirect_stdout(screen):
        now[0] = 10.0  # step 1 traces: 10 s (as 10 s/step: ETA 8:19:50)
        progbar.update(1, [("loss", 1.0)], finalize=False)
        for step in range(2, 102):  # then 0.01 s a step
            now[0] = 10.0 + 0.01 * (step - 1)
            progbar.update(step, [("loss", 1.0)], finalize=False)
    lines = _lines(screen.getvalue())
    # Nothing is drawn before the rate is known, then 2998 and 2900 steps to go.
    assert lines[0] == "   2/3000 ━━━━━━━━━━ 29s 10ms/step - loss: 1.000000"
    assert lines[-1] == " 101/3000 ━━━━━━━━━━ 28s 10ms/step - loss: 1.000000"
    assert len(lines) == 100


def test_progress_bar_values_read_as_in_log_every_lines():
    progbar = _GlobalStepProgbar(10, initial=0, interval=0)
    values = {"loss": 265.6186, "mae": 0.0012345, "steps_per_second": 16.2667}
    screen = io.StringIO()
    with contextlib.redirect_stdout(screen):
        progbar.update(1, list(values.items()), finalize=False)
        progbar.update(2, list(values.items()), finalize=False)
    last = _lines(screen.getvalue())[-1]
    logged = LogEvery().format_line(2, values)
    assert logged == "loss=265.618600 mae=0.001234 steps_per_second=16.27 at step 2"
    assert last.endswith(
        " - loss: 265.618600 - mae: 0.001234 - steps_per_second: 16.27"
    ), last
    assert not re.search(r"265\.6186\b|1\.2345e-03", last), last  # Keras's own


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"total_steps": 0}, "`total_steps`.*received 0"),
        ({"total_steps": 10, "every": 0}, "`every`.*received 0"),
        ({"total_steps": 10, "interval": -1}, "`interval`.*-1"),
    ],
)
def test_progress_bar_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StepProgressBar(**kwargs)
