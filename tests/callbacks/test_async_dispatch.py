"""Keras's async dispatch (JAX, PyTorch): kerasteps callbacks let Keras run batch ends
on its callback thread, act at the next batch begin on the training thread, and write
what a run with every batch end on the training thread writes, bitwise (checkpoints
included); at quiet steps the training thread reads nothing from the device; a signal
stops training after the step in progress, and that step is the one saved.

On TensorFlow Keras never dispatches batch ends to a thread: both runs below are then
synchronous, and the comparisons hold trivially; `test_the_async_run_was_async`
says which it was.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading

import keras
import numpy as np
import pytest

from kerasteps import Every
from kerasteps import steps as steps_lib
from kerasteps._variables import ScalarReader
from kerasteps.callbacks import (
    JSONLinesLogger,
    LogEvery,
    StepCallback,
    StepCheckpoint,
    StepEarlyStopping,
    StepReduceLROnPlateau,
    StepTensorBoard,
    StopAtStep,
    StopAtTime,
    StopOnNonFinite,
    ValidateEvery,
)
from tests.helpers import read_jsonl, read_scalars, tiny_data, tiny_model

pytestmark = pytest.mark.neutral

EVERY = 3
#: 2 epochs of 13 batches: an epoch end off the schedule.
EXAMPLES, BATCH, EPOCHS = 26, 2, 2


class SyncWitness(keras.callbacks.Callback):
    """Not async-safe: Keras runs every batch end of the fit on the training thread.
    Records Keras's logs by (epoch, batch)."""

    def __init__(self):
        super().__init__()
        self.logs: dict[tuple[int, int], dict] = {}
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch  # Keras waits for its threads before an epoch ends

    def on_train_batch_end(self, batch, logs=None):
        self.logs[self.epoch, batch] = dict(logs)


class AsyncWitness(SyncWitness):
    """Async-safe: records Keras's logs and the thread of each batch end; reads
    the model's state only at the train end."""

    async_safe = True

    def __init__(self):
        super().__init__()
        self.threads: set[int] = set()
        self.final_step = None

    def on_train_batch_end(self, batch, logs=None):
        self.threads.add(threading.get_ident())
        super().on_train_batch_end(batch, logs)

    def on_train_end(self, logs=None):
        self.final_step = steps_lib.global_step(self.model)


def fit(tmp_path, witness, steps_per_execution=1, checkpoint=None, stops=(), y=None):
    """Trains with the sinks, validation every 4 steps and a plateau's cut, a
    checkpoint every 5 steps, and Keras's own validation at epoch ends (and the
    callbacks `stops`, on targets `y`); returns what the sinks wrote."""
    model = tiny_model(steps_per_execution=steps_per_execution, metrics=["mae"])
    x, targets = tiny_data(EXAMPLES)
    y = targets if y is None else y
    jsonl, tb = tmp_path / "log.jsonl", tmp_path / "tb"
    checkpoint = checkpoint or StepCheckpoint(tmp_path / "ckpt", every=5, keep=100)
    callbacks = [
        ValidateEvery(4, (x[:8], y[:8]), prefix="val_steps_"),
        StepReduceLROnPlateau("val_steps_loss", patience=1, factor=0.5),
        LogEvery(EVERY),
        StepTensorBoard(str(tb), every=EVERY),
        JSONLinesLogger(str(jsonl), every=EVERY),
        checkpoint,
        *stops,
        witness,
    ]
    model.fit(
        x,
        y,
        batch_size=BATCH,
        epochs=EPOCHS,
        verbose=0,
        shuffle=False,
        validation_data=(x[:6], y[:6]),
        callbacks=callbacks,
    )
    records = read_jsonl(jsonl)
    for record in records:
        del record["time"]
    scalars = {
        (run, tag): read_scalars(str(tb), run, tag)
        for run, tag in [("train", "loss"), ("train", "mae"), ("validation", "loss")]
    }
    return model, records, scalars


def saved_states(directory) -> dict[int, list[np.ndarray]]:
    """The weights of each checkpoint of `directory`, by step."""
    states = {}
    for info in StepCheckpoint.list_checkpoints(directory):
        model = tiny_model(metrics=["mae"])
        StepCheckpoint.restore_checkpoint(model, info)
        states[info.step] = [np.asarray(w) for w in model.get_weights()]
    return states


