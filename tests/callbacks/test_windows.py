"""What a logged value means: the window mean by default, `"last"`, `"epoch"`.

The witness is a plain Keras callback that records the batch logs Keras passes to
every callback: Keras's running means since the epoch began. With equal-sized batches
the running mean `m_t` after `t` batches of an epoch holds `t * m_t` summed losses, so
the mean over any window of steps follows from the witness alone, independently of
kerasteps, which computes it from the metrics' `total`/`count` state.
"""

from __future__ import annotations

import logging
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasteps
from kerasteps import Every
from kerasteps.callbacks import (
    JSONLinesLogger,
    LogEvery,
    StepCallback,
    StepCheckpoint,
    StepProgressBar,
    StepTensorBoard,
    StopAtStep,
    StopOnNonFinite,
    Throughput,
    ValidateEvery,
)
from tests.helpers import (
    MAX_STEPS_PER_EXECUTION,
    Witness,
    needs_steps_per_execution,
    read_jsonl,
    read_scalars,
    tiny_wgan,
)

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]

BATCH = 8
STEPS_PER_EPOCH = 20
EPOCHS = 3


class Recorder(StepCallback):
    """A custom sink: what `event.values()` gives, and which keys were reduced."""

    def __init__(self, every, reduce="mean"):
        super().__init__(every, reduce=reduce)
        self.seen: dict[int, tuple[int, dict, frozenset]] = {}

    def on_step(self, event):
        self.seen[event.step] = (event.prev, event.values(), event.reduced)

    def points(self):
        """(previous point, step, values, reduced) for every point, in order."""
        previous = 0
        for step in sorted(self.seen):
            _, values, reduced = self.seen[step]
            yield previous, step, values, reduced
            previous = step


def regression_model(steps_per_execution=1):
    needs_steps_per_execution(steps_per_execution)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(
        keras.optimizers.Adam(1e-2),
        "mse",
        metrics=["mae", keras.metrics.RootMeanSquaredError(name="rmse")],
        steps_per_execution=steps_per_execution,
    )
    return model


