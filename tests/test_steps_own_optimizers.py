"""Models that train with optimizers of their own, and what the global step counts.

The GAN class here is written the way keras-io's `wgan_gp.py` and Keras's guide to
customizing `fit()` write it: `compile` takes its own optimizers and loss functions
and calls `super().compile()`, and `train_step` updates the critic 3 times per
generator update; `model.optimizer` is Keras's default and never moves.
"""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasteps
from kerasteps.callbacks import (
    JSONLinesLogger,
    LogEvery,
    StepCheckpoint,
    StepTensorBoard,
    StopAtStep,
)
from kerasteps.data import skip_consumed
from kerasteps.steps import StepNotCountedError
from tests.helpers import read_jsonl, read_scalars

pytestmark = pytest.mark.neutral

D_STEPS = 3
BATCH = 8


class KerasIoGAN(keras.Model):
    def __init__(self, latent_dim=2):
        super().__init__()
        self.latent_dim = latent_dim
        self.discriminator = keras.Sequential(
            [
                keras.Input((2,)),
                keras.layers.Dense(8, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        self.generator = keras.Sequential(
            [
                keras.Input((latent_dim,)),
                keras.layers.Dense(8, activation="relu"),
                keras.layers.Dense(2),
            ]
        )

    def compile(self, d_optimizer, g_optimizer, d_loss_fn, g_loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.d_loss_fn = d_loss_fn
        self.g_loss_fn = g_loss_fn

    def train_step(self, real):
        batch = tf.shape(real)[0]
        for _ in range(D_STEPS):
            noise = tf.random.normal((batch, self.latent_dim), seed=1)
            with tf.GradientTape() as tape:
                fake = self.generator(noise, training=True)
                d_loss = self.d_loss_fn(
                    self.discriminator(real, training=True),
                    self.discriminator(fake, training=True),
                )
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(
                zip(grads, self.discriminator.trainable_weights, strict=True)
            )
        noise = tf.random.normal((batch, self.latent_dim), seed=2)
        with tf.GradientTape() as tape:
            g_loss = self.g_loss_fn(self.discriminator(self.generator(noise)))
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(
            zip(grads, self.generator.trainable_weights, strict=True)
        )
        return {"d_loss": d_loss, "g_loss": g_loss}


def make_gan():
    keras.utils.set_random_seed(0)
    gan = KerasIoGAN()
    gan.compile(
        d_optimizer=keras.optimizers.Adam(1e-3),
        g_optimizer=keras.optimizers.Adam(
            keras.optimizers.schedules.ExponentialDecay(1e-3, 10, 0.5)
        ),
        d_loss_fn=lambda real, fake: tf.reduce_mean(fake) - tf.reduce_mean(real),
        g_loss_fn=lambda fake: -tf.reduce_mean(fake),
    )
    return gan


def points(n=BATCH * 10, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 2)).astype("float32")


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_undeclared_gan_is_refused_before_training(tmp_path):
    gan = make_gan()
    sink = JSONLinesLogger(str(tmp_path / "log.jsonl"), every=5)
    with pytest.raises(StepNotCountedError) as caught:
        gan.fit(
            points(),
            batch_size=BATCH,
            epochs=3,
            verbose=0,
            callbacks=[sink, StopAtStep(20)],
        )
    message = str(caught.value)
    assert (
        "KerasIoGAN defines its own train_step and holds the optimizers "
        "`d_optimizer`, `g_optimizer`" in message
    )
    assert "Nothing was trained." in message
    assert 'kerasteps.count_optimizer_steps(model, global_step="g_optimizer")' in (
        message
    )
    # Refused before the first update: no optimizer moved.
    assert int(gan.g_optimizer.iterations.numpy()) == 0
    assert int(gan.d_optimizer.iterations.numpy()) == 0
    assert sink._file is None  # closed


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_declared_gan_counts_logs_stops_and_checkpoints(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    gan = make_gan()
    kerasteps.count_optimizer_steps(gan, global_step="g_optimizer")
    assert kerasteps.step_counters(gan) == {"d_optimizer": 0, "g_optimizer": 0}
    tb, jsonl = str(tmp_path / "tb"), str(tmp_path / "log.jsonl")
    ckpt = str(tmp_path / "ckpt")

    def callbacks():
        return [
            LogEvery(5),
            StepTensorBoard(tb, every=5),
            JSONLinesLogger(jsonl, every=5),
            StepCheckpoint(ckpt, every=kerasteps.Every(10, last=True), keep=5),
            StopAtStep(25),
        ]

    gan.fit(points(), batch_size=BATCH, epochs=100, verbose=0, callbacks=callbacks())
    assert kerasteps.global_step(gan) == 25
    assert kerasteps.step_counters(gan) == {"d_optimizer": 75, "g_optimizer": 25}
    records = read_jsonl(jsonl)
    assert [r["step"] for r in records] == [5, 10, 15, 20, 25]
    assert [r["d_optimizer"] for r in records] == [15, 30, 45, 60, 75]
    assert [r["g_optimizer"] for r in records] == [5, 10, 15, 20, 25]
    lines = [r.getMessage() for r in caplog.records if " at step 15" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].endswith("d_optimizer=45 at step 15")  # the other counter too
    assert [s for s, _ in read_scalars(tb, "train", "counters/d_optimizer")] == [
        5,
        10,
        15,
        20,
        25,
    ]
    # Both learning rates, each as applied: the generator's schedule halves every
    # 10 of its own updates.
    g_rates = dict(read_scalars(tb, "train", "learning_rate/g_optimizer"))
    assert g_rates[10] == pytest.approx(1e-3 * 0.5 ** (9 / 10), rel=1e-5)
    assert g_rates[25] == pytest.approx(1e-3 * 0.5 ** (24 / 10), rel=1e-5)
    d_rates = dict(read_scalars(tb, "train", "learning_rate/d_optimizer"))
    assert list(d_rates.values()) == pytest.approx([1e-3] * 5)
    assert [i.step for i in StepCheckpoint.list_checkpoints(ckpt)] == [10, 20, 25]

    # A new process: build, compile, declare, restore, continue.
    resumed = make_gan()
    kerasteps.count_optimizer_steps(resumed, global_step="g_optimizer")
    restored = StepCheckpoint.restore_latest(resumed, ckpt)
    assert restored == 25
    assert kerasteps.step_counters(resumed) == {"d_optimizer": 75, "g_optimizer": 25}
    stop = StopAtStep(40)
    more = callbacks()[:-1] + [stop]
    resumed.fit(points(), batch_size=BATCH, epochs=100, verbose=0, callbacks=more)
    assert kerasteps.step_counters(resumed) == {"d_optimizer": 120, "g_optimizer": 40}
    records = read_jsonl(jsonl)
    assert [r["step"] for r in records] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert [r["d_optimizer"] for r in records[-3:]] == [90, 105, 120]


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_declaration_errors_name_what_is_allowed():
    gan = make_gan()
    with pytest.raises(
        ValueError,
        match="`global_step` must name an optimizer .*"
        "received 'generator'.*`optimizer`, `d_optimizer`, "
        "`g_optimizer`",
    ):
        kerasteps.count_optimizer_steps(gan, global_step="generator")
    from kerasteps.models import WGAN, build_point_critic, build_point_generator

    wgan = WGAN(build_point_generator(2), build_point_critic(2), latent_dim=2)
    with pytest.raises(ValueError, match="declares its counters itself"):
        kerasteps.count_optimizer_steps(wgan, global_step="g_optimizer")


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_gradient_accumulation_counts_updates(tmp_path):
    """k=4: the global step counts updates; a schedule logs the rate applied."""
    keras.utils.set_random_seed(0)
    layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")
    model = keras.Sequential([keras.Input((1,)), layer])
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([39], [0.5, 0.25])
    model.compile(
        keras.optimizers.SGD(schedule, gradient_accumulation_steps=4),
        loss=lambda y, p: tf.reduce_mean(p),  # gradient 1: each update moves by -lr
    )
    jsonl, tb = str(tmp_path / "log.jsonl"), str(tmp_path / "tb")
    moves = []

    class Moves(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            moves.append(float(layer.kernel.numpy()[0, 0]))

    x = np.ones((200, 1), "float32")
    model.fit(
        x,
        x,
        batch_size=2,
        epochs=5,
        verbose=0,
        callbacks=[
            Moves(),
            JSONLinesLogger(jsonl, every=5),
            StepTensorBoard(tb, every=1),
            StopAtStep(20),
        ],
    )
    assert kerasteps.global_step(model) == 20
    assert kerasteps.steps.micro_steps(model) == 80 == len(moves)
    assert [r["step"] for r in read_jsonl(jsonl)] == [5, 10, 15, 20]
    rates = dict(read_scalars(tb, "train", "learning_rate"))
    assert sorted(rates) == list(range(1, 21))
    # The weight after update n (batch 4n) moved by the rate that update applied.
    applied = {n: moves[4 * n - 5] - moves[4 * n - 1] for n in range(2, 21)}
    for n, moved in applied.items():
        assert rates[n] == pytest.approx(moved, rel=1e-6), n
    assert rates[10] == 0.5 and rates[11] == 0.25


def test_gradient_accumulation_resumes_mid_update_exactly(tmp_path):
    """A checkpoint taken in the middle of an accumulation resumes exactly."""

    def build():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.Input((2,)), keras.layers.Dense(3), keras.layers.Dense(1)]
        )
        model.compile(keras.optimizers.Adam(0.01, gradient_accumulation_steps=4), "mse")
        return model

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype("float32")
    y = x[:, :1] - x[:, 1:]

    def stream():
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat()

    straight = build()
    straight.fit(stream(), steps_per_epoch=20, epochs=1, verbose=0)

    first = build()
    first.fit(stream(), steps_per_epoch=10, epochs=1, verbose=0)  # 2.5 updates
    assert kerasteps.global_step(first) == 2
    assert kerasteps.steps.micro_steps(first) == 10
    info = StepCheckpoint(str(tmp_path / "ckpt"), every=100).save(first)
    assert info.step == 2

    resumed = build()
    StepCheckpoint.restore_checkpoint(resumed, info)
    assert kerasteps.steps.micro_steps(resumed) == 10
    data = skip_consumed(stream(), resumed)  # skips the 10 batches trained on
    resumed.fit(data, steps_per_epoch=10, epochs=1, verbose=0)
    assert kerasteps.global_step(resumed) == 5
    for a, b in zip(straight.weights, resumed.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_loss_scale_skips_and_frozen_models_are_not_errors(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(
        keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(1e-4), initial_scale=2.0**127
        ),
        "mse",
    )
    x = np.ones((40, 2), "float32")
    jsonl = str(tmp_path / "a.jsonl")
    model.fit(
        x,
        100 * x[:, :1],
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[JSONLinesLogger(jsonl, every=1)],
    )
    step = kerasteps.global_step(model)
    assert 0 < step < 20  # the first updates were skipped while the scale settled
    assert [r["step"] for r in read_jsonl(jsonl)] == list(range(1, step + 1))

    frozen = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    frozen.trainable = False
    frozen.compile("sgd", "mse")
    frozen.fit(
        x,
        x[:, :1],
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[JSONLinesLogger(str(tmp_path / "b.jsonl"), every=1)],
    )
    assert kerasteps.global_step(frozen) == 0
