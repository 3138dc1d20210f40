"""`build_mlp`: a configurable dense network, as a plain functional Keras model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras

from kerasteps._validate import check_activation, check_int, check_ints, check_name

__all__ = ["build_mlp"]


def build_mlp(
    input_dim: int,
    widths: Sequence[int] = (64, 64),
    output_dim: int = 1,
    activation: Any = "relu",
    output_activation: Any = None,
    name: str = "mlp",
) -> keras.Model:
    """Builds a dense multi-layer perceptron as a functional `keras.Model`.

    The model is `Input(input_dim) -> Dense(widths[0], activation) -> ... ->
    Dense(output_dim, output_activation)`, with layers named `hidden_0`,
    `hidden_1`, ... and `output`. It uses only built-in layers, so it saves to
    and loads from `.keras` files without custom objects.

    The seed case, a 3-layer sigmoid network that maps an `n_fft`-point spectrum
    to another `n_fft`-point spectrum (two hidden layers of `n_fft` units, then
    the output layer):

    ```python
    model = build_mlp(
        n_fft,
        widths=(n_fft, n_fft),
        output_dim=n_fft,
        activation="sigmoid",
        output_activation="sigmoid",
    )
    ```

    Input shape: `(batch, input_dim)`. Output shape: `(batch, output_dim)`.

    Args:
        input_dim: Int >= 1, the number of input features.
        widths: Sequence of ints >= 1, the units of each hidden layer; empty for a
            single linear (or `output_activation`) layer. Default `(64, 64)`.
        output_dim: Int >= 1, the number of outputs. Default 1.
        activation: Activation of the hidden layers, any `keras.activations.get`
            identifier (`"relu"`, `"sigmoid"`, `"leaky_relu"`, a callable).
            Default `"relu"`.
        output_activation: Activation of the output layer; `None` (default) for
            a linear output (regression values, logits, a critic score).
        name: Name of the model. Default `"mlp"`.

    Returns:
        An uncompiled functional `keras.Model`.

    Raises:
        ValueError: if a dimension or width is < 1, `widths` is not a sequence,
            an activation is unknown, or `name` is empty.
        TypeError: if `input_dim` or `output_dim` is not an int.

    Example:

    >>> from kerasteps.models import build_mlp
    >>> n_fft = 16
    >>> model = build_mlp(n_fft, widths=(n_fft, n_fft), output_dim=n_fft,
    ...                   activation="sigmoid", output_activation="sigmoid")
    >>> model.output_shape, len(model.layers)  # Input + 3 dense layers
    ((None, 16), 4)
    """
    input_dim = check_int("input_dim", input_dim)
    widths = check_ints("widths", widths)
    output_dim = check_int("output_dim", output_dim)
    check_activation("activation", activation)
    check_activation("output_activation", output_activation)
    name = check_name(name)

    inputs = keras.Input(shape=(input_dim,), name="inputs")
    x = inputs
    for index, width in enumerate(widths):
        x = keras.layers.Dense(width, activation=activation, name=f"hidden_{index}")(x)
    outputs = keras.layers.Dense(
        output_dim, activation=output_activation, name="output"
    )(x)
    return keras.Model(inputs, outputs, name=name)
