"""Checks that a directory can be written: one place for every writer (private).

`writable_dir` creates the directory (a callback's `log_dir`, a checkpoint
directory); `creatable_problem` only says why a directory could not be created and
written, creating nothing (a recipe's `--logdir`, checked before any option that
could still refuse the run). Paths with a scheme (`gs://...`) are left to the file
system that writes them.
"""

from __future__ import annotations

import os


def writable_dir(path: str | os.PathLike, argument: str) -> str:
    """Creates `path` if needed and returns it; raises naming `argument` if unwritable.

    Args:
        path: The directory.
        argument: The argument's name, for the error message.

    Returns:
        `path` as a `str`.

    Raises:
        TypeError: if `path` is not a non-empty path.
        ValueError: if `path` is a file, cannot be created, or is not writable.

    Example:

    >>> import os, tempfile
    >>> from kerasteps._paths import writable_dir
    >>> os.path.isdir(writable_dir(os.path.join(tempfile.mkdtemp(), "a/b"), "logdir"))
    True
    """
    import tensorflow as tf  # its file system also writes gs://, s3://, hdfs://

    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"`{argument}` must be a directory path, received {path!r}.")
    path = os.fspath(path)
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise ValueError(
            f"`{argument}` must be a directory, received the path of a file: {path!r}."
        )
    try:
        tf.io.gfile.makedirs(path)
    except Exception as error:  # noqa: BLE001 - report as bad input
        raise ValueError(
            f"`{argument}` is not writable: cannot create {path!r} ({error})."
        ) from error
    if "://" not in path and not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(
            f"`{argument}` is not writable: no write permission in {path!r}."
        )
    return path


def creatable_problem(path: str) -> str | None:
    """Why `path` could not be created and written, or None; creates nothing.

    Example:

    >>> import tempfile
    >>> from kerasteps._paths import creatable_problem
    >>> creatable_problem(tempfile.mkdtemp() + "/new/folder") is None
    True
    """
    if "://" in path:
        return None  # a remote file system: checked when the run writes
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"cannot create {path!r}: {existing!r} is a file (Not a directory)."
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot create or write {path!r}: no write permission in {existing!r}."
    return None
