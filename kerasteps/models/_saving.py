"""`kerasteps.load_model`: load `.keras` files that hold kerasteps models (private)."""

from __future__ import annotations

import os
from typing import Any


def load_model(
    filepath: str | os.PathLike,
    custom_objects: dict[str, Any] | None = None,
    compile: bool = True,
    safe_mode: bool = True,
) -> Any:
    """Loads a `.keras` file, knowing kerasteps's saved classes (`WGAN`).

    `keras.saving.load_model` finds a registered class only once the module that
    registers it has been imported; Keras imports only Keras's own modules by
    itself. This imports `kerasteps.models` (which registers `kerasteps>WGAN`) and
    then calls `keras.saving.load_model`; a model without kerasteps classes loads
    exactly as with Keras.

    Args:
        filepath: The `.keras` file, e.g. a recipe's `LOG_DIR/run-1/model.keras`.
        custom_objects: Optional dict of your own classes, as for Keras.
        compile: Bool, default True: compile the model as it was saved.
        safe_mode: Bool, default True: refuse unsafe lambda deserialization.

    Returns:
        The `keras.Model`, with its step counters as saved.

    Example:

    >>> import os, tempfile, keras
    >>> import kerasteps
    >>> from kerasteps.models import WGAN, build_point_critic, build_point_generator
    >>> gan = WGAN(build_point_generator(2), build_point_critic(2), latent_dim=2)
    >>> gan.compile(keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3))
    >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> gan.save(path)
    >>> type(kerasteps.load_model(path)).__name__
    'WGAN'
    """
    import keras

    import kerasteps.models  # noqa: F401 - registers kerasteps's classes

    return keras.saving.load_model(
        filepath, custom_objects=custom_objects, compile=compile, safe_mode=safe_mode
    )
