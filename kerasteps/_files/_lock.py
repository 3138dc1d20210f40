"""One writer per run directory: a lock file held while a process writes (private).

Every directory that a sink or a checkpoint writes is locked by the process that
writes it, from the run's start to its end: `<directory>/.kerasteps.lock` (for a
JSON-lines file, `<file>.lock` beside it). A second process that would write the same
place fails before training, with an error naming the place and the owner. The same
process may take its own lock again (a notebook re-running `fit()` after an error).

The lock is an `fcntl.flock` on the lock file, held through an open descriptor for as
long as the process writes. The kernel releases it when the process ends in any way
(kill -9 included), so a lock left by a dead process is simply free: there is no
"is its owner alive?" guess and no takeover race (two processes that both saw a dead
owner and both removed the lock, one of them the other's fresh one), and an empty or
garbage file (a start killed mid-write, a full disk) is taken like any free one.
Taking over a file that a gone process left says so in one INFO line: a resume after
a crash is the normal path. After taking the lock, a process checks that the file it
locked is still the one at the path, else tries again: a releaser unlinks the file
while still holding it, and a process that opened it just before would otherwise
hold a lock on a deleted file.

Who holds the lock is the kernel's answer alone. The file's content (the owner's
host, pid, process start time and since when, as JSON) only names the owner in the
error of a refused writer, which waits up to a quarter second for a new owner to
write it (until then the file is empty or names the gone one), else says "owner
unknown".

On a file system shared between hosts (NFS), Linux maps `flock` to the server's
byte-range locks, so the server decides, and a lock left by a host that died is free
once the server drops that host's locks. (The previous lock, a file created with
O_EXCL, treated a lock naming another host as alive forever, so one crash there
blocked every later run.) A file system that refuses locks (`ENOLCK`) gets a warning,
and the run goes on unlocked. Remote paths (`gs://` and other `tf.io.gfile` file
systems) are not locked either: they have no lock and no atomic create-if-absent, so
two writers on one remote directory are the user's to avoid.

`filelock`, the ecosystem's library, is not used: its Unix lock truncates the file it
opens, so the locked file cannot carry the owner that the error names. This module
imports no TensorFlow, so a process takes its lock in milliseconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time

from kerasteps._files import _atomic

__all__ = ["DirectoryLock", "LockedError"]

logger = logging.getLogger("kerasteps")

LOCK_NAME = ".kerasteps.lock"

_ATTEMPTS = 100  # another try only when a holder released the file in between
_NAME_WAIT_S = 0.25  # how long a refused writer waits for the holder's name


@dataclasses.dataclass
class _Held:
    fd: int  # the open lock file that carries this process's flock
    count: int  # how many `DirectoryLock`s of this process hold it


_HELD: dict[str, _Held] = {}  # lock path -> this process's hold on it
_HELD_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    """In a forked child: close the inherited lock files, and hold nothing.

    The parent keeps its locks (a flock goes only with the last descriptor of the
    open file), and a child that outlives a killed parent does not keep them.
    """
    global _HELD_LOCK
    for held in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(held.fd)
    _HELD.clear()
    _HELD_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


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


def _read_owner(fd: int) -> dict | None:
    """The owner a lock file names; None when empty, {} when not a complete one."""
    try:
        data = os.pread(fd, 4096, 0)
        if not data.strip():
            return None
        owner = json.loads(data)
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _is_running(owner: dict) -> bool:
    """Whether a named owner may be running: not a gone process of this host (the
    previous owner, while the new one has not written its name yet)."""
    if owner.get("host") != socket.gethostname():
        return True  # another host's: the lock itself says it is held
    pid = owner["pid"]
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return owner.get("started") in (None, _start_time(pid))


def _holder(fd: int) -> dict | None:
    """The owner of a lock that another process holds, as its file names it; None
    while the file does not name a running process yet (just taken)."""
    deadline = time.monotonic() + _NAME_WAIT_S
    while True:
        owner = _read_owner(fd)
        if owner and isinstance(owner.get("pid"), int) and _is_running(owner):
            return owner
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


def _write_owner(fd: int) -> None:
    """Names this process in the lock file `fd`."""
    pid = os.getpid()
    me = {"host": socket.gethostname(), "pid": pid, "started": _start_time(pid)}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({**me, "time": time.time()}).encode(), 0)


def _same_file(fd: int, path: str) -> bool:
    """Whether the open file `fd` is (still) the file at `path`."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except FileNotFoundError:
        return False


