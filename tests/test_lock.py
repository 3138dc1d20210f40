"""The one-writer lock: who holds it, across real processes where that is the point.

The processes are `tests/scripts/lock_holder.py`, which takes and gives back a lock on
command (it imports no TensorFlow, so it starts in a fraction of a second).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kerasteps._files._lock import LOCK_NAME, DirectoryLock, LockedError

ROOT = Path(__file__).resolve().parents[1]
HOLDER = ROOT / "tests" / "scripts" / "lock_holder.py"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), env.get("PYTHONPATH")])
    )
    return env


class _Holders:
    """`n` lock_holder processes on `directory`, driven line by line."""

    def __init__(self, directory: Path, n: int = 1):
        self.processes = [
            subprocess.Popen(
                [sys.executable, str(HOLDER), str(directory)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=_env(),
            )
            for _ in range(n)
        ]
        self.pids = [int(self._line(p).split()[1]) for p in self.processes]

    @staticmethod
    def _line(process: subprocess.Popen) -> str:
        line = process.stdout.readline()
        assert line, f"lock_holder {process.pid} ended (exit {process.wait()})"
        return line.strip()

    def ask(self, command: str) -> list[str]:
        """Sends `command` to every process first, then reads every answer."""
        for process in self.processes:
            process.stdin.write(command + "\n")
            process.stdin.flush()
        return [self._line(process) for process in self.processes]

    def __enter__(self) -> _Holders:
        return self

    def __exit__(self, *exc) -> None:
        for process in self.processes:
            process.kill()
            process.wait()
            process.stdin.close()
            process.stdout.close()


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # reaped: the pid names no process now
    return process.pid


def _write_stale(directory: Path, pid: int) -> None:
    owner = {"host": socket.gethostname(), "pid": pid, "started": "1", "time": 0.0}
    (directory / LOCK_NAME).write_text(json.dumps(owner))


def _owner(directory: Path, name: str = LOCK_NAME) -> dict:
    return json.loads((directory / name).read_text())


def test_the_lock_module_imports_without_tensorflow():
    code = "import sys, kerasteps._files._lock; print('tensorflow' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    ).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(
    "content", [b"", b"\n", b"\x00\x00garbage{", b'{"pid": 12', b"[1, 2]"]
)
def test_an_empty_or_garbage_lock_file_is_taken(tmp_path, content, caplog):
    (tmp_path / LOCK_NAME).write_bytes(content)  # a start killed mid-write
    lock = DirectoryLock(tmp_path, "`log_dir`")
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        lock.acquire()
    assert _owner(tmp_path)["pid"] == os.getpid()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "INFO",
            f"kerasteps: taking over {tmp_path / LOCK_NAME}, which no process "
            "holds (it names no owner).",
        )
    ]
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_stale_lock_is_taken_over_with_one_info_line(tmp_path, caplog):
    pid = _dead_pid()
    _write_stale(tmp_path, pid)
    lock = DirectoryLock(tmp_path, "`directory`")
    with caplog.at_level(logging.DEBUG, logger="kerasteps"):
        lock.acquire()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "INFO",
            f"kerasteps: taking over {tmp_path / LOCK_NAME}, left by pid {pid} "
            "which is gone.",
        )
    ]
    assert _owner(tmp_path)["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_live_holder_refuses_then_its_kill_frees_the_lock(tmp_path, caplog):
    lock = DirectoryLock(tmp_path, "`directory`")
    with _Holders(tmp_path) as holder:
        (pid,) = holder.pids
        assert holder.ask("acquire") == [f"held {pid}"]
        assert _owner(tmp_path)["pid"] == pid
        with pytest.raises(LockedError) as refused:
            lock.acquire()
        assert (
            f"`directory` {str(tmp_path)!r} is being written by another process "
            f"(pid {pid} on {socket.gethostname()}, since "
        ) in str(refused.value)
        os.kill(pid, signal.SIGKILL)  # no release: the kernel frees the lock
        holder.processes[0].wait()
    with caplog.at_level(logging.DEBUG, logger="kerasteps"):
        lock.acquire()
    assert [r.getMessage() for r in caplog.records] == [
        f"kerasteps: taking over {tmp_path / LOCK_NAME}, left by pid {pid} "
        "which is gone."
    ]
    assert [r.levelname for r in caplog.records] == ["INFO"]
    lock.release()


def test_an_owner_not_written_yet_is_named_unknown(tmp_path):
    # A live holder between taking the lock and writing its name into the file.
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(LockedError) as refused:
            DirectoryLock(tmp_path, "`log_dir`").acquire()
    finally:
        os.close(fd)
    assert str(refused.value) == (
        f"`log_dir` {str(tmp_path)!r} is being written by another process (owner "
        "unknown: its lock file is not written yet). One writer per directory: "
        "wait for it to end, or write elsewhere."
    )


def test_the_stale_lock_race_has_one_holder(tmp_path):
    pid = _dead_pid()
    with _Holders(tmp_path, n=6) as holders:
        for _ in range(10):
            _write_stale(tmp_path, pid)
            answers = holders.ask("acquire")  # all six at once
            held = [a for a in answers if a.startswith("held")]
            assert len(held) == 1, answers
            winner = int(held[0].split()[1])
            assert _owner(tmp_path)["pid"] == winner
            refused = [a for a in answers if a.startswith("refused")]
            assert len(refused) == 5, answers
            # Named, or "owner unknown" if the winner has not written its name yet
            # after a quarter second (a loaded machine): never the gone owner.
            assert all(
                f"(pid {winner} on " in a or "(owner unknown: " in a for a in refused
            ), answers
            assert holders.ask("release") == ["released"] * 6
            assert not (tmp_path / LOCK_NAME).exists()


def test_the_same_process_takes_its_own_lock_again(tmp_path):
    first = DirectoryLock(tmp_path / "log.jsonl", "`path`", file=True)
    second = DirectoryLock(tmp_path / "log.jsonl", "`path`", file=True)
    first.acquire()
    second.acquire()  # a notebook's second fit() after an error
    first.release()
    assert _owner(tmp_path, "log.jsonl.lock")["pid"] == os.getpid()
    second.release()
    assert list(tmp_path.iterdir()) == []


def test_a_remote_path_is_not_locked(tmp_path):
    """A URL (`gs://`, here `file://` so that the disk can be looked at) is left
    to its file system: no lock file, no hold, a second writer is not refused."""
    from kerasteps._files import _lock

    held = dict(_lock._HELD)
    url = f"file://{tmp_path}/run"
    first, second = DirectoryLock(url, "`log_dir`"), DirectoryLock(url, "`log_dir`")
    first.acquire()
    second.acquire()  # a local path would be refused by another process's lock
    assert list(tmp_path.iterdir()) == []
    assert _lock._HELD == held
    first.release()
    second.release()
    # The same place as a local path is locked: the file names this process.
    local = DirectoryLock(str(tmp_path / "run"), "`log_dir`")
    (tmp_path / "run").mkdir()
    local.acquire()
    assert _owner(tmp_path / "run")["pid"] == os.getpid()
    local.release()
    assert not (tmp_path / "run" / LOCK_NAME).exists()


_FULL_DISK = """
import resource, signal, sys
from kerasteps._files._lock import DirectoryLock

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
lock = DirectoryLock(sys.argv[1], "`log_dir`")
resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))  # no byte can be written
try:
    lock.acquire()
except OSError as error:
    print("REFUSED", error.errno)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # room again
lock.acquire()
print("TAKEN")
lock.release()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_lock_whose_owner_cannot_be_written_is_given_back(tmp_path):
    """A real `EFBIG` from the kernel while the owner is written (the file size limit
    at 0, as a full disk gives `ENOSPC`): the lock is released at once, so that the
    same process takes it once there is room (a notebook's next `fit()`)."""
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["REFUSED", str(errno.EFBIG), "TAKEN"]
    assert not (tmp_path / LOCK_NAME).exists()  # released and removed
