"""Tests for kerasteps.steps: the global step and the step-counter protocol."""

import keras
import numpy as np
import pytest

import kerasteps
from kerasteps import steps as steps_lib
from tests.helpers import tiny_data, tiny_model

pytestmark = pytest.mark.neutral


def test_global_step_counts_updates_from_zero():
    model = tiny_model()
    assert kerasteps.global_step(model) == 0
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert kerasteps.global_step(model) == 10
    model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert kerasteps.global_step(model) == 20
    assert kerasteps.step_counters(model) == {"step": 20}


def test_global_step_is_saved_with_the_model(tmp_path):
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert kerasteps.global_step(loaded) == 10


def test_uncompiled_model_is_refused_with_its_name():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="raw")
    with pytest.raises(ValueError, match="'raw' is not compiled"):
        kerasteps.global_step(model)


def test_not_a_model_is_refused():
    with pytest.raises(TypeError, match="Expected a keras.Model .* received int"):
        kerasteps.global_step(3)


class TwoCounterModel(keras.Model):
    """A model following the step-counter protocol, as a GAN would."""

    kerasteps_global_counter = "g_step"

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.d_step = self.add_weight(
            shape=(), dtype="int64", initializer="zeros", trainable=False, name="d_step"
        )
        self.g_step = self.add_weight(
            shape=(), dtype="int64", initializer="zeros", trainable=False, name="g_step"
        )

    def call(self, x):
        return self.dense(x)

    def kerasteps_counters(self):
        return {"d_step": self.d_step, "g_step": self.g_step}


def test_protocol_model_names_its_global_counter():
    model = TwoCounterModel()
    model.d_step.assign(15)
    model.g_step.assign(3)
    assert kerasteps.step_counters(model) == {"d_step": 15, "g_step": 3}
    assert kerasteps.global_step(model) == 3
    assert steps_lib.global_step_name(model) == "g_step"
    assert steps_lib.step_optimizers(model) == {}


def test_protocol_model_with_unknown_global_counter_is_refused():
    model = TwoCounterModel()
    model.kerasteps_global_counter = "steps"
    with pytest.raises(ValueError, match="'steps', which is not one of its counters"):
        kerasteps.global_step(model)


def test_plain_model_optimizer_is_reported_for_learning_rates():
    model = tiny_model()
    assert list(steps_lib.step_optimizers(model)) == [""]
    assert np.isclose(float(model.optimizer.learning_rate), 0.05)
