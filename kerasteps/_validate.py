"""Argument checks shared by kerasteps constructors (private).

Each raises naming the argument and the value received, as Keras's own callbacks do.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any


def is_int(value: Any) -> bool:
    """An integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(
    name: str, value: Any, minimum: int = 1, *, wrong_type: type = TypeError
) -> int:
    """Returns `value` as an int >= `minimum`; raises `wrong_type` for a non-int."""
    if not is_int(value):
        raise wrong_type(
            f"`{name}` must be an int >= {minimum}, received {value!r} "
            f"of type {type(value).__name__}."
        )
    if value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, received {value!r}.")
    return int(value)


def check_positive_number(name: str, value: Any, *, allowed: str = "") -> float:
    """Returns `value` as a finite float > 0; `allowed` names other accepted values."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not real or not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"`{name}` must be a finite number > 0{allowed}, received {value!r}."
        )
    return float(value)


def _is_sequence(value: Any) -> bool:
    """A sequence, not a string."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def check_ints(name: str, values: Any, minimum: int = 1) -> tuple[int, ...]:
    """Returns `values` as a tuple of ints >= `minimum`, or raises `ValueError`."""
    if not _is_sequence(values):
        raise ValueError(
            f"`{name}` must be a sequence of ints >= {minimum}, received {values!r}."
        )
    if not all(is_int(value) and value >= minimum for value in values):
        raise ValueError(
            f"`{name}` must be a sequence of ints >= {minimum}, "
            f"received {tuple(values)!r}."
        )
    return tuple(int(value) for value in values)


def check_image_shape(name: str, value: Any) -> tuple[int, int, int]:
    """Returns `value` as a `(height, width, channels)` tuple of ints >= 1."""
    if not _is_sequence(value) or len(value) != 3:
        raise ValueError(
            f"`{name}` must be (height, width, channels), received {value!r}."
        )
    return check_ints(name, value)  # type: ignore[return-value]


def check_name(value: Any, name: str = "name") -> str:
    """Returns `value`, a non-empty str, or raises `ValueError`."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{name}` must be a non-empty str, received {value!r}.")
    return value


def check_names(name: str, value: Any) -> list[str] | None:
    """Returns `value` as a list of value names, or None; a lone str is refused."""
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"`{name}` must be a sequence of names, received {value!r}.")
    return list(value)


def check_activation(name: str, value: Any) -> Any:
    """Returns `value` if Keras knows the activation (None means linear)."""
    if value is None:
        return None
    import keras

    try:
        keras.activations.get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"`{name}` must be a Keras activation, received {value!r}: {error}"
        ) from None
    return value