def regression_data(n=STEPS_PER_EPOCH * BATCH, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    y = (np.sin(x[:, :1]) + x[:, 1:2] * x[:, 2:3]).astype("float32")
    return x, y


def fit_in_order(model, x, y, callbacks, epochs=EPOCHS, **kwargs):
    """`fit` on arrays, BATCH examples a step, in order (no shuffle), silent."""
    return model.fit(
        x,
        y,
        batch_size=BATCH,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        callbacks=callbacks,
        **kwargs,
    )


def assert_rel(got: float, want: float, rel: float = 1e-4):
    assert got == pytest.approx(want, rel=rel), (got, want)


@pytest.mark.parametrize("steps_per_execution", [1, 4])
@pytest.mark.parametrize("every", [5, 7])  # divides / does not divide 20
def test_sinks_write_the_window_mean(tmp_path, caplog, every, steps_per_execution):
    caplog.set_level(logging.INFO, logger="kerasteps")
    model = regression_model(steps_per_execution)
    x, y = regression_data()
    witness = Witness()
    recorder = Recorder(every)
    tb, jsonl = str(tmp_path / "tb"), str(tmp_path / "log.jsonl")
    history = fit_in_order(
        model,
        x,
        y,
        [
            witness,
            LogEvery(every),
            StepTensorBoard(tb, every=every),
            JSONLinesLogger(jsonl, every=every),
            recorder,
        ],
    )
    records = {r["step"]: r for r in read_jsonl(jsonl)}
    tb_loss = dict(read_scalars(tb, "train", "loss"))
    lines = {
        int(m.group(2)): float(m.group(1))
        for m in map(
            re.compile(r"^loss=(\S+) .*at step (\d+)$").match,
            [r.getMessage() for r in caplog.records if r.name == "kerasteps"],
        )
        if m
    }
    steps = sorted(recorder.seen)
    assert steps == sorted(records) == sorted(tb_loss) == sorted(lines)
    assert len(steps) >= 8
    spans_an_epoch_end = 0
    for step in steps:
        prev_point = max([0] + [s for s in steps if s < step])
        spans_an_epoch_end += prev_point // STEPS_PER_EPOCH != (step - 1) // 20
        want = {
            "loss": witness.window("loss", prev_point, step),
            "mae": witness.window("mae", prev_point, step),
            "rmse": witness.window("rmse", prev_point, step, square=True),
        }
        _, values, reduced = recorder.seen[step]
        assert reduced == {"loss", "mae", "rmse"}
        for key, value in want.items():
            assert_rel(values[key], value)
            assert_rel(records[step][key], value)
        assert_rel(tb_loss[step], want["loss"])
        assert_rel(lines[step], want["loss"], rel=1e-5)  # six digits printed
    assert spans_an_epoch_end >= (2 if every == 7 else 0)
    # Keras's own History and logs are untouched: the epoch means as Keras made them.
    assert history.history["loss"][-1] == pytest.approx(witness.points[-1][2]["loss"])


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_last_is_the_own_batch_and_epoch_is_keras(steps_per_execution):
    model = regression_model(steps_per_execution)
    x, y = regression_data()
    witness = Witness()
    last, epoch = Recorder(Every(6), reduce="last"), Recorder(Every(6), "epoch")
    fit_in_order(model, x, y, [witness, last, epoch])
    assert sorted(last.seen) == sorted(epoch.seen)
    assert len(last.seen) >= 8
    k = steps_per_execution
    for step, (prev, values, reduced) in last.seen.items():
        assert step - prev in (k, STEPS_PER_EPOCH % k or k)
        assert reduced == {"loss", "mae", "rmse"}
        assert_rel(values["loss"], witness.window("loss", prev, step))
        assert_rel(values["rmse"], witness.window("rmse", prev, step, square=True))
        _, keras_values, epoch_reduced = epoch.seen[step]
        assert epoch_reduced == frozenset()
        for key in ("loss", "mae", "rmse"):
            assert keras_values[key] == witness.logs_at(step)[key]


def test_metrics_that_are_not_means_keep_keras_values():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(
        "adam",
        keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.AUC(from_logits=True, name="auc"), "accuracy"],
    )
    x, _ = regression_data()
    y = (x[:, :1] > 0).astype("float32")
    witness, recorder = Witness(), Recorder(7)
    fit_in_order(model, x, y, [witness, recorder], epochs=2)
    for prev, step, values, reduced in recorder.points():
        assert reduced == {"loss", "accuracy"}
        assert values["auc"] == witness.logs_at(step)["auc"]  # as Keras computes it
        assert_rel(values["loss"], witness.window("loss", prev, step))


def test_sample_weights_weight_the_window_as_keras_does():
    """`loss` is weighted by examples per batch, a weighted metric by the weights."""

    def model():
        keras.utils.set_random_seed(0)
        net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        net.compile(keras.optimizers.SGD(0.05), "mse", weighted_metrics=["mse"])
        return net

    x, y = regression_data()
    x, y = x[:-3], y[:-3]  # the last batch is short: batches are not equal
    weights = np.linspace(0.1, 3.0, len(x)).astype("float32")
    recorder = Recorder(4)
    fit_in_order(model(), x, y, [recorder], epochs=1, sample_weight=weights)
    # Replay the same updates, summing what each metric sums.
    replay = model()
    losses, examples, weighted, weight_sums = [], [], [], []
    for start in range(0, len(x), BATCH):
        part = slice(start, start + BATCH)
        error = np.square(keras.ops.convert_to_numpy(replay(x[part])) - y[part])[:, 0]
        losses.append(float(np.sum(error * weights[part])))  # sum over batch size
        examples.append(len(error))
        weighted.append(float(np.sum(error * weights[part])))
        weight_sums.append(float(np.sum(weights[part])))
        replay.train_on_batch(x[part], y[part], sample_weight=weights[part])
    assert sorted(recorder.seen) == [4, 8, 12, 16, 20]
    for prev, step, values, reduced in recorder.points():
        assert reduced == {"loss", "mse"}
        assert_rel(values["loss"], sum(losses[prev:step]) / sum(examples[prev:step]))
        want = sum(weighted[prev:step]) / sum(weight_sums[prev:step])
        assert_rel(values["mse"], want)


