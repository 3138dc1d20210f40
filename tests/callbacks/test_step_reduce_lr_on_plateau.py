"""Tests for kerasteps.callbacks.StepReduceLROnPlateau: the cuts at the patience-th
validation (cooldown, min_lr), the rates that training then applies (mid-epoch on
JAX too), the sinks' records, a resumed run that cuts at the same steps, and every
optimizer of a WGAN (refused while its rates are schedules)."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest

from kerasteps import Every
from kerasteps.callbacks import (
    JSONLinesLogger,
    StepCallback,
    StepCheckpoint,
    StepReduceLROnPlateau,
    ValidateEvery,
)
from tests.helpers import read_jsonl, tiny_data, tiny_model, tiny_wgan

pytestmark = pytest.mark.neutral

CUT = {"patience": 2, "factor": 0.5, "cooldown": 1, "min_lr": 0.01}


def train(directory, end, *, start=0, **kwargs):
    """Fits `tiny_model` (SGD 0.05) from step `start` (restored from `directory`)
    to `end`, batches of 2 in order, validated every 2 steps on data whose
    targets are the training ones negated (validation only gets worse); a
    checkpoint every 10 steps and at the end, a JSON line every step."""
    model = tiny_model()
    if start:
        assert StepCheckpoint.restore_latest(model, directory / "ckpts") == start
    x, y = tiny_data(2 * end)
    cut = StepReduceLROnPlateau(**{**CUT, **kwargs})
    callbacks = [
        ValidateEvery(2, (x[:8], -y[:8])),
        cut,
        StepCheckpoint(directory / "ckpts", every=Every(10, last=True)),
        JSONLinesLogger(directory / "log.jsonl", every=1),
    ]
    model.fit(
        x[2 * start :],
        y[2 * start :],
        batch_size=2,
        shuffle=False,
        verbose=0,
        callbacks=callbacks,
    )
    return model, cut


def test_cuts_at_the_patience_th_validation_and_the_sinks_record_it(tmp_path, caplog):
    """Validations at 2, 4, ...; the best at step 2. Patience 2 cuts at 6; the
    cooldown skips 8; cuts at 12 and 18 (0.0125 -> 0.01, min_lr); none after."""
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        model, cut = train(tmp_path, 30)
    records = {r["step"]: r for r in read_jsonl(tmp_path / "log.jsonl")}
    assert [step for step, _ in cut.cuts] == [6, 12, 18]
    assert [rates[""] for _, rates in cut.cuts] == pytest.approx([0.025, 0.0125, 0.01])
    assert [s for s, r in records.items() if "cut/learning_rate" in r] == [6, 12, 18]
    # The rate each step applied: the cut at step 6 applies from step 7 on.
    expected = [0.05] * 6 + [0.025] * 6 + [0.0125] * 6 + [0.01] * 12
    applied = [records[step]["learning_rate"] for step in range(1, 31)]
    assert applied == pytest.approx(expected, rel=1e-6)
    assert [records[s]["plateau/val_loss"] for s in range(2, 31, 2)] == [
        0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2,
    ]  # fmt: skip
    assert float(model.optimizer.learning_rate) == pytest.approx(0.01)
    lines = [
        r.message for r in caplog.records if "cutting the learning rate" in r.message
    ]
    assert len(lines) == 3
    value = records[6]["val_loss"]
    assert lines[0] == (
        f"StepReduceLROnPlateau: cutting the learning rate at step 6: val_loss = "
        f"{value:.6g} has not improved on the best {records[2]['val_loss']:.6g} "
        "(step 2) in 2 validations (patience 2, min_delta 0.0001); "
        "learning_rate -> 0.025."
    )


def test_training_applies_the_cut_rate_from_the_next_step(tmp_path):
    """The cut at step 6, mid-epoch, trains exactly as a fit of 6 steps at 0.05
    and a second fit at 0.025 (on JAX: the rate reaches the trainer's state)."""
    model, cut = train(tmp_path, 12, cooldown=10)
    assert [step for step, _ in cut.cuts] == [6]
    reference = tiny_model()
    x, y = tiny_data(24)
    reference.fit(x[:12], y[:12], batch_size=2, shuffle=False, verbose=0)
    reference.optimizer.learning_rate = 0.025
    reference.fit(x[12:], y[12:], batch_size=2, shuffle=False, verbose=0)
    for ours, theirs in zip(model.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs)
        )


def test_a_resumed_run_cuts_at_the_same_steps(tmp_path):
    """Resumed at step 10 (after the cut at 6, with the count at 1): the same
    cuts, the same rate at every step and the same state as one run."""
    whole_model, whole = train(tmp_path / "whole", 30)
    train(tmp_path / "split", 10)
    model, resumed = train(tmp_path / "split", 30, start=10)
    assert resumed.cuts == whole.cuts
    assert resumed.state_dict() == whole.state_dict()

    def rates(name):
        return [r["learning_rate"] for r in read_jsonl(tmp_path / name / "log.jsonl")]

    assert rates("split") == rates("whole")
    for ours, theirs in zip(model.weights, whole_model.weights, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs)
        )


