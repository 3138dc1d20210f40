"""`StepSink`: the base of callbacks that record each logged step somewhere."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from time import time as _time
from typing import Any, ClassVar

import tensorflow as tf

from kerasteps._files import _lock, _paths
from kerasteps._files._paths import writable_dir, writable_file
from kerasteps._validate import check_bool, check_name
from kerasteps.callbacks import _sinks
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent, scalar_items
from kerasteps.schedule import Every

__all__ = ["StepSink"]


class StepSink(StepCallback):
    """Base class of the callbacks that record the values of a step in a place:
    `StepTensorBoard`, `JSONLinesLogger`, `StepCSVLogger`.

    A sink implements `write(step, values, time)`, the place's `held_records` and
    `drop_after`, and optionally `open`, `close` and `amend`. The base owns the
    rest, the same for every sink:

    - **Chief only.** Under a multi-worker strategy only the chief writes.
    - **One writer.** The place is locked from the run's start to its end; another
      process that would write it fails before training, naming this one.
    - **Bad input before training.** The place is checked writable when the sink is
      made (`ValueError` naming the argument).
    - **One point per step.** When a run begins, the records the place holds after
      the start step are dropped if they are this run's (a resume: it writes them
      again), said at INFO; another run's records are kept whole aside (an
      `earlier-N` name) and the place is written anew, said at WARNING (see
      `kerasteps.callbacks._sinks`).
    - **One record per step.** The values of a step (training values, provided
      values, Keras's epoch-end validation) go into one `write`; values that come
      after their step was written go to `amend`.
    - **The same values everywhere.** Each record holds the step's values
      (`event.values()`, reduced as `reduce` says), and, at the sink's own points,
      the learning rate of every optimizer and the step counters, unless
      `write_learning_rate` or `write_counters` is False.

    **Keys.** One table for every sink; `key(name, kind)` is where a sink spells
    them its way:

    | value | JSON lines, CSV (`StepSink.key`) | TensorBoard (`run/tag`) |
    |---|---|---|
    | training value `loss` | `loss` | `train/loss` |
    | provided `steps_per_second` | `steps_per_second` | `train/steps_per_second` |
    | validation value `val_loss` | `val_loss` | `validation/loss` |
    | learning rate (plain model) | `learning_rate` | `train/learning_rate` |
    | learning rate of a WGAN's `d` | `learning_rate/d` | `train/learning_rate/d` |
    | step counter `d_step` | `d_step` | `train/counters/d_step` |

    The step itself is each record's `step` (JSON lines, CSV) or its event's step
    (TensorBoard); a plain model's counter `step` is that step.

    Args:
        place: The file or directory the sink writes (`path`, `log_dir`), or None
            for a sink with no place of its own (a tracking server).
        every: Positive int or `kerasteps.Every`, default 100.
        reduce: `"mean"` (default), `"last"` or `"epoch"` (see `StepCallback`).
        write_learning_rate: Bool, default True: record each optimizer's rate.
        write_counters: Bool, default True: record the step counters.
        argument: Non-empty str, default `"path"`: the name of the place's
            argument, for messages.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StepSink
    >>> class PrintSink(StepSink):
    ...     def write(self, step, values, time):
    ...         print(step, sorted(values))
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> x = np.zeros((8, 1))
    >>> _ = model.fit(x, x, batch_size=2, verbose=0, callbacks=[PrintSink(None, 2)])
    2 ['learning_rate', 'loss', 'step']
    4 ['learning_rate', 'loss', 'step']
    """

    records_extras = True
    chief_only = True
    async_safe = True
    reads_model = False  # its events' values only
    #: True: `place` is one file; False: a directory.
    place_is_file: ClassVar[bool] = True
    #: What `drop_after` counts, for the INFO line (`"line(s)"`).
    record_unit: ClassVar[str] = "record(s)"

    def __init__(
        self,
        place: str | os.PathLike | None,
        every: int | Every = 100,
        reduce: str = "mean",
        write_learning_rate: bool = True,
        write_counters: bool = True,
        argument: str = "path",
    ):
        super().__init__(Every.coerce(every, name="every"), reduce=reduce)
        self.write_learning_rate, self.write_counters = (
            check_bool("write_learning_rate", write_learning_rate),
            check_bool("write_counters", write_counters),
        )
        argument = check_name(argument, "argument")
        self.place: str | None = None
        self._place_lock: _lock.DirectoryLock | None = None
        if place is not None:
            check = writable_file if self.place_is_file else writable_dir
            self.place = check(place, argument)
            self._place_lock = _lock.DirectoryLock(
                self.place, f"`{argument}`", file=self.place_is_file
            )
        self._write_lock = threading.Lock()
        self._pending: tuple[int, float, dict[str, Any]] | None = None
        self._last_written: int | None = None  # None: between runs
        self._start_point: tuple[int, Mapping[str, Any]] | None = None

    # -- what a sink implements ---------------------------------------------------
    def write(self, step: int, values: dict[str, Any], time: float) -> None:
        """Records the values of one step (keys spelled by `key`).

        Args:
            step: The global step.
            values: `{key: value}`: numbers (ints for counters).
            time: Wall-clock time of the step, seconds since the epoch.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement write().")

    def amend(self, step: int, values: dict[str, Any], time: float) -> None:
        """Adds values to a step already written (Keras's epoch-end validation that
        comes after its step's record). Default: `write` them as one more record of
        that step; a sink with one record per step merges them into it.

        Args:
            step: The global step of the record written last.
            values: The values that came late.
            time: Wall-clock time.
        """
        self.write(step, values, time)

    def held_records(self, start_step: int) -> tuple[bool, bool]:
        """Whether the place holds records, and whether one of them is after
        `start_step` (or has no step that can be read). Only for a sink with a
        place.

        Args:
            start_step: The step the run starts at.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement held_records()."
        )

    def drop_after(self, step: int) -> int:
        """Drops the place's records after `step`; returns how many were dropped.

        Args:
            step: The step the run starts at.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement drop_after().")

    def keep_aside(self, kept: str, upto: int | None) -> None:
        """Moves the place's records whole to `kept`; with `upto`, the records up to
        that step stay in the place too. Default for a file: rename (or copy, then
        `drop_after(upto)`).

        Args:
            kept: The free `earlier-N` path to keep them at.
            upto: None, or the step up to which the place keeps its records.
        """
        if upto is None:
            tf.io.gfile.rename(self.place, kept)
        else:
            tf.io.gfile.copy(self.place, kept)
            self.drop_after(upto)

    def open(self, start_step: int) -> None:
        """Called when the run begins, after the place was claimed.

        Args:
            start_step: The global step the run starts at.
        """

    def close(self) -> None:
        """Called once when the run ends, after the last record (close files)."""

    def key(self, name: str, kind: str) -> str | None:
        """How this sink spells a value's key; None leaves the value out.

        Args:
            name: The value's name: `loss`, `val_loss`, an optimizer's short name
                (`""` for a plain model's), a counter's name.
            kind: One of `"train"`, `"validation"`, `"learning_rate"`, `"counter"`.

        Example:

        >>> from kerasteps.callbacks import StepSink
        >>> sink = StepSink(None)
        >>> sink.key("val_loss", "validation"), sink.key("g", "learning_rate")
        ('val_loss', 'learning_rate/g')
        """
        if kind == "learning_rate":
            return "learning_rate" + (f"/{name}" if name else "")
        return name

    # -- the run --------------------------------------------------------------------
    def on_run_begin(self, start_step: int) -> None:
        if self._place_lock is not None:
            self._place_lock.acquire()
        try:
            self._pending = None
            self._last_written = start_step
            if self.place is not None:
                self._claim(start_step)
            self.open(start_step)
            point, self._start_point = self._start_point, None
            if point is not None:
                self.log_point(*point)
        except BaseException:
            if self._place_lock is not None:
                self._place_lock.release()
            raise

    def _claim(self, start_step: int) -> None:
        """Makes the place this run's (see the class docstring)."""
        name = type(self).__name__
        owner_path = _sinks.owner_file(self.place, is_file=self.place_is_file)
        owner = _sinks.read_owner(owner_path)
        run_id = self.run.run_id
        claim = _sinks.Claim.PURGE  # this run's place: no need to read it
        if owner != run_id:
            held = self.held_records(start_step)
            claim = _sinks.decide(owner, run_id, self.run.run_known, *held)
        if claim is _sinks.Claim.PURGE:
            count = self.drop_after(start_step)
            _sinks.report_dropped(name, start_step, count, self.record_unit, self.place)
        elif claim is not _sinks.Claim.WRITE:
            kept = _paths.aside_path(self.place, is_file=self.place_is_file)
            upto = start_step if claim is _sinks.Claim.CONTINUE else None
            self.keep_aside(kept, upto)
            _sinks.report_aside(name, start_step, self.place, kept, claim)
        if owner != run_id:
            _sinks.write_owner(owner_path, run_id)

    def log_point(self, step: int, values: Mapping[str, float]) -> None:
        """Writes one point at the run's start step, before training: the initial
        model's values at step 0, which no schedule gives (`Every(first=True)`
        fires after the first update).

        Call it before `fit()`: the point is held, and written when the run
        begins, if it begins at `step`. A run that begins later (a resumed run,
        whose place holds its points) writes nothing. Called from `on_run_begin`
        of a callback listed after the sink, it writes at once. The values are
        keyed as the sink keys training values (`val_*` as validation). A place
        that already holds records up to `step` keeps them, and nothing is
        written.

        Args:
            step: The run's start step: 0 for a new model.
            values: `{name: number}`.

        Raises:
            RuntimeError: the sink's run has trained already.
            ValueError: `step` is after the run's start step (at `fit()`).

        Example:

        >>> import numpy as np, keras
        >>> from kerasteps.callbacks import StepSink
        >>> class PrintSink(StepSink):
        ...     def write(self, step, values, time):
        ...         print(step, values)
        >>> sink = PrintSink(None, every=2, write_learning_rate=False)
        >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> x = np.zeros((4, 1))
        >>> sink.log_point(0, {"loss": 0.0})  # the initial model's point
        >>> _ = model.fit(x, x, batch_size=2, verbose=0, callbacks=[sink])
        0 {'loss': 0.0}
        2 {'loss': 0.0, 'step': 2}
        """
        if self._run is None or self._last_written is None:
            self._start_point = (step, dict(values))  # written as the run begins
            return
        if self.run.step != self.run.start_step:
            raise RuntimeError(
                f"{type(self).__name__}.log_point() writes before training; the "
                f"run is at step {self.run.step} already."
            )
        if step > self.run.start_step:
            raise ValueError(
                f"`step` must be the run's start step {self.run.start_step}, "
                f"received {step!r}."
            )
        if step < self.run.start_step:
            return  # a resumed run: its place holds the point
        if self.place is not None and self.held_records(step)[0]:
            return  # a resumed run: the place holds its points up to `step`
        with self._write_lock:
            self.write(step, self._keyed(scalar_items(values)), _time())

    def record(self, event: StepEvent) -> dict[str, Any]:
        """The values of `event` to record, keyed by `key` (see the class docstring).

        Args:
            event: The `StepEvent`.
        """
        out = self._keyed(event.values())
        if event.scheduled and self.write_learning_rate:
            out.update(self._keyed(event.learning_rates(), "learning_rate"))
        if event.scheduled and self.write_counters:
            out.update(self._keyed(event.counters, "counter"))
        return out

    def _keyed(self, values: Mapping[str, Any], kind: str = "") -> dict[str, Any]:
        """`values` keyed by `key`, as `kind` (default: `val_*` as validation, the
        rest as training values); the values `key` leaves out are dropped."""
        out = {}
        for name, value in values.items():
            is_val = name.startswith("val_")
            key = self.key(name, kind or ("validation" if is_val else "train"))
            if key is not None:
                out[key] = value
        return out

    def on_step(self, event: StepEvent) -> None:
        values = self.record(event)
        with self._write_lock:
            if self._pending is not None and self._pending[0] != event.step:
                self._emit()
            if self._pending is None:
                self._pending = (event.step, event.time, {})
            self._pending[2].update(values)
            if not event.epoch_last:
                self._emit()

    def _emit(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None or not pending[2]:
            return
        step, time, values = pending
        if self._last_written is not None and step <= self._last_written:
            self.amend(step, values, time)
            return
        self.write(step, values, time)
        self._last_written = step

    def flush(self) -> None:
        with self._write_lock:
            self._emit()

    def on_run_end(self, final_step: int) -> None:
        with self._write_lock:
            try:
                self._emit()
                self.close()
            finally:
                self._last_written = None
                if self._place_lock is not None:
                    self._place_lock.release()
