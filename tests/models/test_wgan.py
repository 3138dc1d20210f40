"""Tests for `kerasteps.models.WGAN`: counters, saving, variants, validation, quality.

Every test runs real `fit` calls on tiny MLPs (32 wide) and asserts values and
steps. On a quiet 2-core CPU the file takes about 20 s without the quality test
and about 35 s with it.
"""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasteps
from kerasteps import mixtures
from kerasteps.models import WGAN
from kerasteps.steps import global_step_name, step_optimizers
from tests.helpers import needs_steps_per_execution

pytestmark = pytest.mark.neutral


def mlp(inputs, outputs, width=32, depth=1):
    layers = [keras.layers.Dense(width, activation="relu") for _ in range(depth)]
    return keras.Sequential(
        [keras.Input((inputs,)), *layers, keras.layers.Dense(outputs)]
    )


def make_gan(n_critic=2, **kwargs):
    return WGAN(mlp(2, 2), mlp(2, 1), latent_dim=2, n_critic=n_critic, seed=0, **kwargs)


@pytest.fixture(scope="module")
def ring():
    x, _ = mixtures.ring_of_gaussians(2000, seed=0)
    return x


class LogRecorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append({k: float(v) for k, v in logs.items()})


def assert_counters(model, n_critic, g_step):
    assert model.step_counters() == {"d_step": n_critic * g_step, "g_step": g_step}
    assert kerasteps.step_counters(model) == model.step_counters()
    assert kerasteps.global_step(model) == g_step
    assert int(model.optimizer.iterations) == g_step
    assert int(model.g_optimizer.iterations) == g_step
    assert int(model.d_optimizer.iterations) == n_critic * g_step


def values(variables):
    return [keras.ops.convert_to_numpy(v) for v in variables]


@pytest.mark.keras_range
@pytest.mark.parametrize("n_critic", [1, 5])
def test_counters_after_fit_and_second_fit(ring, n_critic):
    model = make_gan(n_critic)
    model.compile()
    assert_counters(model, n_critic, 0)
    recorder = LogRecorder()
    # 200 examples in elements of n_critic * 8: 200 // (8 n) full batches + 1 short.
    x = ring[:200]
    history = model.fit(x, batch_size=n_critic * 8, verbose=0, callbacks=[recorder])
    steps = math.ceil(200 / (n_critic * 8))
    assert_counters(model, n_critic, steps)
    assert [r["g_step"] for r in recorder.logs] == list(range(1, steps + 1))
    assert [r["d_step"] for r in recorder.logs] == [
        n_critic * s for s in range(1, steps + 1)
    ]
    assert history.history["g_step"] == [steps]
    assert history.history["d_step"] == [n_critic * steps]

    model.fit(x, batch_size=n_critic * 8, epochs=2, verbose=0)
    assert_counters(model, n_critic, 3 * steps)


def test_step_protocol(ring):
    model = make_gan(3)
    assert step_optimizers(model) == {}
    model.compile()
    assert model.kerasteps_global_counter == "g_step"
    assert global_step_name(model) == "g_step"
    assert model.kerasteps_counters() == {
        "d_step": model.d_step,
        "g_step": model.g_step,
    }
    assert step_optimizers(model) == {"d": model.d_optimizer, "g": model.g_optimizer}
    assert model.optimizer is model.g_optimizer
    # The counters have the type of an optimizer's `iterations` (int64 on TensorFlow,
    # int32 on JAX, which has no int64 without a flag).
    assert model.d_step.dtype == model.d_optimizer.iterations.dtype
    assert not model.d_step.trainable
    assert model.d_step in model.non_trainable_variables
    model.fit(ring[:60], batch_size=6, verbose=0)
    assert kerasteps.step_counters(model) == {"d_step": 30, "g_step": 10}


def test_logs_metrics_and_gradient_penalty(ring):
    model = make_gan(2)
    model.compile()
    history = model.fit(ring[:400], batch_size=40, epochs=2, verbose=0)
    logs = history.history
    assert set(logs) == {
        "d_loss",
        "g_loss",
        "wasserstein",
        "gradient_penalty",
        "d_step",
        "g_step",
    }
    assert all(np.isfinite(v).all() for v in logs.values())
    assert all(0 < gp < 100 for gp in logs["gradient_penalty"])
    assert [m.name for m in model.metrics] == [
        "d_loss",
        "g_loss",
        "wasserstein",
        "gradient_penalty",
    ]
    # Trackers are reset every epoch: each epoch's mean counts only its 10 steps.
    assert int(model.metrics[0].count) == 10


