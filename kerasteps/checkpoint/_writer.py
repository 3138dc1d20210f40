"""`BackgroundWriter`: a store's saves on a background thread, one at a time
(private)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


class BackgroundWriter:
    """Runs one write at a time on a thread that is not a daemon (an interpreter
    that exits waits for it); keeps its error for `wait`.

    The writer thread runs at the training's own priority: a lower one (nice
    +10) made a tiny WGAN's saves commit 3.4-4.7x the time of a save on an idle
    machine after their step, instead of 1.6-1.9x, for no measurable gain in
    steps/s (`benchmarks/checkpoint_overhead.py --lag`).

    Attributes:
        on_error: Called with the error on the writer thread when a write fails;
            None by default.

    Example:

    >>> from kerasteps.checkpoint._writer import BackgroundWriter
    >>> writer, done = BackgroundWriter(), []
    >>> writer.start(lambda: done.append(1), "writing")
    >>> writer.wait()
    >>> done
    [1]
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.on_error: Callable[[BaseException], None] | None = None
        #: What the latest write does (`start`'s `where`), and when it began
        #: (`time.monotonic()`).
        self.where, self.began = "", 0.0

    def start(self, write: Callable[[], Any], where: str) -> None:
        """Runs `write()` on the writer thread; `where` names it in an error's note.
        Call `wait` first: one write at a time."""

        def run() -> None:
            try:
                write()
            except BaseException as error:  # noqa: BLE001 - surfaced by `wait`
                error.add_note(f"({where} on the background thread)")
                self._error = error
                if self.on_error is not None:
                    self.on_error(error)

        self.where, self.began = where, time.monotonic()
        self._thread = threading.Thread(
            target=run, name="kerasteps-checkpoint-writer", daemon=False
        )
        self._thread.start()

    @property
    def in_flight(self) -> bool:
        """True while a write runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def failed(self) -> bool:
        """True when a write failed and `wait` has not raised its error yet."""
        return self._error is not None

    def join(self) -> None:
        """Waits for the write in flight, if any; leaves its error for `wait`."""
        if self._thread is not None:  # set and cleared on the owner's thread only
            self._thread.join()

    def wait(self) -> None:
        """Waits for the write in flight, if any; raises its error."""
        self.join()
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error
