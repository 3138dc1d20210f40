"""StepProgressBar and log lines on one terminal: log lines print above the bar.

Real terminals: pseudo-terminals (`os.openpty`). Two tests run a training script with
its stdout and stderr on one (LogEvery's own handler; `logging.basicConfig`'s, with a
bar wider than the terminal), the others train in this process with `sys.stdout` and
a handler on one. What the terminal received is replayed on a small screen (carriage
return, newline, backspace, cursor up, erase, line wrap) to see what a user sees. The
last test runs a script without any logging setup, its output to pipes. The scripts
run on TensorFlow only (what reaches the terminal does not depend on the backend);
the tests that train in this process run on JAX too (`neutral`).
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import re
import struct
import subprocess
import sys
import termios
import textwrap
import threading

import keras
import numpy as np
import pytest

from kerasteps.callbacks import LogEvery, StepProgressBar, _terminal
from kerasteps.callbacks._terminal import LiveLine
from tests import zygote
from tests.helpers import ROOT, script_environment

SCRIPT = ROOT / "tests" / "scripts" / "progress_terminal.py"

_CSI = re.compile(r"\x1b\[([0-9;?]*)([@-~])")
#: Where a log line may begin: a new row, or right after the bar was erased.
_LINE_START = re.compile(r"(\n|\r(\x1b\[\d+A)?\x1b\[[JK])$")
_BAR = re.compile(r"\x1b\[1m\s*\d+/\d+\x1b\[0m")


def _fit(*callbacks, stdout: Terminal | None = None, steps: int = 12) -> None:
    """Trains a tiny model; with `stdout` a terminal as `sys.stdout`."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.random.default_rng(0).normal(size=(steps * 2, 2)).astype("float32")
    # pytest puts its own sys.stdout back before each test: set it here.
    with contextlib.redirect_stdout(stdout.stream if stdout else sys.stdout):
        model.fit(x, x[:, :1], batch_size=2, verbose=0, callbacks=list(callbacks))


class Screen:
    """What a VT100 terminal of `columns` shows (with all its scrollback)."""

    def __init__(self, columns: int):
        self.columns = columns
        self.rows: list[list[str]] = [[]]
        self.row = self.col = 0

    def feed(self, text: str) -> Screen:
        i = 0
        while i < len(text):
            csi = _CSI.match(text, i)
            if csi:
                self._control(csi.group(1), csi.group(2))
                i = csi.end()
                continue
            char = text[i]
            i += 1
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self._down()
            elif char == "\b":
                self.col = max(0, self.col - 1)  # no reverse wrap (xterm's default)
            elif char >= " ":
                if self.col >= self.columns:  # the wrap, deferred to the next char
                    self._down()
                row = self.rows[self.row]
                row.extend(" " * (self.col + 1 - len(row)))
                row[self.col] = char
                self.col += 1
        return self

    def _down(self) -> None:
        self.row += 1
        self.col = 0
        while len(self.rows) <= self.row:
            self.rows.append([])

    def _control(self, argument: str, final: str) -> None:
        if final == "A":
            self.row = max(0, self.row - int(argument or 1))
        elif final == "K":
            del self.rows[self.row][self.col :]
        elif final == "J":
            del self.rows[self.row][self.col :]
            del self.rows[self.row + 1 :]
        # "m" (colours) changes nothing on the screen's text

    def lines(self) -> list[str]:
        return ["".join(row).rstrip() for row in self.rows]


def _pty(columns: int, rows: int = 50) -> tuple[int, int]:
    master, slave = os.openpty()
    size = struct.pack("HHHH", rows, columns, 0, 0)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    return master, slave


#: Written by the test after everything else, so the reader knows it has it all.
#: (Reading until the last writer closes the terminal can lose the last bytes on
#: Linux: the master may see the hang-up before the tty's buffer reaches it.)
_END = b"<<end of the test's terminal>>"


def _read_to_end(master: int) -> bytes:
    """Everything written to the terminal, up to the `_END` the test writes last."""
    chunks = []
    tail = b""
    while not tail.endswith(_END):
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
        tail = (tail + chunk)[-len(_END) :]
    os.close(master)
    return b"".join(chunks).removesuffix(_END)


