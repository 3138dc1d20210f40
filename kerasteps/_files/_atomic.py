"""The one atomic writer of kerasteps (private).

Every file that kerasteps replaces (a checkpoint index, a JSON-lines log rewritten on
resume, a TensorBoard event file rewritten on resume) is written to a temporary file
next to it, flushed to disk, and renamed over the old one: a reader sees the old file
or the new one, never a mix, and a process killed at any moment leaves one of them.
On a local disk the data and the directory entry are fsynced; on object stores
(`gs://`), through `tf.io.gfile`, the rename is the commit point.

TensorFlow is imported on first write, not with this module: the lock module uses
`is_local`, and a process takes its lock in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["is_local", "replace_file", "write_text"]


def is_local(path: str) -> bool:
    """True for a path on the local file system (not `gs://` or another URL)."""
    return "://" not in path


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    with contextlib.suppress(OSError):  # some file systems do not sync directories
        os.fsync(fd)
    os.close(fd)


def replace_file(path: str, write: Callable[[str], Any]) -> None:
    """Writes a new version of `path` atomically.

    Args:
        path: The file to replace (or create).
        write: Called with a temporary path next to `path`; it writes the whole new
            content there (and closes it).

    Example:

    >>> import os, tempfile
    >>> from kerasteps._files._atomic import replace_file
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> replace_file(path, lambda tmp: open(tmp, "w").write("new"))
    >>> open(path).read()
    'new'
    """
    import tensorflow as tf

    path = os.fspath(path)
    # A hidden name that no reader takes for the file (TensorBoard reads every file
    # whose name holds "tfevents").
    tmp = os.path.join(
        os.path.dirname(path), f".kerasteps-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    )
    try:
        write(tmp)
        if is_local(path):
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, path)
            _fsync_dir(os.path.dirname(path))
        else:
            tf.io.gfile.rename(tmp, path, overwrite=True)
    except BaseException:
        # The error that matters is re-raised, not one of the clean-up.
        with contextlib.suppress(Exception):
            if tf.io.gfile.exists(tmp):
                tf.io.gfile.remove(tmp)
        raise


def write_text(path: str, text: str) -> None:
    """Replaces the file `path` with `text`, atomically (see `replace_file`).

    Example:

    >>> import os, tempfile
    >>> from kerasteps._files._atomic import write_text
    >>> path = os.path.join(tempfile.mkdtemp(), "index.json")
    >>> write_text(path, "{}")
    >>> open(path).read()
    '{}'
    """
    import tensorflow as tf

    def write(tmp: str) -> None:
        with tf.io.gfile.GFile(tmp, "w") as handle:
            handle.write(text)

    replace_file(path, write)


def is_temporary(name: str) -> bool:
    """True for the name of a temporary file that `replace_file` left (killed).

    Example:

    >>> from kerasteps._files._atomic import is_temporary
    >>> is_temporary(".kerasteps-12-0a1b2c3d.tmp"), is_temporary("checkpoint.json")
    (True, False)
    """
    return name.startswith(".kerasteps-") and name.endswith(".tmp")
