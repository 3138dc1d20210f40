"""`Throughput`: steps/s and examples/s every N global steps, for the sinks."""

from __future__ import annotations

import time

from kerasteps._validate import check_int
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.schedule import Every

__all__ = ["Throughput"]


class Throughput(StepCallback):
    """Measures training speed over the last window of global steps.

    At every firing step it provides `steps_per_second`, and with a batch size
    `examples_per_second`, over the window since its previous firing (the first
    window starts when the run begins, so it includes tracing and compilation).
    It is a provider: the values reach every kerasteps sink at that step
    (`StepTensorBoard` scalars, JSON lines, `LogEvery` lines), whatever order the
    callbacks were listed in. Steps are global steps, so with
    `steps_per_execution=K` each batch end counts K steps.

    Keras does not tell callbacks the batch size, so pass `batch_size=` (examples
    per global step: the `fit` batch size; for a WGAN, the batch of one generator
    step) to get `examples_per_second`; without it only `steps_per_second` is
    provided. Timing is wall-clock at batch ends.

    Args:
        every: Positive int or `kerasteps.Every`, default 100.
        batch_size: Optional positive int, examples per global step.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import Throughput
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> speed = Throughput(every=5, batch_size=2)
    >>> _ = model.fit(np.ones((40, 2)), np.ones((40, 1)), batch_size=2, verbose=0,
    ...               callbacks=[speed])
    >>> sorted(speed.last_values)
    ['examples_per_second', 'steps_per_second']
    """

    role = "provider"
    reads_values = False
    async_safe = True
    reads_model = False  # its events' values only

    def __init__(self, every: int | Every = 100, batch_size: int | None = None):
        super().__init__(Every.coerce(every, name="every"))
        self.batch_size: int | None = None
        #: The names it adds at each point.
        self.provides = ("steps_per_second",)
        if batch_size is not None:
            self.batch_size = check_int("batch_size", batch_size)
            self.provides += ("examples_per_second",)
        self._window_start: tuple[float, int] | None = None
        #: The values of the last window, `{"steps_per_second": ..., ...}`.
        self.last_values: dict[str, float] = {}

    def on_run_begin(self, start_step: int) -> None:
        self._window_start = (time.perf_counter(), start_step)
        self.last_values = {}

    def on_step(self, event: StepEvent) -> dict[str, float] | None:
        now = time.perf_counter()
        started, first_step = self._window_start or (now, event.prev)
        self._window_start = (now, event.step)
        elapsed = now - started
        steps = event.step - first_step
        if elapsed <= 0 or steps <= 0:
            return None
        self.last_values = {"steps_per_second": steps / elapsed}
        if self.batch_size is not None:
            self.last_values["examples_per_second"] = steps * self.batch_size / elapsed
        return self.last_values
