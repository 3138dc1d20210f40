"""Tests for kerasteps.callbacks.StepCheckpoint and resuming runs.

The end-to-end tests run tests/scripts/resumable_train.py in subprocesses: killed
with SIGKILL after step 25 is logged, resumed and stopped with SIGTERM, resumed
again to step 60, beside one uninterrupted run; then every sink (event files read
with TensorBoard's EventAccumulator and through a real TensorBoard server, JSON
lines) must hold each logged step exactly once, in order, with the values of the
uninterrupted run. Points every 15 steps and checkpoints every 10: a checkpoint
(and the SIGTERM's) lies inside a window, whose partial state it carries.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasteps
from kerasteps.callbacks import StepCheckpoint
from kerasteps.checkpoint import _model_state
from kerasteps.checkpoint.store import CheckpointStore
from kerasteps.data import skip_consumed
from kerasteps.models import WGAN
from tests import zygote
from tests.helpers import (
    SCRIPTS,
    fit_steps,
    free_port,
    load_script,
    read_jsonl,
    read_scalars,
    script_environment,
    tiny_data,
    tiny_model,
)

pytestmark = pytest.mark.neutral

SCRIPT = SCRIPTS / "resumable_train.py"
MAX_STEPS = 60
LOG_EVERY = 15
VALIDATE_EVERY = 15


# -- in-process: what a checkpoint restores -------------------------------------------


def _optimizer_values(optimizer):
    return {v.path: v.numpy() for v in optimizer.variables}


@pytest.mark.keras_range
def test_plain_model_restores_weights_iterations_and_slots(tmp_path):
    model = tiny_model(optimizer=keras.optimizers.Adam(0.01))
    fit_steps(model, 10, [StepCheckpoint(tmp_path, every=5)])
    fresh = tiny_model(seed=1, optimizer=keras.optimizers.Adam(0.01))
    assert not fresh.optimizer.built

    assert StepCheckpoint.restore_latest(fresh, tmp_path) == 10

    assert kerasteps.global_step(fresh) == 10
    assert int(fresh.optimizer.iterations) == 10
    saved = model.optimizer.variables
    restored = fresh.optimizer.variables
    assert len(saved) == len(restored) == 2 + 2 * len(model.trainable_variables)
    for a, b in zip(saved, restored, strict=True):
        assert a.path.rsplit("_", 1)[-1][-8:] == b.path.rsplit("_", 1)[-1][-8:]
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=a.path)
    for a, b in zip(model.weights, fresh.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.keras_range
def test_resume_is_exact_with_skip_consumed(tmp_path):
    """10 steps, checkpoint, new model + restore + 10 steps == 20 steps straight."""
    x, y = tiny_data(64, seed=3)

    def dataset():
        data = tf.data.Dataset.from_tensor_slices((x, y))
        return data.shuffle(64, seed=7).batch(4).repeat()

    def fit(model, steps, callbacks=()):
        start = kerasteps.global_step(model)
        model.fit(
            skip_consumed(dataset(), start),
            steps_per_epoch=steps,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=list(callbacks),
        )

    straight = tiny_model(optimizer=keras.optimizers.Adam(0.01))
    fit(straight, 20)

    first = tiny_model(optimizer=keras.optimizers.Adam(0.01))
    fit(first, 10, [StepCheckpoint(tmp_path, every=10)])
    resumed = tiny_model(optimizer=keras.optimizers.Adam(0.01))  # as in a new process
    assert StepCheckpoint.restore_latest(resumed, tmp_path) == 10
    fit(resumed, 10)

    assert kerasteps.global_step(resumed) == 20
    for a, b in zip(straight.weights, resumed.weights, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
    for a, b in zip(
        straight.optimizer.variables, resumed.optimizer.variables, strict=True
    ):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)


class TwoOptimizers(keras.Model):
    """A custom model with two networks, two optimizers and its own counters."""

    kerasteps_global_counter = "g_step"

    def __init__(self):
        super().__init__()
        self.net_a = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
        self.net_b = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        self.opt_a = keras.optimizers.Adam(0.01)
        self.opt_b = keras.optimizers.RMSprop(0.01, momentum=0.5)
        self.d_step = self.add_weight(
            shape=(), dtype="int64", initializer="zeros", trainable=False, name="d"
        )
        self.g_step = self.add_weight(
            shape=(), dtype="int64", initializer="zeros", trainable=False, name="g"
        )

    def kerasteps_counters(self):
        return {"d_step": self.d_step, "g_step": self.g_step}

    def kerasteps_optimizers(self):
        return {"a": self.opt_a, "b": self.opt_b}

    def call(self, x):
        return self.net_b(x)

    def train_step(self, data):
        x, y = data
        for _ in range(2):  # two "critic" updates per global step
            with tf.GradientTape() as tape:
                loss_a = tf.reduce_mean(tf.square(self.net_a(x) - y))
            variables = self.net_a.trainable_variables
            grads = tape.gradient(loss_a, variables)
            self.opt_a.apply_gradients(zip(grads, variables, strict=True))
            self.d_step.assign_add(1)
        with tf.GradientTape() as tape:
            loss_b = tf.reduce_mean(tf.square(self.net_b(x) - y))
        variables = self.net_b.trainable_variables
        grads = tape.gradient(loss_b, variables)
        self.opt_b.apply_gradients(zip(grads, variables, strict=True))
        self.g_step.assign_add(1)
        return {"d_loss": loss_a, "g_loss": loss_b}


def _two_optimizer_model(seed):
    keras.utils.set_random_seed(seed)
    model = TwoOptimizers()
    model.compile()
    return model


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_custom_two_optimizer_model_restores_both_optimizers(tmp_path):
    model = _two_optimizer_model(0)
    fit_steps(model, 6, [StepCheckpoint(tmp_path, every=3)])
    assert kerasteps.step_counters(model) == {"d_step": 12, "g_step": 6}

    fresh = _two_optimizer_model(1)
    assert not fresh.opt_a.built and not fresh.opt_b.built
    assert StepCheckpoint.restore_latest(fresh, tmp_path) == 6
    assert kerasteps.step_counters(fresh) == {"d_step": 12, "g_step": 6}
    assert int(fresh.opt_a.iterations) == 12 and int(fresh.opt_b.iterations) == 6
    # The slots are restored when the optimizers create them.
    fresh.opt_a.build(fresh.net_a.trainable_variables)
    fresh.opt_b.build(fresh.net_b.trainable_variables)
    for name in ("opt_a", "opt_b"):
        saved = _optimizer_values(getattr(model, name))
        restored = _optimizer_values(getattr(fresh, name))
        assert len(saved) == len(restored) > 2
        for (ks, vs), (kr, vr) in zip(saved.items(), restored.items(), strict=True):
            np.testing.assert_array_equal(vr, vs, err_msg=f"{ks} / {kr}")


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_custom_model_whose_optimizers_build_in_fit_continues_identically(tmp_path):
    model = _two_optimizer_model(0)
    fit_steps(model, 4, [StepCheckpoint(tmp_path, every=4)])
    fresh = _two_optimizer_model(1)
    StepCheckpoint.restore_latest(fresh, tmp_path)  # slots built later, in fit
    fit_steps(model, 3, seed=9)
    fit_steps(fresh, 3, seed=9)
    assert kerasteps.step_counters(fresh) == {"d_step": 14, "g_step": 7}
    for a, b in zip(model.weights, fresh.weights, strict=True):
        np.testing.assert_array_equal(b.numpy(), a.numpy())
    for name in ("opt_a", "opt_b"):
        saved = list(_optimizer_values(getattr(model, name)).values())
        restored = list(_optimizer_values(getattr(fresh, name)).values())
        for vs, vr in zip(saved, restored, strict=True):
            np.testing.assert_array_equal(vr, vs)


@pytest.mark.keras_range
def test_wgan_restores_both_optimizers_and_counters(tmp_path):
    def make(seed):
        keras.utils.set_random_seed(seed)
        generator = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
        critic = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        gan = WGAN(generator, critic, latent_dim=2, n_critic=2, seed=seed)
        gan.compile(keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3))
        return gan

    gan = make(0)
    x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
    gan.fit(x, batch_size=8, epochs=1, verbose=0, callbacks=[])
    assert kerasteps.step_counters(gan) == {"d_step": 16, "g_step": 8}
    StepCheckpoint(tmp_path, every=1).save(gan)
    fresh = make(1)
    assert StepCheckpoint.restore_latest(fresh, tmp_path) == kerasteps.global_step(gan)
    assert kerasteps.step_counters(fresh) == kerasteps.step_counters(gan)
    for name in ("d_optimizer", "g_optimizer"):
        saved = list(_optimizer_values(getattr(gan, name)).values())
        restored = list(_optimizer_values(getattr(fresh, name)).values())
        assert len(saved) == len(restored) > 2
        for vs, vr in zip(saved, restored, strict=True):
            np.testing.assert_array_equal(vr, vs)


# -- in-process: the checkpoint directory -------------------------------------------
@pytest.mark.keras_range
def test_keeps_the_newest_and_writes_an_index(tmp_path):
    model = tiny_model()
    fit_steps(model, 12, [StepCheckpoint(tmp_path, every=2, keep=2)])
    infos = StepCheckpoint.list_checkpoints(tmp_path)
    assert [i.step for i in infos] == [10, 12]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.json", "ckpt-10", "ckpt-12"]
    index = json.loads((tmp_path / "checkpoint.json").read_text())
    assert index["latest"] == "ckpt-12" and index["latest_step"] == 12
    meta = json.loads((tmp_path / "ckpt-12" / "meta.json").read_text())
    assert meta["step"] == 12 and meta["counters"] == {"step": 12}
    assert StepCheckpoint.latest(tmp_path).step == 12


def test_a_save_killed_midway_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    model = tiny_model()
    checkpoint = StepCheckpoint(tmp_path, every=4)
    fit_steps(model, 4, [checkpoint])
    fit_steps(model, 2)  # step 6

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing")

    # 1. Killed while writing the variables: nothing renamed, index untouched.
    with monkeypatch.context() as patch:
        patch.setattr(_model_state, "write_arrays", killed)
        with pytest.raises(KeyboardInterrupt):
            checkpoint.save(model)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.json", "ckpt-4"]
    # 2. Killed after the rename, before the index was replaced: ckpt-6 is
    # complete, so it is adopted (a restore finds it; the next run lists it).
    with monkeypatch.context() as patch:
        patch.setattr(CheckpointStore, "_write_index", killed)
        with pytest.raises(KeyboardInterrupt):
            checkpoint.save(model)
    assert (tmp_path / "ckpt-6").exists()
    index = json.loads((tmp_path / "checkpoint.json").read_text())
    assert [e["name"] for e in index["checkpoints"]] == ["ckpt-4"]

    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [4, 6]
    fresh = tiny_model(seed=3)
    assert StepCheckpoint.restore_latest(fresh, tmp_path) == 6
    fit_steps(fresh, 2, [StepCheckpoint(tmp_path, every=4)])
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint.json",
        "ckpt-4",
        "ckpt-6",
        "ckpt-8",
    ]
    index = json.loads((tmp_path / "checkpoint.json").read_text())
    assert [e["name"] for e in index["checkpoints"]] == ["ckpt-4", "ckpt-6", "ckpt-8"]


@pytest.mark.keras_range
def test_sigterm_saves_at_the_next_batch_end_and_stops(tmp_path):
    previous = signal.getsignal(signal.SIGTERM)
    seen = {}

    class SendSigterm(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 6:  # step 7
                seen["handler"] = signal.getsignal(signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)

    checkpoint = StepCheckpoint(tmp_path, every=100)
    model = tiny_model()
    fit_steps(model, 20, [SendSigterm(), checkpoint])

    assert seen["handler"] == checkpoint._stop._handle
    assert signal.getsignal(signal.SIGTERM) == previous  # restored
    assert checkpoint.interrupted
    # Python runs the handler between bytecodes: at the end of step 7 or 8.
    final = kerasteps.global_step(model)
    assert final in (7, 8)
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [final]


def test_off_the_main_thread_a_handler_of_the_main_thread_stops_the_run(
    tmp_path, caplog
):
    """`fit()` in a thread of its own (as Ray Train runs it): no handler can be
    installed there, and the WARNING names `request_stop`; a SIGTERM handler of the
    main thread that calls it, while the thread trains, saves and stops the run."""
    import threading

    caplog.set_level(logging.WARNING, logger="kerasteps")
    checkpoint = StepCheckpoint(tmp_path, every=100)
    model = tiny_model()
    at_step_7, signalled = threading.Event(), threading.Event()

    class Preempted(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 6:  # step 7: wait for the main thread's signal
                at_step_7.set()
                signalled.wait(30)

    requests = []
    previous = signal.signal(
        signal.SIGTERM,
        lambda signum, frame: requests.append(checkpoint.request_stop(signum)),
    )
    try:
        worker = threading.Thread(
            target=fit_steps, args=(model, 20, [Preempted(), checkpoint])
        )
        worker.start()
        assert at_step_7.wait(60)
        os.kill(os.getpid(), signal.SIGTERM)
        signalled.set()
        worker.join(60)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert requests == [True]
    assert (checkpoint.interrupted, checkpoint.signal_received) == (True, 15)
    # The checkpoint's own end of step 7 came after the request: it saved there.
    assert kerasteps.global_step(model) == 7
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [7]
    assert checkpoint.request_stop() is False  # no run in progress
    (warning,) = [
        r.getMessage() for r in caplog.records if "main thread" in r.getMessage()
    ]
    assert "call checkpoint.request_stop() from the main thread's signal handler" in (
        warning
    )


def test_restore_into_a_different_model_raises(tmp_path):
    model = tiny_model()
    fit_steps(model, 2, [StepCheckpoint(tmp_path, every=2)])
    other = keras.Sequential([keras.Input((2,)), keras.layers.Dense(7)])
    other.compile(keras.optimizers.SGD(0.05), "mse")
    before = [w.numpy() for w in other.weights]
    with pytest.raises(ValueError, match="ckpt-2.* does not restore into the model"):
        StepCheckpoint.restore_latest(other, tmp_path)
    for a, b in zip(before, other.weights, strict=True):
        np.testing.assert_array_equal(a, b.numpy())  # as it was


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"every": 0}, ValueError, "`every`.*received 0"),
        ({"every": -5}, ValueError, "`every`.*received -5"),
        ({"every": "10"}, TypeError, "`every`.*'10'"),
        ({"every": 5, "keep": 0}, ValueError, "`keep`.*received 0"),
        ({"every": 5, "keep": -1}, ValueError, "`keep`.*received -1"),
        ({"every": 5, "signals": ["TERM"]}, ValueError, "`signals`.*'TERM'"),
        ({"every": 5, "verbose": 2}, ValueError, "`verbose` must be 0 or 1.*2"),
        ({"every": 5, "verbose": "1"}, ValueError, "`verbose` must be 0 or 1.*'1'"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        StepCheckpoint(tmp_path, **kwargs)


def test_unwritable_directory_raises_before_training(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="`directory`.*file.txt"):
        StepCheckpoint(a_file, every=5)
    with pytest.raises(ValueError, match="`directory` is not writable.*file.txt/sub"):
        StepCheckpoint(a_file / "sub", every=5)


# -- subprocess: kill, resume, SIGTERM, resume ----------------------------------------
class Run:
    """One run of the training script, its output in files."""

    def __init__(self, workdir: Path, name: str, *extra: str):
        self.out = workdir / f"{name}.out"
        self.err = workdir / f"{name}.err"
        command = [
            sys.executable,
            str(SCRIPT),
            "--workdir",
            str(workdir),
            "--max-steps",
            str(MAX_STEPS),
            "--log-every",
            str(LOG_EVERY),
            "--checkpoint-every",
            "10",
            "--validate-every",
            str(VALIDATE_EVERY),
            *extra,
        ]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = zygote.Popen(
                command, stdout=out, stderr=err, env=script_environment()
            )

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"{self.out.stem} did not finish in {timeout} s:\n{self.log()}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def log(self) -> str:
        return self.err.read_text()[-3000:]

    def result(self) -> dict:
        lines = [ln for ln in self.out.read_text().splitlines() if ln.startswith("{")]
        assert lines, f"no result line:\n{self.log()}"
        return json.loads(lines[-1])


def _logged_steps(path: Path) -> list[int]:
    steps = []
    if not path.exists():
        return steps
    for line in path.read_text().splitlines():
        try:
            steps.append(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            pass  # a line being written
    return steps


def _wait_for_logged_step(run: Run, path: Path, step: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = _logged_steps(path)
        if steps and max(steps) >= step:
            return max(steps)
        if run.process.poll() is not None:
            pytest.fail(f"the run ended before step {step} was logged:\n{run.log()}")
        time.sleep(0.02)
    run.kill()
    pytest.fail(f"step {step} was not logged within {timeout} s:\n{run.log()}")


def _copy_latest_checkpoint(workdir: Path, name: str):
    info = StepCheckpoint.latest(workdir / "checkpoints")
    assert info is not None
    copy = workdir / name
    shutil.copytree(info.path, copy)
    return info.step, copy


def train_here(workdir: Path, *extra: str) -> None:
    """`Run`'s training, in this process: where its process boundary is not what a
    test checks (a process of its own starts TensorFlow again, about 7 CPU-s)."""
    load_script("resumable_train").main(
        [
            *["--workdir", str(workdir), "--max-steps", str(MAX_STEPS)],
            *["--log-every", str(LOG_EVERY), "--checkpoint-every", "10"],
            *["--validate-every", str(VALIDATE_EVERY), *extra],
        ]
    )


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory):
    """SIGKILL after step 25, resume + SIGTERM, resume to step 60; and beside them
    the same run uninterrupted, in `work/straight`."""
    work = tmp_path_factory.mktemp("resumable")
    (work / "straight").mkdir()
    jsonl = work / "log.jsonl"
    runs = []
    try:
        first = Run(work, "run1", "--sleep", "0.05")
        runs.append(first)
        # The uninterrupted run, in this process while the first one starts.
        train_here(work / "straight")
        _wait_for_logged_step(first, jsonl, 25, timeout=120)
        first.process.send_signal(signal.SIGKILL)
        first.wait(30)
        killed_at = max(_logged_steps(jsonl))
        step1, copy1 = _copy_latest_checkpoint(work, "restored-from-1")

        second = Run(
            work, "run2", "--sleep", "0.05", "--dump-restored", str(work / "r2.npz")
        )
        runs.append(second)
        signal_after = max(35, killed_at + LOG_EVERY)
        logged_at_signal = _wait_for_logged_step(second, jsonl, signal_after, 120)
        second.process.send_signal(signal.SIGTERM)
        rc2 = second.wait(60)
        step2, copy2 = _copy_latest_checkpoint(work, "restored-from-2")

        third = Run(work, "run3", "--dump-restored", str(work / "r3.npz"))
        runs.append(third)
        rc3 = third.wait(120)
    finally:
        for run in runs:
            run.kill()
    return {
        "work": work,
        "jsonl": jsonl,
        "killed_at": killed_at,
        "step1": step1,
        "copy1": copy1,
        "logged_at_signal": logged_at_signal,
        "rc2": rc2,
        "step2": step2,
        "copy2": copy2,
        "rc3": rc3,
        "runs": runs,
    }


def test_killed_run_resumes_from_its_newest_checkpoint(resumed_run):
    second = resumed_run["runs"][1].result()
    assert resumed_run["killed_at"] >= 25
    assert resumed_run["step1"] % 10 == 0 and resumed_run["step1"] >= 20
    assert second["start"] == resumed_run["step1"]


def test_sigterm_saves_a_checkpoint_before_exiting(resumed_run):
    second = resumed_run["runs"][1]
    assert resumed_run["rc2"] == 0, second.log()
    result = second.result()
    assert result["interrupted"] is True
    assert "received SIGTERM" in second.log()
    # The checkpoint is of the step where the run stopped, after the signal.
    assert resumed_run["step2"] == result["final"]
    assert resumed_run["step2"] > resumed_run["logged_at_signal"] - 1
    assert resumed_run["step2"] < MAX_STEPS


def test_resumed_run_ends_at_max_steps(resumed_run):
    third = resumed_run["runs"][2]
    assert resumed_run["rc3"] == 0, third.log()
    assert third.result() == {
        "start": resumed_run["step2"],
        "final": MAX_STEPS,
        "interrupted": False,
    }
    assert StepCheckpoint.latest(resumed_run["work"] / "checkpoints").step == MAX_STEPS


def test_every_sink_holds_each_step_once_in_order(resumed_run):
    logged = list(range(LOG_EVERY, MAX_STEPS + 1, LOG_EVERY))
    validated = list(range(VALIDATE_EVERY, MAX_STEPS + 1, VALIDATE_EVERY))
    records = read_jsonl(resumed_run["jsonl"])
    assert [r["step"] for r in records] == logged
    assert [r["step"] for r in records if "val_loss" in r] == validated
    assert all(r["step"] == r.get("step") and r["loss"] > 0 for r in records)

    tb = str(resumed_run["work"] / "tb")
    assert [s for s, _ in read_scalars(tb, "train", "loss")] == logged
    assert [s for s, _ in read_scalars(tb, "train", "counters/step")] == logged
    assert [v for _, v in read_scalars(tb, "train", "counters/step")] == logged
    assert [s for s, _ in read_scalars(tb, "validation", "loss")] == validated
    # Same values in both sinks.
    by_step = {r["step"]: r for r in records}
    for step, value in read_scalars(tb, "train", "loss"):
        assert value == pytest.approx(by_step[step]["loss"], rel=1e-6)


def _checkpoint_tensors(copy: Path) -> list[np.ndarray]:
    return list(_model_state.read_arrays(str(copy / "state.h5")).values())


@pytest.mark.parametrize("which", ["1", "2"])
def test_restored_state_equals_the_checkpoint(resumed_run, which):
    dump = np.load(resumed_run["work"] / f"r{int(which) + 1}.npz")
    step = resumed_run[f"step{which}"]
    assert int(dump["step"]) == step
    tensors = _checkpoint_tensors(resumed_run[f"copy{which}"])
    names = [n for n in dump.files if n != "step"]
    assert any(n.startswith("weight_") for n in names)
    assert sum(n.startswith("optimizer_") for n in names) > 2  # iterations + slots
    for name in names:
        value = dump[name]
        assert any(
            t.shape == value.shape and np.array_equal(t, value) for t in tensors
        ), f"{name} of the restored model is not in the checkpoint"
    iterations = [dump[n] for n in names if n.startswith("optimizer_")][0]
    assert int(iterations) == step


def test_a_resumed_run_writes_the_values_of_an_uninterrupted_one(resumed_run):
    """Killed after the checkpoint of step 20 or 30, stopped by SIGTERM after step
    45 (a checkpoint inside the window 46..60): every point, training and
    validation, in both sinks, is the uninterrupted run's."""
    work = resumed_run["work"]
    assert resumed_run["step1"] in (20, 30)
    want = {r["step"]: r for r in read_jsonl(work / "straight" / "log.jsonl")}
    got = {r["step"]: r for r in read_jsonl(work / "log.jsonl")}
    assert sorted(want) == sorted(got) == [15, 30, 45, 60]
    for step, record in want.items():
        for key in ("loss", "mae", "val_loss", "val_mae"):
            assert got[step][key] == pytest.approx(record[key], rel=1e-6), (step, key)
    tb_want = read_scalars(str(work / "straight" / "tb"), "train", "loss")
    tb_got = read_scalars(str(work / "tb"), "train", "loss")
    assert [s for s, _ in tb_got] == [s for s, _ in tb_want] == [15, 30, 45, 60]
    for (_, a), (_, b) in zip(tb_want, tb_got, strict=True):
        assert b == pytest.approx(a, rel=1e-6)


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read().decode())


