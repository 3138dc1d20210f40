"""Tests for the GAN builders of kerasteps.models (points and images): shapes,
activations, .keras I/O.

The builders stack stock Keras layers, which Keras itself tests on every backend,
so these run once, on TensorFlow (no `neutral` marker): on JAX, compiling the two
image networks took 25 s of the JAX run and covered no kerasteps code of its own.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from kerasteps.models import (
    build_image_critic,
    build_image_generator,
    build_point_critic,
    build_point_generator,
)
from tests.helpers import activation_name, assert_round_trip, dense_layers


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
    assert [activation_name(d) for d in dense_layers(critic)] == ["relu"] * 3 + [
        "linear"
    ]
    assert [d.units for d in dense_layers(generator)] == [128, 128, 128, 2]
    latent = np.random.default_rng(1).normal(size=(6, 8)).astype("float32")
    points = generator.predict(latent, verbose=0)
    assert critic.predict(points, verbose=0).shape == (6, 1)
    assert_round_trip(generator, latent, tmp_path)
    assert_round_trip(critic, points, tmp_path)
    with pytest.raises(
        ValueError, match="`latent_dim` must be an int >= 1, received 0"
    ):
        build_point_generator(0)


def test_point_networks_given_data_work_in_its_standardized_units(tmp_path):
    """With `data`, the critic sees `(x - mean) / std` and the generator's output is
    mapped back by the same mean and one std over all coordinates."""
    rng = np.random.default_rng(0)
    x = rng.normal([10.0, -4.0, 2.0], [3.0, 1.0, 2.0], size=(5000, 3))
    mean, std = x.mean(axis=0), np.sqrt(((x - x.mean(axis=0)) ** 2).mean())
    generator = build_point_generator(4, widths=(8,), data=x)
    critic = build_point_critic(widths=(8,), data=x)
    assert generator.output_shape == (None, 3) and critic.input_shape == (None, 3)
    latent = rng.normal(size=(6, 4)).astype("float32")
    inner = keras.Model(generator.input, generator.get_layer("output").output)
    np.testing.assert_allclose(
        generator.predict(latent, verbose=0),
        inner.predict(latent, verbose=0) * std + mean,
        rtol=1e-5,
    )
    points = x[:6].astype("float32")
    standardized = critic.get_layer("standardize")(points)
    np.testing.assert_allclose(standardized, (points - mean) / std, rtol=1e-4)
    assert_round_trip(generator, latent, tmp_path)
    assert_round_trip(critic, points, tmp_path)


@pytest.mark.parametrize(
    "builder, kwargs, message",
    [
        (build_point_critic, {"data": np.zeros((5, 2))}, "one point repeated"),
        (build_point_critic, {"data": np.ones(5)}, r"an array of shape \(5,\)"),
        (build_point_critic, {"data": [[np.nan, 1.0]] * 3}, "finite values"),
        (
            build_point_critic,
            {"input_dim": 3, "data": np.eye(2)},
            "`data` holds points of 2 dimensions, `input_dim` is 3",
        ),
        (
            build_point_generator,
            {"output_dim": 3, "data": np.eye(2)},
            "`data` holds points of 2 dimensions, `output_dim` is 3",
        ),
    ],
)
def test_point_builders_refuse_bad_data(builder, kwargs, message):
    with pytest.raises(ValueError, match=message):
        builder(**kwargs)


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
