"""TensorBoard as the child of `kerasteps board`, ending with its parent (private).

`python -m kerasteps.cli._board_child PARENT_PID TENSORBOARD_ARGS...` runs TensorBoard's
own `main` in this process, after arranging to end when the parent does, however it
ends (a `kill -9` runs no cleanup in the parent): on Linux the kernel sends SIGTERM at
the parent's death (`PR_SET_PDEATHSIG`); everywhere, a watchdog thread checks every
half second that the parent is still this process's parent, and exits if not.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # the watchdog still works
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    def watch() -> None:  # its first look also covers a parent dead already
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="kerasteps-board-watchdog", daemon=True).start()


def _provide_pkg_resources() -> None:
    """TensorBoard < 2.21 imports `pkg_resources`, which setuptools >= 82 no longer
    has (and Python >= 3.12 venvs have no setuptools at all). It uses two names:
    `iter_entry_points` (dynamic plugins) and `parse_version`; give it those."""
    import types
    from importlib import metadata, util

    if util.find_spec("pkg_resources") is not None:
        return

    from packaging.version import parse as parse_version  # a TensorFlow dependency

    def iter_entry_points(group: str, name: str | None = None):
        for entry in metadata.entry_points(group=group):
            if name is None or entry.name == name:
                yield types.SimpleNamespace(
                    name=entry.name, load=entry.load, resolve=entry.load
                )

    shim = types.ModuleType("pkg_resources")
    shim.iter_entry_points = iter_entry_points
    shim.parse_version = parse_version
    sys.modules["pkg_resources"] = shim


def main() -> None:
    _die_with(int(sys.argv[1]))
    from kerasteps import _startup

    _startup.quiet_startup(keras=False)  # TensorFlow without its start-up lines
    _provide_pkg_resources()
    from tensorboard import main as tensorboard_main

    sys.argv = ["tensorboard", *sys.argv[2:]]
    tensorboard_main.run_main()


if __name__ == "__main__":
    main()
