"""`build_image_classifier`: a small convolutional image classifier with logits out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras

from kerasteps._validate import check_image_shape, check_int, check_ints, check_name

__all__ = ["build_image_classifier"]


def build_image_classifier(
    input_shape: Sequence[int] = (32, 32, 3),
    num_classes: int = 2,
    *,
    filters: Sequence[int] = (32, 64),
    dense_units: int = 64,
    dropout: float = 0.0,
    rescale: float | None = 1.0 / 255,
    binary_single_logit: bool = True,
    name: str = "image_classifier",
) -> keras.Model:
    """Builds a small convolutional image classifier that outputs logits.

    Layers: optional `Rescaling(rescale)`, then for each entry `f` of `filters` a
    block `Conv2D(f, 3, "same", relu) -> Conv2D(f, 3, "same", relu) ->
    MaxPooling2D(2)`, then `GlobalAveragePooling2D -> Dense(dense_units, relu) ->
    Dropout(dropout) -> Dense(logits)` with no activation.

    Outputs are **logits**; pair them with a loss built with `from_logits=True`:

    - binary (`num_classes=2`) with `binary_single_logit=True` (default): shape
      `(batch, 1)`, one logit for the positive class; use
      `keras.losses.BinaryCrossentropy(from_logits=True)` and
      `keras.metrics.BinaryAccuracy(threshold=0.0)`; labels are 0/1 of shape
      `(batch,)` or `(batch, 1)`;
    - binary with `binary_single_logit=False`, and multi-class
      (`num_classes > 2`): shape `(batch, num_classes)`; use
      `keras.losses.SparseCategoricalCrossentropy(from_logits=True)` with integer
      labels (or `CategoricalCrossentropy(from_logits=True)` with one-hot ones).

    Input shape: `(batch, height, width, channels)` = `(batch, *input_shape)`,
    pixel values in [0, 255] with the default `rescale=1/255` (pass
    `rescale=None` for inputs that are already scaled).

    Args:
        input_shape: `(height, width, channels)`, default `(32, 32, 3)`. Height
            and width must be at least `2 ** len(filters)` (one 2x2 pooling per
            block).
        num_classes: Int >= 2, the number of classes. Default 2.
        filters: Sequence of ints >= 1, the filters of each convolution block.
            Default `(32, 64)`.
        dense_units: Int >= 1, units of the hidden dense layer. Default 64.
        dropout: Float in [0, 1), dropout rate before the logits. Default 0.
        rescale: Float factor of the first `Rescaling` layer, or `None` for no
            rescaling. Default `1/255`.
        binary_single_logit: Bool, default True. With `num_classes=2`, output one
            logit (True) or two logits (False). Ignored for `num_classes > 2`.
        name: Name of the model. Default `"image_classifier"`.

    Returns:
        An uncompiled functional `keras.Model`.

    Raises:
        ValueError: if `input_shape` is not 3 positive ints or too small for the
            pooling, `num_classes` < 2, `dropout` is outside [0, 1), `rescale` is
            not a finite non-zero number, or another argument is out of range.

    Example:

    >>> import numpy as np
    >>> from kerasteps.models import build_image_classifier
    >>> model = build_image_classifier((32, 32, 3), num_classes=10)
    >>> model.output_shape
    (None, 10)
    >>> build_image_classifier((28, 28, 1), num_classes=2).output_shape
    (None, 1)
    """
    height, width, channels = check_image_shape("input_shape", input_shape)
    _check_num_classes(num_classes)
    filters = check_ints("filters", filters)
    dense_units = check_int("dense_units", dense_units)
    _check_dropout_and_rescale(dropout, rescale)
    smallest = 2 ** len(filters)  # one 2x2 pooling per block
    if height < smallest or width < smallest:
        raise ValueError(
            f"`input_shape` height and width must be >= {smallest} for "
            f"{len(filters)} pooling blocks (`filters={filters!r}`), received "
            f"{tuple(input_shape)!r}."
        )
    name = check_name(name)
    outputs_count = 1 if num_classes == 2 and binary_single_logit else num_classes

    inputs = keras.Input(shape=(height, width, channels), name="images")
    x = inputs
    if rescale is not None:
        x = keras.layers.Rescaling(float(rescale), name="rescale")(x)
    for block, count in enumerate(filters):
        prefix = f"block{block}"
        for conv in range(2):
            x = keras.layers.Conv2D(
                count, 3, padding="same", activation="relu", name=f"{prefix}_conv{conv}"
            )(x)
        x = keras.layers.MaxPooling2D(2, name=f"{prefix}_pool")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    x = keras.layers.Dense(dense_units, activation="relu", name="hidden")(x)
    if dropout > 0:
        x = keras.layers.Dropout(float(dropout), name="dropout")(x)
    outputs = keras.layers.Dense(outputs_count, name="logits")(x)
    return keras.Model(inputs, outputs, name=name)


def _check_num_classes(num_classes: Any) -> None:
    if (
        isinstance(num_classes, bool)
        or not isinstance(num_classes, int)
        or num_classes < 2
    ):
        raise ValueError(
            "`num_classes` must be an int >= 2 (use 2 for a binary classifier), "
            f"received {num_classes!r}."
        )


def _check_dropout_and_rescale(dropout: Any, rescale: Any) -> None:
    if (
        isinstance(dropout, bool)
        or not isinstance(dropout, (int, float))
        or not 0.0 <= dropout < 1.0
    ):
        raise ValueError(f"`dropout` must be a float in [0, 1), received {dropout!r}.")
    if rescale is not None and (
        isinstance(rescale, bool)
        or not isinstance(rescale, (int, float))
        or not math.isfinite(rescale)
        or rescale == 0
    ):
        raise ValueError(
            f"`rescale` must be a finite non-zero number or None, received {rescale!r}."
        )
