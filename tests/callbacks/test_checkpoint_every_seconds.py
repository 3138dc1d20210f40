"""Tests for StepCheckpoint(every_seconds=...): saves on a time cadence, at the
first step that ends after it, and at the final step when it has no `every`."""

from __future__ import annotations

import time

import keras
import pytest

from kerasteps.callbacks import StepCheckpoint, StopAtStep
from tests.helpers import tiny_data, tiny_model

pytestmark = pytest.mark.neutral


class StepTimes(keras.callbacks.Callback):
    """Each step takes 10 ms; notes when each global step ended."""

    def __init__(self):
        super().__init__()
        self.ended = {}

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.01)
        self.ended[len(self.ended) + 1] = time.monotonic()


@pytest.mark.parametrize("every", [None, 1000])
def test_saves_at_the_first_step_after_each_period(tmp_path, every):
    """100 steps of at least 10 ms, a save every 0.25 s: each save at least 0.25 s
    after the one before, by the steps' own end times; the final step saved
    without `every`; with `every=1000` (no `last`) only where a period ended there
    (once in CI it did: step 100 ended a period)."""
    times = StepTimes()
    checkpoint = StepCheckpoint(tmp_path, every=every, keep=100, every_seconds=0.25)
    x, y = tiny_data(400)
    model = tiny_model()
    begun = time.monotonic()
    model.fit(
        x,
        y,
        batch_size=2,
        shuffle=False,
        verbose=0,
        callbacks=[times, checkpoint, StopAtStep(100)],
    )
    steps = [info.step for info in StepCheckpoint.list_checkpoints(tmp_path)]
    if every is None:
        assert steps[-1] == 100  # the final step, saved when it has no `every`
        timed = steps[:-1]
    else:
        timed = steps  # step 100 among them only if a period ended there
    assert len(timed) >= 2
    ends = [begun] + [times.ended[step] for step in timed]
    assert all(
        later - earlier >= 0.25 for earlier, later in zip(ends, ends[1:], strict=False)
    )
    assert len(timed) <= (times.ended[100] - begun) / 0.25


def test_neither_every_nor_every_seconds_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"needs `every` \(steps: an int or kerasteps"):
        StepCheckpoint(tmp_path)
    with pytest.raises(ValueError, match=r"`every_seconds` must be a"):
        StepCheckpoint(tmp_path, every_seconds=0)
