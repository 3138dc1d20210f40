"""Edges users hit (issue 27): the last validation of a run stopped mid-epoch in the
JSON lines, hostile launcher arguments, the progress bar off a terminal, messages
that name the cure for a model with optimizers of its own, and the WGAN on JAX."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import struct
import warnings

import keras
import numpy as np
import pytest

import kerasteps
from kerasteps.callbacks import (
    JSONLinesLogger,
    LogEvery,
    StepCheckpoint,
    StepProgressBar,
    StepTensorBoard,
    StopAtStep,
    Throughput,
)
from kerasteps.steps import StepNotCountedError
from tests.helpers import (
    invoke,
    read_jsonl,
    read_scalars,
    tiny_data,
    tiny_model,
    tiny_wgan,
    write_scalars,
)


# -- 1. the JSON lines keep Keras's last validation ---------------------------------
def test_jsonl_holds_the_validation_of_a_stop_mid_epoch(tmp_path):
    model = tiny_model()
    x, y = tiny_data(100)  # 50 steps per epoch: StopAtStep(30) stops mid-epoch
    history = model.fit(
        x,
        y,
        batch_size=2,
        epochs=5,
        verbose=0,
        shuffle=False,
        validation_data=tiny_data(8, seed=1),
        callbacks=[
            StepTensorBoard(str(tmp_path / "tb"), every=10),
            JSONLinesLogger(str(tmp_path / "log.jsonl"), every=10),
            StopAtStep(30),
        ],
    )
    records = read_jsonl(str(tmp_path / "log.jsonl"))
    assert [r["step"] for r in records] == [10, 20, 30]
    assert ["val_loss" in r for r in records] == [False, False, True]
    assert read_scalars(str(tmp_path / "tb"), "validation", "loss")[0][0] == 30
    board = read_scalars(str(tmp_path / "tb"), "validation", "loss")[0][1]
    assert records[-1]["val_loss"] == pytest.approx(board, rel=1e-6)
    assert records[-1]["val_loss"] == pytest.approx(history.history["val_loss"][-1])
    assert "loss" in records[-1] and records[-1]["step"] == 30


# -- 2. hostile launcher arguments --------------------------------------------------
@pytest.mark.parametrize(
    ("log_dir", "why"),
    [
        ("/proc/x", "'/proc/x' is under /proc or /sys, a pseudo file system"),
        ("/", "'/' is the root of the file system"),
        ("/tmp/..", "'/tmp/..' is the root of the file system"),
        ("/etc", "'/etc' is a system folder"),
    ],
)
def test_run_refuses_a_log_dir_that_is_no_folder_for_runs(log_dir, why):
    # `--steps 0` is refused too, after `--log-dir` (click checks options in the
    # order given): nothing trains into `log_dir`, even where it is not refused.
    result = invoke("run", "global_step", "--log-dir", log_dir, "--steps", "0")
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: Invalid value for '--log-dir': " + why), last
    assert "Traceback" not in result.output


def _header(length: int) -> bytes:
    """A TFRecord header: `uint64 length`, `uint32 masked_crc32c(length)`."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", length)
    return header + struct.pack("<I", masked_crc32c(header))


def _record(data: bytes) -> bytes:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return _header(len(data)) + data + struct.pack("<I", masked_crc32c(data))


def _damaged_event_file(path) -> None:
    """Two good records (version, loss=0.5 at step 1), then one that claims 2**40
    bytes with a valid length checksum."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    value = summary_pb2.Summary.Value(tag="loss", simple_value=0.5)
    event = event_pb2.Event(
        step=1, wall_time=1.0, summary=summary_pb2.Summary(value=[value])
    )
    first = event_pb2.Event(file_version="brain.Event:2", wall_time=1.0)
    body = _record(first.SerializeToString()) + _record(event.SerializeToString())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body + _header(2**40) + b"x" * 64)


def test_summary_reads_a_damaged_event_file_up_to_the_damage(tmp_path, caplog):
    write_scalars(tmp_path / "good", {"loss": [(10, 1.0), (20, 0.25)]})
    bad = tmp_path / "bad" / "events.out.tfevents.1.host"
    _damaged_event_file(bad)
    result = invoke("summary", str(tmp_path))
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:]]
    assert [row[:4] for row in rows] == [
        ["bad", "loss", "1", "1"],
        ["good", "loss", "2", "20"],
    ]
    warnings_ = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings_ == [
        f"kerasteps: the event file {bad} is damaged at byte 82: a record claims "
        "1099511627776 bytes, the file has 76; read the 2 record(s) before it."
    ]


def test_resuming_into_a_damaged_event_file_reads_up_to_the_damage(tmp_path, caplog):
    """TensorFlow's reader would allocate 2**40 bytes (a crash, not an error)."""
    from kerasteps._files import _eventfiles

    bad = tmp_path / "train" / "events.out.tfevents.1.host"
    _damaged_event_file(bad)
    assert _eventfiles.truncate_after(str(bad.parent), 5) == 0
    assert [e.step for e in _eventfiles.read_events(str(bad))] == [0, 1]
    assert "is damaged at byte 82" in caplog.text


