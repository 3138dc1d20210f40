"""Generators and critics for `kerasteps.models.WGAN`: 2-D points and DCGAN images.

- `build_point_generator` / `build_point_critic`: MLPs for toy 2-D point clouds
  (rings, spirals, Gaussian mixtures).
- `build_image_generator` / `build_image_critic`: DCGAN-style convolutional
  networks for 28x28xC (MNIST-like) and 32x32xC (CIFAR-like) images.

Conventions, as `WGAN` expects them: a generator maps latent vectors of shape
`(batch, latent_dim)` to samples; a critic maps samples to one unbounded score of
shape `(batch, 1)` with **no activation** (a Wasserstein critic is not a
classifier). Image generators end in `tanh`, so real images must be scaled to
[-1, 1] too (`x / 127.5 - 1` for uint8 pixels). Critics use **no batch
normalization**: the WGAN-GP gradient penalty is computed per example, which batch
statistics would break, so the image critic uses layer normalization (or none).

All builders return plain functional Keras models made of built-in layers: they
save to and load from `.keras` files without custom objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import keras
import numpy as np

from kerasteps._validate import (
    check_activation,
    check_image_shape,
    check_int,
    check_ints,
    check_name,
)

__all__ = [
    "build_image_critic",
    "build_image_generator",
    "build_point_critic",
    "build_point_generator",
]

#: Image heights/widths the DCGAN builders support, and the spatial size of the
#: generator's first feature map for each (upsampled twice by 2).
_BASE_SIZE = {28: 7, 32: 8}


#: Hidden layer widths of both point networks: three ReLU layers of 128 units,
#: measured on PacGAN's ring and grid (docs/benchmarks.md).
POINT_WIDTHS = (128, 128, 128)


class _Scaling(NamedTuple):
    """Points' mean per coordinate, and one standard deviation over all of them."""

    mean: list[float]
    std: float


def _dim_and_scaling(
    data: Any, dim: int | None, dim_name: str
) -> tuple[int, _Scaling | None]:
    """The points' dimension (`dim`, else the data's, else 2) and the scaling of
    `data` (None for None), checked: finite points `(N, d)`, N >= 2, not all
    equal, with `d == dim` where `dim` is given."""
    if data is None:
        return check_int(dim_name, 2 if dim is None else dim), None
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2 or not np.isfinite(x).all():
        raise ValueError(
            "`data` must be at least 2 points of shape (N, d) with finite values, "
            f"received an array of shape {x.shape}."
        )
    if dim is not None and x.shape[1] != dim:
        raise ValueError(
            f"`data` holds points of {x.shape[1]} dimensions, `{dim_name}` is {dim}."
        )
    mean = x.mean(axis=0)
    std = float(np.sqrt(((x - mean) ** 2).mean()))
    if std == 0:
        raise ValueError("`data` holds one point repeated: it has no scale.")
    dim = check_int(dim_name, x.shape[1] if dim is None else dim)
    return dim, _Scaling([float(m) for m in mean], std)


def _point_mlp(
    input_dim: int,
    widths: Sequence[int],
    output_dim: int,
    activation: Any,
    name: str,
    before: keras.Layer | None = None,
    after: keras.Layer | None = None,
) -> keras.Model:
    """An MLP of ReLU (or `activation`) layers of `widths` and a linear output,
    with `before` and `after` around it, as one functional model."""
    widths = check_ints("widths", widths)
    check_activation("activation", activation)
    inputs = keras.Input(shape=(input_dim,), name="inputs")
    x = inputs if before is None else before(inputs)
    for index, width in enumerate(widths):
        x = keras.layers.Dense(width, activation=activation, name=f"hidden_{index}")(x)
    x = keras.layers.Dense(output_dim, name="output")(x)
    return keras.Model(inputs, x if after is None else after(x), name=check_name(name))


