"""Tests for kerasteps.callbacks.StepEarlyStopping: patience in validations, its
decisions recorded by the sinks, and its state through a checkpoint: a resumed run
stops where the uninterrupted one stopped, and a run that stopped does not train
again."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest

from kerasteps import Every, global_step
from kerasteps.callbacks import (
    JSONLinesLogger,
    StepCheckpoint,
    StepEarlyStopping,
    ValidateEvery,
)
from tests.helpers import fit_steps, read_jsonl, tiny_data, tiny_model

pytestmark = pytest.mark.neutral


def train(
    directory, end, *, start=0, patience=6, target=-1.0, every=2, twin=None, **kwargs
):
    """Fits `tiny_model` from step `start` (restored from `directory`) to `end`,
    batches of 2 in order, validated `every` 2 steps on data whose targets are
    `target` times the training ones (-1: validation gets worse as training goes
    on); a checkpoint every 10 steps and at the end. `twin`: a second
    StepEarlyStopping on the same monitor (listed after the first)."""
    model = tiny_model()
    if start:
        assert StepCheckpoint.restore_latest(model, directory / "ckpts") == start
    x, y = tiny_data(2 * end)
    early = StepEarlyStopping(patience=patience, **kwargs)
    callbacks = [
        ValidateEvery(every, (x[:8], target * y[:8])),
        early,
        *([] if twin is None else [twin]),
        StepCheckpoint(directory / "ckpts", every=Every(10, last=True)),
        JSONLinesLogger(directory / "log.jsonl", every=1000),
    ]
    model.fit(
        x[2 * start :],
        y[2 * start :],
        batch_size=2,
        shuffle=False,
        verbose=0,
        callbacks=callbacks,
    )
    return model, early


def test_stops_at_the_patience_th_validation_without_improvement(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        model, early = train(tmp_path, 40, patience=3)
    records = read_jsonl(tmp_path / "log.jsonl")
    values = {r["step"]: r["val_loss"] for r in records}
    best_step = min(values, key=values.get)  # validation only gets worse
    assert best_step == 2 and early.best_step == 2
    assert early.stopped_step == 8 == global_step(model)
    assert [(r["step"], r["patience/val_loss"]) for r in records] == [
        (2, 0),
        (4, 1),
        (6, 2),
        (8, 3),
    ]
    assert all(r["best/val_loss"] == values[2] for r in records)
    (line,) = [r.message for r in caplog.records if "stopping at step" in r.message]
    assert line == (
        f"StepEarlyStopping: stopping at step 8: val_loss = {values[8]:.6g} has not "
        f"improved on the best {values[2]:.6g} (step 2) in 3 validations "
        "(patience 3, min_delta 0)."
    )


def test_a_resumed_run_stops_where_the_uninterrupted_one_stopped(tmp_path):
    """Stopped at step 10 (ckpt-10, 4 validations without improvement) and
    resumed: the count goes on, and training stops at step 14 as in one run."""
    _, whole = train(tmp_path / "whole", 40)
    assert whole.stopped_step == 14
    train(tmp_path / "split", 10)  # patience not reached: ends at step 10
    model, resumed = train(tmp_path / "split", 40, start=10)
    assert resumed.stopped_step == 14 == global_step(model)
    assert resumed.state_dict() == whole.state_dict()


def test_patience_steps_counts_steps_whatever_the_cadence(tmp_path):
    """The best at the first validation; 5 steps without improvement stop at the
    first validation 5 or more steps after it: step 8 every 2 steps (3
    validations later), step 9 every 3 steps (2 later)."""
    _, every_two = train(tmp_path / "two", 40, patience=None, patience_steps=5)
    _, every_three = train(
        tmp_path / "three", 40, patience=None, patience_steps=5, every=3
    )
    assert (every_two.best_step, every_two.stopped_step) == (2, 8)
    assert (every_three.best_step, every_three.stopped_step) == (3, 9)
    assert every_three.reason.endswith(
        "in 2 validations since step 3 (patience_steps 5, min_delta 0)"
    )


def test_two_on_one_monitor_keep_their_own_state_across_a_resume(tmp_path):
    """The second starts judging at step 6: resumed at step 10, each takes its
    own saved state back, and the first stops at 14 as in one run."""
    whole_twin = StepEarlyStopping(start_step=6)
    _, whole = train(tmp_path / "whole", 40, twin=whole_twin)
    train(tmp_path / "split", 10, twin=StepEarlyStopping(start_step=6))
    twin = StepEarlyStopping(start_step=6)
    _, resumed = train(tmp_path / "split", 40, start=10, twin=twin)
    assert (resumed.state_key, twin.state_key) == (
        "StepEarlyStopping:val_loss",
        "StepEarlyStopping:val_loss#2",
    )
    assert resumed.stopped_step == whole.stopped_step == 14
    assert (resumed.best_step, twin.best_step) == (2, whole_twin.best_step)
    assert whole_twin.best_step >= 6
    assert resumed.state_dict() == whole.state_dict()
    assert twin.state_dict() == whole_twin.state_dict()


def weights(model):
    return [keras.ops.convert_to_numpy(w) for w in model.weights]


@pytest.mark.parametrize("async_save", [True, False])
def test_restore_best_weights_loads_the_best_checkpoint_from_disk(
    tmp_path, caplog, async_save
):
    """Stopped at step 8 (the best at step 2): the model holds the weights of
    ckpt-2 (those of a 2-step fit, bitwise) at global step 8, and the final
    checkpoint, ckpt-8, holds the state of step 8 (a resume continues there)."""
    model, x, y = tiny_model(), *tiny_data(80)
    early = StepEarlyStopping(patience=3, restore_best_weights=True)
    checkpoint = StepCheckpoint(
        tmp_path, every=Every(10, last=True), monitor="val_loss", async_save=async_save
    )
    validate = ValidateEvery(2, (x[:8], -y[:8]))
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        model.fit(
            x, y, batch_size=2, shuffle=False, verbose=0,
            callbacks=[validate, early, checkpoint],
        )  # fmt: skip
    assert (early.best_step, early.stopped_step, global_step(model)) == (2, 8, 8)
    two_steps = tiny_model()
    fit_steps(two_steps, 2)
    for ours, theirs in zip(weights(model), weights(two_steps), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    (line,) = [r.message for r in caplog.records if "restored the weights" in r.message]
    assert f"restored the weights of {tmp_path / 'ckpt-2'} (step 2, val_loss=" in line
    assert line.endswith("the global step stays 8.")
    eight_steps, resumed = tiny_model(), tiny_model()
    fit_steps(eight_steps, 8)
    assert StepCheckpoint.restore_latest(resumed, tmp_path) == 8
    for ours, theirs in zip(weights(resumed), weights(eight_steps), strict=True):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(
    ("checkpoint", "has"),
    [(False, "no StepCheckpoint"), (True, "a StepCheckpoint with monitor=None")],
)
def test_restore_best_weights_without_a_best_checkpoint_is_refused(
    tmp_path, checkpoint, has
):
    model, x, y = tiny_model(), *tiny_data(8)
    callbacks = [
        ValidateEvery(2, (x, y)),
        StepEarlyStopping(restore_best_weights=True),
    ]
    if checkpoint:
        callbacks.append(StepCheckpoint(tmp_path, every=4))
    with pytest.raises(ValueError, match=f"by 'val_loss', but the run has {has}: add"):
        model.fit(x, y, batch_size=2, verbose=0, callbacks=callbacks)
    assert global_step(model) == 0


def test_a_run_that_stopped_does_not_train_again(tmp_path, caplog):
    train(tmp_path, 40, patience=3)  # stops at 8, saved as the final checkpoint
    model = tiny_model()
    assert StepCheckpoint.restore_latest(model, tmp_path / "ckpts") == 8
    early = StepEarlyStopping(patience=3)
    reason = early.stopped(model)
    assert reason.startswith("StepEarlyStopping: the run stopped at step 8: val_loss")
    x, y = tiny_data(8)
    with pytest.raises(RuntimeError, match="the run stopped at step 8"):
        model.fit(x, y, batch_size=2, verbose=0, callbacks=[early])
    assert global_step(model) == 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"patience": 0}, r"`patience` must be"),
        ({"min_delta": -0.1}, r"`min_delta` must be"),
        ({"monitor": "val_auc", "mode": "min"}, r"`mode` 'min' contradicts"),
        ({"start_step": -1}, r"`start_step` must be"),
        ({"patience": 2, "patience_steps": 9}, r"give `patience` \(validations\) or"),
        ({"patience_steps": 0}, r"`patience_steps` must be an int >= 1"),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        StepEarlyStopping(**kwargs)


def test_a_monitor_never_judged_is_said_at_the_end(tmp_path, caplog):
    """Validation every 100 steps in a run of 10: each decider says, once, that
    it judged nothing."""
    model, (x, y) = tiny_model(), tiny_data(20)
    callbacks = [
        ValidateEvery(100, (x, y)),
        StepEarlyStopping(),
        StepCheckpoint(tmp_path, every=5, monitor="val_loss"),
    ]
    with caplog.at_level(logging.WARNING, logger="kerasteps"):
        model.fit(x, y, batch_size=2, verbose=0, callbacks=callbacks)
    lines = sorted(r.message for r in caplog.records if "nothing was" in r.message)
    assert lines == [
        f"{name}: no validation of the run (steps 1 to 10) gave 'val_loss': nothing "
        "was judged. Validate more often than the run is long."
        for name in ("StepCheckpoint", "StepEarlyStopping")
    ]
