"""A live line on a terminal that log lines print above (private).

Owned here: `StepProgressBar` draws its bar through a `LiveLine`. While the line is
on screen, every `logging.StreamHandler` that writes to the same terminal (the
`kerasteps` logger's, the root logger's from `logging.basicConfig`, TensorFlow's...)
writes through it: the line is erased, the log line printed, and the live line drawn
again below it, as tqdm's `logging_redirect_tqdm` and Rich's live display do.

- **Off a terminal, whole lines.** A `LiveLine` whose stream is not a tty (a pipe, a
  file) touches no handler, and writes what is drawn as whole lines only: the text a
  drawing leaves on screen (after Keras's `"\\r"` and `"\\b"` redraws), without
  colour codes or trailing blanks, ending in a newline. So a log line written to the
  same pipe (`2>&1`, a scheduler's log file) never joins a bar line.
- **The real last line.** What is drawn in `drawing()` (Keras's `Progbar` writes
  `"\\b" * n + "\\r" + line` to `sys.stdout`) is captured and written by the
  `LiveLine` itself, so it knows the text on screen and how many rows it takes: a line
  wider than the terminal wraps, and both the redraw and the erase go back to its first
  row (`"\\r"`, cursor up, erase to the end of the screen), where Keras's backspaces
  only work on terminals that wrap backwards.
- **Handlers.** A handler's stream is replaced by an `_AboveLine` while the line is on
  screen (found before the line is first drawn, then again at most once a second, so
  handlers added after the bar began count too) and put back by `close()`;
  `logging.lastResort` (what prints warnings when no handler is set up) is stood in
  for the same way. A stream is swapped in under the handler's lock (`setStream`),
  so a record it is printing then is out before the line is drawn; it is put back by
  assignment, which takes no handler's lock: `close()` may run within a handler's
  `emit`, which holds that handler's lock and then takes the line's.
- **Threads.** One lock orders drawing and log lines (records come from other threads,
  e.g. the asynchronous checkpoint writer's warnings).
- **An end without a hook.** Keras calls no callback when `fit()` raises, so the owner
  passes `alive`: a log line that comes when the run is over, or may be, closes the line
  first (the bar stays as last drawn, the record starts on the next row, the handlers
  get their streams back; an owner whose run goes on draws a new line below), and a
  newer `LiveLine` that draws closes the older ones it finds.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from typing import TextIO

__all__ = ["LiveLine"]

#: Control sequences (colours) take no room on screen.
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x1f\x7f]")
#: Erase from the cursor to the end of the screen.
_ERASE = "\x1b[J"
#: How often, at most, the handlers are looked for again while the line is drawn.
_RESCAN_SECONDS = 1.0


def _width(text: str) -> int:
    """Columns that `text` takes on screen (wide East Asian characters take two)."""
    plain = _CONTROL.sub("", text)
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in plain)


def _overwrite(line: str, written: str) -> str:
    """The line on screen after `written` (no newline in it) was written over `line`."""
    if "\r" in written:
        line, written = "", written.rsplit("\r", 1)[1]
    return line + written.replace("\b", "")


def _terminal_stat(stream) -> os.stat_result | None:
    """The `stat` of the terminal that `stream` writes to, or None if it is no tty."""
    try:
        fd = stream.fileno()
        return os.fstat(fd) if os.isatty(fd) else None
    except (AttributeError, OSError, ValueError):  # closed, StringIO, captured
        return None


def _stream_handlers() -> list[logging.StreamHandler]:
    """Every `StreamHandler` attached to the root logger or any other logger."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    handlers = (
        handler
        for logger in loggers
        if isinstance(logger, logging.Logger)  # not a `PlaceHolder`
        for handler in list(logger.handlers)
        if isinstance(handler, logging.StreamHandler)
    )
    return list(dict.fromkeys(handlers))  # each once


