"""Tests for StepTensorBoard, read back with TensorBoard's own reader."""

import os

import keras
import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from kerasteps.callbacks import StepTensorBoard
from tests.helpers import read_scalar_steps, read_scalars, tiny_data, tiny_model

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


def test_scalars_learning_rate_schedule_and_counters(tmp_path):
    log_dir = str(tmp_path / "tb")
    schedule = keras.optimizers.schedules.ExponentialDecay(
        0.1, decay_steps=1, decay_rate=0.5
    )
    model = tiny_model(optimizer=keras.optimizers.SGD(schedule), metrics=["mae"])
    x, y = tiny_data(20)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[StepTensorBoard(log_dir, every=2)],
    )
    accumulator = EventAccumulator(os.path.join(log_dir, "train"))
    accumulator.Reload()
    assert set(accumulator.Tags()["scalars"]) == {
        "loss",
        "mae",
        "learning_rate",
        "counters/step",
    }
    rates = read_scalars(log_dir, "train", "learning_rate")
    # The update that produced step s used the rate at iterations s - 1.
    assert [s for s, _ in rates] == [2, 4, 6, 8, 10]
    for step, rate in rates:
        assert rate == pytest.approx(0.1 * 0.5 ** (step - 1), rel=1e-5)
    assert read_scalars(log_dir, "train", "counters/step") == [
        (s, float(s)) for s in [2, 4, 6, 8, 10]
    ]


def test_constant_learning_rate_and_histograms_are_the_trained_state(tmp_path):
    """Under JAX the state of an epoch in progress lives outside the model's
    variables; every scheduled point still has the learning rate (a variable),
    and the histograms show the weights of that step, not of the epoch's start."""
    log_dir = str(tmp_path / "tb")
    model = tiny_model(optimizer=keras.optimizers.Adam(0.01))
    x, y = tiny_data(80)
    weights = {}

    class KeepWeights(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if (batch + 1) % 10 == 0:  # Callback.model syncs the trained state
                weights[batch + 1] = keras.ops.convert_to_numpy(
                    self.model.layers[-1].kernel
                )

    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[
            StepTensorBoard(log_dir, every=5, histogram_every=10),
            KeepWeights(),
        ],
    )
    rates = read_scalars(log_dir, "train", "learning_rate")
    assert [s for s, _ in rates] == list(range(5, 41, 5))
    assert all(rate == pytest.approx(0.01) for _, rate in rates)
    accumulator = EventAccumulator(
        os.path.join(log_dir, "train"), size_guidance={"tensors": 0}
    )
    accumulator.Reload()
    kernels = [t for t in accumulator.Tags()["tensors"] if t.endswith("kernel")]
    histograms = accumulator.Tensors(kernels[-1])  # the output layer's, 4 x 1
    assert [h.step for h in histograms] == [10, 20, 30, 40]
    for event in histograms:
        kernel = weights[event.step]
        buckets = np.frombuffer(
            event.tensor_proto.tensor_content, dtype=np.float64
        ).reshape(-1, 3)
        assert buckets[:, 2].sum() == kernel.size
        assert buckets[0, 0] == pytest.approx(kernel.min(), abs=1e-6)
        assert buckets[-1, 1] == pytest.approx(kernel.max(), abs=1e-6)
    assert not np.allclose(weights[10], weights[40])  # the weights moved


def test_histograms_every_m_steps(tmp_path):
    log_dir = str(tmp_path / "tb")
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[StepTensorBoard(log_dir, every=5, histogram_every=4)],
    )
    accumulator = EventAccumulator(
        os.path.join(log_dir, "train"), size_guidance={"tensors": 0}
    )
    accumulator.Reload()
    tags = accumulator.Tags()["tensors"]
    kernel = [t for t in tags if t.startswith("weights/") and "kernel" in t]
    assert len(kernel) == 2
    events = accumulator.Tensors(kernel[0])
    assert [e.step for e in events] == [4, 8]
    table = np.frombuffer(
        events[0].tensor_proto.tensor_content, dtype=np.float64
    ).reshape(-1, 3)
    assert table[:, 2].sum() == 2 * 4  # every weight of the 2x4 kernel counted once
    assert read_scalar_steps(log_dir, "train", "loss") == [5, 10]


def test_validation_run_shares_the_tag(tmp_path):
    log_dir = str(tmp_path / "tb")
    model = tiny_model(metrics=["mae"])
    x, y = tiny_data(20)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=2,
        verbose=0,
        validation_data=(x, y),
        callbacks=[StepTensorBoard(log_dir, every=5)],
    )
    assert read_scalar_steps(log_dir, "validation", "loss") == [10, 20]
    assert read_scalar_steps(log_dir, "validation", "mae") == [10, 20]
    evaluated = model.evaluate(x, y, verbose=0, return_dict=True)
    assert read_scalars(log_dir, "validation", "loss")[-1][1] == pytest.approx(
        evaluated["loss"], rel=1e-5
    )


