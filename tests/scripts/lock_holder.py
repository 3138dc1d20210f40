"""Takes and gives back a kerasteps lock on command, for the lock tests.

    python tests/scripts/lock_holder.py DIR

Prints `ready PID`, then reads commands from stdin, one a line, and answers each with
one line: `acquire` -> `held PID` or `refused MESSAGE`; `release` -> `released`;
`exit` (or the end of stdin) ends it, without releasing (the lock goes with the
process). It imports only the lock module, not TensorFlow.
"""

from __future__ import annotations

import os
import sys

from kerasteps._files._lock import DirectoryLock, LockedError


def main() -> int:
    lock = DirectoryLock(sys.argv[1], "`directory`")
    print("ready", os.getpid(), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "acquire":
            try:
                lock.acquire()
            except LockedError as error:
                print("refused", str(error).replace("\n", " "), flush=True)
            else:
                print("held", os.getpid(), flush=True)
        elif command == "release":
            lock.release()
            print("released", flush=True)
        elif command == "exit":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