def _run_in_terminal(columns: int, *args: str) -> str:
    """Runs the script with its stdout and stderr on a terminal, buffered as a
    user's Python has them there (line-buffered, not `PYTHONUNBUFFERED`)."""
    term = Terminal(columns)
    env = script_environment()
    del env["PYTHONUNBUFFERED"]
    process = zygote.Popen(
        [sys.executable, str(SCRIPT), *args],
        stdin=subprocess.DEVNULL,
        stdout=term.slave,
        stderr=term.slave,
        env=env,
    )
    try:
        process.wait(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=60)
    out = term.read()
    assert process.returncode == 0, out[-3000:]
    return out


def _states(out: str) -> dict[str, dict]:
    found = re.findall(r"STATE (\{.*?\})\r?\n", out)
    return {state["when"]: state for state in map(json.loads, found)}


def _check_log_lines(out: str, pattern: str) -> list[re.Match]:
    """Every log line starts on a row of its own, whole, and the bar comes back."""
    lines = list(re.finditer(pattern + r"\r\n", out))
    assert lines, out[-2000:]
    for line in lines:
        before = out[max(0, line.start() - 20) : line.start()]
        assert _LINE_START.search(before), (before, line.group())
    return lines


def test_log_lines_print_above_the_bar_in_a_terminal():
    out = _run_in_terminal(120, "--thread")
    steps = [5, 10, 15, 20, 25, 30, 35, 40]
    logged = _check_log_lines(out, r"INFO:kerasteps:loss=\S+ at step (\d+)")
    assert [int(m.group(1)) for m in logged] == steps
    for line in logged:  # the bar is drawn again at once, below the line
        assert _BAR.match(out, line.end()), out[line.end() : line.end() + 80]
    # Lines from another thread (its own handler, then LogEvery's) are whole too.
    chatter = r"(WARNING:kerasteps\.writer:)?from a thread \d+"
    assert len(_check_log_lines(out, chatter)) > 5

    screen = Screen(120).feed(out).lines()
    bars = [i for i, row in enumerate(screen) if "━" in row]
    assert len(bars) == 1, "\n".join(screen)  # every bar drawn before was erased
    assert re.match(r"40/40 ━{30} ", screen[bars[0]])
    rows = [i for i, row in enumerate(screen) if "INFO:kerasteps:loss=" in row]
    assert [screen[i].rsplit(" ", 1)[1] for i in rows] == [str(s) for s in steps]
    assert all(
        re.fullmatch(r"INFO:kerasteps:loss=\S+ at step \d+", screen[i]) for i in rows
    )
    assert rows[-1] < bars[0]
    assert all(re.fullmatch(chatter, row) for row in screen if "from a thread" in row)
    states = _states(out)
    assert states["before"]["handlers"] == 0  # LogEvery adds its handler ...
    assert states["after"]["original"] == [True]  # ... which writes to stderr again


def test_a_bar_wider_than_the_terminal_is_erased_from_its_first_row():
    out = _run_in_terminal(50, "--basic-config", "--steps", "20")
    logged = _check_log_lines(out, r"INFO:kerasteps:loss=\S+ at step (\d+)")
    assert [int(m.group(1)) for m in logged] == [5, 10, 15, 20]
    assert "\r\x1b[1A\x1b[J" in out  # the bar takes two rows: up one, then erase

    screen = Screen(50).feed(out).lines()
    bars = [i for i, row in enumerate(screen) if "━" in row]
    assert len(bars) == 1, "\n".join(screen)
    assert screen[bars[0]].startswith("20/20 ━")
    assert "loss: " in screen[bars[0] + 1]  # its second row
    rows = [row for row in screen if "INFO:kerasteps:" in row]
    assert len(rows) == 4
    assert all(
        re.fullmatch(r"INFO:kerasteps:loss=\S+ at step \d+", row) for row in rows
    )
    states = _states(out)
    assert states["before"]["original"] == states["after"]["original"] == [True]


# -- in this process --------------------------------------------------------------
class Terminal:
    """A pseudo-terminal of `columns`: `stream` writes to it, `read()` what came."""

    def __init__(self, columns: int = 120):
        self.columns = columns
        self.master, self.slave = _pty(columns)
        self.stream = io.TextIOWrapper(
            io.FileIO(os.dup(self.slave), "w"), encoding="utf-8", line_buffering=True
        )
        self._out: list[bytes] = []
        self._reader = threading.Thread(
            target=lambda: self._out.append(_read_to_end(self.master)), daemon=True
        )
        self._reader.start()

    def read(self) -> str:
        """Closes the terminal; what it received."""
        if self.slave is not None:
            if not self.stream.closed:
                self.stream.close()  # flushes
            os.write(self.slave, _END)
            self._reader.join(timeout=30)
            os.close(self.slave)
            self.slave = None
        return b"".join(self._out).decode("utf-8", "replace")