def build_point_generator(
    latent_dim: int = 2,
    *,
    widths: Sequence[int] = POINT_WIDTHS,
    output_dim: int | None = None,
    activation: Any = "relu",
    data: Any = None,
    name: str = "point_generator",
) -> keras.Model:
    """Builds an MLP generator of low-dimensional points (2-D by default).

    With `data`, the generator works in standardized units: its last layer, a
    `Rescaling`, maps its output to the data's mean and standard deviation (one
    over all coordinates, so the shapes keep their proportions): the networks
    see numbers of order 1 at any scale. Pass the same `data` to
    `build_point_critic`. (A WGAN's gradient penalty is still in the data's
    own units.)

    Input shape: `(batch, latent_dim)`. Output shape: `(batch, output_dim)`,
    unbounded (linear output layer).

    Args:
        latent_dim: Int >= 1, the size of the latent vectors. Default 2.
        widths: Sequence of ints >= 1, the hidden layer widths. Default
            `(128, 128, 128)`.
        output_dim: Int >= 1, the dimension of a point, or None (the default)
            for the data's (2 without `data`).
        activation: Activation of the hidden layers. Default `"relu"`.
        data: Optional training points `(N, d)`, for the output's scale.
            Defaults to `None`: no rescaling.
        name: Name of the model. Default `"point_generator"`.

    Returns:
        An uncompiled functional `keras.Model`.

    Raises:
        ValueError: if a size is < 1, the activation is unknown, or `data` is
            not finite points `(N, d)` (with `d == output_dim` if given).

    Example:

    >>> import numpy as np
    >>> from kerasteps.models import build_point_generator
    >>> x = np.random.default_rng(0).normal(5.0, 3.0, size=(1000, 2))
    >>> generator = build_point_generator(2, data=x)
    >>> generator.output_shape, generator.layers[-1].name
    ((None, 2), 'to_data_scale')
    """
    latent_dim = check_int("latent_dim", latent_dim)
    output_dim, scaling = _dim_and_scaling(data, output_dim, "output_dim")
    after = None
    if scaling is not None:
        after = keras.layers.Rescaling(
            scaling.std, offset=scaling.mean, name="to_data_scale"
        )
    return _point_mlp(latent_dim, widths, output_dim, activation, name, after=after)


def build_point_critic(
    input_dim: int | None = None,
    *,
    widths: Sequence[int] = POINT_WIDTHS,
    activation: Any = "relu",
    data: Any = None,
    name: str = "point_critic",
) -> keras.Model:
    """Builds an MLP critic of low-dimensional points: one unbounded score each.

    No batch normalization and no output activation, as WGAN and WGAN-GP require.
    With `data`, the critic's first layer, a `Rescaling`, standardizes the points
    by the data's mean and standard deviation (one over all coordinates).

    Input shape: `(batch, input_dim)`. Output shape: `(batch, 1)`, linear.

    Args:
        input_dim: Int >= 1, the dimension of a point, or None (the default)
            for the data's (2 without `data`).
        widths: Sequence of ints >= 1, the hidden layer widths. Default
            `(128, 128, 128)`.
        activation: Activation of the hidden layers. Default `"relu"`.
        data: Optional training points `(N, d)`, for the input's scale.
            Defaults to `None`: no rescaling.
        name: Name of the model. Default `"point_critic"`.

    Returns:
        An uncompiled functional `keras.Model`.

    Raises:
        ValueError: if a size is < 1, the activation is unknown, or `data` is
            not finite points `(N, d)` (with `d == input_dim` if given).

    Example:

    >>> from kerasteps.models import build_point_critic
    >>> build_point_critic().output_shape
    (None, 1)
    """
    input_dim, scaling = _dim_and_scaling(data, input_dim, "input_dim")
    before = None
    if scaling is not None:
        before = keras.layers.Rescaling(
            1.0 / scaling.std,
            offset=[-m / scaling.std for m in scaling.mean],
            name="standardize",
        )
    return _point_mlp(input_dim, widths, 1, activation, name, before=before)


def _check_gan_image_shape(value: Any) -> tuple[int, int, int]:
    height, width, channels = check_image_shape("image_shape", value)
    if height != width or height not in _BASE_SIZE:
        raise ValueError(
            "`image_shape` must be (28, 28, C) or (32, 32, C), "
            f"received {tuple(value)!r}."
        )
    return height, width, channels