def test_tensorboard_server_shows_each_step_once(resumed_run, tmp_path):
    port = free_port()
    log = open(tmp_path / "tensorboard.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(resumed_run["work"] / "tb"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--reload_interval",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # TensorBoard with KERAS_BACKEND=torch segfaults (torch and TF in one
        # process), as `kerasteps board` knows; a user starts it without one.
        env={k: v for k, v in script_environment().items() if k != "KERAS_BACKEND"},
    )
    base = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars"
    logged = list(range(LOG_EVERY, MAX_STEPS + 1, LOG_EVERY))
    validated = list(range(VALIDATE_EVERY, MAX_STEPS + 1, VALIDATE_EVERY))
    found: dict[str, list[int]] = {}
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if server.poll() is not None:
                break
            try:
                for run in ("train", "validation"):
                    points = _get_json(f"{base}?run={run}&tag=loss")
                    found[run] = [int(point[1]) for point in points]
                if found.get("train") == logged and found.get("validation") == (
                    validated
                ):
                    break
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass  # not serving yet, or the run is not loaded yet
            time.sleep(0.5)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()
    output = (tmp_path / "tensorboard.log").read_text()[-2000:]
    assert found.get("train") == logged, output
    assert found.get("validation") == validated, output


def test_restore_logs_the_checkpoint(tmp_path, caplog):
    model = tiny_model()
    fit_steps(model, 2, [StepCheckpoint(tmp_path, every=2)])
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        StepCheckpoint.restore_latest(tiny_model(), tmp_path)
    assert any("restored" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("verbose", [0, 1])
def test_saves_are_logged_at_info_only_when_verbose(tmp_path, caplog, verbose):
    with caplog.at_level(logging.DEBUG, logger="kerasteps"):
        fit_steps(tiny_model(), 8, [StepCheckpoint(tmp_path, every=4, verbose=verbose)])
    saves = [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.getMessage().startswith("StepCheckpoint: saved")
    ]
    level = logging.INFO if verbose else logging.DEBUG
    assert saves == [
        (level, f"StepCheckpoint: saved {tmp_path / name} at step {step}.")
        for name, step in [("ckpt-4", 4), ("ckpt-8", 8)]
    ]