@pytest.fixture
def terminal():
    """A handler of the `kerasteps` logger on a terminal (`_fit` draws there)."""
    term = Terminal()
    log = logging.getLogger("kerasteps")
    handler = logging.StreamHandler(term.stream)
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.INFO)
    term.handler = handler
    yield term
    log.removeHandler(handler)
    log.setLevel(level)
    term.read()


class _FailAt(keras.callbacks.Callback):
    def __init__(self, step: int):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == self.step:
            raise RuntimeError(f"failed at step {self.step}")


class _Streams(keras.callbacks.Callback):
    """Records, at each batch end, the stream of a handler."""

    def __init__(self, handler: logging.StreamHandler):
        super().__init__()
        self.handler = handler
        self.seen: list = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(self.handler.stream)


@pytest.mark.neutral
@pytest.mark.keras_range
def test_handlers_get_their_streams_back_after_the_run(terminal):
    original = terminal.handler.stream
    streams = _Streams(terminal.handler)
    _fit(LogEvery(every=5), StepProgressBar(12, interval=0), streams, stdout=terminal)
    assert all(s is not original for s in streams.seen)  # through the bar's line
    assert terminal.handler.stream is original
    screen = Screen(120).feed(terminal.read()).lines()
    assert len(screen) == 4, screen
    assert re.fullmatch(r"loss=\S+ at step 5", screen[0])
    assert re.fullmatch(r"loss=\S+ at step 10", screen[1])
    assert screen[2].startswith("12/12 ━")
    assert screen[3] == ""


@pytest.mark.neutral
@pytest.mark.keras_range
def test_after_a_fit_that_raised_the_next_log_line_gives_streams_back(terminal):
    original = terminal.handler.stream
    with pytest.raises(RuntimeError, match="failed at step 7"):
        _fit(
            LogEvery(every=5),
            StepProgressBar(12, interval=0),
            _FailAt(7),
            stdout=terminal,
        )
    # Keras called no hook: the stream is still the bar's ...
    assert terminal.handler.stream is not original
    logging.getLogger("kerasteps").warning("after the failed run")
    # ... until the next log line, which finds the run over.
    assert terminal.handler.stream is original
    screen = Screen(120).feed(terminal.read()).lines()
    assert screen[-1] == ""
    assert screen[-2] == "after the failed run"  # a row of its own
    assert screen[-3].startswith(" 7/12 ━")  # the bar as it was last drawn
    assert re.fullmatch(r"loss=\S+ at step 5", screen[-4])


@pytest.mark.neutral
@pytest.mark.keras_range
def test_a_new_run_takes_over_from_a_run_that_raised(terminal):
    original = terminal.handler.stream
    bar = StepProgressBar(12, interval=0)
    with pytest.raises(RuntimeError):
        _fit(bar, _FailAt(4), stdout=terminal)
    streams = _Streams(terminal.handler)
    _fit(StepProgressBar(12, interval=0), streams, stdout=terminal)  # another bar
    wrapped = streams.seen[-1]
    assert wrapped is not original and wrapped.stream is original  # not nested
    assert terminal.handler.stream is original
    with pytest.raises(RuntimeError):
        _fit(bar, _FailAt(4), stdout=terminal)
    _fit(bar, stdout=terminal)  # the same bar again
    assert terminal.handler.stream is original


class _LogsAt(keras.callbacks.Callback):
    """Logs a line at the end of one step, outside any kerasteps callback."""

    def __init__(self, step: int):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == self.step:
            logging.getLogger("kerasteps").warning("from another callback")


@pytest.mark.neutral
def test_a_log_line_between_steps_leaves_the_bar_and_the_run_draws_it_again(
    terminal,
):
    # No frame inspection: a line logged on the training thread while no kerasteps
    # callback acts may come after a fit() that raised, so the bar's line closes
    # (the bar stays as drawn above it); the run goes on and draws a new line.
    original = terminal.handler.stream
    streams = _Streams(terminal.handler)
    _fit(StepProgressBar(12, interval=0), _LogsAt(6), streams, stdout=terminal)
    assert streams.seen[5] is original  # closed by the line at step 6
    assert streams.seen[-1] is not original  # through the new line again
    assert terminal.handler.stream is original
    screen = Screen(120).feed(terminal.read()).lines()
    at = screen.index("from another callback")
    assert screen[at - 1].startswith(" 6/12 ━"), screen
    assert screen[at + 1].startswith("12/12 ━"), screen
    assert screen[at + 2 :] == [""], screen