def _open(path: str) -> tuple[int, bool] | None:
    """Opens the lock file, creating it if absent: the descriptor and whether it was
    created here; None if it was removed in between."""
    with contextlib.suppress(FileExistsError):
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
    try:
        return os.open(path, os.O_RDWR), False
    except FileNotFoundError:
        return None


def _describe(owner: dict | None) -> str:
    """How a refused writer's error names the owner: `pid 12 on host, since ...`."""
    if owner is None:
        return "owner unknown: its lock file is not written yet"
    text = f"pid {owner['pid']}"
    if isinstance(owner.get("host"), str):
        text += f" on {owner['host']}"
    if isinstance(owner.get("time"), int | float):
        text += f", since {time.ctime(owner['time'])}"
    return text


class DirectoryLock:
    """A lock on one run directory (or file) for this process.

    Args:
        path: The locked place: a directory, or with `file=True` a file.
        what: How error messages name the argument, e.g. "`log_dir`".
        file: Whether `path` is a file (the lock is `<path>.lock`). Default False.

    Example:

    >>> import tempfile
    >>> from kerasteps._files._lock import DirectoryLock
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
        path = os.path.realpath(self.lock_path)
        with _HELD_LOCK:
            if path in _HELD:  # this process holds it already
                _HELD[path].count += 1
            else:
                fd = self._take(path)
                if fd is not None:
                    _HELD[path] = _Held(fd, 1)
        self._held = True

    def _take(self, path: str) -> int | None:
        """The descriptor that holds the lock on `path` for this process; None if the
        file system has no locks; raises `LockedError` if another process holds it."""
        for _ in range(_ATTEMPTS):
            opened = _open(path)
            if opened is None:
                continue
            fd, created = opened
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _holder(fd)
                os.close(fd)
                raise LockedError(
                    f"{self.what} {self.path!r} is being written by another "
                    f"process ({_describe(owner)}). One writer per directory: "
                    "wait for it to end, or write elsewhere."
                ) from None
            except OSError as error:
                os.close(fd)
                if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                logger.warning(
                    "kerasteps: %s %r is not locked: its file system has no locks "
                    "(%s). Make sure no other process writes there.",
                    self.what,
                    self.path,
                    error.strerror,
                )
                return None
            if not _same_file(fd, path):  # released and removed in between
                os.close(fd)
                continue
            try:
                if not created:
                    self._say_taken_over(_read_owner(fd))
                _write_owner(fd)
            except BaseException:  # the owner cannot be recorded (a full disk)
                if created:
                    with contextlib.suppress(OSError):
                        os.remove(path)  # while still holding it
                os.close(fd)  # gives the lock back: the same process may try again
                raise
            return fd
        raise LockedError(f"Could not lock {self.what} {self.path!r}.")

    def _say_taken_over(self, owner: dict | None) -> None:
        if owner is not None and isinstance(owner.get("pid"), int):
            left_by = f"left by pid {owner['pid']}"
            if owner.get("host") != socket.gethostname():
                left_by += f" on {owner.get('host')}"
            why = f"{left_by} which is gone"
        else:
            why = "which no process holds (it names no owner)"
        logger.info("kerasteps: taking over %s, %s.", self.lock_path, why)

    def release(self) -> None:
        """Gives the lock back (the file is removed by its last holder)."""
        if not self._held:
            return
        self._held = False
        path = os.path.realpath(self.lock_path)
        with _HELD_LOCK:
            held = _HELD.get(path)
            if held is None:  # not locked (remote, no locks) or a forked child
                return
            held.count -= 1
            if held.count > 0:
                return
            del _HELD[path]
            try:
                with contextlib.suppress(OSError):
                    if _same_file(held.fd, path):
                        os.remove(path)  # while still holding: see the module's doc
            finally:
                os.close(held.fd)
