"""Argument checks shared by kerasteps constructors (private).

Each raises naming the argument, what is allowed and the value received, as Keras's
own callbacks do. Every public constructor checks its arguments with these when it is
called, so that a wrong one is refused before training, never at the first write or
at the run's end (`tests/test_arguments.py` tries a wrong value of each kind on every
parameter of every public class).

A flag is a Python `bool`: `"False"`, `0`, `None` and NumPy's `bool_` are refused
(the values go into configurations that are written as JSON, which has no NumPy
types). A number is finite unless said otherwise.

Example:

>>> from kerasteps._validate import check_int
>>> check_int("keep", 3)
3
>>> check_int("keep", 0)
Traceback (most recent call last):
...
ValueError: `keep` must be an int >= 1, received 0.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


def _shown(value: Any) -> str:
    """`repr(value)`, cut to a line."""
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def check_that(
    name: str, value: Any, ok: bool, what: str, *, wrong_type: type = TypeError
) -> Any:
    """Returns `value` if `ok`, else raises `wrong_type`: "`name` must be `what`".

    Example:

    >>> from kerasteps._validate import check_that
    >>> check_that("x", 3, False, "a str")
    Traceback (most recent call last):
    ...
    TypeError: `x` must be a str, received 3.
    """
    if not ok:
        raise wrong_type(f"`{name}` must be {what}, received {_shown(value)}.")
    return value


def is_int(value: Any) -> bool:
    """An integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(
    name: str,
    value: Any,
    minimum: int | None = 1,
    *,
    wrong_type: type = TypeError,
    kind: str = "an int",
) -> int:
    """Returns `value` as an int >= `minimum` (None: any int); raises `wrong_type`
    for a non-int (a bool, a float, NaN), `ValueError` below `minimum`.

    Example:

    >>> from kerasteps._validate import check_int
    >>> check_int("level", 20, 0, kind="a logging level int")
    20
    """
    allowed = kind if minimum is None else f"{kind} >= {minimum}"
    if not is_int(value):
        raise wrong_type(
            f"`{name}` must be {allowed}, received {_shown(value)} "
            f"of type {type(value).__name__}."
        )
    if minimum is not None and value < minimum:
        raise ValueError(f"`{name}` must be {allowed}, received {value!r}.")
    return int(value)


def check_number(
    name: str,
    value: Any,
    minimum: float | None = 0.0,
    maximum: float | None = None,
    *,
    wrong_type: type = ValueError,
) -> float:
    """Returns `value` as a finite float in `[minimum, maximum]` (None: no bound);
    raises `wrong_type` for a non-number (a bool, a str), `ValueError` for NaN, an
    infinity or a number out of range.

    Example:

    >>> from kerasteps._validate import check_number
    >>> check_number("timeout", float("inf"), 0, 100)
    Traceback (most recent call last):
    ...
    ValueError: `timeout` must be a finite number >= 0 and <= 100, received inf.
    """
    bounds = [f">= {minimum:.15g}"] if minimum is not None else []
    bounds += [f"<= {maximum:.15g}"] if maximum is not None else []
    allowed = " ".join(["a finite number", " and ".join(bounds)]).strip()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise wrong_type(f"`{name}` must be {allowed}, received {_shown(value)}.")
    too_small = minimum is not None and value < minimum
    too_big = maximum is not None and value > maximum
    if not math.isfinite(value) or too_small or too_big:
        raise ValueError(f"`{name}` must be {allowed}, received {value!r}.")
    return float(value)


def check_positive_number(name: str, value: Any, *, allowed: str = "") -> float:
    """Returns `value` as a finite float > 0; `allowed` names other accepted values."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not real or not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"`{name}` must be a finite number > 0{allowed}, received {_shown(value)}."
        )
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """Returns `value` if it is True or False, else raises `ValueError`.

    Example:

    >>> from kerasteps._validate import check_bool
    >>> check_bool("write_counters", "False")
    Traceback (most recent call last):
    ...
    ValueError: `write_counters` must be True or False, received 'False'.
    """
    return check_that(
        name, value, isinstance(value, bool), "True or False", wrong_type=ValueError
    )


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """Returns `value` if it is one of `choices` (and of its type), else raises
    `ValueError` listing them.

    Example:

    >>> from kerasteps._validate import check_choice
    >>> check_choice("reduce", "median", ("mean", "last"))
    Traceback (most recent call last):
    ...
    ValueError: `reduce` must be "mean" or "last", received 'median'.
    """
    ok = any(isinstance(value, type(c)) and value == c for c in choices)
    shown = [f'"{c}"' if isinstance(c, str) else repr(c) for c in choices]
    listed = " or ".join(shown)
    if len(shown) > 2:
        listed = f"one of {', '.join(shown[:-1])} or {shown[-1]}"
    return check_that(name, value, ok, listed, wrong_type=ValueError)


def _is_sequence(value: Any) -> bool:
    """A sequence, not a string."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def check_ints(name: str, values: Any, minimum: int = 1) -> tuple[int, ...]:
    """Returns `values` as a tuple of ints >= `minimum`, or raises `ValueError`."""
    if not _is_sequence(values):
        raise ValueError(
            f"`{name}` must be a sequence of ints >= {minimum}, "
            f"received {_shown(values)}."
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
            f"`{name}` must be (height, width, channels), received {_shown(value)}."
        )
    return check_ints(name, value)  # type: ignore[return-value]


