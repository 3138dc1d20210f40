"""`BackgroundWriter`: a store's saves on a background thread, one at a time
(private)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


def lower_priority() -> None:
    """Runs the calling thread at a lower CPU priority (Linux: nice +10).

    The background write then takes the cycles training leaves idle instead of
    competing with its threads; elsewhere this does nothing.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


class BackgroundWriter:
    """Runs one write at a time on a thread that is not a daemon (an interpreter
    that exits waits for it), at a lower CPU priority; keeps its error for `wait`
    and hands it to `on_error` on the writer thread."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        #: Called with the error on the writer thread when a background save fails.
        self.on_error: Callable[[BaseException], None] | None = None

    def start(self, write: Callable[[], Any], where: str) -> None:
        """Runs `write()` on the writer thread; `where` names it in an error.
        Call `wait` first: one write at a time."""

        def run() -> None:
            lower_priority()
            try:
                write()
            except BaseException as error:  # noqa: BLE001 - surfaced by `wait`
                error.add_note(f"({where} on the background thread)")
                self._error = error
                if self.on_error is not None:
                    self.on_error(error)

        self._thread = threading.Thread(
            target=run, name="kerasteps-checkpoint-writer", daemon=False
        )
        self._thread.start()

    @property
    def in_flight(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def failed(self) -> bool:
        return self._error is not None

    def join(self) -> None:
        """Waits for the write in flight; leaves its error for `wait`."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def wait(self) -> None:
        """Waits for the write in flight, if any; raises its error."""
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error