def test_summary_refuses_the_root_and_skips_what_is_no_event_file(tmp_path):
    result = invoke("summary", "/")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "Error: Invalid value for 'LOG_DIR': '/' is the root of the file system: "
        "give the folder of your runs."
    )
    write_scalars(tmp_path / "good", {"loss": [(10, 1.0)]})
    os.mkfifo(tmp_path / "good" / "events.out.tfevents.2.fifo")  # would block a read
    (tmp_path / "root").symlink_to("/")  # never walked through
    (tmp_path / "proc").symlink_to("/proc/self")
    result = invoke("summary", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert [line.split()[:4] for line in result.output.splitlines()[1:]] == [
        ["good", "loss", "1", "10"]
    ]


# -- 3. the progress bar off a terminal ---------------------------------------------
_BAR_LINE = re.compile(r"^ ?\d+/20 ━+ \d+(:\d+)*m?s \S+/step( - [\w]+: \S+)*$")
_LOG_LINE = re.compile(
    r"^(loss=\S+ steps_per_second=\S+ examples_per_second=\S+ "
    r"at step \d+|StopAtStep: reached global step 20 .*)$"
)


def test_progress_bar_off_a_terminal_writes_whole_lines(tmp_path):
    """The shape of docs/long-runs.md, stdout and the log lines to one pipe."""
    out = io.StringIO()  # not a terminal: as `python train.py 2>&1 | tee log`
    log = logging.getLogger("kerasteps")
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out):
            model = tiny_model()
            x, y = tiny_data(100)
            model.fit(
                x,
                y,
                batch_size=2,
                epochs=2,
                verbose=0,
                callbacks=[
                    Throughput(every=5, batch_size=2),
                    LogEvery(every=5),
                    StepProgressBar(total_steps=20, interval=0),
                    StopAtStep(20),
                ],
            )
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    text = out.getvalue()
    assert text.endswith("\n") and "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    strange = [s for s in lines if not (_BAR_LINE.match(s) or _LOG_LINE.match(s))]
    assert strange == []
    bars = [int(s.split("/")[0]) for s in lines if _BAR_LINE.match(s)]
    # The second step (the first with a steady rate: no ETA from compiling), the
    # tenths, the end.
    assert bars == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    logs = [s for s in lines if s.startswith("loss=")]
    assert [s.rsplit(" ", 1)[1] for s in logs] == ["5", "10", "15", "20"]


# -- 4. messages that name the cure -------------------------------------------------
def test_suggest_global_step_prefers_the_generator():
    from kerasteps.steps import suggest_global_step

    assert suggest_global_step({"d_optimizer": 1, "g_optimizer": 1}) == "g_optimizer"
    assert suggest_global_step({"d_optimizer": 5, "g_optimizer": 1}) == "g_optimizer"
    assert suggest_global_step({"disc_opt": 1, "gen_opt": 2}) == "gen_opt"
    assert suggest_global_step({"critic": 5, "actor": 1}) == "actor"
    assert suggest_global_step({"b": 2, "a": 2}) == "b"  # a tie: the first


def _guide_gan(compile_optimizer=None):
    """keras.io's "end-to-end GAN example": one critic and one generator update per
    step, its own `d_optimizer` and `g_optimizer`, `super().compile()`."""
    import tensorflow as tf

    class GAN(keras.Model):
        def __init__(self):
            super().__init__()
            self.discriminator = keras.Sequential(
                [
                    keras.Input((2,)),
                    keras.layers.Dense(4, activation="relu"),
                    keras.layers.Dense(1),
                ]
            )
            self.generator = keras.Sequential(
                [keras.Input((2,)), keras.layers.Dense(2)]
            )

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            if compile_optimizer is None:
                super().compile()
            else:
                super().compile(optimizer=compile_optimizer)
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer
            self.loss_fn = loss_fn

        def train_step(self, real):
            batch = tf.shape(real)[0]
            fake = self.generator(tf.random.normal((batch, 2), seed=1))
            both = tf.concat([fake, real], axis=0)
            labels = tf.concat([tf.ones((batch, 1)), tf.zeros((batch, 1))], axis=0)
            with tf.GradientTape() as tape:
                d_loss = self.loss_fn(labels, self.discriminator(both))
            weights = self.discriminator.trainable_weights
            grads = tape.gradient(d_loss, weights)
            self.d_optimizer.apply_gradients(zip(grads, weights, strict=True))
            noise = tf.random.normal((batch, 2), seed=2)
            with tf.GradientTape() as tape:
                scores = self.discriminator(self.generator(noise))
                g_loss = self.loss_fn(tf.zeros((batch, 1)), scores)
            weights = self.generator.trainable_weights
            grads = tape.gradient(g_loss, weights)
            self.g_optimizer.apply_gradients(zip(grads, weights, strict=True))
            return {"d_loss": d_loss, "g_loss": g_loss}

    keras.utils.set_random_seed(0)
    gan = GAN()
    gan.compile(
        keras.optimizers.Adam(1e-3),
        keras.optimizers.Adam(1e-3),
        keras.losses.BinaryCrossentropy(from_logits=True),
    )
    return gan


