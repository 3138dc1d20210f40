"""TensorBoard as the child of `kerasteps board`, ending with its parent (private).

`python -m kerasteps._board_child PARENT_PID TENSORBOARD_ARGS...` runs TensorBoard's
own `main` in this process, after arranging to end when the parent does, however it
ends (a `kill -9` runs no cleanup in the parent): on Linux the kernel sends SIGTERM at
the parent's death (`PR_SET_PDEATHSIG`); everywhere, a watchdog thread checks every
half second that the parent is still this process's parent, and exits if not.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog below still works

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(0)
            time.sleep(0.5)

    threading.Thread(target=watch, name="kerasteps-board-watchdog", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the watch began
        os._exit(0)


def main() -> None:
    parent = int(sys.argv[1])
    _die_with(parent)
    from kerasteps import _startup

    _startup.quiet_startup(keras=False)  # TensorFlow without its start-up lines
    from tensorboard import main as tensorboard_main

    sys.argv = ["tensorboard", *sys.argv[2:]]
    tensorboard_main.run_main()


if __name__ == "__main__":
    main()
