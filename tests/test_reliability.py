"""Nothing lost, nothing let in: the checkpoint store, signals, one writer per
directory, bad input, the launcher. Each test names the item of the reliability
issue it checks."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner

import kerasteps
import kerasteps.cli
from kerasteps.callbacks import (
    JSONLinesLogger,
    LogEvery,
    StepCheckpoint,
    StepTensorBoard,
    StopOnNonFinite,
    Throughput,
    ValidateEvery,
)
from kerasteps.checkpoint.store import NonFiniteStateError
from kerasteps.data import skip_consumed
from tests import zygote
from tests.helpers import (
    ROOT,
    NanAtStep,
    fit_steps,
    script_environment,
    tiny_data,
    tiny_model,
    tiny_wgan,
)

pytestmark = pytest.mark.neutral

SCRIPT = ROOT / "tests" / "scripts" / "signal_train.py"


def _weights(model):
    return [v.numpy().copy() for v in model.weights]


def _checkpoints(tmp_path, steps=(2, 4, 6)):
    """A directory with checkpoints at `steps` (every=2, keep enough)."""
    model = tiny_model()
    fit_steps(model, max(steps), [StepCheckpoint(tmp_path, every=2, keep=10)])
    return model


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# -- 1. an unreadable index never costs a checkpoint ----------------------------------
@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated", "lists-nothing"])
def test_an_unreadable_index_is_rebuilt_and_nothing_is_deleted(
    tmp_path, caplog, damage
):
    _checkpoints(tmp_path)
    index = tmp_path / "checkpoint.json"
    text = index.read_text()
    index.write_text(
        {
            "garbage": "not json at all",
            "empty": "",
            "truncated": text[: len(text) // 2],
            "lists-nothing": json.dumps({"checkpoints": []}),
        }[damage]
    )
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [2, 4, 6]
    caplog.set_level(logging.WARNING, logger="kerasteps")
    # A run begins (the clean-up runs), then is killed before its first save.
    model = tiny_model(seed=1)
    assert StepCheckpoint.restore_latest(model, tmp_path) == 6
    fit_steps(model, 1, [StepCheckpoint(tmp_path, every=100)])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.json",
        "ckpt-2",
        "ckpt-4",
        "ckpt-6",
    ]
    rebuilt = json.loads(index.read_text())
    assert [e["name"] for e in rebuilt["checkpoints"]] == ["ckpt-2", "ckpt-4", "ckpt-6"]
    assert any(
        "rebuilt it from the 3 complete" in m or "adopted the complete" in m
        for m in _warnings(caplog)
    )


# -- 2. index entries cannot name anything outside the directory ---------------------
@pytest.mark.parametrize("name", ["../victim", "ABSOLUTE", ""])
def test_index_entries_outside_the_directory_are_ignored(tmp_path, caplog, name):
    checkpoints = tmp_path / "ckpt"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    name = str(victim) if name == "ABSOLUTE" else name
    model = tiny_model()
    fit_steps(model, 2, [StepCheckpoint(checkpoints, every=2, keep=1)])
    index = checkpoints / "checkpoint.json"
    data = json.loads(index.read_text())
    data["checkpoints"].insert(0, {"name": name, "step": 1, "time": 0})
    index.write_text(json.dumps(data))
    caplog.set_level(logging.WARNING, logger="kerasteps")
    fit_steps(model, 4, [StepCheckpoint(checkpoints, every=2, keep=1)])  # rotates
    assert (victim / "precious.txt").read_text() == "keep me"
    assert checkpoints.is_dir()
    assert [i.step for i in StepCheckpoint.list_checkpoints(checkpoints)] == [6]
    assert any(
        f"ignoring the index entry {{'name': {name!r}" in m for m in _warnings(caplog)
    )


# -- 3. a truncated data file: fall back, name it, never half-restore ----------------
@pytest.mark.parametrize("size", ["half", "zero"])
def test_a_truncated_checkpoint_falls_back_to_the_one_before(tmp_path, caplog, size):
    trained = _checkpoints(tmp_path)
    data = tmp_path / "ckpt-6" / "state.h5"
    content = data.read_bytes()
    data.write_bytes(content[: len(content) // 2] if size == "half" else b"")
    caplog.set_level(logging.WARNING, logger="kerasteps")
    model = tiny_model(seed=1)
    assert StepCheckpoint.restore_latest(model, tmp_path) == 4
    warning = [m for m in _warnings(caplog) if "ckpt-6" in m]
    assert warning and "bytes" in warning[0]  # names the file and the sizes
    fresh = tiny_model(seed=1)
    before = _weights(fresh)
    with pytest.raises(ValueError, match=r"ckpt-6.*incomplete.*state.h5"):
        StepCheckpoint.restore_checkpoint(fresh, tmp_path / "ckpt-6")
    for a, b in zip(before, _weights(fresh), strict=True):
        np.testing.assert_array_equal(a, b)  # untouched
    assert kerasteps.global_step(trained) == 6


def test_a_damaged_checkpoint_is_restored_all_or_nothing(tmp_path):
    """Sizes right, bytes wrong: the CRC-32 in meta.json catches it; nothing changes."""
    _checkpoints(tmp_path)
    data = tmp_path / "ckpt-6" / "state.h5"
    content = bytearray(data.read_bytes())
    content[len(content) // 2] ^= 0xFF
    data.write_bytes(bytes(content))
    model = tiny_model(seed=1)
    fit_steps(model, 3)
    before = _weights(model) + [model.optimizer.iterations.numpy()]
    with pytest.raises(ValueError, match="ckpt-6.*damaged"):
        StepCheckpoint.restore_checkpoint(model, tmp_path / "ckpt-6")
    after = _weights(model) + [model.optimizer.iterations.numpy()]
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    assert StepCheckpoint.restore_latest(model, tmp_path) == 4


def test_a_missing_checkpoint_folder_falls_back_with_a_warning(tmp_path, caplog):
    _checkpoints(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "ckpt-6")
    caplog.set_level(logging.WARNING, logger="kerasteps")
    assert StepCheckpoint.restore_latest(tiny_model(seed=1), tmp_path) == 4
    assert "ckpt-6 is listed but missing: dropped" in " ".join(_warnings(caplog))


# -- 4. non-finite state is never saved -----------------------------------------------
def test_checkpoints_of_a_nan_state_are_never_written(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="kerasteps")
    model = NanAtStep(nan_step=37)
    model.compile(keras.optimizers.SGD(0.01))
    x, y = tiny_data(100)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[
            StopOnNonFinite(every=5),
            StepCheckpoint(tmp_path, every=1, keep=5),
        ],
    )
    steps = [info.step for info in StepCheckpoint.list_checkpoints(tmp_path)]
    assert steps == [32, 33, 34, 35, 36]  # 37..40 hold NaN weights: refused
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(
        "not saving step 37: " in m and "NaN or an infinity" in m for m in errors
    )
    restored = NanAtStep(nan_step=10**9)
    restored.compile(keras.optimizers.SGD(0.01))
    restored(x[:1])
    assert StepCheckpoint.restore_latest(restored, tmp_path) == 36
    assert all(np.isfinite(w.numpy()).all() for w in restored.weights)
    with pytest.raises(NonFiniteStateError, match="not saving step 40"):
        StepCheckpoint(tmp_path, every=1).save(model)


# -- 5. random state: seed generators are saved ---------------------------------------
def _wgan_stream():
    from kerasteps.mixtures import ring_of_gaussians
    from kerasteps.models import WGAN

    x, _ = ring_of_gaussians(2 * 16 * 8, seed=0)
    return WGAN.make_dataset(x, 16, n_critic=2, seed=1, repeat=True)


def test_a_resumed_wgan_equals_an_uninterrupted_one(tmp_path):
    straight = tiny_wgan()
    straight.fit(_wgan_stream(), steps_per_epoch=12, epochs=2, verbose=0)

    first = tiny_wgan()
    first.fit(
        _wgan_stream(),
        steps_per_epoch=12,
        epochs=1,
        verbose=0,
        callbacks=[StepCheckpoint(tmp_path, every=12)],
    )
    resumed = tiny_wgan(seed=7)  # other initial weights: all must come from the save
    assert StepCheckpoint.restore_latest(resumed, tmp_path) == 12
    np.testing.assert_array_equal(
        resumed._seed_generator.state.numpy(), first._seed_generator.state.numpy()
    )
    keras.utils.set_random_seed(0)  # the stream's shuffle follows the global seed
    resumed.fit(
        skip_consumed(_wgan_stream(), resumed), steps_per_epoch=12, epochs=1, verbose=0
    )
    assert (
        resumed.step_counters()
        == straight.step_counters()
        == {
            "d_step": 48,
            "g_step": 24,
        }
    )
    for a, b in zip(straight.variables, resumed.variables, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    for opt in ("d_optimizer", "g_optimizer"):
        for a, b in zip(
            getattr(straight, opt).variables,
            getattr(resumed, opt).variables,
            strict=True,
        ):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_wgan_keeps_its_seed_state_in_keras_files_and_dropout_in_checkpoints(
    tmp_path,
):
    gan = tiny_wgan()
    gan.fit(_wgan_stream(), steps_per_epoch=5, epochs=1, verbose=0)
    gan.save(tmp_path / "gan.keras")
    loaded = keras.saving.load_model(tmp_path / "gan.keras")
    state = gan._seed_generator.state.numpy()
    assert state[1] > 0
    np.testing.assert_array_equal(loaded._seed_generator.state.numpy(), state)

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((2,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)]
    )
    model.compile("sgd", "mse")
    fit_steps(model, 6, [StepCheckpoint(tmp_path / "ckpt", every=6)])
    (seed,) = [v for v in model.variables if v.name == "seed_generator_state"]
    fresh = keras.Sequential(
        [keras.Input((2,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)]
    )
    fresh.compile("sgd", "mse")
    StepCheckpoint.restore_latest(fresh, tmp_path / "ckpt")
    (restored,) = [v for v in fresh.variables if v.name == "seed_generator_state"]
    np.testing.assert_array_equal(restored.numpy(), seed.numpy())


# -- 6. mismatches are refused --------------------------------------------------------
def test_an_adam_checkpoint_does_not_restore_into_sgd(tmp_path):
    model = tiny_model(optimizer=keras.optimizers.Adam(1e-3))
    fit_steps(model, 4, [StepCheckpoint(tmp_path, every=4)])
    sgd = tiny_model(seed=2, optimizer=keras.optimizers.SGD(0.1))
    before = _weights(sgd)
    with pytest.raises(ValueError, match="holds the state of a Adam.*is a SGD"):
        StepCheckpoint.restore_latest(sgd, tmp_path)
    for a, b in zip(before, _weights(sgd), strict=True):
        np.testing.assert_array_equal(a, b)


def _stream(batch_size, drop_remainder=True):
    x, y = tiny_data(64)
    data = tf.data.Dataset.from_tensor_slices((x, y))
    return data.batch(batch_size, drop_remainder=drop_remainder).repeat()


def test_a_resume_with_another_batch_size_is_refused(tmp_path):
    model = tiny_model()
    model.fit(
        _stream(4),
        steps_per_epoch=8,
        epochs=1,
        verbose=0,
        callbacks=[StepCheckpoint(tmp_path, every=8)],
    )
    meta = json.loads((tmp_path / "ckpt-8" / "meta.json").read_text())
    assert meta["examples_per_step"] == 4
    # A static batch size: refused by skip_consumed, before training.
    resumed = tiny_model()
    StepCheckpoint.restore_latest(resumed, tmp_path)
    with pytest.raises(ValueError, match="batches of 8 examples.*trained on 4"):
        skip_consumed(_stream(8), resumed)
    # Unknown statically: refused at the first step, before anything is written.
    resumed = tiny_model()
    StepCheckpoint.restore_latest(resumed, tmp_path)
    jsonl = tmp_path / "log.jsonl"
    with pytest.raises(ValueError, match="8 examples per batch.*trained on 4"):
        resumed.fit(
            skip_consumed(_stream(8, drop_remainder=False), 8),
            steps_per_epoch=8,
            epochs=1,
            verbose=0,
            callbacks=[JSONLinesLogger(jsonl, every=1)],
        )
    assert not jsonl.exists() or jsonl.read_text() == ""
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [8]
    # The same batch size resumes.
    resumed = tiny_model()
    StepCheckpoint.restore_latest(resumed, tmp_path)
    resumed.fit(
        skip_consumed(_stream(4), resumed), steps_per_epoch=8, epochs=1, verbose=0
    )
    assert kerasteps.global_step(resumed) == 16


def test_the_documented_way_to_change_the_learning_rate_after_a_restore(tmp_path):
    model = tiny_model(optimizer=keras.optimizers.Adam(1e-3))
    fit_steps(model, 4, [StepCheckpoint(tmp_path, every=4)])
    resumed = tiny_model(optimizer=keras.optimizers.Adam(1e-5))
    StepCheckpoint.restore_latest(resumed, tmp_path)
    assert float(resumed.optimizer.learning_rate.numpy()) == pytest.approx(1e-3)
    resumed.optimizer.learning_rate.assign(1e-5)  # the rule: set it after restoring
    fit_steps(resumed, 2)
    assert float(resumed.optimizer.learning_rate.numpy()) == pytest.approx(1e-5)


# -- 7, 8. signals --------------------------------------------------------------------
def _start(tmp_path, *args):
    return zygote.Popen(
        [sys.executable, str(SCRIPT), "--workdir", str(tmp_path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=script_environment(),
        preexec_fn=zygote.as_in_a_terminal,
    )


def _wait_for(process, word, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if word in line:
            return
        if not line and process.poll() is not None:
            pytest.fail(f"ended before {word}: {process.stderr.read()[-2000:]}")
    process.kill()
    pytest.fail(f"no {word} within {timeout} s")


def _finish(process, timeout=60):
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"did not end within {timeout} s: {err[-2000:]}")
    return out, err


def test_ctrl_c_saves_and_stops_with_one_line(tmp_path):
    process = _start(tmp_path, "--sleep", "0.05")
    _wait_for(process, "READY")
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    out, err = _finish(process)
    assert process.returncode == 128 + signal.SIGINT, err[-2000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["interrupted"] and result["signal"] == signal.SIGINT
    assert result["checkpoints"] == [result["final"]] and result["final"] > 0
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "SIGINT" in line]
    assert lines == [
        "StepCheckpoint: received SIGINT; stopping training after the step in "
        "progress and saving a checkpoint of it."
    ]


def test_a_second_ctrl_c_interrupts_at_once(tmp_path):
    process = _start(tmp_path, "--sleep", "0.3")
    _wait_for(process, "READY")
    process.send_signal(signal.SIGINT)
    time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = _finish(process)
    assert process.returncode != 0 and "KeyboardInterrupt" in err
    assert "second SIGINT; not waiting any longer" in err


def test_after_a_failed_fit_sigterm_still_ends_the_process(tmp_path):
    """Item 7: no hook runs when fit raises; the handler must step aside."""
    process = _start(tmp_path, "--fail-at", "5", "--after-fail", "60")
    _wait_for(process, "FAILED")
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _finish(process, timeout=30)
    assert process.returncode == -signal.SIGTERM
    assert time.monotonic() - started < 10


def test_handlers_are_restored_after_an_exception_in_process(tmp_path):
    previous = signal.getsignal(signal.SIGTERM)

    class Boom(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                raise RuntimeError("boom")

    model = tiny_model()
    with pytest.raises(RuntimeError, match="boom"):
        fit_steps(model, 10, [StepCheckpoint(tmp_path, every=100), Boom()])
    # The handler is still installed (no hook ran), but steps aside when called:
    # simulate a signal outside fit by calling it with this frame.
    handler = signal.getsignal(signal.SIGTERM)
    seen = []
    signal.signal(signal.SIGTERM, previous)  # what it restores to ...
    signal.signal(signal.SIGTERM, handler)
    original = signal.raise_signal
    try:
        signal.raise_signal = seen.append
        handler(signal.SIGTERM, sys._getframe())
    finally:
        signal.raise_signal = original
    assert seen == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == previous


# -- 9. the launcher's TensorBoard dies with it ---------------------------------------
def test_board_child_dies_with_a_killed_launcher(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "logs").mkdir()
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kerasteps.cli",
            "board",
            str(tmp_path / "logs"),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        child = None
        while time.monotonic() < deadline and child is None:
            out = subprocess.run(
                ["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True
            ).stdout.split()
            child = int(out[0]) if out else None
            time.sleep(0.2)
        assert child is not None, "no TensorBoard child"
        launcher.kill()  # SIGKILL: no cleanup in the launcher
        launcher.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{child}/stat") as handle:
                if handle.read().split(") ")[1].startswith("Z"):
                    break  # a zombie: dead, waiting to be reaped
            time.sleep(0.2)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("TensorBoard outlived the killed launcher")
    finally:
        launcher.kill()


# -- 10. one writer per directory -----------------------------------------------------
@pytest.mark.tensorflow_only("the lock is pure Python, taken before training")
def test_a_second_process_on_the_same_directories_fails_before_training(
    tmp_path, caplog
):
    def sinks():  # the script's, on the same directories
        return [
            StepCheckpoint(tmp_path / "ckpt", every=1000),
            JSONLinesLogger(tmp_path / "log.jsonl", every=10),
        ]

    first = _start(tmp_path, "--sleep", "0.2")
    try:
        _wait_for(first, "READY")
        second = tiny_model()  # the second process is this one
        with pytest.raises(RuntimeError) as raised:
            fit_steps(second, 20, sinks())
        assert f"is being written by another process (pid {first.pid}" in str(
            raised.value
        )
        assert kerasteps.global_step(second) == 0  # not a single step
        assert first.poll() is None  # the first goes on
    finally:
        first.kill()
        first.wait()
    # The first was killed: its locks are free, and the next run (this process)
    # takes them over with one INFO line each (the normal resume after a crash).
    model = tiny_model()
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        fit_steps(model, 20, sinks())
    assert kerasteps.global_step(model) == 20
    taken = [r for r in caplog.records if "taking over" in r.getMessage()]
    assert [r.levelname for r in taken] == ["INFO", "INFO"]
    assert all(
        f"left by pid {first.pid} which is gone" in r.getMessage() for r in taken
    )


def test_the_same_process_may_fit_again_after_an_error(tmp_path):
    class Boom(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                raise RuntimeError("boom")

    model = tiny_model()
    sinks = [
        StepTensorBoard(tmp_path / "tb", every=1),
        JSONLinesLogger(tmp_path / "l.jsonl", every=1),
        StepCheckpoint(tmp_path / "ckpt", every=2),
    ]
    with pytest.raises(RuntimeError):
        fit_steps(model, 10, [*sinks, Boom()])
    fit_steps(model, 4, sinks)  # a notebook re-runs the cell: not refused
    assert kerasteps.global_step(model) == 6
    assert not list(tmp_path.rglob("*.lock"))  # hidden ones included
    # The second fit continued the first's run: nothing was moved aside.
    assert not list(tmp_path.rglob("*earlier*"))


# -- 11-16. bad input: a clear error before training ----------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda d: LogEvery(None),
        lambda d: StepTensorBoard(d, every=None),
        lambda d: JSONLinesLogger(os.path.join(d, "l.jsonl"), every=None),
        # StepCheckpoint(d, every=None) needs `every_seconds` instead:
        # tests/callbacks/test_checkpoint_every_seconds.py.
        lambda d: ValidateEvery(None, (np.ones((2, 2)), np.ones((2, 1)))),
        lambda d: Throughput(None),
        lambda d: StopOnNonFinite(every=None),
    ],
)
def test_every_none_is_refused(tmp_path, make):
    with pytest.raises(TypeError, match="`every` must be a positive int .*None"):
        make(str(tmp_path))


def test_log_every_format_is_checked(tmp_path, caplog):
    for fmt, match in [
        ("{loss", "not a valid format string"),
        ("{0}", "value names"),
        ("{loss.real}", "value names"),
        ("{loss:q}", "cannot format a number"),
    ]:
        with pytest.raises(ValueError, match=match):
            LogEvery(fmt=fmt)
    model = tiny_model()
    jsonl = tmp_path / "l.jsonl"
    with pytest.raises(
        ValueError,
        match=r"names 'nokey', which this run does not log"
        r"\. Names it logs: loss",
    ):
        fit_steps(
            model, 10, [LogEvery(5, fmt="{nokey}"), JSONLinesLogger(jsonl, every=5)]
        )
    assert kerasteps.global_step(model) == 5  # stopped at its first line
    caplog.set_level(logging.INFO, logger="kerasteps")
    validate = ValidateEvery(4, tiny_data(4, seed=1))
    fit_steps(tiny_model(), 8, [validate, LogEvery(2, fmt="{loss:.2f} {val_loss:.2f}")])
    lines = [r.getMessage() for r in caplog.records if r.name == "kerasteps"]
    assert lines[0].endswith(" -") and " -" not in lines[1]  # val_loss at 4, 8


def test_validate_every_data_the_model_cannot_take_fails_before_training(tmp_path):
    model = tiny_model()
    wrong = (np.ones((8, 3), "float32"), np.ones((8, 1), "float32"))  # 3 features
    jsonl = tmp_path / "l.jsonl"
    sink = JSONLinesLogger(jsonl, every=1)
    with pytest.raises(ValueError, match="ValidateEvery: the model .* cannot evaluate"):
        fit_steps(model, 10, [sink, ValidateEvery(9, wrong)])
    assert kerasteps.global_step(model) == 0 and sink._file is None
    lossless = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    lossless.compile("sgd")
    with pytest.raises(ValueError, match="compile the model with a loss"):
        lossless.fit(
            *tiny_data(8), verbose=0, callbacks=[ValidateEvery(2, tiny_data(4))]
        )


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "", "/abs"])
def test_tensorboard_run_names_must_be_plain(tmp_path, name):
    with pytest.raises(ValueError, match="`train_run` must be a plain folder name"):
        StepTensorBoard(tmp_path, train_run=name)


def test_restore_latest_of_a_file_or_a_checkpoint_folder(tmp_path):
    _checkpoints(tmp_path / "ckpt", steps=(2,))
    (tmp_path / "file.txt").write_text("x")
    model = tiny_model()
    with pytest.raises(ValueError, match="received a file"):
        StepCheckpoint.restore_latest(model, tmp_path / "file.txt")
    with pytest.raises(
        ValueError, match="received the checkpoint folder .*pass its parent"
    ):
        StepCheckpoint.restore_latest(model, tmp_path / "ckpt" / "ckpt-2")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_uncatchable_signals_are_refused(tmp_path, sig):
    with pytest.raises(ValueError, match=f"cannot hold {sig.name}"):
        StepCheckpoint(tmp_path, every=5, signals=[sig])


# -- 17. the launcher: usage errors exit 2 with one line ------------------------------
def _launch(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "kerasteps.cli", *args],
        capture_output=True,
        text=True,
        env=script_environment(),
        cwd=cwd,
        timeout=300,
    )


def _error_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("Error")]


def test_launcher_refuses_a_log_dir_under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    result = _launch("run", "global_step", "--log-dir", str(tmp_path / "file" / "logs"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "Invalid value for '--log-dir'" in result.stderr
    assert "Not a directory" in result.stderr


def test_launcher_refuses_an_unwritable_plot_output(tmp_path):
    from kerasteps.event_files import read_scalars  # noqa: F401 - TensorBoard present

    log_dir = tmp_path / "logs"
    with tf.summary.create_file_writer(str(log_dir)).as_default():
        tf.summary.scalar("loss", 1.0, step=1)
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(
        kerasteps.cli.main,
        ["plot", str(log_dir), "-o", str(tmp_path / "file" / "c.png")],
    )
    assert result.exit_code == 2
    assert "Invalid value for '--output': cannot write" in result.output


@pytest.mark.parametrize("kind", ["pickled", "strings"])
def test_wgan_refuses_data_that_is_not_numbers(tmp_path, kind):
    path = tmp_path / "data.npy"
    if kind == "pickled":
        np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    else:
        np.save(path, np.array([["a", "b"], ["c", "d"]]))
    result = CliRunner().invoke(
        kerasteps.cli.main,
        ["run", "wgan", "--data", str(path), "--log-dir", str(tmp_path / "logs")],
    )
    assert result.exit_code == 2
    assert type(result.exception) is SystemExit  # a usage error, not a traceback
    assert "Invalid value for '--data'" in result.output
    assert not (tmp_path / "logs").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ('"""Broken."""\nimport click\ndef main(:\n    pass\n', "SyntaxError"),
        ('"""Broken."""\nimport no_such_module_here\n', "ModuleNotFoundError"),
    ],
)
def test_a_recipe_file_that_cannot_load_shows_its_own_error(tmp_path, source, shown):
    path = tmp_path / "my_recipe.py"
    path.write_text(source)
    result = _launch("run", str(path))
    assert result.returncode == 2
    assert f"the recipe file {str(path)!r} cannot be loaded" in result.stderr
    assert f'File "{path}", line ' in result.stderr
    assert shown in result.stderr
    assert "kerasteps/cli/__init__.py" not in result.stderr
    assert "kerasteps/recipe.py" not in result.stderr