def check_name(
    value: Any,
    name: str = "name",
    *,
    optional: bool = False,
    hint: str = "",
    shown: Callable[[Any], str] = _shown,
) -> Any:
    """Returns `value`, a non-empty str (or None when `optional`), else raises
    `ValueError`; `hint` follows "a non-empty string" (" such as 'val_'"), `shown`
    writes the value (masking what it must not show).

    Example:

    >>> from kerasteps._validate import check_name
    >>> check_name("", "prefix", hint=" such as 'val_'")
    Traceback (most recent call last):
    ...
    ValueError: `prefix` must be a non-empty string such as 'val_', received ''.
    """
    if optional and value is None:
        return None
    if not isinstance(value, str) or not value:
        allowed = f"a non-empty string{hint}" + (" or None" if optional else "")
        raise ValueError(f"`{name}` must be {allowed}, received {shown(value)}.")
    return value


def check_names(
    name: str, value: Any, *, empty: bool = True, what: str = "a sequence of names"
) -> list[str] | None:
    """Returns `value` as a list of value names (non-empty strings), or None; a
    lone str, a non-iterable and (unless `empty`) no names are refused, saying
    `what` is allowed.

    Example:

    >>> from kerasteps._validate import check_names
    >>> check_names("keys", ("loss", "val_loss"))
    ['loss', 'val_loss']
    >>> check_names("keys", [1])
    Traceback (most recent call last):
    ...
    TypeError: `keys` must be a sequence of names, received [1].
    """
    if value is None:
        return None
    iterable = isinstance(value, Iterable) and not isinstance(value, (str, bytes))
    names = list(value) if iterable else []
    ok = iterable and all(isinstance(n, str) and n for n in names)
    check_that(name, value, ok, what)
    if not empty and not names:
        raise ValueError(f"`{name}` must not be empty, received {_shown(value)}.")
    return names


def check_path(name: str, value: Any, kind: str = "file") -> str:
    """Returns `value` (a non-empty str or path-like) as a str, else `TypeError`.

    Example:

    >>> from kerasteps._validate import check_path
    >>> check_path("directory", None, "directory")
    Traceback (most recent call last):
    ...
    TypeError: `directory` must be a directory path, received None.
    """
    path = isinstance(value, (str, os.PathLike)) and os.fspath(value)
    check_that(name, value, isinstance(path, str) and bool(path), f"a {kind} path")
    return path


def check_callable(name: str, value: Any, what: str) -> Any:
    """Returns `value` if it is callable, else raises `TypeError` saying `what`."""
    return check_that(name, value, callable(value), what)


def is_mapping_of(value: Any, kind: type | tuple[type, ...] = object) -> bool:
    """Whether `value` is a mapping of non-empty strings to instances of `kind`.

    Example:

    >>> from kerasteps._validate import is_mapping_of
    >>> is_mapping_of({"loss": 1.0}, float), is_mapping_of({2: "x"})
    (True, False)
    """
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and k and isinstance(v, kind) for k, v in value.items()
    )


def check_separator(name: str, value: Any) -> str:
    """Returns `value`, a CSV column separator: one character that is no quote
    (`"`) and no line break, else raises `ValueError`.

    Example:

    >>> from kerasteps._validate import check_separator
    >>> check_separator("separator", ";")
    ';'
    """
    ok = isinstance(value, str) and len(value) == 1 and value not in '"\r\n'
    if ok:
        try:
            csv.writer(io.StringIO(), delimiter=value)
        except (TypeError, ValueError):
            ok = False
    what = "one character other than a quote or a line break (',', ';', '\\t'...)"
    return check_that(name, value, ok, what, wrong_type=ValueError)


def check_activation(name: str, value: Any) -> Any:
    """Returns `value` if Keras knows the activation (None means linear)."""
    if value is None:
        return None
    import keras

    try:
        keras.activations.get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"`{name}` must be a Keras activation, received {_shown(value)}: {error}"
        ) from None
    return value
