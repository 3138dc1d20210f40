"""`StepTensorBoard`: TensorBoard scalars at the true global step."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from kerasteps._files import _eventfiles
from kerasteps._validate import check_callable, check_path, check_that
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.callbacks.step_sink import StepSink
from kerasteps.schedule import Every

__all__ = ["StepTensorBoard"]

_RUN_NAME_RE = re.compile(r"^(?!\.\.?\Z)[A-Za-z0-9_.-]+$")  # not `.` nor `..`


def _image_value(tag: str, image: Any) -> Any:
    """The summary value of an image: an array `(H, W)` or `(H, W, 1|3|4)`, uint8
    or floats in [0, 1], encoded as PNG."""
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[-1] not in (1, 3, 4):
        raise ValueError(
            f"Image {tag!r} must have shape (H, W) or (H, W, 1|3|4), received "
            f"{array.shape}."
        )
    if array.dtype != np.uint8:
        array = np.clip(np.nan_to_num(array.astype(np.float32)), 0.0, 1.0)
        array = np.round(array * 255.0).astype(np.uint8)
    png = tf.io.encode_png(array).numpy()
    return _eventfiles.image_value(tag, png, int(array.shape[1]), int(array.shape[0]))


def _check_run_names(train_run: Any, validation_run: Any) -> None:
    """Raises unless both are different plain folder names."""
    plain = "a plain folder name inside `log_dir` (letters, digits, `_`, `-`, `.`)"
    for name, value in (("train_run", train_run), ("validation_run", validation_run)):
        ok = isinstance(value, str) and _RUN_NAME_RE.match(value) is not None
        check_that(name, value, ok, plain, wrong_type=ValueError)
    if train_run == validation_run:
        raise ValueError(
            f"`train_run` and `validation_run` must differ, both are {train_run!r}."
        )


class StepTensorBoard(StepSink):
    """Writes TensorBoard scalars at the true global step, every N steps.

    Training values go to the run `<log_dir>/train`, validation values (from
    `ValidateEvery`, or Keras's own epoch-end validation, at the step they were
    computed) to `<log_dir>/validation` under the same tag without `val_`, so
    TensorBoard draws train and validation `loss` in one chart. Also written to
    `train`: the learning rate of every optimizer (`learning_rate`, or
    `learning_rate/d`, `learning_rate/g`; schedules evaluated at the step that
    used them), the model's step counters (`counters/step`, or `counters/d_step`,
    `counters/g_step`), and optionally weight histograms every M steps. A training
    value is about its step: by default the mean over the steps since the previous
    point (`reduce="mean"`), so curves do not jump at epoch ends and a resumed run
    continues the same curve.

    Unlike `keras.callbacks.TensorBoard(update_freq=N)`, the step continues across
    `fit()` calls, new callback instances and models reloaded from `.keras` files,
    and is exact with `steps_per_execution`. Files are TensorBoard event files
    written with TensorBoard's own record writer (also to `gs://` paths).

    Resuming: when `fit()` starts at global step `s` and a run directory holds
    summaries after `s` (a run resumed from an earlier checkpoint), its event files
    are rewritten without them first, so TensorBoard never shows a step twice.
    Nothing else in `log_dir` is touched. One writer: `log_dir` is locked by this
    process from the run's start to its end; another process that would write it
    fails before training, naming this one.

    Args:
        log_dir: Directory for the runs (created if missing).
        every: Positive int or `kerasteps.Every`, default 100, when scalars are written.
        histogram_every: Optional positive int or `Every`, default None: weight
            histograms of the model's trainable weights, in the `train` run.
        images: Optional callable `(model, step) -> {tag: image}` returning images
            to write (arrays `(H, W)`, `(H, W, 1|3|4)`, uint8 or floats in
            [0, 1]: a sample grid, a scatter plot), in the `train` run.
        image_every: Positive int or `Every`, when `images` is called. Defaults
            to `every`.
        write_learning_rate: Bool, default True.
        write_counters: Bool, default True.
        train_run: Name of the training run folder inside `log_dir`, default
            `"train"` (a plain name: no `/`, no `..`).
        validation_run: Name of the validation run folder, default `"validation"`.
        reduce: `"mean"` (default), `"last"` or `"epoch"`: the mean of `loss` and
            of each `Mean`-type metric over the steps since the previous point, the
            value of the step's own batch, or Keras's running mean since the epoch
            began. Other metrics (AUC) are written as Keras computes them.

    Example:

    >>> import numpy as np, keras, tempfile
    >>> from kerasteps.callbacks import StepTensorBoard
    >>> log_dir = tempfile.mkdtemp()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> _ = model.fit(np.ones((40, 2)), np.ones((40, 1)), batch_size=2, verbose=0,
    ...               callbacks=[StepTensorBoard(log_dir, every=5)])
    """

    place_is_file = False
    record_unit = "value(s)"

    def __init__(
        self,
        log_dir: str | os.PathLike,
        every: int | Every = 100,
        histogram_every: int | Every | None = None,
        images: Callable[[keras.Model, int], Mapping[str, Any]] | None = None,
        image_every: int | Every | None = None,
        write_learning_rate: bool = True,
        write_counters: bool = True,
        train_run: str = "train",
        validation_run: str = "validation",
        reduce: str = "mean",
    ):
        _check_run_names(train_run, validation_run)
        log_dir = check_path("log_dir", log_dir, "directory")  # required
        if images is not None:
            check_callable("images", images, "a callable (model, step) -> {tag: image}")
        if image_every is not None:
            image_every = Every.coerce(image_every, name="image_every")
        if histogram_every is not None:
            histogram_every = Every.coerce(histogram_every, name="histogram_every")
        super().__init__(
            log_dir, every, reduce, write_learning_rate, write_counters, "log_dir"
        )
        self.log_dir = self.place
        self.histogram_every = histogram_every
        self.images = images
        self.image_every = None
        if images is not None:
            self.image_every = self.every if image_every is None else image_every
        self.train_run = train_run
        self.validation_run = validation_run
        self._writers: dict[str, _eventfiles.EventWriter] = {}

    def run_dir(self, run: str) -> str:
        """Returns the directory of a run (`"train"` or `"validation"`).

        Args:
            run: The run name.

        Example:

        >>> from kerasteps.callbacks import StepTensorBoard
        >>> import tempfile
        >>> StepTensorBoard(tempfile.mkdtemp()).run_dir("train").endswith("train")
        True
        """
        return os.path.join(self.log_dir, run)

    # -- the place --------------------------------------------------------------------
    def _runs(self) -> tuple[str, str]:
        return (self.train_run, self.validation_run)

    def held_records(self, start_step: int) -> tuple[bool, bool]:
        steps = [_eventfiles.max_step(self.run_dir(run)) for run in self._runs()]
        held = [step for step in steps if step is not None]
        return bool(held), any(step > start_step for step in held)

    def drop_after(self, step: int) -> int:
        return sum(
            _eventfiles.truncate_after(self.run_dir(run), step) for run in self._runs()
        )

    def keep_aside(self, kept: str, upto: int | None) -> None:
        """Moves the run folders (nothing else in `log_dir`) to `kept`."""
        for run in self._runs():
            moved = _eventfiles.move_aside(self.run_dir(run), os.path.join(kept, run))
            if upto is not None and moved:
                _eventfiles.copy_until(moved, self.run_dir(run), upto)

    def open(self, start_step: int) -> None:
        self.close()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}

    def key(self, name: str, kind: str) -> str | None:
        """`run/tag`: validation values in the validation run without `val_`, the
        rest in the train run (counters as `counters/<name>`).

        Example:

        >>> import tempfile
        >>> from kerasteps.callbacks import StepTensorBoard
        >>> board = StepTensorBoard(tempfile.mkdtemp())
        >>> board.key("val_loss", "validation"), board.key("d_step", "counter")
        ('validation/loss', 'train/counters/d_step')
        """
        if kind == "validation":
            return f"{self.validation_run}/{name[4:]}"
        if kind == "counter":
            return f"{self.train_run}/counters/{name}"
        return f"{self.train_run}/{super().key(name, kind)}"

    def _write(self, run: str, step: int, values: list, wall_time: float) -> None:
        """Writes the summary `values` of `step` to `run`'s event file, flushed."""
        if run not in self._writers:
            self._writers[run] = _eventfiles.EventWriter(self.run_dir(run))
        self._writers[run].write_summary(step, values, wall_time)
        self._writers[run].flush()

    def write(self, step: int, values: dict[str, Any], time: float) -> None:
        by_run: dict[str, list] = {}
        for key, value in values.items():
            run, tag = key.split("/", 1)
            by_run.setdefault(run, []).append(_eventfiles.scalar_value(tag, value))
        for run, summaries in by_run.items():
            self._write(run, step, summaries, time)

    def on_step(self, event: StepEvent) -> None:
        super().on_step(event)
        if event.scheduled:
            self.on_other_step(event)

    def schedules(self) -> list[Every]:
        """The scalar schedule, and those of the histograms and images.

        Example:

        >>> import tempfile
        >>> from kerasteps.callbacks import StepTensorBoard
        >>> StepTensorBoard(tempfile.mkdtemp(), every=5, histogram_every=50).schedules()
        [Every(5), Every(50)]
        """
        schedules = (self.every, self.histogram_every, self.image_every)
        return [every for every in schedules if every is not None]

    def _due(self, every: Every | None, event: StepEvent) -> bool:
        return every is not None and every.fires(
            event.prev, event.step, self.run.start_step
        )

    def on_other_step(self, event: StepEvent) -> None:
        """Histograms and images on their own schedules, between scalar points (and
        at them, from `on_step`)."""
        extra = []
        if self._due(self.histogram_every, event):
            extra.extend(
                _eventfiles.histogram_value(f"weights/{weight.path}", weight.numpy())
                for weight in self.model.trainable_weights
            )
        if self._due(self.image_every, event):
            images = dict(self.images(self.model, event.step))
            extra.extend(_image_value(tag, image) for tag, image in images.items())
        if extra:
            with self._write_lock:
                self._write(self.train_run, event.step, extra, event.time)