def rate(optimizer):
    """The optimizer's learning rate now, as a float."""
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def schedule_of(optimizer):
    """The optimizer's learning-rate schedule, from its config."""
    config = optimizer.get_config()["learning_rate"]
    return keras.optimizers.schedules.deserialize(config)


def test_default_optimizers():
    gp = make_gan(n_critic=3)
    gp.compile(total_steps=100)
    assert gp.total_steps == 100 and gp.gradient_penalty == 0.1
    assert isinstance(gp.g_optimizer, keras.optimizers.Adam)
    assert isinstance(gp.d_optimizer, keras.optimizers.Adam)
    assert gp.d_optimizer is not gp.g_optimizer
    assert (gp.d_optimizer.beta_1, gp.d_optimizer.beta_2) == (0.5, 0.9)
    # 2e-3 decaying linearly to 1e-5: the generator's over 100 updates, the
    # critic's over n_critic * 100.
    schedules = {
        "g": (schedule_of(gp.g_optimizer), 100),
        "d": (schedule_of(gp.d_optimizer), 300),
    }
    for name, (schedule, updates) in schedules.items():
        at = [float(schedule(step)) for step in (0, updates // 2, updates, 2 * updates)]
        assert at == pytest.approx([2e-3, (2e-3 + 1e-5) / 2, 1e-5, 1e-5]), name
    assert rate(gp.g_optimizer) == pytest.approx(2e-3)
    assert make_gan().total_steps is None  # not compiled yet
    message = "`total_steps` must be an int >= 1, received 0"
    with pytest.raises(ValueError, match=message):
        make_gan().compile(total_steps=0)

    clip = make_gan(gradient_penalty=None, clip_value=0.01)
    clip.compile()
    assert isinstance(clip.d_optimizer, keras.optimizers.RMSprop)
    assert float(clip.g_optimizer.learning_rate) == pytest.approx(5e-5)

    same = keras.optimizers.Adam()
    with pytest.raises(ValueError, match="different optimizer"):
        make_gan().compile(same, same)


def test_weight_clipping_variant(ring):
    model = make_gan(3, gradient_penalty=None, clip_value=0.01)
    # A large learning rate so that clipping is actually needed.
    model.compile(keras.optimizers.RMSprop(0.05), keras.optimizers.RMSprop(1e-3))
    history = model.fit(ring[:300], batch_size=30, verbose=0)
    assert "gradient_penalty" not in history.history
    weights = [keras.ops.convert_to_numpy(v) for v in model.critic.trainable_variables]
    assert max(np.abs(w).max() for w in weights) <= 0.01 + 1e-7
    assert max(np.abs(w).max() for w in weights) == pytest.approx(0.01)
    assert_counters(model, 3, 10)


@pytest.mark.keras_range
def test_keras_save_and_load_restores_everything(ring, tmp_path):
    model = make_gan(3)
    model.compile(
        keras.optimizers.Adam(1e-3, beta_1=0.5, beta_2=0.9),
        keras.optimizers.RMSprop(2e-3),
    )
    model.fit(ring[:240], batch_size=24, verbose=0)
    assert_counters(model, 3, 10)
    path = tmp_path / "wgan.keras"
    model.save(path)

    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, WGAN)
    assert (loaded.n_critic, loaded.latent_dim, loaded.gradient_penalty) == (3, 2, 0.1)
    assert loaded.optimizer is loaded.g_optimizer
    assert isinstance(loaded.g_optimizer, keras.optimizers.RMSprop)
    assert_counters(loaded, 3, 10)
    for name in ("d_optimizer", "g_optimizer"):
        before = getattr(model, name).variables
        after = getattr(loaded, name).variables
        # iterations, learning rate and every slot variable (Adam m, v; RMSprop).
        assert len(before) == len(after) > 2
        for a, b in zip(before, after, strict=True):
            assert a.name.split("_")[-1] == b.name.split("_")[-1]
            np.testing.assert_array_equal(
                values([a])[0], values([b])[0], err_msg=a.path
            )
    for a, b in zip(values(model.weights), values(loaded.weights), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.generate(5, seed=3), loaded.generate(5, seed=3))

    # Training continues from the saved state and keeps the invariant.
    loaded.fit(ring[:240], batch_size=24, verbose=0)
    assert_counters(loaded, 3, 20)
    loaded.save(path)
    assert_counters(keras.saving.load_model(path), 3, 20)


def test_save_weights_restores_counters(ring, tmp_path):
    model = make_gan(2)
    model.compile()
    model.fit(ring[:120], batch_size=12, verbose=0)
    path = tmp_path / "wgan.weights.h5"
    model.save_weights(path)
    fresh = make_gan(2)
    fresh.compile()
    fresh.load_weights(path)
    assert_counters(fresh, 2, 10)


@pytest.mark.keras_range
def test_the_default_schedule_is_saved_and_continues_after_a_reload(ring, tmp_path):
    """The rate's schedule is the run's: a reloaded model continues it from its
    step, with the `total_steps` it was compiled with, never re-derived."""
    model = make_gan(2)
    model.compile(total_steps=40)
    model.fit(ring[:240], batch_size=24, verbose=0)  # 10 of 40 generator steps
    path = tmp_path / "wgan.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.total_steps == 40
    for name in ("g_optimizer", "d_optimizer"):
        assert rate(getattr(loaded, name)) == rate(getattr(model, name)), name
    # A quarter of the way: the generator's rate is 2e-3 - (2e-3 - 1e-5) / 4.
    assert rate(loaded.g_optimizer) == pytest.approx(2e-3 - (2e-3 - 1e-5) / 4)
    loaded.fit(ring[:2400], batch_size=24, verbose=0)  # 100 more: past the end
    assert rate(loaded.g_optimizer) == pytest.approx(1e-5)
    assert rate(loaded.d_optimizer) == pytest.approx(1e-5)


def test_config_round_trip():
    model = make_gan(4, gradient_penalty=None, clip_value=0.05, name="my_gan")
    config = model.get_config()
    clone = WGAN.from_config(config)
    assert clone.get_config() == config
    assert (clone.n_critic, clone.clip_value, clone.gradient_penalty) == (4, 0.05, None)
    assert clone.name == "my_gan"
    assert clone.generator is not model.generator


@pytest.mark.parametrize("batches", [12, 10])
def test_steps_per_execution(ring, batches):
    model = make_gan(2)
    needs_steps_per_execution(4)
    model.compile(steps_per_execution=4)
    recorder = LogRecorder()
    model.fit(ring[: batches * 10], batch_size=10, verbose=0, callbacks=[recorder])
    assert_counters(model, 2, batches)
    expected = list(range(4, batches + 1, 4))
    if batches % 4:
        expected.append(batches)
    assert [r["g_step"] for r in recorder.logs] == expected
    assert [r["d_step"] for r in recorder.logs] == [2 * s for s in expected]


def test_jit_compile(ring):
    model = make_gan(1)
    needs_steps_per_execution(2)
    model.compile(jit_compile=True, steps_per_execution=2)
    assert model.jit_compile
    history = model.fit(ring[:64], batch_size=16, verbose=0)
    assert_counters(model, 1, 4)
    assert np.isfinite(history.history["gradient_penalty"]).all()


def test_dataset_helper(ring):
    ds = WGAN.make_dataset(ring[:100], batch_size=8, n_critic=3, seed=0)
    assert ds.element_spec.shape.as_list() == [24, 2]
    assert int(ds.cardinality()) == 4
    # Each pass is a fresh permutation: no example twice within a pass, a new
    # order every pass, the same passes for the same seed.
    x = np.arange(20, dtype="float32")[:, None]
    ds_x = WGAN.make_dataset(x, batch_size=2, n_critic=3, seed=5)
    first = np.concatenate([e.numpy().ravel() for e in ds_x])
    second = np.concatenate([e.numpy().ravel() for e in ds_x])
    assert len(first) == len(set(first)) == 18
    assert not np.array_equal(first, second)
    again = WGAN.make_dataset(x, batch_size=2, n_critic=3, seed=5)
    np.testing.assert_array_equal(
        np.concatenate([e.numpy() for e in again]).ravel(), first
    )
    ordered = WGAN.make_dataset(x, batch_size=2, n_critic=3, shuffle=False)
    np.testing.assert_array_equal(
        np.concatenate([e.numpy() for e in ordered]).ravel(), np.arange(18)
    )
    # Datasets of single examples work too; tuples keep their first item.
    ds2 = WGAN.make_dataset(
        tf.data.Dataset.from_tensor_slices((ring[:100], ring[:100])),
        8,
        3,
        shuffle=False,
    )
    first = next(iter(ds2))
    np.testing.assert_array_equal(first.numpy(), ring[:24])
    model = make_gan(3)
    model.compile()
    model.fit(ds, epochs=2, verbose=0)
    assert_counters(model, 3, 8)
    with pytest.raises(ValueError, match="fewer than one element"):
        WGAN.make_dataset(ring[:10], batch_size=8, n_critic=3)
    with pytest.raises(ValueError, match="rank >= 2"):
        WGAN.make_dataset(np.zeros(100), batch_size=8, n_critic=3)


def test_wrong_data_raises_before_training(ring):
    model = make_gan(5)
    model.compile()
    with pytest.raises(
        ValueError, match=r"`batch_size` must be a multiple of n_critic=5"
    ):
        model.fit(ring[:100], batch_size=32, verbose=0)
    with pytest.raises(ValueError, match=r"batch_size=None"):
        model.fit(ring[:100], verbose=0)  # Keras's default 32
    with pytest.raises(ValueError, match="rank 2"):
        model.fit(ring[:100, :, None], batch_size=10, verbose=0)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        model.fit(np.zeros((100, 3), "float32"), batch_size=10, verbose=0)
    with pytest.raises(ValueError, match="last batch"):
        model.fit(ring[:102], batch_size=10, verbose=0)
    bad = WGAN.make_dataset(ring[:100], batch_size=4, n_critic=3)  # 12 per element
    with pytest.raises(ValueError, match="not a multiple of 5"):
        model.fit(bad, verbose=0)
    assert model.step_counters() == {"d_step": 0, "g_step": 0}


def test_partial_last_element_is_cut_to_a_multiple(ring):
    model = make_gan(3)
    model.compile()
    # 2 elements of 30 and a last one of 8 -> 6 examples, 3 critic batches of 2.
    model.fit(ring[:68], batch_size=30, verbose=0)
    assert_counters(model, 3, 3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_critic": 0}, r"`n_critic` must be an int >= 1, received 0"),
        ({"n_critic": 2.5}, r"`n_critic` must be an int >= 1, received 2.5"),
        ({"clip_value": 0.01}, r"exactly one of `gradient_penalty`.*clip_value=0.01"),
        ({"gradient_penalty": None}, r"received gradient_penalty=None and clip_value"),
        ({"gradient_penalty": 0.0}, r"`gradient_penalty` must be .*received 0.0"),
        (
            {"gradient_penalty": None, "clip_value": -1},
            r"`clip_value` must be .*received -1",
        ),
        ({"latent_dim": 0}, r"`latent_dim` must be an int >= 1, received 0"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = {"generator": mlp(2, 2), "critic": mlp(2, 1), "latent_dim": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        WGAN(**args)


def test_bad_networks_raise():
    with pytest.raises(ValueError, match=r"critic must return one value per example"):
        WGAN(mlp(2, 2), mlp(2, 2), latent_dim=2)
    with pytest.raises(ValueError, match=r"output shape is \(None, 2\)"):
        WGAN(mlp(2, 2), mlp(2, 2), latent_dim=2)
    with pytest.raises(ValueError, match=r"`latent_dim`=3 does not match .* 2"):
        WGAN(mlp(2, 2), mlp(2, 1), latent_dim=3)
    with pytest.raises(ValueError, match="critic cannot take"):
        WGAN(mlp(2, 3), mlp(2, 1), latent_dim=2)
    # Unbuilt Sequential models are built from latent_dim.
    generator = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(2)])
    critic = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(1)])
    model = WGAN(generator, critic, latent_dim=4)
    assert generator.built and critic.built
    assert model.generate(3).shape == (3, 2)


def test_generate():
    model = make_gan()
    a, b = model.generate(10, seed=1), model.generate(10, seed=1)
    assert a.shape == (10, 2) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, model.generate(10, seed=2))
    assert model.generate(0).shape == (0, 2)
    # The same samples in chunks of 3, up to float32 rounding: a matrix product
    # on another batch size may sum in another order (on JAX a relative 1.2e-6
    # was seen in a CI run, on TensorFlow an absolute 1.2e-7 on values near 0.01).
    chunked = model.generate(10, seed=1, batch_size=3)
    np.testing.assert_allclose(chunked, a, rtol=1e-5, atol=1e-6)
