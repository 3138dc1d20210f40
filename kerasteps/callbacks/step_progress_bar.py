"""`StepProgressBar`: one `keras.utils.Progbar` over the global steps of a run."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence

import keras

from kerasteps import _compat
from kerasteps._validate import check_int, check_names, check_number
from kerasteps.callbacks._terminal import LiveLine
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.callbacks.step_run import StepRun
from kerasteps.schedule import Every

__all__ = ["StepProgressBar"]


class _GlobalStepProgbar(_compat.ProgbarFromStep, keras.utils.Progbar):
    """A `Progbar` whose count starts at the run's first global step.

    A resumed run starts at its checkpoint's step: the time-per-step estimate (and
    the ETA) use only the steps of this run. The first update (its step includes
    tracing) starts the clock and draws nothing; the ETA comes from the rate since.
    Every value is shown as it is (the callback reduced it already), formatted as
    `LogEvery` prints it.
    """


def _run_alive(run: StepRun) -> Callable[[], bool]:
    """A test that `run` may still be training, for a log line.

    Keras calls no callback when `fit()` raises, and nothing public tells that the
    call is over. A log line written on the training thread while no kerasteps
    callback of the run acts (`run.acting`) is taken as the run being over: it
    comes after a `fit()` that raised, or from Keras or another callback between
    two steps. The bar's line then closes (the bar stays as last drawn above the
    log line); a run that goes on draws the bar again below at its next update.
    From another thread (a checkpoint writer, a data loader) nothing can be told:
    the run is taken as going on.
    """

    def alive() -> bool:
        return not run.ended and (threading.get_ident() != run.thread or run.acting)

    return alive


class StepProgressBar(StepCallback):
    """Shows one progress bar over the global steps of the whole run.

    Keras's bar restarts every epoch and counts batches; this one counts global
    steps up to `total_steps` (the planned end, e.g. `StopAtStep`'s `max_steps`)
    across all epochs, starts at the restored step when a run resumes, and shows
    the ETA and the latest value of every logged metric and provided value
    (`val_loss`, `steps_per_second`). The ETA and the time per step come from this
    run's steady speed: the bar is first drawn at its second update, the first
    (whose step includes tracing) only starts its clock. Values read as in
    `LogEvery`'s lines (`kerasteps.formatting.format_value`: `loss: 265.618600`,
    `steps_per_second: 16.27`). The values shown are refreshed at most every
    `interval` seconds; each is the mean over the steps since the previous refresh
    (`reduce="mean"`). It is exact with `steps_per_execution` (the bar moves by K
    steps per batch end). The last line, printed when training ends, shows the
    final global step.

    It is Keras's own `keras.utils.Progbar`. Pass `verbose=0` to `fit()` so Keras
    does not draw its per-epoch bar as well.

    On a terminal, log lines print above the bar: while the bar is drawn, every
    `logging.StreamHandler` that writes to the same terminal (the `kerasteps`
    logger's, the root logger's from `logging.basicConfig`) erases the bar, prints
    its line, and the bar is drawn again below it, as with tqdm's
    `logging_redirect_tqdm`. The handlers get their streams back when the run ends;
    after a `fit()` that raised (Keras calls no callback then), at the next log
    line or the next run of a bar. Nothing public tells when a `fit()` that raised
    is over, so a log line written on the training thread while no kerasteps
    callback acts (Keras's own, or another callback's between two steps) does the
    same: the bar stays as last drawn above it, and is drawn again below at its
    next update.

    Off a terminal (stdout to a pipe or a file) the bar writes whole lines only,
    never a line without its newline, so log lines sent to the same place never
    join it: one line at the run's second step (the first with a steady speed),
    one each time the step crosses a tenth of `total_steps`, and the final line
    when training ends; without colour codes.

    Args:
        total_steps: Positive int, the global step at which the run is planned to
            end (the bar's target).
        every: Positive int or `kerasteps.Every`, default 1: how often the bar is
            updated (the bar redraws at most every `interval` seconds anyway).
        keys: Optional sequence of value names to show. Default: all.
        width: Int, default 30, width of the bar in characters.
        interval: Float, default 0.05: minimum seconds between redraws.
        reduce: `"mean"` (default), `"last"` or `"epoch"`: what is shown for
            `loss` and the `Mean`-type metrics: the mean since the previous
            refresh, the latest step's own batch, or Keras's running mean since
            the epoch began.

    Example:

    >>> import contextlib, io, numpy as np, keras
    >>> from kerasteps.callbacks import StepProgressBar
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> bar = StepProgressBar(total_steps=20)
    >>> with contextlib.redirect_stdout(io.StringIO()) as screen:
    ...     _ = model.fit(np.ones((40, 2)), np.ones((40, 1)), batch_size=2,
    ...                   verbose=0, callbacks=[bar])
    >>> "20/20" in screen.getvalue(), bar.count
    (True, 20)
    """

    chief_only = True

    def __init__(
        self,
        total_steps: int,
        every: int | Every = 1,
        keys: Sequence[str] | None = None,
        width: int = 30,
        interval: float = 0.05,
        reduce: str = "mean",
    ):
        super().__init__(Every.coerce(every, name="every"), reduce=reduce)
        self.total_steps = check_int("total_steps", total_steps)
        self.width = check_int("width", width)
        self.keys = check_names("keys", keys)
        self.interval = check_number("interval", interval, 0, wrong_type=TypeError)
        #: The `keras.utils.Progbar` of the current (or last) run.
        self.progbar: keras.utils.Progbar | None = None
        #: The global step the bar shows (after the run: the final step).
        self.count: int | None = None
        self._lock = threading.Lock()
        self._line: LiveLine | None = None

    def on_run_begin(self, start_step: int) -> None:
        if self._line is not None:
            self._line.close()  # the previous run raised: no hook ended it
        self.progbar = _GlobalStepProgbar(
            self.total_steps,
            initial=start_step,
            width=self.width,
            interval=self.interval,
            unit_name="step",
        )
        self.count = start_step
        self._values: list[tuple[str, float]] = []
        self._refreshed = -float("inf")
        self._draw = False
        self._line = self._open_line()
        if self._line.whole_lines:
            self.progbar.interval = 0  # the lines below decide when to draw
        self._next_line = start_step + 1  # off a terminal: the next line's step

    def _open_line(self) -> LiveLine:
        """The bar's line on `sys.stdout`, drawn in place where the bar redraws one
        line (`"\\r"`), as Keras decides.

        Keras's `Progbar` redraws in place when `verbose=1` and its display is dynamic
        (stdout a tty, or any POSIX system, a notebook, PyCharm), and prints to stdout
        unless interactive logging is off (then to `absl.logging`). `LiveLine` adds its
        own condition: stdout is a terminal.
        """
        interactive = keras.config.is_interactive_logging_enabled()
        in_place = interactive and _compat.progbar_redraws_in_place(self.progbar)
        return LiveLine(sys.stdout, enabled=in_place, alive=_run_alive(self.run))

    def _line_due(self, step: int) -> bool:
        """Whether the bar is drawn at `step`: always on a terminal; off a terminal,
        at the run's second step (the first starts the bar's clock and draws
        nothing), then each tenth of the run. A line that a log line closed between
        two steps is opened anew first."""
        if self._line.closed:
            self._line = self._open_line()
        if not self._line.whole_lines:
            return True
        if step < self._next_line or step >= self.total_steps:
            return False  # the final line comes at the run's end
        # Before the bar's clock starts (nothing drawn), the first line is the next.
        tenth = -(-self.total_steps // 10) if self.progbar.started else 1
        self._next_line = (step // tenth + 1) * tenth
        return True

    def wants_values(self, step: int) -> bool:
        """True where the bar is drawn and its values are due for a refresh: at
        most every `interval` seconds (each line, off a terminal)."""
        with self._lock:
            self._draw = self._line_due(step)
            now = time.monotonic()
            due = now - self._refreshed >= self.interval or self._line.whole_lines
            refresh = self._draw and due
            if refresh:
                self._refreshed = now
            return refresh

    def on_step(self, event: StepEvent) -> None:
        with self._lock:
            if not event.scheduled:  # a provider's values at a step of its own
                self._draw = self._line_due(event.step)
            # The training values since the last refresh when they were due
            # (`wants_values`), else a provider's at this step only.
            shown = {**dict(self._values), **event.values()}
            if self.keys is not None:
                shown = {k: shown[k] for k in self.keys if k in shown}
            self._values = list(shown.items())
            self.count = event.step
            if self._draw:
                with self._line.drawing():
                    self.progbar.update(event.step, self._values, finalize=False)

    def on_run_end(self, final_step: int) -> None:
        with self._lock, contextlib.closing(self._line), self._line.drawing():
            self.count = final_step
            self.progbar.update(final_step, self._values, finalize=True)
