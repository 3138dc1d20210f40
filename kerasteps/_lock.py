"""One writer per run directory: a lock file held while a process writes (private).

Every directory that a sink or a checkpoint writes is locked by the process that
writes it, from the run's start to its end: `<directory>/.kerasteps.lock` (for a
JSON-lines file, `<file>.lock` beside it) holds the owner's host, pid and process start
time. A second process that would write the same place fails before training, with an
error naming the place and the owner. The same process may take its own lock again (a
notebook re-running `fit()` after an error), and a lock whose owner is gone (killed) is
stale and taken over.

Local paths only: on `gs://` and other `tf.io.gfile` file systems there is no atomic
create-if-absent, so nothing is locked there, and running two writers on the same
remote directory is the user's to avoid.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time

from kerasteps import _atomic

__all__ = ["DirectoryLock", "LockedError"]

logger = logging.getLogger("kerasteps")

LOCK_NAME = ".kerasteps.lock"

_HELD: dict[str, int] = {}  # lock path -> how many holders in this process
_HELD_LOCK = threading.Lock()


class LockedError(RuntimeError):
    """Another live process is writing the directory."""


def _start_time(pid: int) -> str | None:
    """The start time of a process (Linux `/proc`), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[19]  # field 22 of stat: start time in clock ticks since boot
    except (OSError, IndexError):
        return None


def _alive(owner: dict) -> bool:
    if owner.get("host") != socket.gethostname():
        return True  # cannot tell: another machine's process may be running
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    started = owner.get("started")
    return started is None or started == _start_time(pid)


def _me() -> dict:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _start_time(os.getpid()),
        "time": time.time(),
    }


def _create(path: str) -> bool:
    """Creates the lock file, holding this process's identity; False if it exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(_me()))
    return True


class DirectoryLock:
    """A lock on one run directory (or file) for this process.

    Args:
        path: The locked place: a directory, or with `file=True` a file.
        what: How error messages name the argument, e.g. "`log_dir`".
        file: Whether `path` is a file (the lock is `<path>.lock`).

    Example:

    >>> import tempfile
    >>> from kerasteps._lock import DirectoryLock
    >>> lock = DirectoryLock(tempfile.mkdtemp(), "`log_dir`")
    >>> lock.acquire(); lock.release()
    """

    def __init__(self, path: str, what: str, file: bool = False):
        self.path = os.fspath(path)
        self.what = what
        self.lock_path = (
            f"{self.path}.lock" if file else os.path.join(self.path, LOCK_NAME)
        )
        self._held = False

    def acquire(self) -> None:
        """Takes the lock, or raises `LockedError` naming the live owner."""
        if self._held or not _atomic.is_local(self.path):
            return
        path = os.path.abspath(self.lock_path)
        with _HELD_LOCK:
            if _HELD.get(path, 0) > 0:  # this process holds it already
                _HELD[path] += 1
                self._held = True
                return
            for _ in range(3):
                if _create(path) or self._ours_or_stale(path):
                    break
            else:
                raise LockedError(f"Could not lock {self.what} {self.path!r}.")
            _HELD[path] = 1
            self._held = True

    def _ours_or_stale(self, path: str) -> bool:
        """For a lock file that exists: True if this process left it (a run that
        ended with an error); raises `LockedError` if a live process holds it;
        else removes it (its owner is gone) and returns False, to try again."""
        owner = self._owner(path)
        me = (os.getpid(), socket.gethostname())
        if (owner.get("pid"), owner.get("host")) == me:
            return True
        if _alive(owner):
            raise LockedError(
                f"{self.what} {self.path!r} is being written by another "
                f"process (pid {owner.get('pid')} on "
                f"{owner.get('host')}, since "
                f"{time.ctime(owner.get('time', 0))}). One writer per "
                "directory: wait for it to end, or write elsewhere."
            )
        logger.warning(
            "kerasteps: taking over %s, left by pid %s which is gone.",
            self.lock_path,
            owner.get("pid"),
        )
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return False

    @staticmethod
    def _owner(path: str) -> dict:
        try:
            with open(path) as handle:
                owner = json.loads(handle.read() or "{}")
        except (OSError, ValueError):
            return {}  # unreadable (a writer killed mid-write): stale
        return owner if isinstance(owner, dict) else {}

    def release(self) -> None:
        """Gives the lock back (the file is removed by its last holder)."""
        if not self._held:
            return
        self._held = False
        path = os.path.abspath(self.lock_path)
        with _HELD_LOCK:
            count = _HELD.get(path, 0) - 1
            if count > 0:
                _HELD[path] = count
                return
            _HELD.pop(path, None)
            try:
                os.remove(path)
            except OSError:
                pass