class _AboveLine:
    """A handler's stream while a `LiveLine` is shown: what it writes goes above."""

    def __init__(self, stream: TextIO, line: LiveLine):
        self.stream = stream
        self.line = line

    def write(self, text: str) -> int:
        return self.line._write_above(self.stream, text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)  # flush, name, encoding, fileno, isatty...


class LiveLine:
    """One line redrawn in place at the bottom of a terminal; log lines go above it.

    Args:
        stream: The terminal stream the line is drawn on (the real `sys.stdout`):
            `drawing()` captures what its block writes to `sys.stdout` and writes
            it here. Off a terminal, as whole lines (see the module docstring).
        enabled: False to leave everything as it is (the line is not drawn in
            place, on a terminal or off it: what is drawn is written as it is).
        alive: Returns False once the owner's run is over without `close()` (a
            `fit()` that raised), or may be; then the next log line closes the line
            (`closed`). None: open until `close()`.

    Example:

    >>> import sys
    >>> from kerasteps.callbacks._terminal import LiveLine
    >>> line = LiveLine(sys.stdout)  # here not a terminal: whole lines
    >>> line.active, line.whole_lines
    (False, True)
    >>> with line.drawing():  # on a terminal: captured, drawn as the live line
    ...     print(" 3/10 - loss: 0.1234", end="")
    ...     print("\\b" * 20 + "\\r 4/10 - loss: 0.1003", end="")
     4/10 - loss: 0.1003
    >>> line.close()
    """

    def __init__(
        self,
        stream: TextIO,
        enabled: bool = True,
        alive: Callable[[], bool] | None = None,
    ):
        self.stream = stream
        self._stat = _terminal_stat(stream) if enabled else None
        self._whole_lines = enabled and self._stat is None
        self._alive = alive
        self._lock = threading.RLock()
        #: The live line as last drawn (control sequences included).
        self.text = ""
        self._shown = False  # on screen, the cursor at its end
        self._partial = False  # a log write without its newline came last
        #: True after `close()`, or once a log line found the owner's run over.
        self.closed = False
        self._wrapped: list[tuple[logging.StreamHandler, _AboveLine]] = []
        self._last_resort: tuple[logging.Handler, logging.Handler] | None = None
        self._scanned = -float("inf")

    @property
    def active(self) -> bool:
        """True while the line is drawn in place on a terminal (until `close()`)."""
        return self._stat is not None and not self.closed

    @property
    def whole_lines(self) -> bool:
        """True off a terminal: what is drawn is written as whole lines only."""
        return self._whole_lines and not self.closed

    @contextlib.contextmanager
    def drawing(self) -> Iterator[None]:
        """Captures what the block writes to `sys.stdout` and draws it as the line.

        Text up to a newline becomes a finished line (it scrolls up with the log
        lines); the text after the last newline is the live line.
        """
        active = self.active
        if not (active or self.whole_lines):
            yield
            return
        captured = io.StringIO()
        with self._lock:
            if active and time.monotonic() - self._scanned >= _RESCAN_SECONDS:
                self._wrap_handlers()  # before the line is on screen
            try:
                with contextlib.redirect_stdout(captured):
                    yield
            finally:
                if active:
                    self._draw(captured.getvalue())
                else:
                    self._write_whole_lines(captured.getvalue())

    def close(self) -> None:
        """Gives every handler its stream back and leaves the cursor on a new row."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for handler, wrapper in self._wrapped:
                if handler.stream is wrapper:
                    handler.stream = wrapper.stream
            if self._last_resort is not None:
                original, ours = self._last_resort
                if logging.lastResort is ours:
                    logging.lastResort = original
            self._alive = None  # what it holds (the owner's run) may go
            if self._shown or self._partial:
                self._write("\n")
            self._shown = self._partial = False

    # -- drawing ------------------------------------------------------------------
    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
        except UnicodeEncodeError:  # as Keras's print_msg: its bar in plain ASCII
            encoding = getattr(self.stream, "encoding", None) or "utf-8"
            text = text.replace("━", "=").encode(encoding, "replace").decode(encoding)
            self.stream.write(text)
        self.stream.flush()

    def _home(self) -> str:
        """Moves the cursor to the first column of the live line's first row."""
        if self._partial:
            self._partial = False
            return "\n"  # keep a log line that has no newline yet
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0  # unknown
        # A line as wide as the terminal or wider wraps. The rows are counted at the
        # current width: terminals that reflow lines when resized show it that way.
        above = (_width(self.text) - 1) // columns if self._shown and columns else 0
        return "\r" + (f"\x1b[{above}A" if above > 0 else "")  # up to its first row

    def _write_whole_lines(self, captured: str) -> None:
        """Off a terminal: each line as it would end up on screen, with a newline."""
        rows = (_overwrite("", written) for written in captured.split("\n"))
        lines = (_CONTROL.sub("", row).rstrip() for row in rows)
        text = "".join(f"{line}\n" for line in lines if line)
        if text:
            self._write(text)  # one write: a pipe keeps it whole

    def _draw(self, captured: str) -> None:
        if not captured:
            return
        *finished, live = captured.split("\n")
        out = self._home() + _ERASE
        for written in finished:
            out += _overwrite(self.text, written) + "\n"
            self.text = ""
        self.text = _overwrite(self.text, live)
        self._write(out + self.text)
        self._shown = bool(self.text)

    # -- log lines ----------------------------------------------------------------
    def _write_above(self, stream: TextIO, text: str) -> int:
        if not self.closed and self._alive is not None and not self._alive():
            self.close()  # the run ended without telling (fit raised)
        with self._lock:
            if self.closed:
                return stream.write(text)
            if text and self._shown and not self._partial:
                self._write(self._home() + _ERASE)
                self._shown = False
            written = stream.write(text)
            stream.flush()
            if text.endswith("\n"):
                self._partial = False
                if self.text:
                    self._write(self.text)
                    self._shown = True
            elif text:
                self._partial = True
            return written

    def _wrap_handlers(self) -> None:
        """Sends the handlers that write to this terminal through `_AboveLine`."""
        self._scanned = time.monotonic()
        for handler in _stream_handlers():
            self._close_older(handler)
            stream = getattr(handler, "stream", None)
            if not self._on_terminal(stream):
                continue  # drawn through this line already, or another terminal
            wrapper = _AboveLine(stream, self)
            try:
                # Under the handler's lock: a record it is printing now is out first.
                handler.setStream(wrapper)
            except AttributeError:  # a read-only `stream` (logging.lastResort's kind)
                continue
            self._wrapped.append((handler, wrapper))
        self._wrap_last_resort()

    def _close_older(self, handler: logging.Handler | None) -> None:
        """Closes an older line (its run raised) that `handler` writes through: this
        one is on."""
        stream = getattr(handler, "stream", None)
        if isinstance(stream, _AboveLine) and stream.line is not self:
            stream.line.close()

    def _on_terminal(self, stream: TextIO) -> bool:
        """Whether `stream` writes to this line's terminal, not through a line."""
        if isinstance(stream, _AboveLine):
            return False
        stat = _terminal_stat(stream)
        return stat is not None and os.path.samestat(stat, self._stat)

    def _wrap_last_resort(self) -> None:
        """`logging.lastResort` (WARNING and up when no logger has a handler) too.

        Its `stream` is always the current `sys.stderr`, so it cannot be swapped:
        a handler of the same level and format writing through `_AboveLine` stands in
        for it while the line is on screen.
        """
        if self._last_resort is not None:
            return
        self._close_older(logging.lastResort)  # an older line's stand-in
        original = logging.lastResort
        if not isinstance(original, logging.StreamHandler):
            return
        if not self._on_terminal(original.stream):
            return
        ours = logging.StreamHandler(_AboveLine(original.stream, self))
        ours.setLevel(original.level)
        ours.setFormatter(original.formatter)
        self._last_resort = (original, ours)
        logging.lastResort = ours