class WorseEveryTwo(StepCallback):
    """A provider of `quality_w1`, worse at every second step."""

    role = "provider"
    value_prefix = "quality_"

    def __init__(self):
        super().__init__(every=Every(2))

    def on_step(self, event):
        return {"quality_w1": float(event.step)}


def test_a_wgan_scheduled_rate_is_refused_naming_the_optimizer():
    gan = tiny_wgan()  # the default compile: PolynomialDecay rates
    x = np.zeros((8, 2), "float32")
    with pytest.raises(ValueError, match=r"optimizer 'd' \(Adam\) is a schedule"):
        gan.fit(x, batch_size=2, verbose=0, callbacks=[WorseEveryTwo(), cut_w1()])
    assert int(gan.d_step) == 0


def cut_w1():
    return StepReduceLROnPlateau("quality_w1", patience=2, factor=0.5, min_delta=0)


def test_both_wgan_optimizers_are_cut():
    gan = tiny_wgan()
    gan.compile(
        d_optimizer=keras.optimizers.Adam(1e-3), g_optimizer=keras.optimizers.Adam(2e-3)
    )
    cut = cut_w1()
    x = np.zeros((16, 2), "float32")
    gan.fit(x, batch_size=2, verbose=0, callbacks=[WorseEveryTwo(), cut])
    assert [step for step, _ in cut.cuts] == [6]
    assert cut.cuts[0][1] == pytest.approx({"d": 5e-4, "g": 1e-3})
    assert float(gan.d_optimizer.learning_rate) == pytest.approx(5e-4)
    assert float(gan.g_optimizer.learning_rate) == pytest.approx(1e-3)


def test_a_monitor_no_validation_gives_is_refused_before_training():
    model = tiny_model()
    x, y = tiny_data(8)
    cut = StepReduceLROnPlateau("val_accuracy")
    with pytest.raises(ValueError, match=r"'val_accuracy' is no value that"):
        model.fit(
            x, y, batch_size=2, verbose=0, callbacks=[ValidateEvery(2, (x, y)), cut]
        )
    assert int(model.optimizer.iterations) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"factor": 0}, r"`factor` must be a number > 0 and < 1, received 0"),
        ({"factor": 1.0}, r"`factor` must be a number > 0 and < 1, received 1.0"),
        ({"factor": 2}, r"`factor` must be a number > 0 and < 1, received 2"),
        ({"factor": "half"}, r"`factor` must be a number > 0 and < 1, received 'half'"),
        ({"patience": 0}, r"`patience` must be an int >= 1"),
        ({"patience": 2, "patience_steps": 50}, r"give `patience` \(validations\)"),
        ({"cooldown": -1}, r"`cooldown` must be an int >= 0"),
        ({"min_lr": -1e-3}, r"`min_lr` must be a finite number >= 0"),
        ({"monitor": "val_loss", "mode": "max"}, r"`mode` 'max' contradicts"),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        StepReduceLROnPlateau(**kwargs)


def test_the_deciders_leave_the_quiet_steps_quiet(tmp_path, monkeypatch):
    """The deciders, a best checkpoint and a time limit make the run act at no
    step where validation and a plain checkpoint alone do not (but where
    StopAtTime's timer woke it): the other steps are counted, no callback acts
    and nothing is read from the device."""
    from kerasteps.callbacks import StepEarlyStopping, StopAtTime
    from kerasteps.callbacks._dispatch import Dispatcher

    acted, wakes = [], []
    dispatch, wake = Dispatcher._dispatch, StopAtTime._wake
    monkeypatch.setattr(
        Dispatcher, "_dispatch", lambda d, r: (acted.append(r.step), dispatch(d, r))
    )
    monkeypatch.setattr(StopAtTime, "_wake", lambda s: (wakes.append(1), wake(s)))

    def steps_acted(*deciders, **monitor):
        acted.clear()
        model, (x, y) = tiny_model(), tiny_data(80)
        model.fit(
            x, y, batch_size=2, shuffle=False, verbose=0,
            callbacks=[
                ValidateEvery(10, (x[:8], y[:8])),
                *deciders,
                StepCheckpoint(tmp_path / str(bool(monitor)), every=20, **monitor),
            ],
        )  # fmt: skip
        return set(acted)

    plain = steps_acted()
    deciding = steps_acted(
        StepEarlyStopping(patience=50),
        StepReduceLROnPlateau(patience=50),
        StopAtTime(3600.0),
        monitor="val_loss",
    )
    assert {10, 20, 30, 40} <= plain and len(plain) <= 6
    assert len(deciding - plain) <= len(wakes)
