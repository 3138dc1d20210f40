"""`TrainingClock`: the wall time inside `fit`'s training calls (the recipe kit)."""

from __future__ import annotations

import os
import time

import keras

__all__ = ["TrainingClock"]


class TrainingClock(keras.callbacks.Callback):
    """Sums the wall time spent inside `fit`'s training calls.

    Each call is timed from its train batch's begin to its end (with
    `steps_per_execution=K`, one call runs K steps), so what happens between calls
    (evaluating, logging, checkpointing) is not counted. List it first in
    `callbacks`, so that a call's end is taken before the other callbacks act at
    that batch end. Tracing and compiling happen inside the first call of a
    `fit()`: run `kerasteps.recipe.warm_up` first to leave them out.

    Args:
        seconds: The time to count on from, default 0.0; a resumed run starts from
            the time it had logged at its checkpoint (`TrainingClock.resume`).

    Attributes:
        seconds: The training time so far.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.recipe import TrainingClock
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> clock = TrainingClock()
    >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2, verbose=0,
    ...               callbacks=[clock])
    >>> clock.seconds > 0
    True
    """

    def __init__(self, seconds: float = 0.0):
        super().__init__()
        self.seconds = float(seconds)
        self._began: float | None = None

    @classmethod
    def resume(
        cls, log_dir: str | os.PathLike, step: int, tag: str = "train_seconds"
    ) -> TrainingClock:
        """A clock that continues from the time a run logged at `step`.

        Reads the TensorBoard run `log_dir/train` (a `StepTensorBoard` log
        directory): the last value of `tag` at or before `step` (a resumed run's
        start step), or 0.0 when there is none.

        Args:
            log_dir: The `log_dir` of the run's `StepTensorBoard`.
            step: The global step the run resumes from.
            tag: The scalar the clock's time was logged as.

        Returns:
            A `TrainingClock` whose `seconds` is that value.

        Example:

        >>> import tempfile
        >>> from kerasteps.recipe import TrainingClock
        >>> TrainingClock.resume(tempfile.mkdtemp(), step=100).seconds
        0.0
        """
        from kerasteps import event_files

        train = os.path.join(log_dir, "train")
        points = {}
        if os.path.isdir(train):
            points = event_files.read_scalars(train).get(".", {})
        before = [value for at, value in points.get(tag, []) if at <= step]
        return cls(before[-1] if before else 0.0)

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._began = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self._began is not None:
            self.seconds += time.perf_counter() - self._began
            self._began = None
