"""The one finiteness check of kerasteps (private).

Used wherever a state must be finite before it is kept: a checkpoint is never written
(nor restored) with a NaN or an infinity in its weights or optimizer state, whatever
guard callbacks are present, and `StopOnNonFinite` keeps only finite snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["first_non_finite_array"]


def first_non_finite_array(arrays: Iterable[tuple[str, np.ndarray]]) -> str | None:
    """Returns the name of the first float array holding a NaN or inf, else None.

    Example:

    >>> import numpy as np
    >>> from kerasteps.checkpoint._finite import first_non_finite_array
    >>> first_non_finite_array([("a", np.ones(2)), ("b", np.array([np.inf]))])
    'b'
    """
    for name, array in arrays:
        array = np.asarray(array)
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            return name
    return None
