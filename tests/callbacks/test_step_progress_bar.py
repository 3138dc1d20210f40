"""Tests for kerasteps.callbacks.StepProgressBar: a bar of global steps (what it
counts; tests/test_terminal.py has the bar on a real terminal)."""

from __future__ import annotations

import re

import pytest

import kerasteps
from kerasteps.callbacks import (
    StepProgressBar,
    StopAtStep,
)
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
    assert counts[0] == (11, 30) and counts[-1] == (30, 30)
    assert "loss:" in output
    assert bar.count == 30


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
