"""Checks that a directory can be written: one place for every writer (private).

`writable_dir` creates the directory (a callback's `log_dir`, a checkpoint
directory); `creatable_problem` only says why a directory could not be created and
written, creating nothing (a recipe's `--log-dir`, checked before any option that
could still refuse the run). Paths with a scheme (`gs://...`) are left to the file
system that writes them.

Some folders are refused even when they can be written (as root everything can):
the file system's root, a top-level system folder itself (`/etc`, `/usr`, `/var`,
...; a folder below them is fine), and anything under `/proc` or `/sys`, pseudo
file systems where a write is not a file (`unfit_problem`). The home directory is
not refused: runs written there are untidy, not lost. `aside_path` names the place
where what a new run finds in its way is kept (`earlier-N`), never deleted.
"""

from __future__ import annotations

import contextlib
import os
from itertools import count
from typing import Any

from kerasteps._validate import check_path

#: Pseudo file systems: what is below them is no file, and `/proc` shows every
#: process's view of the whole file system again (readers never enter them).
PSEUDO_FILE_SYSTEMS = ("/proc", "/sys")

#: Top-level system folders: never the folder of runs themselves.
_SYSTEM_FOLDERS = frozenset(
    {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32"}
    | {"/proc", "/run", "/sbin", "/sys", "/usr", "/var"}
)


def is_file_system_root(path: str | os.PathLike) -> bool:
    """Whether `path` is, once resolved, the root of the file system (`/`).

    Example:

    >>> from kerasteps._files._paths import is_file_system_root
    >>> is_file_system_root("/tmp/.."), is_file_system_root("/tmp")
    (True, False)
    """
    real = os.path.realpath(os.path.abspath(os.fspath(path)))
    return os.path.dirname(real) == real


def in_pseudo_file_system(path: str | os.PathLike) -> bool:
    """Whether `path`, once resolved, is `/proc`, `/sys` or below them.

    Example:

    >>> from kerasteps._files._paths import in_pseudo_file_system
    >>> in_pseudo_file_system("/proc/self/cwd/.."), in_pseudo_file_system("/tmp")
    (True, False)
    """
    real = os.path.abspath(os.fspath(path))  # normalised: "/proc/self/cwd/.." is /proc
    with contextlib.suppress(OSError):
        real = os.path.realpath(real)
    return any(real == top or real.startswith(top + "/") for top in PSEUDO_FILE_SYSTEMS)


def unfit_problem(path: str | os.PathLike) -> str | None:
    """Why `path` is no folder to write runs into, whatever its permissions; or None.

    The file system's root, a top-level system folder itself, and anything under
    `/proc` or `/sys` are refused (see the module docstring).

    Example:

    >>> from kerasteps._files._paths import unfit_problem
    >>> unfit_problem("/")
    "'/' is the root of the file system: give a folder of its own for the runs."
    >>> unfit_problem("logs/run") is None
    True
    """
    path = os.fspath(path)
    if "://" in path:
        return None
    if is_file_system_root(path):
        return (
            f"{path!r} is the root of the file system: give a folder of its own "
            "for the runs."
        )
    if in_pseudo_file_system(path):
        return (
            f"{path!r} is under {' or '.join(PSEUDO_FILE_SYSTEMS)}, a pseudo file "
            "system that holds no files: give a folder on a disk."
        )
    if os.path.realpath(os.path.abspath(path)) in _SYSTEM_FOLDERS:
        return f"{path!r} is a system folder: give a folder of its own for the runs."
    return None


def writable_dir(path: str | os.PathLike, argument: str) -> str:
    """Creates `path` if needed and returns it; raises naming `argument` if unwritable.

    Args:
        path: The directory.
        argument: The argument's name, for the error message.

    Returns:
        `path` as a `str`.

    Raises:
        TypeError: if `path` is not a non-empty path.
        ValueError: if `path` is a file, cannot be created, is not writable, or is
            no folder for runs (`unfit_problem`).

    Example:

    >>> import os, tempfile
    >>> from kerasteps._files._paths import writable_dir
    >>> os.path.isdir(writable_dir(os.path.join(tempfile.mkdtemp(), "a/b"), "log_dir"))
    True
    """
    import tensorflow as tf  # its file system also writes gs://, s3://, hdfs://

    path = _checked_path(path, argument, "directory")
    unfit = unfit_problem(path)
    if unfit:
        raise ValueError(f"`{argument}` is not a folder for runs: {unfit}")
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise ValueError(
            f"`{argument}` must be a directory, received the path of a file: {path!r}."
        )
    _makedirs(path, argument, "")
    if "://" not in path and not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(
            f"`{argument}` is not writable: no write permission in {path!r}."
        )
    return path


def _checked_path(path: Any, argument: str, kind: str) -> str:
    """`path` as a `str`; raises `TypeError` if it is not a non-empty path."""
    return check_path(argument, path, kind)


def _makedirs(path: str, argument: str, kind: str) -> None:
    """Creates the directory `path`; raises `ValueError` naming `argument` if not."""
    import tensorflow as tf

    try:
        tf.io.gfile.makedirs(path)
    except Exception as error:  # noqa: BLE001 - report as bad input
        raise ValueError(
            f"`{argument}` is not writable: cannot create {kind}{path!r} ({error})."
        ) from error


def creatable_problem(path: str) -> str | None:
    """Why `path` could not be created and written, or None; creates nothing.

    Also says why a folder that could be written is still no folder for runs
    (`unfit_problem`).

    Example:

    >>> import tempfile
    >>> from kerasteps._files._paths import creatable_problem
    >>> creatable_problem(tempfile.mkdtemp() + "/new/folder") is None
    True
    """
    unfit = unfit_problem(path)
    if unfit or "://" in path:
        return unfit  # None for a remote file system: checked when the run writes
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"cannot create {path!r}: {existing!r} is a file (Not a directory)."
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot create or write {path!r}: no write permission in {existing!r}."
    return None


def writable_file(path: str | os.PathLike, argument: str) -> str:
    """Creates the parent of file `path` if needed and returns `path`; raises naming
    `argument` if the file cannot be written.

    Args:
        path: The file.
        argument: The argument's name, for the error message.

    Example:

    >>> import os, tempfile
    >>> from kerasteps._files._paths import writable_file
    >>> folder = tempfile.mkdtemp()
    >>> path = writable_file(os.path.join(folder, "a", "log.jsonl"), "path")
    >>> os.path.isdir(os.path.dirname(path))
    True
    """
    import tensorflow as tf  # its file system also writes gs://, s3://, hdfs://

    path = _checked_path(path, argument, "file")
    if tf.io.gfile.isdir(path):
        raise ValueError(
            f"`{argument}` must be a file path, received a directory: {path!r}."
        )
    parent = os.path.dirname(path) or "."
    _makedirs(parent, argument, "directory ")
    if "://" not in path and not os.access(parent, os.W_OK):
        raise ValueError(
            f"`{argument}` is not writable: no write permission in {parent!r} "
            f"(received {path!r})."
        )
    if "://" not in path and os.path.exists(path) and not os.access(path, os.W_OK):
        raise ValueError(f"`{argument}` is not writable: {path!r} is read-only.")
    return path


def aside_path(place: str, is_file: bool) -> str:
    """The first free `earlier-N` name beside a file, or inside a directory.

    Example:

    >>> import os, tempfile
    >>> from kerasteps._files._paths import aside_path
    >>> folder = tempfile.mkdtemp()
    >>> os.path.basename(aside_path(os.path.join(folder, "log.jsonl"), True))
    'log.earlier-1.jsonl'
    >>> os.path.basename(aside_path(folder, False))
    'earlier-1'
    """
    if is_file:  # folder/stem.earlier-N.suffix
        stem, suffix = os.path.splitext(place)
        stem += "."
    else:  # place/earlier-N
        stem, suffix = os.path.join(place, ""), ""
    candidates = (f"{stem}earlier-{n}{suffix}" for n in count(1))
    import tensorflow as tf  # remote file systems too, as the sinks write them

    return next(path for path in candidates if not tf.io.gfile.exists(path))
