"""The one-writer lock under a race of separate processes: how often exactly one wins.

    python benchmarks/lock_race.py [--trials 300] [--processes 4] [--mode all]

Each trial prepares the lock of a run directory, forks `--processes` separate
processes (not threads) that all wait on one pipe, then releases them together with
one write: each takes the directory's lock (`kerasteps._files._lock.DirectoryLock`),
reports whether it holds it, and keeps holding it until every process has answered
(the parent closes a second pipe). Then they exit without releasing, as a process
killed with kill -9 would. The modes (`--mode all` runs each in turn):

- `stale`: the lock file names a gone process (a dead pid), as after a crash: every
  process sees a stale lock at once (issue 27: more than one took it in 12 of 50);
- `empty`: an empty lock file, as a start killed mid-write or a full disk leaves;
- `none`: no lock file, a plain simultaneous start.

Prints, per mode, e.g. `stale: 300/300 trials: exactly one holder (4 processes,
1.9 s)`, and the holder counts of any other trial; exits 1 unless every trial of
every mode had exactly one holder. The processes are forks of this script, which
imports only the lock module (no TensorFlow), so they cost a millisecond each.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's kerasteps

from kerasteps._files._lock import LOCK_NAME, DirectoryLock, LockedError  # noqa: E402

MODES = ("stale", "empty", "none")


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # reaped: the pid names no process now
    return pid


def _prepare(directory: str, mode: str, dead_pid: int) -> None:
    path = os.path.join(directory, LOCK_NAME)
    if mode == "stale":
        owner = {"host": socket.gethostname(), "pid": dead_pid, "time": 0.0}
        with open(path, "w") as handle:
            handle.write(json.dumps(owner))
    elif mode == "empty":
        open(path, "w").close()
    elif os.path.exists(path):
        os.remove(path)


def _child(directory: str, start: int, done: int, result: int) -> None:
    """One contender: waits for the start, takes the lock, answers, holds, exits."""
    os.read(start, 1)
    try:
        DirectoryLock(directory, "`directory`").acquire()
        answer = b"1"
    except LockedError:
        answer = b"0"
    except Exception:  # noqa: BLE001 - counted as a failed trial, not a crash
        answer = b"E"
    os.write(result, answer)
    os.read(done, 1)  # the end of file: every process has answered
    os._exit(0)  # without releasing: the kernel frees the lock


def trial(directory: str, processes: int, mode: str, dead_pid: int) -> str:
    """Runs one race; returns the answers, one character per process."""
    _prepare(directory, mode, dead_pid)
    start_r, start_w = os.pipe()
    done_r, done_w = os.pipe()
    result_r, result_w = os.pipe()
    children = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:
            try:
                for fd in (start_w, done_w, result_r):
                    os.close(fd)
                _child(directory, start_r, done_r, result_w)
            finally:
                os._exit(1)
        children.append(pid)
    for fd in (start_r, done_r, result_w):
        os.close(fd)
    os.write(start_w, b"x" * processes)  # all of them at once
    answers = b""
    while len(answers) < processes:
        chunk = os.read(result_r, processes)
        if not chunk:
            break  # a process died without answering
        answers += chunk
    os.close(done_w)
    for pid in children:
        os.waitpid(pid, 0)
    os.close(start_w)
    os.close(result_r)
    return answers.decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--mode", choices=[*MODES, "all"], default="all")
    args = parser.parse_args()
    dead_pid = _dead_pid()
    ok = True
    for mode in MODES if args.mode == "all" else (args.mode,):
        holders: collections.Counter[str] = collections.Counter()
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as directory:
            for _ in range(args.trials):
                answers = trial(directory, args.processes, mode, dead_pid)
                if len(answers) < args.processes or "E" in answers:
                    holders["a process failed"] += 1
                else:
                    holders[f"{answers.count('1')} holders"] += 1
        one = holders.pop("1 holders", 0)
        others = ", ".join(f"{n} trials: {what}" for what, n in sorted(holders.items()))
        print(
            f"{mode}: {one}/{args.trials} trials: exactly one holder"
            f" ({args.processes} processes, {time.perf_counter() - began:.1f} s)"
            + (f"; {others}" if others else ""),
            flush=True,
        )
        ok = ok and one == args.trials
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
