"""Tests for the best checkpoints: `StepCheckpoint(monitor=..., keep_best=...)`,
the retention rule, the best table and `StepCheckpoint.restore_best`.

Each anchor bug of the issue is a test here: a best checkpoint at mid-epoch
validation steps, more than k checkpoints after a resume, rotation with `keep=1,
keep_best=1` while the best is the oldest, a best deleted by hand before a resume.
"""

from __future__ import annotations

import json
import logging
import math
import shutil

import keras
import numpy as np
import pytest

from kerasteps import Every
from kerasteps.callbacks import StepCallback, StepCheckpoint, ValidateEvery
from kerasteps.checkpoint import CheckpointInfo
from kerasteps.checkpoint._retention import Retention
from tests.helpers import tiny_data, tiny_model

pytestmark = pytest.mark.neutral


class Witness(StepCallback):
    """Records each validation value of `name` by step, as the sinks receive it."""

    role = "sink"
    records_extras = True

    def __init__(self, name: str = "val_loss"):
        super().__init__(every=None)
        self.name, self.seen = name, {}

    def on_step(self, event):
        if self.name in event.extras:
            self.seen[event.step] = float(event.extras[self.name])


def best_of(seen: dict[int, float], k: int, mode: str = "min") -> list[int]:
    """The steps of the k best values (ties: the earlier step)."""
    sign = 1.0 if mode == "min" else -1.0
    finite = [(sign * v, s) for s, v in seen.items() if math.isfinite(v)]
    return [s for _, s in sorted(finite)[:k]]


def saved_at_their_time(seen: dict[int, float], k: int) -> list[int]:
    """The steps whose value ranked among the k best when it came."""
    saved = []
    for step in sorted(seen):
        so_far = {s: v for s, v in seen.items() if s <= step}
        if step in best_of(so_far, k):
            saved.append(step)
    return saved


def index_of(directory) -> dict:
    with open(f"{directory}/checkpoint.json") as handle:
        return json.load(handle)


def folders(directory) -> list[int]:
    return sorted(info.step for info in StepCheckpoint.list_checkpoints(directory))


def run(directory, steps, *, start=0, validate_every=2, target=1.0, **kw):
    """Fits `tiny_model` from step `start` (restored) to `steps`, on batches of 2
    in order, validated every `validate_every` steps on data whose target is
    `target` times the training one (-1.0: validation gets worse as training
    improves)."""
    model = tiny_model()
    if start:
        assert StepCheckpoint.restore_latest(model, directory) == start
    x, y = tiny_data(2 * steps)
    witness = Witness()
    checkpoint = StepCheckpoint(directory, **{"every": 100, **kw})
    validate = ValidateEvery(validate_every, (x[:8], target * y[:8]))
    model.fit(
        x[2 * start :],
        y[2 * start :],
        batch_size=2,
        shuffle=False,
        verbose=0,
        callbacks=[checkpoint, witness, validate],
    )
    return model, witness.seen, checkpoint


def test_mid_epoch_validation_keeps_the_best_states_of_their_steps(tmp_path):
    """Validation every 2 steps inside one epoch of 20: the 2 best are saved at
    their own steps (their weights give the value recorded for them), beside the
    newest; the index's best table lists them best first."""
    model, seen, _ = run(tmp_path, 20, keep=1, monitor="val_loss", keep_best=2)
    best = best_of(seen, 2)
    assert len(seen) == 10 and len(set(seen.values())) == 10
    table = index_of(tmp_path)["best"]
    assert table["monitor"] == "val_loss" and table["mode"] == "min"
    assert [(e["step"], e["value"]) for e in table["checkpoints"]] == [
        (s, seen[s]) for s in best
    ]
    newest = max(saved_at_their_time(seen, 2))
    assert set(folders(tmp_path)) == {*best, newest}
    x, y = tiny_data(40)
    for step in best:  # the state of that step, not of a later one
        restored = tiny_model(1)
        StepCheckpoint.restore_checkpoint(restored, tmp_path / f"ckpt-{step}")
        loss = restored.evaluate(x[:8], y[:8], verbose=0)
        assert loss == pytest.approx(seen[step], rel=1e-6)
    restored = tiny_model(2)
    assert StepCheckpoint.restore_best(restored, tmp_path) == best[0]