def test_wgan_metrics_are_window_means(tmp_path):
    from kerasteps.mixtures import ring_of_gaussians
    from kerasteps.models import WGAN

    gan = tiny_wgan(noise_seed=0)
    x, _ = ring_of_gaussians(2 * 12 * 16, seed=0)
    witness = Witness()
    witness.on_epoch_begin = lambda epoch, logs=None: setattr(
        witness, "_epoch_start", int(gan.g_step.numpy())
    )
    witness.on_train_batch_end = lambda batch, logs=None: witness.points.append(
        (int(logs["g_step"]), witness._epoch_start, dict(logs))
    )
    recorder = Recorder(5)
    jsonl = str(tmp_path / "gan.jsonl")
    gan.fit(
        WGAN.make_dataset(x, 16, n_critic=2),
        epochs=2,
        verbose=0,
        callbacks=[witness, recorder, JSONLinesLogger(jsonl, every=5)],
    )
    records = {r["step"]: r for r in read_jsonl(jsonl)}
    keys = {"d_loss", "g_loss", "wasserstein", "gradient_penalty"}
    assert len(recorder.seen) == 4
    for prev, step, values, reduced in recorder.points():
        assert reduced == keys
        assert records[step]["d_step"] == 2 * step
        for key in keys:
            assert_rel(values[key], witness.window(key, prev, step), rel=2e-4)
            assert_rel(records[step][key], values[key], rel=1e-6)


def test_validation_values_are_never_reduced(tmp_path):
    model = regression_model()
    x, y = regression_data()
    validate = ValidateEvery(10, validation_data=regression_data(32, seed=1))
    recorder = Recorder(10)
    fit_in_order(model, x, y, [validate, recorder], epochs=1)
    _, values, reduced = recorder.seen[20]
    assert "val_loss" not in reduced
    expected = model.evaluate(*regression_data(32, seed=1), verbose=0, return_dict=True)
    assert values["val_loss"] == pytest.approx(expected["loss"], rel=1e-6)


