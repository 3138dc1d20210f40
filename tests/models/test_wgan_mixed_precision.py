"""Mixed precision for `kerasteps.models.WGAN`: loss scaling and exact counters."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import kerasteps
from kerasteps.checkpoint._format import read_state
from kerasteps.checkpoint._model_state import StateLayout
from kerasteps.checkpoint.store import CheckpointStore
from kerasteps.models import WGAN

pytestmark = pytest.mark.neutral

N_CRITIC = 2
BATCH = 8


@pytest.fixture
def policy():
    """Sets a global dtype policy for the test; always restores float32."""

    def set_policy(name: str) -> None:
        keras.mixed_precision.set_dtype_policy(name)

    try:
        yield set_policy
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def _make_wgan(**kwargs) -> WGAN:
    # Built after the policy is set, so the layers compute in its dtype; the
    # critic's last layer outputs float32.
    generator = keras.Sequential(
        [keras.Input((2,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(2)]
    )
    critic = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(8, "relu"),
            keras.layers.Dense(1, dtype="float32"),
        ]
    )
    return WGAN(generator, critic, latent_dim=2, n_critic=N_CRITIC, seed=0, **kwargs)


def _data(steps: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.normal(size=(steps * N_CRITIC * BATCH, 2)).astype("float32")


def _iterations(optimizer) -> int:
    return int(keras.ops.convert_to_numpy(optimizer.iterations))


def _assert_counters_match_optimizers(model: WGAN) -> dict[str, int]:
    counters = model.step_counters()
    assert counters["d_step"] == _iterations(model.d_optimizer)
    assert counters["g_step"] == _iterations(model.g_optimizer)
    assert counters["g_step"] == _iterations(model.optimizer)
    assert kerasteps.global_step(model) == counters["g_step"]
    return counters


def _skipped(optimizer, initial_scale: float = 2.0**15) -> int:
    """Updates a LossScaleOptimizer skipped so far: each skip halves its scale,
    and it only grows again after `dynamic_growth_steps` (2000) applied ones."""
    scale = float(keras.ops.convert_to_numpy(optimizer.dynamic_scale))
    return int(round(np.log2(initial_scale / scale)))


@pytest.mark.parametrize("variant", ["clip", "gp"])
def test_mixed_float16_loss_scaling_counts_exactly(policy, tmp_path, variant):
    policy("mixed_float16")
    keras.utils.set_random_seed(0)
    kwargs = {"gradient_penalty": None, "clip_value": 0.05} if variant == "clip" else {}
    model = _make_wgan(**kwargs)
    assert model.generator.compute_dtype == "float16"
    model.compile()
    assert isinstance(model.d_optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(model.g_optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.optimizer is model.g_optimizer
    steps = 3
    history = model.fit(_data(steps), batch_size=N_CRITIC * BATCH, verbose=0)
    for name in history.history:
        assert np.isfinite(history.history[name]).all(), name
    counters = _assert_counters_match_optimizers(model)
    # Counted updates are exactly the calls minus the skipped updates.
    d_skipped, g_skipped = _skipped(model.d_optimizer), _skipped(model.g_optimizer)
    assert counters == {
        "d_step": N_CRITIC * steps - d_skipped,
        "g_step": steps - g_skipped,
    }
    if variant == "clip":
        # Small gradients: nothing skipped at the default scale 2**15, so the
        # counters are those of float32 training.
        assert d_skipped == g_skipped == 0
        assert counters == {"d_step": N_CRITIC * steps, "g_step": steps}
    assert history.history["g_step"] == [counters["g_step"]]
    assert history.history["d_step"] == [counters["d_step"]]

    # .keras round trip: wrapped optimizers, counters and iterations restored.
    path = tmp_path / "wgan.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded.d_optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(loaded.g_optimizer, keras.optimizers.LossScaleOptimizer)
    assert loaded.step_counters() == counters
    _assert_counters_match_optimizers(loaded)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded.d_optimizer.dynamic_scale),
        keras.ops.convert_to_numpy(model.d_optimizer.dynamic_scale),
    )

    # StepCheckpoint's store round trip: wrapped optimizers' scales and slots too.
    store = CheckpointStore(tmp_path / "ckpt")
    info = store.save(model)
    fresh = _make_wgan(**kwargs)
    fresh.compile()
    assert fresh.step_counters() == {"d_step": 0, "g_step": 0}
    assert store.restore(fresh, info) == counters["g_step"]
    restored = StateLayout.of(fresh).variables
    for key, value in read_state(info.path).items():
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(restored[key]), value, err_msg=key
        )
    assert fresh.step_counters() == counters
    _assert_counters_match_optimizers(fresh)


def test_skipped_non_finite_step_is_not_counted(policy):
    policy("mixed_float16")
    keras.utils.set_random_seed(0)
    model = _make_wgan()
    # A loss scale of 2**20 overflows float16 gradients: the first updates are
    # skipped, each halving the scale, until the gradients are finite.
    model.compile(
        keras.optimizers.LossScaleOptimizer(
            keras.optimizers.Adam(1e-4), initial_scale=2.0**20
        ),
        keras.optimizers.LossScaleOptimizer(
            keras.optimizers.Adam(1e-4), initial_scale=2.0**20
        ),
    )
    assert isinstance(model.d_optimizer.inner_optimizer, keras.optimizers.Adam)
    calls = 8
    history = model.fit(_data(calls), batch_size=N_CRITIC * BATCH, verbose=0)
    counters = _assert_counters_match_optimizers(model)
    d_skipped = _skipped(model.d_optimizer, 2.0**20)
    g_skipped = _skipped(model.g_optimizer, 2.0**20)
    assert d_skipped > 0 and g_skipped > 0
    assert counters == {
        "d_step": N_CRITIC * calls - d_skipped,
        "g_step": calls - g_skipped,
    }
    assert counters["d_step"] < N_CRITIC * calls
    assert counters["g_step"] < calls
    assert history.history["g_step"] == [counters["g_step"]]
    assert history.history["d_step"] == [counters["d_step"]]
    # Updates were applied once the scale had come down.
    assert counters["d_step"] > 0


def test_mixed_bfloat16_needs_no_loss_scaling(policy):
    policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    model = _make_wgan()
    assert model.generator.compute_dtype == "bfloat16"
    model.compile()
    assert not isinstance(model.d_optimizer, keras.optimizers.LossScaleOptimizer)
    assert not isinstance(model.g_optimizer, keras.optimizers.LossScaleOptimizer)
    steps = 2
    history = model.fit(_data(steps), batch_size=N_CRITIC * BATCH, verbose=0)
    assert np.isfinite(history.history["d_loss"]).all()
    assert np.isfinite(history.history["g_loss"]).all()
    counters = _assert_counters_match_optimizers(model)
    assert counters == {"d_step": N_CRITIC * steps, "g_step": steps}


def test_float32_optimizers_are_not_wrapped_but_wrapped_ones_are_accepted(policy):
    policy("float32")
    model = _make_wgan()
    model.compile()
    assert not isinstance(model.d_optimizer, keras.optimizers.LossScaleOptimizer)
    wrapped = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-4))
    other = _make_wgan()
    other.compile(wrapped, keras.optimizers.Adam(1e-4))
    assert other.d_optimizer is wrapped
    with pytest.raises(ValueError, match="two different optimizer"):
        _make_wgan().compile(
            keras.optimizers.LossScaleOptimizer(wrapped.inner_optimizer),
            wrapped.inner_optimizer,
        )
    assert model.generator.compute_dtype == "float32"