def test_keep_one_and_the_oldest_best_survives_rotation(tmp_path):
    """`keep=1, keep_best=1` while validation only gets worse: the first
    validated checkpoint stays, beside the newest, whatever the rotation."""
    _, seen, _ = run(tmp_path, 16, keep=1, every=2, monitor="val_loss", target=-1.0)
    assert best_of(seen, 1) == [2]  # the oldest is the best
    assert folders(tmp_path) == [2, 16]
    assert index_of(tmp_path)["best"]["checkpoints"][0]["step"] == 2


def test_a_resumed_run_keeps_the_same_best_and_no_more(tmp_path):
    """Two runs of 10 steps, the second resumed from the first's checkpoint: the
    checkpoints on disk and the best table equal those of one run of 20 steps
    (Lightning kept more than k after a resume)."""
    options = dict(keep=2, every=Every(4, last=True), monitor="val_loss", keep_best=2)
    whole = tmp_path / "whole"
    run(whole, 20, **options)
    parts = tmp_path / "parts"
    run(parts, 10, **options)  # ends with a save at step 10
    run(parts, 20, start=10, **options)
    assert folders(parts) == folders(whole)
    assert len(folders(parts)) <= 4
    assert index_of(parts)["best"] == index_of(whole)["best"]


def test_a_best_deleted_by_hand_warns_and_the_next_best_is_used(tmp_path, caplog):
    _, seen, _ = run(tmp_path, 12, keep=1, monitor="val_loss", keep_best=2)
    first, second = best_of(seen, 2)
    shutil.rmtree(tmp_path / f"ckpt-{first}")
    with caplog.at_level(logging.WARNING, logger="kerasteps"):
        assert StepCheckpoint.restore_best(tiny_model(), tmp_path) == second
    assert any(
        f"ckpt-{first} is listed but missing" in r.message for r in caplog.records
    )


def test_keras_epoch_end_validation_is_judged(tmp_path):
    """fit's own `validation_data`: the value of each epoch end is judged at the
    epoch's last step, and the best epoch's state is kept."""
    model = tiny_model()
    x, y = tiny_data(16)
    checkpoint = StepCheckpoint(tmp_path, every=1000, monitor="val_loss", keep=1)
    history = model.fit(
        x,
        y,
        batch_size=4,
        epochs=4,
        validation_data=(x[:8], -y[:8]),
        shuffle=False,
        verbose=0,
        callbacks=[checkpoint],
    )
    losses = history.history["val_loss"]
    best = 4 * (1 + int(np.argmin(losses)))
    entries = StepCheckpoint.list_checkpoints(tmp_path)
    assert best in [e.step for e in entries]
    (info,) = [e for e in entries if e.step == best]
    assert info.monitor == "val_loss" and info.value == pytest.approx(min(losses))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"monitor": "val_nope"},
            r"`monitor` 'val_nope' is no value .* \['val_loss', 'val_mae'\]",
        ),
        ({"monitor": "loss"}, r"`monitor` 'loss' is not a validation value"),
    ],
)
def test_a_monitor_no_validation_gives_is_refused_before_training(
    tmp_path, kwargs, message
):
    model = tiny_model(metrics=["mae"])
    x, y = tiny_data(8)
    checkpoint = StepCheckpoint(tmp_path, every=2, **kwargs)
    validate = ValidateEvery(2, (x, y))
    with pytest.raises(ValueError, match=message):
        model.fit(x, y, batch_size=2, verbose=0, callbacks=[checkpoint, validate])
    assert int(model.optimizer.iterations) == 0
    assert folders(tmp_path) == []


