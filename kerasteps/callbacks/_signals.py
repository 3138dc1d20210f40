"""Signals during `fit()`: the first one asks for a graceful stop (private).

Owned here, as Lightning's `signal_connector` owns them: `StepCheckpoint` asks for a
`GracefulStop` while a run trains. The first SIGTERM or Ctrl-C (SIGINT) calls back
(training stops after the step in progress and the checkpoint saves it); a second one
goes to the handler that was there before (SIGTERM's default kills, Ctrl-C's raises
`KeyboardInterrupt`).

Keras calls no callback hook when `fit()` raises (TensorFlow's `fit` has no `finally`),
so a run that ended with an error never uninstalls its handlers. A handler therefore
checks, when a signal comes, that its model is still inside `fit()` (its frame is on
the stack); if not, it uninstalls itself and re-delivers the signal to the handler
before it, so a later SIGTERM still ends the process.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

logger = logging.getLogger("kerasteps")

#: Signals that no handler can catch.
UNCATCHABLE = frozenset(
    s for s in (getattr(signal, "SIGKILL", None), getattr(signal, "SIGSTOP", None)) if s
)


def check_signals(signals: Iterable[Any], argument: str = "signals") -> tuple:
    """Returns `signals` as `signal.Signals`; raises `ValueError` for bad ones.

    Example:

    >>> import signal
    >>> from kerasteps.callbacks._signals import check_signals
    >>> check_signals([signal.SIGTERM])
    (<Signals.SIGTERM: 15>,)
    """
    try:
        values = tuple(signal.Signals(s) for s in signals)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"`{argument}` must be signal numbers, received {signals!r}."
        ) from error
    for value in values:
        if value in UNCATCHABLE:
            raise ValueError(
                f"`{argument}` cannot hold {value.name}, which no process can "
                f"catch; received {signals!r}. Use SIGTERM, SIGINT, SIGUSR1..."
            )
    return values


def in_fit(frame: FrameType | None, model: Any) -> bool:
    """True if `frame`'s stack is inside `model.fit()`."""
    while frame is not None:
        if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
            return True
        frame = frame.f_back
    return False


class GracefulStop:
    """Handlers of `signals` for one run of `model`, calling `on_first(signum)` once.

    Args:
        signals: The signals to handle.
        model: The model whose `fit()` is the run.
        on_first: Called with the signal number at the first signal of the run.
    """

    def __init__(
        self,
        signals: Iterable[signal.Signals],
        model: Any,
        on_first: Callable[[int], None],
    ):
        self.signals = tuple(signals)
        self.model = model
        self.on_first = on_first
        self.received: int | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def install(self) -> None:
        """Installs the handlers (main thread only; elsewhere: a WARNING)."""
        self.restore()
        self.received = None
        if not self.signals:
            return
        if threading.current_thread() is not threading.main_thread():
            logger.warning(
                "StepCheckpoint: fit() runs outside the main thread, where Python "
                "installs no signal handler: to save and stop on a preemption, call "
                "checkpoint.request_stop() from the main thread's signal handler or "
                "the cluster's preemption hook."
            )
            return
        self._previous = {sig: signal.signal(sig, self._handle) for sig in self.signals}

    def restore(self) -> None:
        """Puts back the handlers that were there before `install`."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, previous in self._previous.items():
            if signal.getsignal(sig) == self._handle:
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def _deliver_to_previous(self, signum: int) -> None:
        self.restore()
        signal.raise_signal(signum)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not in_fit(frame, self.model):
            # The run ended without a hook (fit raised): step aside.
            self._deliver_to_previous(signum)
            return
        if self.received is not None:
            logger.warning("StepCheckpoint: second %s; not waiting any longer.", name)
            self._deliver_to_previous(signum)
            return
        self.received = signum
        self.on_first(signum)
