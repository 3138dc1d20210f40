"""Tests for kerasteps.models.build_mlp: shapes, activations, .keras I/O."""

from __future__ import annotations

import numpy as np
import pytest

from kerasteps.models import (
    build_mlp,
)
from tests.helpers import activation_name, assert_round_trip, dense_layers

pytestmark = pytest.mark.neutral


# --------------------------------------------------------------------------- MLP
def test_mlp_seed_case_is_a_three_layer_sigmoid_spectrum_mapper(tmp_path):
    n_fft = 16
    model = build_mlp(
        n_fft,
        widths=(n_fft, n_fft),
        output_dim=n_fft,
        activation="sigmoid",
        output_activation="sigmoid",
    )
    assert model.input_shape == (None, n_fft)
    assert model.output_shape == (None, n_fft)
    layers = dense_layers(model)
    assert [layer.units for layer in layers] == [n_fft, n_fft, n_fft]
    assert [activation_name(layer) for layer in layers] == ["sigmoid"] * 3
    spectra = np.random.default_rng(0).normal(size=(5, n_fft)).astype("float32")
    outputs = model.predict(spectra, verbose=0)
    assert outputs.shape == (5, n_fft)
    assert np.all((outputs > 0) & (outputs < 1))
    assert_round_trip(model, spectra, tmp_path)


def test_mlp_defaults_and_linear_model():
    model = build_mlp(3)
    layers = dense_layers(model)
    assert [layer.units for layer in layers] == [64, 64, 1]
    assert [activation_name(layer) for layer in layers] == ["relu", "relu", "linear"]
    assert [layer.name for layer in layers] == ["hidden_0", "hidden_1", "output"]
    assert model.name == "mlp"

    linear = build_mlp(4, widths=(), output_dim=2, name="linear")
    assert [layer.units for layer in dense_layers(linear)] == [2]
    assert linear.output_shape == (None, 2)
    assert linear.name == "linear"


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"input_dim": 0}, ValueError, "`input_dim` must be an int >= 1, received 0"),
        (
            {"input_dim": 2.5},
            TypeError,
            "`input_dim` must be an int >= 1, received 2.5",
        ),
        ({"input_dim": 4, "widths": (8, 0)}, ValueError, r"`widths` .*\(8, 0\)"),
        ({"input_dim": 4, "widths": "64"}, ValueError, "`widths` .*received '64'"),
        ({"input_dim": 4, "output_dim": -1}, ValueError, "`output_dim` .*received -1"),
        ({"input_dim": 4, "activation": "nope"}, ValueError, "`activation` .*'nope'"),
        (
            {"input_dim": 4, "output_activation": "bad"},
            ValueError,
            "`output_activation` .*'bad'",
        ),
        ({"input_dim": 4, "name": ""}, ValueError, "`name` .*received ''"),
    ],
)
def test_mlp_rejects_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        build_mlp(**kwargs)