def test_a_name_only_validation_settles_is_an_error_there(tmp_path):
    """A model of two outputs validated by Keras at the epoch end: on
    TensorFlow the names are known once it ran, and the first validation (step 4)
    names those it holds; JAX's fit builds the model first, and the monitor is
    refused before step 1. (So does ValidateEvery, which evaluates a batch
    before the first step.)"""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((2,))
    outputs = {
        "a": keras.layers.Dense(1, name="a")(inputs),
        "b": keras.layers.Dense(1, name="b")(inputs),
    }
    model = keras.Model(inputs, outputs)
    model.compile("sgd", {"a": "mse", "b": "mse"})
    x, y = tiny_data(8)
    targets = {"a": y, "b": -y}
    checkpoint = StepCheckpoint(tmp_path, every=100, monitor="val_c_loss")
    held = r"\['val_a_loss', 'val_b_loss', 'val_loss'\]"
    with pytest.raises(ValueError, match=rf"(of step 4: |; it gives ){held}"):
        model.fit(
            x,
            targets,
            batch_size=2,
            validation_data=(x, targets),
            verbose=0,
            callbacks=[checkpoint],
        )
    assert folders(tmp_path) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keep_best": 2}, r"`keep_best` \(2\) needs `monitor`"),
        ({"monitor": "val_loss", "mode": "max"}, r"`mode` 'max' contradicts"),
        ({"monitor": "val_accuracy", "mode": "min"}, r"`mode` 'min' contradicts"),
        ({"monitor": "val_loss", "mode": "up"}, r"`mode` must be"),
        ({"monitor": "", "keep_best": 1}, r"`monitor` must be a non-empty"),
        ({"monitor": "val_loss", "keep_best": -1}, r"`keep_best` must be"),
        ({"keep_every_steps": 0}, r"`keep_every_steps` must be"),
        ({"keep_every_hours": 0.0}, r"`keep_every_hours` must be"),
    ],
)
def test_bad_arguments_are_refused_at_construction(tmp_path, kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        StepCheckpoint(tmp_path, every=5, **kwargs)


def test_a_non_finite_value_is_never_best(tmp_path):
    """A validation whose value is NaN: never saved as a best, and a checkpoint
    of that step records no value."""
    model = tiny_model()
    x, y = tiny_data(12)
    bad = y[:4].copy()
    bad[0] = np.nan
    witness = Witness()
    checkpoint = StepCheckpoint(tmp_path, every=2, keep=10, monitor="val_loss")
    validate = ValidateEvery(2, (x[:4], bad))
    model.fit(
        x,
        y,
        batch_size=2,
        shuffle=False,
        verbose=0,
        callbacks=[checkpoint, witness, validate],
    )
    assert all(math.isnan(v) for v in witness.seen.values())
    entries = StepCheckpoint.list_checkpoints(tmp_path)
    assert [e.step for e in entries] == [2, 4, 6]
    assert all(e.monitor == "val_loss" and e.value is None for e in entries)
    assert index_of(tmp_path)["best"]["checkpoints"] == []
    assert StepCheckpoint.restore_best(tiny_model(), tmp_path) is None


def _infos(values, hours=0.0):
    return [
        CheckpointInfo(f"ckpt-{s}", s, "", s * hours * 3600.0, "val_loss", v)
        for s, v in values
    ]


def test_retention_is_one_rule():
    infos = _infos([(10, 0.5), (20, 0.2), (30, 0.9), (40, 0.2), (50, 0.7), (60, 0.8)])
    assert Retention(2).kept(infos) == {"ckpt-50", "ckpt-60"}
    assert Retention(1, "val_loss", "min", 2).kept(infos) == {
        "ckpt-20",
        "ckpt-40",
        "ckpt-60",
    }
    best = Retention(1, "val_loss", "min", 1)
    assert best.kept(infos) == {"ckpt-20", "ckpt-60"}  # a tie: the earlier step
    assert [e.step for e in Retention(1, "val_loss", "max", 1).best(infos)] == [30]
    spans = Retention(1, keep_every_steps=25)
    assert spans.kept(infos) == {"ckpt-10", "ckpt-30", "ckpt-50", "ckpt-60"}
    hourly = Retention(1, keep_every_hours=2.0)  # saved at s hours: spans of 2 h
    assert hourly.kept(_infos([(1, None), (2, None), (3, None), (4, None)], 1.0)) == {
        "ckpt-1",
        "ckpt-2",
        "ckpt-4",
    }


def test_a_new_keep_best_wins_over_the_directory_and_says_so(tmp_path, caplog):
    options = dict(every=Every(4, last=True), monitor="val_loss")
    run(tmp_path, 10, keep_best=1, **options)
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        run(tmp_path, 20, start=10, keep_best=3, **options)
    (line,) = [r.message for r in caplog.records if "are ranked again" in r.message]
    assert line == (
        f"StepCheckpoint: this run keeps the 3 best by val_loss; the checkpoints in "
        f"{tmp_path} were kept as the 1 best by val_loss, and are ranked again."
    )
    assert index_of(tmp_path)["best"]["keep_best"] == 3
    assert len(index_of(tmp_path)["best"]["checkpoints"]) == 3