@pytest.mark.neutral
def test_nothing_changes_when_stdout_is_not_a_terminal(capsys):
    log = logging.getLogger("kerasteps")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.INFO)
    try:
        streams = _Streams(handler)
        _fit(LogEvery(every=5), StepProgressBar(12, interval=0), streams)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    assert all(s is stream for s in streams.seen)
    assert stream.getvalue().splitlines()[0].startswith("loss=")
    out = capsys.readouterr().out
    # Off a terminal the bar writes whole lines only: no redraws, no colours.
    assert "\x1b" not in out and "\r" not in out and "\b" not in out
    assert out.endswith("\n")
    lines = out.splitlines()
    assert lines and all(re.match(r"^ *\d+/12 ", line) for line in lines), lines


@pytest.mark.neutral
def test_a_log_write_without_newline_is_kept_and_the_line_drawn_after_it():
    term = Terminal(columns=30)
    line = LiveLine(term.stream)
    handler = logging.StreamHandler(term.stream)
    handler.terminator = ""
    log = logging.getLogger("kerasteps.test_terminal")
    log.addHandler(handler)
    log.propagate = False
    try:
        with line.drawing():
            sys.stdout.write("\r" + "=" * 45)  # two rows on 30 columns
        assert line.text == "=" * 45
        log.warning("part one;")
        log.warning(" part two\n")
        with line.drawing():
            sys.stdout.write("\b\b\r" + "#" * 10)
        line.close()
        assert handler.stream is term.stream
    finally:
        log.removeHandler(handler)
        log.propagate = True
    out = term.read()
    assert out.startswith("\r\x1b[J" + "=" * 45 + "\r\x1b[1A\x1b[Jpart one;")
    screen = Screen(30).feed(out).lines()
    assert screen == ["part one; part two", "#" * 10, ""]


@pytest.mark.neutral
def test_warnings_with_no_handler_set_up_print_above_the_line(monkeypatch):
    term = Terminal(columns=40)
    monkeypatch.setattr(sys, "stderr", term.stream)  # where logging.lastResort prints
    original = logging.lastResort
    log = logging.getLogger("kerasteps.test_no_handler")
    monkeypatch.setattr(log, "propagate", False)  # no handler anywhere: lastResort
    line = LiveLine(term.stream)
    with line.drawing():
        sys.stdout.write("\r 1/10 ━━━")
    assert logging.lastResort is not original
    log.warning("a warning")
    log.info("not shown: below lastResort's level")
    line.close()
    assert logging.lastResort is original
    screen = Screen(40).feed(term.read()).lines()
    assert screen == ["a warning", " 1/10 ━━━", ""]


@pytest.mark.neutral
def test_a_handler_added_while_the_line_is_drawn_prints_above_it(monkeypatch):
    monkeypatch.setattr(_terminal, "_RESCAN_SECONDS", 0.0)
    term = Terminal(columns=40)
    log = logging.getLogger("kerasteps.test_added")
    monkeypatch.setattr(log, "propagate", False)
    line = LiveLine(term.stream)
    with line.drawing():
        sys.stdout.write("\r 1/10")
    handler = logging.StreamHandler(term.stream)
    log.addHandler(handler)  # as logging.basicConfig() in the middle of a run
    try:
        with line.drawing():
            sys.stdout.write("\r 2/10")
        assert handler.stream is not term.stream
        log.warning("added later")
        line.close()
        assert handler.stream is term.stream
    finally:
        log.removeHandler(handler)
    assert Screen(40).feed(term.read()).lines() == ["added later", " 2/10", ""]


def test_lines_show_without_any_logging_setup(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        import os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import numpy as np, keras
        from kerasteps import Every
        from kerasteps.callbacks import LogEvery
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        model.fit(np.ones((6, 2)), np.ones((6, 1)), batch_size=2, verbose=0,
                  callbacks=[LogEvery(Every(2, start=1))])
    """)
    )
    result = zygote.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=script_environment(),
    )
    assert result.returncode == 0, result.stderr
    lines = [
        ln for ln in result.stderr.splitlines() if ln.startswith("INFO:kerasteps:")
    ]
    assert [ln.rsplit(" ", 1)[1] for ln in lines] == ["1", "3"]
    assert all(ln.startswith("INFO:kerasteps:loss=") for ln in lines)
