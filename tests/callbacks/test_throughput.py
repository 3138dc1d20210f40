"""Tests for kerasteps.callbacks.Throughput: steps and examples per second."""

from __future__ import annotations

import math

import pytest

from kerasteps.callbacks import (
    JSONLinesLogger,
    StepTensorBoard,
    Throughput,
)
from tests.helpers import (
    fit_on_tiny_data,
    read_jsonl,
    read_scalars,
    tiny_model,
)

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_throughput_values_are_positive_and_finite(tmp_path, steps_per_execution):
    model = tiny_model(steps_per_execution=steps_per_execution)
    speed = Throughput(every=8, batch_size=2)
    path = tmp_path / "log.jsonl"
    fit_on_tiny_data(
        model,
        32,
        [
            JSONLinesLogger(path, every=8),
            StepTensorBoard(tmp_path / "tb", every=8),
            speed,
        ],
        epochs=2,
    )
    records = read_jsonl(path)
    assert [r["step"] for r in records] == [8, 16, 24, 32]
    for record in records:
        steps, examples = record["steps_per_second"], record["examples_per_second"]
        assert math.isfinite(steps) and steps > 0
        assert examples == pytest.approx(2 * steps)
    tags = read_scalars(str(tmp_path / "tb"), "train", "steps_per_second")
    assert [s for s, _ in tags] == [8, 16, 24, 32]
    assert all(v > 0 and math.isfinite(v) for _, v in tags)


def test_throughput_without_batch_size_gives_steps_only():
    speed = Throughput(every=5)
    fit_on_tiny_data(tiny_model(), 20, [speed])
    assert list(speed.last_values) == ["steps_per_second"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"every": 0}, "`every`.*received 0"), ({"batch_size": 0}, "`batch_size`.*0")],
)
def test_throughput_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Throughput(**kwargs)
