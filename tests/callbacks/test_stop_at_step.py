"""Tests for kerasteps.callbacks.StopAtStep: training ends at a global step."""

from __future__ import annotations

import logging
import re

import pytest
import tensorflow as tf

import kerasteps
from kerasteps.callbacks import (
    JSONLinesLogger,
    StepCheckpoint,
    StopAtStep,
)
from tests.helpers import (
    fit_on_tiny_data,
    read_jsonl,
    tiny_data,
    tiny_model,
)

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def test_stop_at_step_ends_at_max_steps_and_after_a_resume(tmp_path):
    model = tiny_model()
    stop = StopAtStep(30)
    fit_on_tiny_data(model, 20, [stop, StepCheckpoint(tmp_path, every=10)], epochs=100)
    assert kerasteps.global_step(model) == 30
    assert stop.stopped_step == 30 and stop.remaining(model) == 0

    resumed = tiny_model(seed=4)
    StepCheckpoint.restore_latest(resumed, tmp_path)
    later = StopAtStep(45)
    assert later.remaining(resumed) == 15
    fit_on_tiny_data(resumed, 20, [later], epochs=100)
    assert kerasteps.global_step(resumed) == 45 and later.remaining(resumed) == 0


def test_stop_at_step_with_steps_per_execution_stops_at_the_next_boundary(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model(steps_per_execution=4)
    stop = StopAtStep(30)
    fit_on_tiny_data(model, 40, [stop], epochs=10)
    assert kerasteps.global_step(model) == stop.stopped_step == 32
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "StopAtStep(max_steps=30): with steps_per_execution=4 the step moves 4 at a "
        "time from 0, so training stops at step 32, the first execution boundary "
        "past 30 (an epoch end can move the boundaries)." in messages
    )
    assert (
        "StopAtStep: reached global step 32 (max_steps=30, 2 past it: "
        "steps_per_execution=4); stopping training." in messages
    )
    caplog.clear()
    exact = tiny_model(steps_per_execution=4)
    fit_on_tiny_data(exact, 40, [StopAtStep(28)], epochs=10)
    assert kerasteps.global_step(exact) == 28
    assert [r.getMessage() for r in caplog.records] == [
        "StopAtStep: reached global step 28 (max_steps=28); stopping training."
    ]


def _repeated_tiny_data(n=64):
    x, y = tiny_data(n)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat()


def test_epochs_of_whole_executions_are_labelled_with_the_true_step(tmp_path):
    """steps_per_epoch=200, K=7: Keras trains 203 steps an epoch; so do the labels."""

    class Steps(kerasteps.callbacks.StepCallback):
        def __init__(self):
            super().__init__(every=1)
            self.seen = []

        def on_step(self, event):
            self.seen.append((event.step, kerasteps.global_step(self.model)))

    model = tiny_model(steps_per_execution=7)
    steps, jsonl = Steps(), str(tmp_path / "log.jsonl")
    model.fit(
        _repeated_tiny_data(),
        steps_per_epoch=200,
        epochs=3,
        verbose=0,
        callbacks=[steps, JSONLinesLogger(jsonl, every=100)],
    )
    assert kerasteps.global_step(model) == 609
    assert all(told == true for told, true in steps.seen), steps.seen[-5:]
    assert [s for s, _ in steps.seen] == list(range(7, 610, 7))
    assert [r["step"] for r in read_jsonl(jsonl)] == [105, 203, 301, 406, 504, 602]


def test_stop_at_step_reports_the_true_step_past_an_epoch_end(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = tiny_model(steps_per_execution=7)
    stop = StopAtStep(200)
    model.fit(
        _repeated_tiny_data(),
        steps_per_epoch=200,
        epochs=3,
        verbose=0,
        callbacks=[stop],
    )
    assert kerasteps.global_step(model) == stop.stopped_step == 203
    assert "reached global step 203 (max_steps=200, 3 past it" in caplog.text
    assert "so training stops at step 203" in caplog.text


def test_stop_at_step_refuses_a_run_that_starts_at_or_after_max_steps(tmp_path):
    model = tiny_model()
    fit_on_tiny_data(model, 10, [StopAtStep(5)], epochs=3)
    assert kerasteps.global_step(model) == 5
    stop = StopAtStep(5)
    assert stop.remaining(model) == 0
    sink = JSONLinesLogger(tmp_path / "log.jsonl", every=1)
    with pytest.raises(RuntimeError, match=r"max_steps=5.*global step 5.*remaining"):
        fit_on_tiny_data(model, 10, [sink, stop])
    assert kerasteps.global_step(model) == 5  # not a single step was trained
    assert sink._file is None  # the sink that already began was closed


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-3, ValueError), (2.5, TypeError), ("10", TypeError)],
)
def test_stop_at_step_bad_max_steps(value, error):
    with pytest.raises(error, match=f"`max_steps`.*{re.escape(repr(value))}"):
        StopAtStep(value)