def test_callbacks_observe_and_never_change_training(tmp_path):
    """Bit-identical weights with and without every kerasteps callback.

    Under JAX the callbacks attach the trained state mid-epoch (Keras keeps it apart
    from the variables); that must never roll training back or perturb it.
    """

    def train(callbacks):
        keras.utils.set_random_seed(3)
        model = keras.Sequential(
            [
                keras.Input((3,)),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dropout(0.3),
                keras.layers.Dense(1),
            ]
        )
        spe = MAX_STEPS_PER_EXECUTION or 2
        model.compile("adam", "mse", metrics=["mae"], steps_per_execution=spe)
        x, y = regression_data()
        model.fit(
            x,
            y,
            batch_size=BATCH,
            epochs=3,
            verbose=0,
            callbacks=callbacks,
            validation_data=regression_data(16, seed=2),
        )
        return [v.numpy() for v in model.weights + model.optimizer.variables]

    bare = train([])
    observed = train(
        [
            ValidateEvery(7, regression_data(16, seed=1)),
            Throughput(5, batch_size=BATCH),
            LogEvery(3),
            Recorder(Every(4), reduce="last"),
            StepTensorBoard(str(tmp_path / "tb"), every=5, histogram_every=10),
            JSONLinesLogger(str(tmp_path / "l.jsonl"), every=6),
            StepCheckpoint(str(tmp_path / "ckpt"), every=10),
            StopAtStep(1000),
            StopOnNonFinite(every=1),
            StepProgressBar(100),
        ]
    )
    assert len(bare) == len(observed)
    for a, b in zip(bare, observed, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_second_fit_continues_the_window(tmp_path):
    """Two `fit()` calls write what one would: the window carries across."""
    x, y = regression_data()

    def run(splits, path):
        model = regression_model()
        sink = JSONLinesLogger(path, every=15)
        for epochs in splits:
            fit_in_order(model, x, y, [sink], epochs=epochs)
        return read_jsonl(path)

    one = run([3], str(tmp_path / "one.jsonl"))
    two = run([1, 2], str(tmp_path / "two.jsonl"))  # the second starts at step 20
    assert [r["step"] for r in one] == [r["step"] for r in two] == [15, 30, 45, 60]
    for a, b in zip(one, two, strict=True):
        assert_rel(b["loss"], a["loss"], rel=1e-6)


def test_bad_reduce_is_refused(tmp_path):
    for make in (
        lambda: LogEvery(5, reduce="median"),
        lambda: JSONLinesLogger(str(tmp_path / "l.jsonl"), reduce="avg"),
        lambda: StepTensorBoard(str(tmp_path / "tb"), reduce=None),
        lambda: Recorder(5, reduce="sum"),
    ):
        with pytest.raises(ValueError, match='`reduce` must be one of "mean"'):
            make()


def test_dataset_input_window_mean_with_repeat(tmp_path):
    """A repeated dataset with `steps_per_epoch` (one stream): still exact."""
    x, y = regression_data()
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).repeat()
    model = regression_model()
    witness, recorder = Witness(), Recorder(9)
    model.fit(
        data, steps_per_epoch=13, epochs=3, verbose=0, callbacks=[witness, recorder]
    )
    assert kerasteps.global_step(model) == 39
    assert sorted(recorder.seen) == [9, 18, 27, 36]
    for prev, step, values, _ in recorder.points():
        assert_rel(values["loss"], witness.window("loss", prev, step))


class TrackedModel(keras.Model):
    """A custom `train_step` that keeps its loss in a `Mean` tracker (keras-io's
    DCGAN way), and also returns the raw batch loss under a tracker's name."""

    def __init__(self, raw_under_metric_name: bool):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.tracker = keras.metrics.Mean(name="tracked_loss")
        self.shadow = keras.metrics.Mean(name="raw_loss")
        self.raw_under_metric_name = raw_under_metric_name

    def call(self, x):
        return self.dense(x)

    @property
    def metrics(self):
        return [self.tracker, self.shadow]

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(x) - y))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
        self.tracker.update_state(loss)
        self.shadow.update_state(loss)
        raw = loss if self.raw_under_metric_name else self.shadow.result()
        return {"tracked_loss": self.tracker.result(), "raw_loss": raw}


@pytest.mark.tensorflow_only("a custom train_step with tf.GradientTape")
def test_custom_train_step_trackers_are_reduced_and_raw_values_kept():
    x, y = regression_data()
    for raw in (False, True):
        keras.utils.set_random_seed(0)
        model = TrackedModel(raw_under_metric_name=raw)
        model.compile(keras.optimizers.SGD(0.01))
        witness, recorder = Witness(), Recorder(6)
        fit_in_order(model, x, y, [witness, recorder], epochs=2)
        for prev, step, values, reduced in recorder.points():
            want = witness.window("tracked_loss", prev, step)
            assert_rel(values["tracked_loss"], want)
            if raw:  # a value that is not the metric's running mean: kept as logged
                assert reduced == {"tracked_loss"}
                assert values["raw_loss"] == witness.logs_at(step)["raw_loss"]
            else:
                assert reduced == {"tracked_loss", "raw_loss"}
                assert_rel(values["raw_loss"], want)