def assert_same_states(weights, saved, other_weights, other_saved) -> None:
    """Two runs' final weights and every checkpoint's weights equal, bitwise."""
    for a, b in zip(weights, other_weights, strict=True):
        np.testing.assert_array_equal(a, b)
    assert sorted(saved) == sorted(other_saved)
    for step, state in saved.items():
        for a, b in zip(state, other_saved[step], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"checkpoint of step {step}")


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_an_async_run_writes_what_a_sync_run_writes_bitwise(
    tmp_path, caplog, steps_per_execution
):
    """The same model, data and callbacks; one run beside a witness that is not
    async-safe (every batch end on the training thread), one beside an async-safe
    witness: the JSON lines, TensorBoard scalars and log lines are the same, the
    weights and every checkpoint's bitwise, and Keras's logs the same at every
    batch."""
    runs = []
    for name, witness in [("sync", SyncWitness()), ("async", AsyncWitness())]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="kerasteps"):
            model, records, scalars = fit(tmp_path / name, witness, steps_per_execution)
        lines = [r.getMessage() for r in caplog.records]
        lines = [line for line in lines if " at step " in line]
        weights = [np.asarray(w) for w in model.get_weights()]
        saved = saved_states(tmp_path / name / "ckpt")
        runs.append((records, scalars, lines, weights, witness.logs, saved))
    if keras.backend.backend() != "tensorflow":  # the second run was async
        assert threading.get_ident() not in witness.threads
    (records, scalars, lines, weights, logs, saved), async_run = runs
    assert [r["step"] for r in records if "loss" in r][:3] == [3, 6, 9]
    assert any("val_steps_loss" in r for r in records)
    assert any("val_loss" in r for r in records)
    assert records == async_run[0]
    assert scalars == async_run[1]
    assert lines == async_run[2] and len(lines) >= 8
    executions = -(-EXAMPLES // BATCH // steps_per_execution)  # per epoch
    assert len(logs) == EPOCHS * executions
    assert logs == async_run[4]
    assert len(saved) >= 4  # every 5 steps: 5 (6 with 3 steps per execution)...25
    assert_same_states(weights, saved, async_run[3], async_run[5])


def test_the_async_run_was_async(tmp_path):
    """On JAX and PyTorch, the async-safe witness's batch ends ran on Keras's
    threads, never the training thread, and the run ended at the true step; on
    TensorFlow, all on the training thread."""
    witness = AsyncWitness()
    fit(tmp_path, witness)
    assert witness.final_step == EPOCHS * EXAMPLES // BATCH
    training_thread = threading.get_ident()
    if keras.backend.backend() == "tensorflow":
        assert witness.threads == {training_thread}
    else:
        assert witness.threads and training_thread not in witness.threads


def _stops(case: str) -> list:
    """The callbacks that may stop training, each case with one that stops: at a
    step, on a validation that did not improve, on a non-finite loss (the
    targets of batch 9 are NaN), or on time."""
    stopping = {
        "at-step": StopAtStep(20),
        "early": StepEarlyStopping("val_steps_loss", patience=1, min_delta=10.0),
        "non-finite": StopOnNonFinite(every=EVERY),
        "time": StopAtTime(0.6),
    }
    others = {
        "at-step": StopAtStep(10**6),
        "early": StepEarlyStopping("val_steps_loss", patience=10**6),
        "non-finite": StopOnNonFinite(every=EVERY),
        "time": StopAtTime(3600),
    }
    if case == "time":  # a run without validation
        del others["early"]
    return [stopping[case], *(stop for name, stop in others.items() if name != case)]


@pytest.mark.parametrize("steps_per_execution", [1, 3])
@pytest.mark.parametrize("case", ["at-step", "early", "non-finite"])
def test_a_stop_under_async_dispatch_comes_at_the_step_of_a_sync_run(
    tmp_path, case, steps_per_execution
):
    """Callbacks that may stop training beside the sinks: the run stops at the
    same step with or without async dispatch, and writes the same, bitwise; the
    ends of quiet executions still ran on Keras's thread."""
    x, y = tiny_data(EXAMPLES)
    if case == "non-finite":
        y[BATCH * 9 : BATCH * 10] = np.nan
    runs = []
    for name, witness in [("sync", SyncWitness()), ("async", AsyncWitness())]:
        stops = _stops(case)
        model, records, scalars = fit(
            tmp_path / name, witness, steps_per_execution, stops=stops, y=y
        )
        final = steps_lib.global_step(model)
        weights = [np.asarray(w) for w in model.get_weights()]
        saved = saved_states(tmp_path / name / "ckpt")
        runs.append((final, stops[0].stopped_step, records, scalars, weights, saved))
    (final, stopped, records, scalars, weights, saved), async_run = runs
    assert stopped == final < EPOCHS * EXAMPLES // BATCH  # it stopped the run
    assert (final, stopped) == async_run[:2]
    # As text: a NaN equals a NaN there.
    assert json.dumps(records) == json.dumps(async_run[2])
    assert repr(scalars) == repr(async_run[3])
    assert_same_states(weights, saved, async_run[4], async_run[5])
    if keras.backend.backend() != "tensorflow" and steps_per_execution == 1:
        # Quiet ends ran on Keras's thread (with 3 steps per execution a sink is
        # due at every end: none is quiet).
        assert witness.threads - {threading.get_ident()}


def test_stop_at_time_under_async_dispatch_stops_where_it_says(tmp_path):
    """`StopAtTime` decides at an end on the training thread: the step it
    stopped at is the run's last, and the final checkpoint's."""
    witness = AsyncWitness()
    stops = _stops("time")
    checkpoint = StepCheckpoint(tmp_path / "ckpt", every=Every(10**6, last=True))
    x, y = tiny_data(EXAMPLES)
    model = tiny_model(metrics=["mae"])
    model.fit(
        np.tile(x, (200, 1)),
        np.tile(y, (200, 1)),
        batch_size=BATCH,
        epochs=10**6,
        verbose=0,
        shuffle=False,
        callbacks=[*stops, checkpoint, witness],
    )
    final = steps_lib.global_step(model)
    assert stops[0].stopped_step == final == witness.final_step
    assert checkpoint.last_saved.step == final
    if keras.backend.backend() != "tensorflow":
        assert witness.threads - {threading.get_ident()}


class Preemption(AsyncWitness):
    """Async-safe: sends this process SIGTERM from the end of batch 5 (on Keras's
    thread on JAX and PyTorch), as a scheduler does while training goes on."""

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if batch == 5 and self.epoch == 0:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_signal_under_async_dispatch_saves_the_step_where_training_stopped(
    tmp_path,
):
    """SIGTERM while Keras runs batch ends on its thread: the handler stops
    training after the step in progress, and the checkpoint holds that step, the
    run's last, bitwise (the model's weights equal the restored checkpoint's)."""
    checkpoint = StepCheckpoint(tmp_path / "ckpt", every=100, keep=100)
    witness = Preemption()
    # What was there before the run (a handler of an earlier test's `fit()` that
    # raised may still be installed: it steps aside when a signal finds it).
    before = signal.getsignal(signal.SIGTERM)
    model, _, _ = fit(tmp_path, witness, checkpoint=checkpoint)
    final = steps_lib.global_step(model)
    assert checkpoint.interrupted and checkpoint.signal_received == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before  # handed back
    assert 6 <= final < EPOCHS * EXAMPLES // BATCH  # stopped early: 26 steps in all
    saved = saved_states(tmp_path / "ckpt")
    assert max(saved) == final == checkpoint.last_saved.step == witness.final_step
    for a, b in zip(saved[final], model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))
    if keras.backend.backend() != "tensorflow":
        assert witness.threads and threading.get_ident() not in witness.threads


