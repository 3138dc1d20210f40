"""Old spellings that keep working for one release, with a `DeprecationWarning`.

`renamed_keyword("logdir", "log_dir")` lets a function whose argument was renamed
still take the old keyword: `read_scalars(logdir=...)` warns, naming the new
spelling, and calls `read_scalars(log_dir=...)`. The glossary of names, and the
spellings that go away in the next release, are in docs/development.md ("Names").

Example:

>>> import warnings
>>> from kerasteps._deprecation import renamed_keyword
>>> @renamed_keyword("logdir", "log_dir")
... def where(log_dir):
...     return log_dir
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     where(logdir="logs")
'logs'
>>> print(caught[0].message)  # doctest: +ELLIPSIS
`logdir=` of where() is deprecated ...; use `log_dir=`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def renamed_keyword(old: str, new: str) -> Callable[[F], F]:
    """A decorator: the function also takes its argument `new` as `old=`.

    Passing `old=` warns `DeprecationWarning` (pointing at the caller) and passes
    the value as `new=`; passing both is a `TypeError`. The signature, docstring
    and name are the function's own (`functools.wraps`).
    """

    def decorator(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(
                        f"{function.__qualname__}() got both `{new}` and its "
                        f"deprecated spelling `{old}`; give `{new}` only."
                    )
                warn_renamed(f"`{old}=` of {function.__qualname__}()", f"`{new}=`")
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorator


def warn_renamed(what: str, instead: str, stacklevel: int = 3) -> None:
    """Warns `DeprecationWarning`: `what` goes away in the next release.

    `stacklevel` 3 points at the caller of the function that calls this one.
    """
    warnings.warn(
        f"{what} is deprecated and will be removed in the next release; use {instead}.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
