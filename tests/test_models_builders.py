"""Tests for the model builders of kerasteps.models: shapes, activations, .keras I/O."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from kerasteps.models import (
    build_image_classifier,
    build_image_critic,
    build_image_generator,
    build_mlp,
    build_point_critic,
    build_point_generator,
)

pytestmark = pytest.mark.neutral


def dense_layers(model: keras.Model) -> list[keras.layers.Dense]:
    return [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]


def activation_name(layer: keras.layers.Layer) -> str:
    return keras.activations.serialize(layer.activation)


def assert_round_trip(model: keras.Model, inputs: np.ndarray, tmp_path) -> None:
    """Saves `model` to .keras, loads it back, and compares predictions."""
    path = tmp_path / f"{model.name}.keras"
    expected = model.predict(inputs, verbose=0)
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.name == model.name
    assert loaded.input_shape == model.input_shape
    assert loaded.output_shape == model.output_shape
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), expected, atol=1e-6)


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


# ---------------------------------------------------------------------- GAN nets
def test_point_generator_and_critic(tmp_path):
    generator = build_point_generator(8)
    critic = build_point_critic()
    assert generator.input_shape == (None, 8)
    assert generator.output_shape == (None, 2)
    assert critic.input_shape == (None, 2)
    assert critic.output_shape == (None, 1)
    assert activation_name(dense_layers(generator)[-1]) == "linear"
    assert activation_name(dense_layers(critic)[-1]) == "linear"
    assert activation_name(dense_layers(critic)[0]) == "leaky_relu"
    latent = np.random.default_rng(1).normal(size=(6, 8)).astype("float32")
    points = generator.predict(latent, verbose=0)
    assert critic.predict(points, verbose=0).shape == (6, 1)
    assert_round_trip(generator, latent, tmp_path)
    assert_round_trip(critic, points, tmp_path)
    with pytest.raises(
        ValueError, match="`latent_dim` must be an int >= 1, received 0"
    ):
        build_point_generator(0)


@pytest.mark.parametrize("image_shape", [(28, 28, 1), (32, 32, 3)])
def test_image_generator_and_critic(image_shape, tmp_path):
    generator = build_image_generator(16, image_shape, base_filters=4)
    critic = build_image_critic(image_shape, base_filters=4)
    assert generator.input_shape == (None, 16)
    assert generator.output_shape == (None, *image_shape)
    assert critic.input_shape == (None, *image_shape)
    assert critic.output_shape == (None, 1)
    assert activation_name(generator.get_layer("images")) == "tanh"
    assert activation_name(critic.get_layer("score")) == "linear"
    assert not any(
        isinstance(layer, keras.layers.BatchNormalization) for layer in critic.layers
    )
    assert any(
        isinstance(layer, keras.layers.LayerNormalization) for layer in critic.layers
    )

    latent = np.random.default_rng(2).normal(size=(3, 16)).astype("float32") * 10
    images = generator.predict(latent, verbose=0)
    assert images.shape == (3, *image_shape)
    assert images.min() >= -1.0 and images.max() <= 1.0

    # Without batch norm, examples never interact, even in training mode: the
    # per-example gradient penalty of WGAN-GP stays valid.
    batch = critic(images, training=True)
    one = critic(images[:1], training=True)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(batch)[:1],
        keras.ops.convert_to_numpy(one),
        atol=1e-5,
    )

    assert_round_trip(generator, latent, tmp_path)
    assert_round_trip(critic, images, tmp_path)


def test_image_critic_without_normalization():
    critic = build_image_critic((28, 28, 3), base_filters=4, normalization=None)
    assert not any(
        isinstance(layer, keras.layers.LayerNormalization) for layer in critic.layers
    )
    assert critic.output_shape == (None, 1)


@pytest.mark.parametrize(
    "builder, kwargs, message",
    [
        (
            build_image_generator,
            {"image_shape": (64, 64, 3)},
            r"`image_shape` must be \(28, 28, C\) or \(32, 32, C\), "
            r"received \(64, 64, 3\)",
        ),
        (build_image_generator, {"image_shape": (28, 32, 1)}, r"\(28, 32, 1\)"),
        (build_image_generator, {"image_shape": (28, 28)}, r"received \(28, 28\)"),
        (build_image_generator, {"latent_dim": 0}, "`latent_dim` .*received 0"),
        (build_image_critic, {"image_shape": (32, 32, 0)}, r"\(32, 32, 0\)"),
        (build_image_critic, {"base_filters": 0}, "`base_filters` .*received 0"),
        (
            build_image_critic,
            {"normalization": "batch"},
            "`normalization` must be 'layer' or None .*received 'batch'",
        ),
    ],
)
def test_image_gan_builders_validate_arguments(builder, kwargs, message):
    with pytest.raises(ValueError, match=message):
        builder(**kwargs)
