"""What this process knows about the log files it wrote (private helper).

A sink that starts a run at step `s` must drop whatever its files hold after `s`,
which means reading them: for a long run called through many `fit()`s (a loop of
`fit(epochs=1)`, say) that read grows with the log. When this process wrote the
files last, it already knows an upper bound of their steps, so a new run that
starts at or after that bound can skip the read. The knowledge is keyed by the
files' sizes and modification times: any change by another writer (or process)
makes it stale, and the sink reads the files as before.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

import tensorflow as tf

_LOCK = threading.Lock()
# key -> (signature of the files, upper bound of every step they hold)
_BOUNDS: dict[str, tuple[tuple, int]] = {}


def key(path: str | os.PathLike) -> str:
    """The cache key of a file or directory: its absolute path, or a URL as is."""
    path = os.fspath(path)
    return path.rstrip("/") if "://" in path else os.path.abspath(path)


def signature(paths: Iterable[str]) -> tuple:
    """(path, size, modification time, inode) of each file, in the given order;
    missing files are left out. Local files use `os.stat` (nanosecond times; the
    inode changes when a file is replaced), others `tf.io.gfile.stat`."""
    entries = []
    for path in paths:
        try:
            if "://" in os.fspath(path):
                stat = tf.io.gfile.stat(path)
                entries.append((path, stat.length, stat.mtime_nsec, None))
            else:
                stat = os.stat(path)
                entries.append((path, stat.st_size, stat.st_mtime_ns, stat.st_ino))
        except (OSError, tf.errors.NotFoundError):
            continue
    return tuple(entries)


def bound_if_unchanged(name: str, sig: tuple) -> int | None:
    """The remembered step bound of `name` if its files still match `sig`."""
    with _LOCK:
        known = _BOUNDS.get(key(name))
    return known[1] if known is not None and known[0] == sig else None


def remember(name: str, sig: tuple, bound: int) -> None:
    """Records that the files of `name`, as in `sig`, hold no step after `bound`."""
    with _LOCK:
        _BOUNDS[key(name)] = (sig, int(bound))


def forget(name: str) -> None:
    with _LOCK:
        _BOUNDS.pop(key(name), None)
