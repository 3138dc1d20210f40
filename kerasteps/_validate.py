"""Argument checks shared by kerasteps constructors (private).

Each raises naming the argument and the value received, as Keras's own callbacks do.
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def check_int(
    name: str, value: Any, minimum: int = 1, *, wrong_type: type = TypeError
) -> int:
    """Returns `value` as an int >= `minimum`; raises `wrong_type` for a non-int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise wrong_type(
            f"`{name}` must be an int >= {minimum}, received {value!r} "
            f"of type {type(value).__name__}."
        )
    if value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, received {value!r}.")
    return int(value)


def check_positive_number(name: str, value: Any, *, allowed: str = "") -> float:
    """Returns `value` as a finite float > 0; `allowed` names other accepted values."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"`{name}` must be a finite number > 0{allowed}, received {value!r}."
        )
    return float(value)