def test_event_files_sort_in_writing_order(tmp_path):
    log_dir = str(tmp_path / "tb")
    model = tiny_model()
    x, y = tiny_data(20)
    for _ in range(3):
        model.fit(
            x,
            y,
            batch_size=2,
            epochs=1,
            verbose=0,
            callbacks=[StepTensorBoard(log_dir, every=10)],
        )
    files = sorted(os.listdir(os.path.join(log_dir, "train")))
    assert len(files) == 3
    assert read_scalar_steps(log_dir, "train", "loss") == [10, 20, 30]


def test_bad_log_dir_is_refused(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("keep")
    with pytest.raises(
        ValueError, match="`log_dir` must be a directory, received the path of a file"
    ):
        StepTensorBoard(str(blocker))
    with pytest.raises(ValueError, match="`log_dir` is not writable: cannot create"):
        StepTensorBoard(str(blocker / "sub"))
    with pytest.raises(
        ValueError, match="`train_run` and `validation_run` must differ"
    ):
        StepTensorBoard(str(tmp_path / "tb"), train_run="x", validation_run="x")
    with pytest.raises(TypeError, match="`histogram_every` must be a positive int"):
        StepTensorBoard(str(tmp_path / "tb"), histogram_every="5")
    assert blocker.read_text() == "keep"


def test_images_every_m_steps_decode_to_what_was_given(tmp_path):
    import io

    from PIL import Image

    log_dir = str(tmp_path / "tb")
    calls = []

    def images(model, step):
        calls.append(step)
        grid = np.zeros((6, 8, 3), dtype=np.float32)
        grid[:, : step % 8] = 1.0
        return {"samples": grid}

    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[StepTensorBoard(log_dir, every=5, images=images, image_every=3)],
    )
    assert calls == [3, 6, 9]
    accumulator = EventAccumulator(
        os.path.join(log_dir, "train"), size_guidance={"tensors": 0}
    )
    accumulator.Reload()
    events = accumulator.Tensors("samples")
    assert [e.step for e in events] == [3, 6, 9]
    width, height, png = events[1].tensor_proto.string_val
    assert (int(width), int(height)) == (8, 6)
    pixels = np.asarray(Image.open(io.BytesIO(png)))
    assert pixels.shape == (6, 8, 3)
    assert (pixels[:, :6] == 255).all() and (pixels[:, 6:] == 0).all()
    assert read_scalar_steps(log_dir, "train", "loss") == [5, 10]


def test_bad_images_argument(tmp_path):
    with pytest.raises(TypeError, match="`images` must be a callable"):
        StepTensorBoard(str(tmp_path / "tb"), images="grid")


def test_fit_in_a_loop_does_not_read_back_its_own_event_files(tmp_path, monkeypatch):
    """A loop of `fit(epochs=1)` calls: each run starts where this process left
    the files, so they are not read again (that read grows with the log)."""
    from kerasteps._files import _eventfiles

    reads = []
    read_events = _eventfiles.read_events

    def counting_read_events(path):
        reads.append(path)
        yield from read_events(path)

    monkeypatch.setattr(_eventfiles, "read_events", counting_read_events)
    log_dir = str(tmp_path / "tb")
    model = tiny_model()
    x, y = tiny_data(20)
    for _ in range(4):
        callback = StepTensorBoard(log_dir, every=5)  # a new instance each time
        model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[callback])
    assert reads == []
    assert read_scalar_steps(log_dir, "train", "loss") == list(range(5, 41, 5))
    assert len(os.listdir(os.path.join(log_dir, "train"))) == 4


def test_event_files_changed_by_another_writer_are_read_again(tmp_path, caplog):
    import tensorflow as tf

    log_dir = str(tmp_path / "tb")
    model = tiny_model()
    x, y = tiny_data(20)
    callback = StepTensorBoard(log_dir, every=5)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[callback])
    # Another writer (here TF's own summary writer) adds a value at step 50.
    writer = tf.summary.create_file_writer(os.path.join(log_dir, "train"))
    with writer.as_default():
        tf.summary.scalar("other", 1.0, step=50)
    writer.close()
    with caplog.at_level("INFO", logger="kerasteps"):
        model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[callback])
    assert "run starts at step 10; dropped 1 value(s)" in caplog.text
    accumulator = EventAccumulator(
        os.path.join(log_dir, "train"), size_guidance={"tensors": 0}
    )
    accumulator.Reload()
    assert "other" not in accumulator.Tags()["tensors"]
    assert read_scalar_steps(log_dir, "train", "loss") == [5, 10, 15, 20]