def build_image_generator(
    latent_dim: int = 128,
    image_shape: Sequence[int] = (28, 28, 1),
    *,
    base_filters: int = 64,
    name: str = "image_generator",
) -> keras.Model:
    """Builds a DCGAN generator of 28x28xC or 32x32xC images in [-1, 1].

    Layers, for an image of size `s = 4 * b` (`b` = 7 or 8) and `f = base_filters`:
    `Dense(b*b*4f) -> BatchNorm -> ReLU -> Reshape(b, b, 4f) ->
    Conv2DTranspose(2f, 4, stride 2) -> BatchNorm -> ReLU ->
    Conv2DTranspose(f, 4, stride 2) -> BatchNorm -> ReLU -> Conv2D(C, 3, tanh)`.
    (Batch normalization is fine in the generator; only the critic must not
    use it.)

    Input shape: `(batch, latent_dim)`. Output shape: `(batch, *image_shape)`,
    values in [-1, 1].

    Args:
        latent_dim: Int >= 1, the size of the latent vectors. Default 128.
        image_shape: `(28, 28, C)` or `(32, 32, C)` with `C >= 1` channels.
            Default `(28, 28, 1)`.
        base_filters: Int >= 1, the filters of the last upsampling layer (the
            first ones have 4x and 2x as many). Default 64.
        name: Name of the model. Default `"image_generator"`.

    Returns:
        An uncompiled functional `keras.Model`.

    Raises:
        ValueError: if `image_shape` is not `(28, 28, C)` or `(32, 32, C)`, or a
            size is < 1.

    Example:

    >>> from kerasteps.models import build_image_generator
    >>> build_image_generator(64, (32, 32, 3), base_filters=8).output_shape
    (None, 32, 32, 3)
    """
    latent_dim = check_int("latent_dim", latent_dim)
    height, width, channels = _check_gan_image_shape(image_shape)
    filters = check_int("base_filters", base_filters)
    base = _BASE_SIZE[height]

    inputs = keras.Input(shape=(latent_dim,), name="latent")
    units = base * base * 4 * filters
    x = keras.layers.Dense(units, use_bias=False, name="project")(inputs)
    x = keras.layers.BatchNormalization(name="project_bn")(x)
    x = keras.layers.ReLU(name="project_relu")(x)
    x = keras.layers.Reshape((base, base, 4 * filters), name="reshape")(x)
    for index, count in enumerate((2 * filters, filters)):
        x = keras.layers.Conv2DTranspose(
            count, 4, strides=2, padding="same", use_bias=False, name=f"up{index}"
        )(x)
        x = keras.layers.BatchNormalization(name=f"up{index}_bn")(x)
        x = keras.layers.ReLU(name=f"up{index}_relu")(x)
    outputs = keras.layers.Conv2D(
        channels, 3, padding="same", activation="tanh", name="images"
    )(x)
    return keras.Model(inputs, outputs, name=check_name(name))


def build_image_critic(
    image_shape: Sequence[int] = (28, 28, 1),
    *,
    base_filters: int = 64,
    normalization: str | None = "layer",
    name: str = "image_critic",
) -> keras.Model:
    """Builds a DCGAN-style critic of 28x28xC or 32x32xC images, without batch norm.

    Layers, with `f = base_filters`: `Conv2D(f, 4, stride 2) -> LeakyReLU(0.2) ->
    Conv2D(2f, 4, stride 2) -> [LayerNorm] -> LeakyReLU(0.2) ->
    Conv2D(4f, 4, stride 2) -> [LayerNorm] -> LeakyReLU(0.2) -> Flatten ->
    Dense(1)`. Layer normalization normalizes each example over its whole feature
    map (height, width and channels), so examples never interact, as the WGAN-GP
    gradient penalty requires.

    Input shape: `(batch, *image_shape)`, images scaled to [-1, 1]. Output shape:
    `(batch, 1)`, an unbounded score (no activation).

    Args:
        image_shape: `(28, 28, C)` or `(32, 32, C)` with `C >= 1` channels.
            Default `(28, 28, 1)`.
        base_filters: Int >= 1, the filters of the first convolution (then 2x and
            4x as many). Default 64.
        normalization: `"layer"` (default) for layer normalization, or `None` for
            none (e.g. for the original WGAN with weight clipping). Batch
            normalization is refused.
        name: Name of the model. Default `"image_critic"`.

    Returns:
        An uncompiled functional `keras.Model`.

    Raises:
        ValueError: if `image_shape` is not `(28, 28, C)` or `(32, 32, C)`,
            `normalization` is not `"layer"` or `None`, or a size is < 1.

    Example:

    >>> from kerasteps.models import build_image_critic
    >>> build_image_critic((28, 28, 1), base_filters=8).output_shape
    (None, 1)
    """
    _check_gan_image_shape(image_shape)
    filters = check_int("base_filters", base_filters)
    if normalization not in ("layer", None):
        raise ValueError(
            "`normalization` must be 'layer' or None (a WGAN-GP critic must not "
            f"use batch normalization), received {normalization!r}."
        )

    inputs = keras.Input(shape=tuple(image_shape), name="images")
    x = inputs
    for index, count in enumerate((filters, 2 * filters, 4 * filters)):
        x = keras.layers.Conv2D(
            count, 4, strides=2, padding="same", name=f"conv{index}"
        )(x)
        if index > 0 and normalization == "layer":
            x = keras.layers.LayerNormalization(axis=(1, 2, 3), name=f"conv{index}_ln")(
                x
            )
        x = keras.layers.LeakyReLU(0.2, name=f"conv{index}_lrelu")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    outputs = keras.layers.Dense(1, name="score")(x)
    return keras.Model(inputs, outputs, name=check_name(name))