def _points(n=32):
    return np.random.default_rng(0).normal(size=(n, 2)).astype("float32")


def _iterations(gan) -> tuple[int, int]:
    return int(gan.d_optimizer.iterations.numpy()), int(
        gan.g_optimizer.iterations.numpy()
    )


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_guide_gan_is_refused_before_training_naming_the_generator(tmp_path):
    gan = _guide_gan()
    with pytest.raises(StepNotCountedError) as caught:
        gan.fit(
            _points(),
            batch_size=8,
            verbose=0,
            callbacks=[JSONLinesLogger(str(tmp_path / "log.jsonl"), every=1)],
        )
    message = str(caught.value)
    assert "counts its steps with optimizers other than `model.optimizer`" in message
    assert "Nothing was trained." in message
    assert (
        'kerasteps.count_optimizer_steps(model, global_step="g_optimizer")' in message
    )
    assert _iterations(gan) == (0, 0)  # before any update
    assert not os.path.exists(tmp_path / "log.jsonl")


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_guide_gan_checked_at_its_first_step_suggests_the_generator(tmp_path):
    """`model.optimizer` set but unused: found at the first step (tie 1 and 1)."""
    gan = _guide_gan(compile_optimizer=keras.optimizers.SGD(0.1))
    with pytest.raises(StepNotCountedError) as caught:
        gan.fit(
            _points(),
            batch_size=8,
            verbose=0,
            callbacks=[JSONLinesLogger(str(tmp_path / "log.jsonl"), every=1)],
        )
    message = str(caught.value)
    assert "`d_optimizer` (iterations 1), `g_optimizer` (iterations 1)" in message
    assert (
        'kerasteps.count_optimizer_steps(model, global_step="g_optimizer")' in message
    )
    assert "That step was applied" in message
    assert "after the declaration the global step is 1" in message
    assert _iterations(gan) == (1, 1)


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_restoring_an_undeclared_gan_names_the_declaration(tmp_path, caplog):
    directory = str(tmp_path / "ckpt")
    first = _guide_gan()
    kerasteps.count_optimizer_steps(first, global_step="g_optimizer")
    first.fit(
        _points(80),
        batch_size=8,
        verbose=0,
        callbacks=[StepCheckpoint(directory, every=10)],
    )
    assert kerasteps.global_step(first) == 10

    resumed = _guide_gan()  # a new process that forgot the declaration
    assert StepCheckpoint.restore_latest(resumed, directory) == 0
    warning = [r.getMessage() for r in caplog.records if "saved at" in r.getMessage()]
    assert len(warning) == 1
    assert (
        "was saved at step 10 but the model's global step after restoring is 0. The "
        "model counts its steps with optimizers other than `model.optimizer`: "
        "`d_optimizer` (iterations 10), `g_optimizer` (iterations 10)" in warning[0]
    )
    assert warning[0].endswith(
        "then restore again:\n\n"
        '    kerasteps.count_optimizer_steps(model, global_step="g_optimizer")\n'
    )
    with pytest.raises(StepNotCountedError, match="Nothing was trained"):
        resumed.fit(
            _points(),
            batch_size=8,
            verbose=0,
            callbacks=[StepCheckpoint(directory, every=10)],
        )
    assert _iterations(resumed) == (10, 10)
    kerasteps.count_optimizer_steps(resumed, global_step="g_optimizer")  # the cure
    assert StepCheckpoint.restore_latest(resumed, directory) == 10


# -- 5. the WGAN on JAX -------------------------------------------------------------
@pytest.mark.neutral
def test_wgan_counters_raise_no_int64_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gan = tiny_wgan()
        gan.fit(_points(16), batch_size=8, epochs=1, verbose=0)
    int64 = [str(w.message) for w in caught if "int64" in str(w.message)]
    assert int64 == []
    assert gan.step_counters() == {"d_step": 4, "g_step": 2}  # 2 batches of 2 x 4
    assert str(gan.d_step.dtype) == str(gan.g_optimizer.iterations.dtype)
