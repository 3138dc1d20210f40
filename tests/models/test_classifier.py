"""Tests for kerasteps.models.build_image_classifier: shapes, activations, I/O.

The classifier stacks stock Keras layers, which Keras itself tests on every
backend, so these run once, on TensorFlow (no `neutral` marker): on JAX they took
22 s of the JAX run and covered no kerasteps code of its own.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from kerasteps.models import (
    build_image_classifier,
)
from tests.helpers import activation_name, assert_round_trip


# -------------------------------------------------------------------- classifier
def test_classifier_logits_shapes_for_binary_and_multiclass():
    assert build_image_classifier().output_shape == (None, 1)
    two = build_image_classifier(num_classes=2, binary_single_logit=False)
    assert two.output_shape == (None, 2)
    ten = build_image_classifier((28, 28, 1), num_classes=10, filters=(8,))
    assert ten.input_shape == (None, 28, 28, 1)
    assert ten.output_shape == (None, 10)
    for model in (two, ten):
        assert activation_name(model.get_layer("logits")) == "linear"


def test_classifier_rescaling_is_optional():
    model = build_image_classifier(filters=(4,), dense_units=4)
    assert isinstance(model.layers[1], keras.layers.Rescaling)
    assert model.get_layer("rescale").scale == pytest.approx(1 / 255)
    plain = build_image_classifier(filters=(4,), dense_units=4, rescale=None)
    assert not any(isinstance(x, keras.layers.Rescaling) for x in plain.layers)


def test_classifier_trains_on_logits_and_round_trips(tmp_path):
    keras.utils.set_random_seed(0)
    images = np.random.default_rng(0).integers(0, 256, (8, 32, 32, 3)).astype("uint8")
    labels = np.arange(8) % 2
    model = build_image_classifier(filters=(4, 8), dense_units=8, dropout=0.25)
    model.compile(
        "adam",
        keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.BinaryAccuracy(threshold=0.0)],
    )
    history = model.fit(images, labels, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert_round_trip(model, images.astype("float32"), tmp_path)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_classes": 1}, "`num_classes` must be an int >= 2 .*received 1"),
        ({"input_shape": (32, 32)}, r"`input_shape` .*received \(32, 32\)"),
        ({"input_shape": (32, 0, 3)}, r"`input_shape` .*\(32, 0, 3\)"),
        (
            {"input_shape": (8, 8, 3), "filters": (4, 4, 4, 4)},
            r"`input_shape` height and width must be >= 16 .*\(8, 8, 3\)",
        ),
        ({"dropout": 1.0}, r"`dropout` must be a float in \[0, 1\), received 1.0"),
        ({"rescale": 0}, "`rescale` .*received 0"),
        ({"filters": ()}, None),  # no conv blocks is allowed
    ],
)
def test_classifier_validates_arguments(kwargs, message):
    if message is None:
        assert build_image_classifier(**kwargs).output_shape == (None, 1)
        return
    with pytest.raises(ValueError, match=message):
        build_image_classifier(**kwargs)
