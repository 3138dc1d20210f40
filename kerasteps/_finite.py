"""The one finiteness check of kerasteps (private).

Used wherever a state must be finite before it is kept: a checkpoint is never written
(nor restored) with a NaN or an infinity in its weights or optimizer state, whatever
guard callbacks are present, and `StopOnNonFinite` keeps only finite snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import keras
import numpy as np

__all__ = ["first_non_finite", "first_non_finite_array"]


def _name(variable: Any) -> str:
    return str(getattr(variable, "path", None) or getattr(variable, "name", "?"))


def first_non_finite(variables: Iterable[Any]) -> str | None:
    """Returns the path of the first float variable holding a NaN or inf, else None.

    The check runs on the device (one reduction per variable) and reads back one
    boolean per variable.

    Args:
        variables: Keras variables (integer ones, such as counters, are skipped).

    Example:

    >>> import keras, numpy as np
    >>> from kerasteps._finite import first_non_finite
    >>> good = keras.Variable(np.ones(3), name="good")
    >>> bad = keras.Variable(np.array([1.0, np.nan]), name="bad")
    >>> first_non_finite([good]), first_non_finite([good, bad])
    (None, 'bad')
    """
    floats = [
        v
        for v in variables
        if np.dtype(keras.backend.standardize_dtype(v.dtype)).kind == "f"
    ]
    if not floats:
        return None
    checks = keras.ops.stack([keras.ops.all(keras.ops.isfinite(v)) for v in floats])
    finite = np.asarray(keras.ops.convert_to_numpy(checks))
    for variable, ok in zip(floats, finite, strict=True):
        if not ok:
            return _name(variable)
    return None


def first_non_finite_array(arrays: Iterable[tuple[str, np.ndarray]]) -> str | None:
    """Returns the name of the first float array holding a NaN or inf, else None.

    Example:

    >>> import numpy as np
    >>> from kerasteps._finite import first_non_finite_array
    >>> first_non_finite_array([("a", np.ones(2)), ("b", np.array([np.inf]))])
    'b'
    """
    for name, array in arrays:
        array = np.asarray(array)
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            return name
    return None