def test_kerasteps_reads_the_state_on_the_training_thread_only(tmp_path, monkeypatch):
    """Every read of the trained state (the state sync and the scalar reads of the
    metric windows and counters) happens on the training thread, at steps where
    a callback acts: at most once per acting step and epoch end, not at every
    step."""
    reads: list[int] = []
    sync, scalar_read = steps_lib.sync_trained_state, ScalarReader.__call__

    def spy_sync(model):
        reads.append(threading.get_ident())
        return sync(model)

    def spy_read(self):
        reads.append(threading.get_ident())
        return scalar_read(self)

    monkeypatch.setattr(steps_lib, "sync_trained_state", spy_sync)
    monkeypatch.setattr(ScalarReader, "__call__", spy_read)
    fit(tmp_path, AsyncWitness())
    assert reads and set(reads) == {threading.get_ident()}


class ReadsTheModel(StepCallback):
    """Does nothing where it acts, but says it reads the model's state."""

    async_safe = True

    def on_step(self, event):
        pass


def test_a_point_of_sinks_reads_the_state_in_one_transfer_without_a_sync(
    tmp_path, monkeypatch
):
    """Under JAX, at a point where only sinks act, the metrics' state and the
    learning rate come from the state Keras keeps apart from the model, in one
    transfer on the training thread, with no sync of the whole model; the lines
    equal those of a run where a callback that reads the model has the state
    synced at every point. (Other backends: no state apart, the lines equal.)"""
    counts = {"transfers": 0, "syncs": 0}
    training_thread = threading.get_ident()
    sync = steps_lib.sync_trained_state

    def spy_sync(model):
        counts["syncs"] += getattr(model, "_jax_state_synced", True) is False
        return sync(model)

    monkeypatch.setattr(steps_lib, "sync_trained_state", spy_sync)
    if keras.backend.backend() == "jax":
        import jax

        device_get = jax.device_get

        def spy_get(values):
            counts["transfers"] += threading.get_ident() == training_thread
            return device_get(values)

        monkeypatch.setattr(jax, "device_get", spy_get)
    runs = {}
    for name, extra in [("sinks", []), ("synced", [ReadsTheModel(every=EVERY)])]:
        counts.update(transfers=0, syncs=0)
        model = tiny_model(metrics=["mae"])
        x, y = tiny_data(EXAMPLES)
        jsonl = tmp_path / f"{name}.jsonl"
        sinks = [LogEvery(EVERY), JSONLinesLogger(str(jsonl), every=EVERY)]
        model.fit(
            x,
            y,
            batch_size=BATCH,
            epochs=EPOCHS,
            verbose=0,
            shuffle=False,
            callbacks=[*sinks, *extra],
        )
        records = read_jsonl(jsonl)
        for record in records:
            del record["time"]
        runs[name] = (records, dict(counts))
    (records, sinks), (synced_records, synced) = runs["sinks"], runs["synced"]
    assert records == synced_records
    points = len(records)
    assert points == 8 and "learning_rate" in records[0] and "mae" in records[0]
    if keras.backend.backend() == "jax":
        # The first point comes while the run checks that its step moves (a
        # sync); the epochs' ends sync as Keras does.
        assert points - 2 <= sinks["transfers"] <= points
        assert synced["transfers"] == 0 and synced["syncs"] >= points
        assert sinks["syncs"] <= synced["syncs"] - (points - 2)
    else:
        assert sinks["transfers"] == synced["transfers"] == 0


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="JAX's transfer guard; backend not JAX"
)
def test_the_training_thread_reads_nothing_from_the_device_at_quiet_steps(
    tmp_path, monkeypatch
):
    """A callback listed first opens a window on the training thread from each
    batch begin whose previous step is quiet (no callback acts: not a multiple of
    3 or 4, not the run's first, where the tracker checks that the global step
    moved) to the next batch begin, unless that batch is an epoch's last (Keras's
    epoch end follows): the kerasteps callbacks' begin hooks, the training step
    and Keras's batch end run in it. In it,
    `jax.transfer_guard_device_to_host("disallow_explicit")` (thread-local)
    forbids every device-to-host transfer; on a GPU or TPU a read raises. On the
    CPU, where an array's memory is the host's and the guard never fires, every
    conversion to host values that Python code makes is recorded with its thread
    and whether the window was open: Keras's `convert_to_numpy` (which kerasteps's
    reads and Keras's conversion of the logs go through) and `jax.Array._value`
    (behind `np.asarray(array)` from Python). None on the training thread in a
    window; Keras converted the logs on its threads. On the code before async
    dispatch, Keras converted them on the training thread at every step."""
    import jax
    from jax._src.array import ArrayImpl
    from keras.src import backend

    window = threading.local()
    conversions: list[tuple[int, bool]] = []
    value, convert = ArrayImpl._value, backend.convert_to_numpy

    def note():
        conversions.append((threading.get_ident(), getattr(window, "open", False)))

    def spy_value(array):
        note()
        return value.fget(array)

    def spy_convert(x):
        note()
        return convert(x)

    monkeypatch.setattr(ArrayImpl, "_value", property(spy_value))
    monkeypatch.setattr(backend, "convert_to_numpy", spy_convert)

    class Guard(keras.callbacks.Callback):
        async_safe = True

        def __init__(self):
            super().__init__()
            self.guard, self.epoch, self.guarded = None, 0, 0

        def release(self):
            window.open = False
            if self.guard is not None:
                self.guard.__exit__(None, None, None)
                self.guard = None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            self.release()
            steps = self.params["steps"]
            done = self.epoch * steps + batch  # steps before it
            last = batch == steps - 1  # Keras's epoch end follows its batch end
            if done > 1 and 0 < batch and not last and done % 3 and done % 4:
                self.guard = jax.transfer_guard_device_to_host("disallow_explicit")
                self.guard.__enter__()
                window.open = True
                self.guarded += 1

        def on_epoch_end(self, epoch, logs=None):
            self.release()

    guard = Guard()
    model = tiny_model(metrics=["mae"])
    x, y = tiny_data(EXAMPLES)
    model.fit(
        x,
        y,
        batch_size=BATCH,
        epochs=EPOCHS,
        verbose=0,
        shuffle=False,
        callbacks=[
            guard,
            ValidateEvery(4, (x[:8], y[:8])),
            LogEvery(EVERY),
            StepTensorBoard(str(tmp_path / "tb"), every=EVERY),
            JSONLinesLogger(str(tmp_path / "log.jsonl"), every=EVERY),
        ],
    )
    assert guard.guarded == 10  # of 26 batch begins
    training = threading.get_ident()
    assert (training, True) not in conversions
    assert (training, False) in conversions  # at the steps where callbacks act
    assert any(thread != training for thread, _ in conversions)  # Keras's logs
    steps = [record["step"] for record in read_jsonl(tmp_path / "log.jsonl")]
    assert steps == [s for s in range(1, 27) if s % 3 == 0 or s % 4 == 0]
