"""`StepCheckpoint`: atomic checkpoints every N global steps, and exact resume."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Iterable

import keras
import tensorflow as tf

from kerasteps import steps as steps_lib
from kerasteps._files import _atomic, _lock
from kerasteps._files._paths import writable_dir
from kerasteps._resume_state import ResumeState
from kerasteps._validate import (
    check_bool,
    check_choice,
    check_int,
    check_path,
    check_positive_number,
)
from kerasteps.callbacks import _dispatch, _signals, _sinks, _windows
from kerasteps.callbacks._monitor import Monitor
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.checkpoint._crash import crash_point
from kerasteps.checkpoint._format import INDEX_FILE, NAME_RE, read_meta
from kerasteps.checkpoint._retention import Retention, ranked
from kerasteps.checkpoint.store import (
    CheckpointInfo,
    CheckpointStore,
    NonFiniteStateError,
)
from kerasteps.schedule import Every

__all__ = ["StepCheckpoint"]

logger = logging.getLogger("kerasteps")
_NAME = "StepCheckpoint"


def _check_directory(directory: str | os.PathLike) -> str:
    """The checkpoint directory to read; a clear error for a file or a checkpoint."""
    path = check_path("directory", directory, "directory").rstrip("/") or "/"
    if NAME_RE.match(os.path.basename(path)) and tf.io.gfile.isdir(path):
        raise ValueError(
            f"`directory` must be a StepCheckpoint directory, received the checkpoint "
            f"folder {path!r}: pass its parent, {os.path.dirname(path) or '.'!r} (or "
            "use StepCheckpoint.restore_checkpoint for this one)."
        )
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise ValueError(
            f"`directory` must be a StepCheckpoint directory, received a file: "
            f"{path!r}."
        )
    return path


def _attach_run_state(model: keras.Model, info: CheckpointInfo) -> int:
    """Hands what the next run needs from a restored checkpoint to the model, as
    a `kerasteps.checkpoint.ResumeState`; returns the model's global step.

    These `meta.json` fields do not change what was restored: a malformed one is
    dropped with a WARNING (the weights are fine), never handed to the run. Without
    `windows` the first point of each sink after the resume is the mean of the
    steps since the resume, not since the sink's previous point; without
    `examples_per_step` a resume with another batch size is not caught.
    """
    meta = read_meta(info.path)
    windows = meta.get("windows", {})
    problem = _windows.carry_problem(windows)
    if problem is not None:
        _drop(info, "windows", problem)
        windows = {}
    run_id = meta.get("run_id")
    links = meta.get("links", {})  # `StepRun.links`: a dict of short strings
    if not isinstance(links, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and 0 < len(v) <= 256
        for k, v in links.items()
    ):
        _drop(info, "links", f"{links!r:.80} is not a {{name: id}} of strings")
        links = {}
    decisions = meta.get("decisions", {})
    if not isinstance(decisions, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) for k, v in decisions.items()
    ):
        _drop(info, "decisions", f"{decisions!r:.80} is not a {{key: state}}")
        decisions = {}
    per_step = meta.get("examples_per_step")
    if per_step is not None and (type(per_step) is not int or per_step <= 0):
        _drop(info, "examples_per_step", f"{per_step!r} is not a positive int")
        per_step = None
    # The sinks' windows that began before the save continue in the next run, which
    # is the same run as the one that saved (its sinks drop their points after it).
    step = steps_lib.global_step(model)
    run_id = run_id if _sinks.is_run_id(run_id) else None
    forked_from = None
    original = _original(info, meta.get("directory"))
    if original is not None and run_id is not None:
        # A copy of the folder, restored while the original is still there: a run
        # of its own that branches off the original's (which it never writes).
        forked_from = {"run_id": run_id, "step": step, "links": dict(links)}
        run_id, links = None, {}
        logger.info(
            "StepCheckpoint: %s is a copy of %s, which is still there: this run is a "
            "fork of run %s at step %d, with a run id, sinks' claims and MLflow run "
            "of its own.",
            info.path,
            original,
            forked_from["run_id"],
            step,
        )
    ResumeState(
        step=step,
        windows=windows,
        run_id=run_id,
        examples_per_step=per_step,
        source=info.path,
        links=links,
        forked_from=forked_from,
        decisions=decisions,
    ).attach(model)
    return step


def _where(directory: str) -> str:
    """A checkpoint directory as `meta.json` records it: absolute when local."""
    return os.path.realpath(directory) if _atomic.is_local(directory) else directory


def _original(info: CheckpointInfo, saved_in: object) -> str | None:
    """The checkpoint `info` was copied from, when it was saved in another local
    directory that still holds it; else None (saved here, or moved here)."""
    if not isinstance(saved_in, str) or not _atomic.is_local(info.path):
        return None
    here = os.path.dirname(os.path.realpath(info.path))
    original = os.path.join(saved_in, info.name)
    if saved_in == here or not os.path.isfile(os.path.join(original, "meta.json")):
        return None
    return original


def set_aside_lines(store: CheckpointStore, info: CheckpointInfo | None) -> list[str]:
    """What the `earlier-N` folders of a directory hold that is later than the
    checkpoint restored (`info`; None: none was), one line each with the line that
    resumes from there. A run that began in the directory without restoring set
    them aside at its first save (`StepCheckpoint`).

    Args:
        store: The directory's store.
        info: The checkpoint restored, or None.
    """
    restored = -1 if info is None else info.step
    lines = []
    for path, steps, when in store.set_aside():
        later = [step for step in steps if step > restored]
        if later:
            what = (
                "holds no checkpoint of its own"
                if info is None
                else (f"was restored from step {info.step}")
            )
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
            lines.append(
                f"{store.directory} {what}, but {path} holds the checkpoints of steps "
                f"{later}, set aside at {stamp} "
                "by a run that began in the directory without restoring. To resume "
                f"from them: StepCheckpoint.restore_latest(model, {path!r})."
            )
    return lines


#: What the next run loses when a field of `meta.json` that only it reads is dropped.
_COSTS = {
    "windows": "the first point of each sink is not exact",
    "links": "a run of another system, such as MLflow's, is not continued",
    "examples_per_step": "a resume with another batch size is not caught",
    "decisions": "early stopping and learning-rate cuts start over",
}


def _drop(info: CheckpointInfo, field: str, problem: str) -> None:
    logger.warning(
        "StepCheckpoint: %s: %s in meta.json is malformed (%s); the checkpoint is "
        "restored without it (%s).",
        info.path,
        field,
        problem,
        _COSTS[field],
    )


class StepCheckpoint(StepCallback):
    """Saves an atomic checkpoint every N global steps, for an exact resume.

    A checkpoint holds every state variable of the model: its weights and
    non-trainable variables, the state of every optimizer (its `iterations`, learning
    rate and slot variables: `model.optimizer` and any optimizer that is an attribute
    of the model, such as a GAN's `d_optimizer`), the step counters, and the states
    of the model's seed generators (Dropout masks and a WGAN's noise continue
    exactly). Beside it, a `meta.json` holds the global step, the counters, the
    optimizer classes, the size and CRC-32 of the state file, and what the sinks'
    open windows hold (the metrics' `total`/`count` since each schedule's previous
    point), so that the first point after a resume is the same mean as in an
    uninterrupted run.

    **One format on every backend.** The state is an HDF5 file (`state.h5`) keyed by
    the model's structure, as Keras keys `.weights.h5` (`layers/dense/vars/0`,
    `optimizer/vars/3`): a checkpoint restores into any identically built model, in
    another notebook cell, a sweep, or under another Keras backend (TensorFlow, JAX,
    PyTorch). Restores are strict: a variable missing from the checkpoint, or one
    the model does not have, raises a `ValueError` naming it (see
    `kerasteps.checkpoint.store` for partial restores). The slots of an optimizer
    that is not built yet when you restore (a custom `train_step`'s) are assigned
    the moment it builds them, before its first update. Paths may be remote
    (`gs://...`, through `tf.io.gfile`). Checkpoints of kerasteps 0.1.0 (a
    `tf.train.Checkpoint`) are not read.

    **Async saves** (the default, `async_save=True`): at a saving step the training
    thread only copies the state to host memory (into buffers kept from one save to
    the next: one extra copy of the state in memory), and a background thread writes
    and commits the checkpoint while training goes on. At most one save is in flight:
    a save that comes due while the previous one is still being written waits for
    it. The run's end (also after a signal) waits for the save in flight. An error
    in the background write (a full disk) is raised on the training thread at the
    next batch end, or at the run's end. `async_save=False` writes on the training
    thread.

    **Resume** with one call *before* `fit()` (the dispatcher reads the start step when
    training begins): `StepCheckpoint.restore_latest(model, directory)` restores the
    newest checkpoint and returns its global step, or `None` when there is none.
    Training then continues at that step and every kerasteps sink drops what it
    wrote after it. The data position is the script's: with a repeatable pipeline
    (seeded, deterministic, `.repeat()`-ed and fed with `steps_per_epoch`),
    `kerasteps.data.skip_consumed(dataset, model)` skips the batches already
    trained on, which makes the resume exact. The checkpoint records the examples
    per step; a resumed run with another batch size would skip the wrong data, so
    it is refused: by `skip_consumed` when the dataset's batch size is static, else
    at the first step, before anything is written.

    The learning rate is part of the optimizer's state, so a restore puts back the
    saved rate (a schedule continues from the restored `iterations`). To go on at
    another rate on purpose, assign it after restoring:
    `model.optimizer.learning_rate.assign(1e-5)`.

    **Signals**, as Lightning does it: while `fit()` runs, the first SIGTERM or
    Ctrl-C (SIGINT), or any other signal in `signals`, stops training after the
    step in progress (`model.stop_training = True`, set by the handler) and makes
    the callback save that step, the run's last, with one WARNING line;
    `interrupted` is then True and `signal_received` names the signal, so the
    script can exit (`128 + signal_received` by convention). The handler itself
    stops training, so Keras may run batch ends on a thread of its own (JAX,
    PyTorch): the callback is `async_safe`. Off the main thread (Ray Train),
    where Python installs no signal handler, `request_stop()` does the same: call
    it from the main thread's handler or the cluster's preemption hook. A second
    signal goes to the handler that was there before: SIGTERM then kills, Ctrl-C
    raises `KeyboardInterrupt` at once. Handlers are installed on the main thread
    when the run begins and restored when it ends; after a `fit()` that raised (no
    hook runs then), a handler that finds its run gone steps aside and re-delivers
    the signal.

    **Best checkpoints** (`monitor="val_loss"`): a value is judged at the step it
    is about, where a validation computed it (`ValidateEvery`'s steps, or Keras's
    own `validation_data` at an epoch end), never again later. A value that ranks
    among the `keep_best` best so far (ties: the earlier step) is saved at once,
    on schedule or not; a checkpoint saved at a step with a value records it in
    its `meta.json`. A value that is not finite is never best. Retention is one
    rule: a save keeps the union of the newest `keep`, the `keep_best` best, and
    the first of every `keep_every_steps` steps or `keep_every_hours` hours; it
    never deletes a best checkpoint or the newest. The ranking is rebuilt from the
    checkpoints' `meta.json` files, so a resumed run keeps the same best; the index
    `checkpoint.json` holds it as a table (`best`: monitor, mode, and each best
    checkpoint's name, step and value), replaced atomically with the index.
    `restore_best(model, directory)` loads the best. A monitor that no validation
    of the run can give (not `val_` + the loss or a compiled metric, or a
    provider's prefix) is refused when the run begins; one that the first
    validation does not hold is an error there, naming those it holds.

    A checkpoint scheduled at a step that ends an epoch is written at the epoch end,
    after the sinks wrote that step (with Keras's validation values). A step where
    `StopOnNonFinite` stopped training is not saved.

    Args:
        directory: Directory of the checkpoints (created if missing).
        every: Positive int or `kerasteps.Every`, when to save. `Every(n, last=True)`
            also saves at the final step of each run. None (default) with
            `every_seconds` alone.
        keep: Positive int, default 3: how many of the newest checkpoints to keep.
        signals: Signals that save and stop, default `(signal.SIGTERM,
            signal.SIGINT)`; `()` for none. SIGKILL and SIGSTOP cannot be caught.
        verbose: `0` (default) or `1`, as in `keras.callbacks.ModelCheckpoint`:
            `1` logs each save at INFO (`StepCheckpoint: saved ... at step n.`),
            `0` at DEBUG. Restores are always logged at INFO.
        async_save: Bool, default True: write checkpoints on a background thread
            (see above); False writes them on the training thread.
        monitor: Optional name of a validation value, such as `"val_loss"`: the
            checkpoints are judged by it (see **Best checkpoints**). None (default):
            no judging.
        mode: `"auto"` (default), `"min"` or `"max"`: which values of `monitor` are
            better; `"auto"` infers it from the name as Keras does (accuracy, AUC,
            precision, recall, F1, IoU: higher; anything else: lower). A mode that
            contradicts the name (`"max"` for a loss) is refused.
        keep_best: Int >= 0, default 1 with `monitor` (0 without): how many of the
            best checkpoints to keep, besides the newest `keep`.
        keep_every_steps: Optional positive int: also keep the first checkpoint of
            every span of that many steps.
        keep_every_hours: Optional positive number: also keep the first checkpoint
            of every span of that many hours (TF1's `keep_checkpoint_every_n_hours`).
        every_seconds: Optional positive number: also save at the first step that
            ends `every_seconds` or more after the run's begin or its latest save
            (a timer wakes the run: nothing runs at the quiet steps in between).
            Given without `every`, the final step is saved too. Not under a
            multi-worker strategy, whose workers must save at the same steps.

    Attributes:
        directory: The checkpoint directory, as a path string.
        store: The `kerasteps.checkpoint.store.CheckpointStore` that writes and
            reads `directory` (`StopOnNonFinite(checkpoint=...)` saves the last
            finite state through it, one writer for the directory).

    Example:

    >>> import numpy as np, keras, tempfile
    >>> from kerasteps.callbacks import StepCheckpoint
    >>> directory = tempfile.mkdtemp()
    >>> def make_model():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    ...     model.compile("adam", "mse")
    ...     return model
    >>> model = make_model()
    >>> x, y = np.ones((40, 2)), np.ones((40, 1))
    >>> _ = model.fit(x, y, batch_size=2, verbose=0,
    ...               callbacks=[StepCheckpoint(directory, every=5, keep=2)])
    >>> [info.step for info in StepCheckpoint.list_checkpoints(directory)]
    [15, 20]
    >>> model = make_model()  # a new process: restore, then fit
    >>> StepCheckpoint.restore_latest(model, directory)
    20
    """

    role = "action"
    reads_values = False
    async_safe = True  # a signal's handler stops training itself (see Signals)

    def __init__(
        self,
        directory: str | os.PathLike,
        every: int | Every | None = None,
        keep: int = 3,
        signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
        verbose: int = 0,
        async_save: bool = True,
        monitor: str | None = None,
        mode: str = "auto",
        keep_best: int | None = None,
        keep_every_steps: int | None = None,
        keep_every_hours: float | None = None,
        every_seconds: float | None = None,
    ):
        super().__init__(None if every is None else Every.coerce(every, name="every"))
        self.every_seconds = (
            None
            if every_seconds is None
            else check_positive_number("every_seconds", every_seconds)
        )
        self._timer: threading.Timer | None = None
        self._since_save = 0.0  # when the run began or last saved (monotonic)
        self.async_save = check_bool("async_save", async_save)
        self.keep = check_int("keep", keep)
        self.verbose = int(check_choice("verbose", verbose, (0, 1)))
        check_choice("mode", mode, ("auto", "min", "max"))
        self._monitor = None if monitor is None else Monitor(_NAME, monitor, mode)
        #: The monitored value's name, or None; `mode`: "min" or "max" (inferred).
        self.monitor = None if self._monitor is None else self._monitor.name
        self.mode = "min" if self._monitor is None else self._monitor.mode
        if keep_best is None:
            keep_best = 0 if monitor is None else 1
        retention = Retention(
            self.keep,
            self.monitor,
            self.mode,
            keep_best,
            keep_every_steps,
            keep_every_hours,
        )
        self.keep_best = retention.keep_best
        self.directory = writable_dir(directory, "directory")
        self.signals = _signals.check_signals(signals)
        self.store = CheckpointStore(self.directory, retention)
        self.store.writer.on_error = self._wake  # raise the error at the next batch end
        self._lock = _lock.DirectoryLock(self.directory, "`directory`")
        self._stop: _signals.GracefulStop | None = None
        self._others: list[CheckpointInfo] = []  # another run's: aside at a save
        self._pending: StepEvent | None = None  # a save after the epoch's validation
        self._last: StepEvent | None = None  # the latest step the callback saw
        #: The steps of this run saved, or refused as not finite: never saved again.
        self._done_steps: set[int] = set()
        #: True after a signal made the callback save and stop training.
        self.interrupted = False
        #: The signal number that interrupted the run, else None.
        self.signal_received: int | None = None
        #: The `CheckpointInfo` of the last save of this callback, or None.
        self.last_saved: CheckpointInfo | None = None
        self.save_seconds, self._save_began = 0.0, 0.0
        #: The latest value of `monitor`, `(step, value)` (None: not finite).
        self._judged: tuple[int, float | None] | None = None
        #: The best finite values of `monitor` saved in the directory, by step.
        self._best: dict[int, float] = {}
        if every is None and every_seconds is None:
            raise ValueError(
                "StepCheckpoint needs `every` (steps: an int or kerasteps.Every) or "
                "`every_seconds` (a positive number); received neither."
            )

    # -- public API -----------------------------------------------------------------
    @staticmethod
    def list_checkpoints(directory: str | os.PathLike) -> list[CheckpointInfo]:
        """Returns the committed checkpoints of a directory, oldest save first.

        Complete checkpoint folders that the index does not list (a kill between a
        save's rename and its index write) are listed too.

        Args:
            directory: A `StepCheckpoint` directory.

        Example:

        >>> import tempfile
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> StepCheckpoint.list_checkpoints(tempfile.mkdtemp())
        []
        """
        return CheckpointStore(_check_directory(directory)).entries()

    @staticmethod
    def latest(directory: str | os.PathLike) -> CheckpointInfo | None:
        """Returns the newest committed checkpoint of a directory, or None.

        Args:
            directory: A `StepCheckpoint` directory.

        Example:

        >>> import tempfile
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> StepCheckpoint.latest(tempfile.mkdtemp()) is None
        True
        """
        return CheckpointStore(_check_directory(directory)).latest()

    @staticmethod
    def restore_latest(model: keras.Model, directory: str | os.PathLike) -> int | None:
        """Restores the newest checkpoint into `model`; call it BEFORE `fit()`.

        Restores weights, optimizer states, step counters and seed states. A plain
        model's optimizer is built first, so its slots hold the saved values when
        this returns; the slots of optimizers built later (a custom `train_step`'s)
        get their values when they are created. A checkpoint that is incomplete,
        damaged (a `meta.json` field that the restore reads is malformed, too) or
        not finite is skipped with a WARNING naming it and why, and the next newest
        is tried; a failed attempt leaves the model as it was; nothing is deleted.
        A malformed `windows` or `examples_per_step` field, which only the next run
        reads, is dropped with a WARNING instead: the weights are fine, only the
        first logged mean after the resume (or the batch size check) is lost.

        Args:
            model: The compiled model, built like the one that was saved.
            directory: A `StepCheckpoint` directory (it may not exist yet).

        Returns:
            The restored global step, or None when the directory holds no checkpoint
            (the model is left untouched).

        Raises:
            ValueError: if `directory` is a file or a checkpoint folder, or if the
                directory holds checkpoints and none restores into the model (each
                one is named, with the reason).

        Example:

        >>> import tempfile, keras
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("adam", "mse")
        >>> StepCheckpoint.restore_latest(model, tempfile.mkdtemp()) is None
        True
        """
        steps_lib.global_step(model)  # validates model and compile state
        store = CheckpointStore(_check_directory(directory))
        info = store.restore_latest(model)
        for line in set_aside_lines(store, info):
            logger.warning("StepCheckpoint: %s", line)
        return None if info is None else _attach_run_state(model, info)

    @staticmethod
    def restore_best(
        model: keras.Model, directory: str | os.PathLike, monitor: str | None = None
    ) -> int | None:
        """Restores the best checkpoint into `model`, as `restore_latest` does.

        The best by the value that the checkpoints' `meta.json` files record
        (`StepCheckpoint(monitor=...)`), in the direction recorded with it; a
        checkpoint that does not restore is skipped with a WARNING, and the next
        best is tried.

        Args:
            model: The compiled model, built like the one that was saved.
            directory: A `StepCheckpoint` directory.
            monitor: The monitored value's name; default the one the newest
                checkpoint that records a value records.

        Returns:
            The restored global step, or None when no checkpoint records a value of
            `monitor` (the model is left untouched).

        Raises:
            ValueError: as `restore_latest`.

        Example:

        >>> import numpy as np, keras, tempfile
        >>> from kerasteps.callbacks import StepCheckpoint, ValidateEvery
        >>> def make_model():
        ...     model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        ...     model.compile(keras.optimizers.SGD(0.3), "mse")
        ...     return model
        >>> x = np.linspace(-1, 1, 32)[:, None]
        >>> directory = tempfile.mkdtemp()
        >>> checkpoint = StepCheckpoint(directory, every=100, monitor="val_loss")
        >>> validate = ValidateEvery(4, validation_data=(x, 2 * x))
        >>> _ = make_model().fit(x, 2 * x, batch_size=4, epochs=3, verbose=0,
        ...                      callbacks=[validate, checkpoint])
        >>> judged = [e for e in StepCheckpoint.list_checkpoints(directory) if e.value]
        >>> best = min(judged, key=lambda entry: entry.value)
        >>> StepCheckpoint.restore_best(make_model(), directory) == best.step
        True
        """
        steps_lib.global_step(model)  # validates model and compile state
        store = CheckpointStore(_check_directory(directory))
        info = store.restore_best(model, monitor)
        return None if info is None else _attach_run_state(model, info)

    @staticmethod
    def restore_checkpoint(
        model: keras.Model, path: str | os.PathLike | CheckpointInfo
    ) -> int:
        """Restores one checkpoint (a `ckpt-<step>` folder) into `model`.

        Args:
            model: The compiled model, built like the one that was saved.
            path: The checkpoint folder, or a `CheckpointInfo`.

        Returns:
            The restored global step.

        Raises:
            ValueError: naming the checkpoint, if `path` is not a checkpoint folder,
                or the checkpoint is incomplete, damaged, not finite or does not
                match the model (which is then left as it was).

        Example:

        >>> from kerasteps.callbacks import StepCheckpoint
        >>> # step = StepCheckpoint.restore_checkpoint(model, "ckpts/ckpt-40")
        """
        if not isinstance(path, CheckpointInfo):
            path = os.fspath(path).rstrip("/")
            match = NAME_RE.match(os.path.basename(path))
            if not match or not tf.io.gfile.isdir(path):
                raise ValueError(
                    f"`path` must be a StepCheckpoint folder `ckpt-<step>`, "
                    f"received {path!r}."
                )
            path = CheckpointInfo(os.path.basename(path), int(match.group(1)), path, 0)
        CheckpointStore(os.path.dirname(path.path)).restore(model, path)
        return _attach_run_state(model, path)

    def restore(self, model: keras.Model) -> int | None:
        """Restores this callback's newest checkpoint into `model` (before `fit()`).

        Args:
            model: The compiled model.

        Returns:
            The restored global step, or None if there is no checkpoint yet.

        Example:

        >>> import tempfile, keras
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("adam", "mse")
        >>> StepCheckpoint(tempfile.mkdtemp(), every=100).restore(model) is None
        True
        """
        return self.restore_latest(model, self.directory)

    def save(self, model: keras.Model | None = None) -> CheckpointInfo:
        """Saves a checkpoint of the model's current state now, atomically.

        Args:
            model: The model, default the model of the running `fit()`.

        Returns:
            The `CheckpointInfo` of the checkpoint.

        Raises:
            kerasteps.checkpoint.store.NonFiniteStateError: if a weight or an
                optimizer variable holds a NaN or an infinity (nothing is written).

        Example:

        >>> import tempfile, keras
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("adam", "mse")
        >>> StepCheckpoint(tempfile.mkdtemp(), every=100).save(model).step
        0
        """
        model = model if model is not None else self.model
        self._keep_other_runs_aside()
        info = self.store.save(
            model, self._run_meta(model, steps_lib.global_step(model))
        )
        self._done_steps.add(info.step)
        self._saved(info)
        return info

    def _run_meta(self, model: keras.Model, step: int) -> dict:
        """What a resumed run needs from this run, for the checkpoint's meta.json
        of a save at `step`."""
        run = self._run
        if run is None or run.model is not model:
            return {}
        # Where it was saved: a copy of the folder restored while this one still
        # exists is a fork (`_attach_run_state`).
        meta = {"run_id": run.run_id, "directory": _where(self.directory)}
        if self._judged is not None and self._judged[0] == step:
            name, value = self.monitor, self._judged[1]
            meta["monitor"] = {"name": name, "mode": self.mode, "value": value}
        if run.links:
            meta["links"] = dict(run.links)
        if run.step == step:
            # What the sinks' windows hold since their last point: a resumed run
            # writes the same values as an uninterrupted one.
            state = run.resume_state()
            meta["windows"] = state.windows
            if state.examples_per_step is not None:
                meta["examples_per_step"] = state.examples_per_step
            if state.decisions:  # taken after this step's decisions
                meta["decisions"] = dict(state.decisions)
        return meta

    def _saved(self, info: CheckpointInfo) -> None:
        self.last_saved = info
        #: How long the longest save of this callback took, from its state's copy
        #: to its commit (`StopAtTime` stops early enough for one more).
        took = time.monotonic() - self._save_began
        self.save_seconds = max(self.save_seconds, took)
        if info.path:
            logger.log(
                logging.INFO if self.verbose else logging.DEBUG,
                "StepCheckpoint: saved %s at step %d.",
                info.path,
                info.step,
            )

    # -- run ------------------------------------------------------------------------
    def set_model(self, model: keras.Model) -> None:
        # Keras sets every callback's model before any begins the run: the run knows
        # where it saves before its sinks claim their files (a fork's run id).
        super().set_model(model)
        _dispatch.note_saves_into(model, self.directory)

    def on_run_begin(self, start_step: int) -> None:
        if self.every_seconds is not None and self.run.lockstep:
            raise ValueError(  # before the lock: a refused run leaves no trace
                "StepCheckpoint: `every_seconds` saves at steps that each "
                "worker's clock would choose alone; under a multi-worker "
                "strategy the workers save together: give `every` (steps)."
            )
        if self.run.is_chief:
            self._lock.acquire()
            self.store.recover()
        # Another run's checkpoints go aside at this run's first save, not now: a
        # run stopped before it saves anything leaves the directory as it was.
        self._others = self._other_runs(start_step) if self.run.is_chief else []
        later = [
            e.step
            for e in self.store.entries()
            if e.step > start_step and e not in self._others
        ]
        if later:
            logger.warning(
                "StepCheckpoint: the run starts at step %d but %s holds checkpoints "
                "of later steps %s (restore with StepCheckpoint.restore_latest before "
                "fit to resume from them); they are replaced as new ones are saved.",
                start_step,
                self.directory,
                later,
            )
        self.store.prepare(self.model)  # host buffers now, not in a saving step
        self._done_steps = {start_step}  # never re-save the state it starts from
        self._judged = None
        if self._monitor is not None:
            best = self.store.retention.best(self.store.entries())
            self._best = {entry.step: entry.value for entry in best}
        self._say_a_new_rule()
        self._pending = self._last = None
        self.interrupted = False
        self.signal_received = None
        self._stop = _signals.GracefulStop(self.signals, self.model, self._on_signal)
        self._stop.install()
        if self.every_seconds is not None:
            self._arm_timer()

    def _say_a_new_rule(self) -> None:
        """INFO when the directory's best table was kept by another monitor or
        `keep_best` than this run's, which wins (the checkpoints are ranked again)."""
        try:
            with tf.io.gfile.GFile(os.path.join(self.directory, INDEX_FILE)) as f:
                saved = json.loads(f.read()).get("best")
        except (OSError, ValueError, AttributeError, tf.errors.OpError):
            return
        if not isinstance(saved, dict) or "keep_best" not in saved:
            return
        was = (saved.get("monitor"), saved.get("keep_best"))
        if was != (self.monitor, self.keep_best):
            logger.info(
                "StepCheckpoint: this run keeps the %d best by %s; the checkpoints in "
                "%s were kept as the %s best by %s, and are ranked again.",
                self.keep_best,
                self.monitor,
                self.directory,
                was[1],
                was[0],
            )

    def _other_runs(self, start_step: int) -> list[CheckpointInfo]:
        """The checkpoints of another run: saved under another run id (see
        `kerasteps.callbacks._sinks`), or under none (an older kerasteps) at a step
        after this run's start."""
        others = []
        for entry in self.store.entries():
            run_id = read_meta(entry.path).get("run_id")
            if run_id == self.run.run_id:
                continue
            if _sinks.is_run_id(run_id) or entry.step > start_step:
                others.append(entry)
        return others

    def _keep_other_runs_aside(self) -> None:
        """Before this run's first save: moves another run's checkpoints whole into
        `directory/earlier-N`, where the `keep` rotation and new saves of the same
        step cannot delete them."""
        others, self._others = self._others, []
        if not others:
            return
        kept = self.store.keep_aside([entry.name for entry in others])
        logger.warning(
            "StepCheckpoint: %s held the checkpoints of another run (steps %s): they "
            "are kept whole in %s (StepCheckpoint.restore_latest(model, %r) resumes "
            "that run), and this run saves its own in the directory.",
            self.directory,
            [entry.step for entry in others],
            kept,
            kept,
        )

    def on_run_ready(self) -> None:
        if self._monitor is not None:  # refused before training: see `Monitor`
            self._monitor.begin(self.run, self.model)

    def _judge(self, event: StepEvent) -> bool:
        """Takes `monitor`'s value at this step, if a validation computed it here;
        True if it ranks among the `keep_best` best so far (save this step)."""
        if self._monitor is None:
            return False
        value = self._monitor.take(event, self.run)
        if value is None:
            return False
        finite = math.isfinite(value)
        self._judged = (event.step, value if finite else None)
        if not finite or not self.keep_best:
            return False
        best = ranked({**self._best, event.step: value}, self.mode, self.keep_best)
        return event.step in best

    def on_step(self, event: StepEvent) -> None:
        self._last = event
        self._raise_failed_write()
        self._judge(event)  # a scheduled step is saved anyway
        if self.run.non_finite_at == event.step:
            logger.warning(
                "StepCheckpoint: not saving step %d, where a loss is not finite.",
                event.step,
            )
        else:
            self._save_or_defer(event)
        self._stop_on_signal(event)

    def on_other_step(self, event: StepEvent) -> None:
        self._last = event
        self._raise_failed_write()
        due = self._judge(event) or self._time_due(event)
        if due and self.run.non_finite_at != event.step:
            self._save_or_defer(event)
        self._stop_on_signal(event)

    def _time_due(self, event: StepEvent) -> bool:
        """Whether `every_seconds` passed since the run began or last saved (or
        this is the final step, with no `every`)."""
        if self.every_seconds is None:
            return False
        if event.final and self.every is None:
            return True
        return time.monotonic() - self._since_save >= self.every_seconds

    def _arm_timer(self) -> None:
        """Wakes the run `every_seconds` after the latest save (or the begin)."""
        if self._timer is not None:
            self._timer.cancel()
        self._since_save = time.monotonic()
        self._timer = threading.Timer(self.every_seconds, self._wake)
        self._timer.daemon = True
        self._timer.start()

    def _raise_failed_write(self) -> None:
        if self.store.writer.failed:  # the background write failed: raise it here
            self._finish_background()

    def _stop_on_signal(self, event: StepEvent) -> None:
        """After SIGTERM or Ctrl-C: save this step (unless not finite) and stop.

        Every step processed after the signal is saved: under async dispatch the
        end of the step before the last one may be processed after the signal
        (at the last one's batch begin), and the last one after it.
        """
        if self.signal_received is not None:
            self.interrupted = True
            self.model.stop_training = True
            if self.run.non_finite_at != event.step:
                self._save_or_defer(event)

    def _save_or_defer(self, event: StepEvent) -> None:
        if event.epoch_last and not event.final:
            self._pending = event  # after the epoch's validation values were written
            return
        self._save_now(event)

    def _save_now(self, event: StepEvent) -> None:
        """Saves the state of `event.step`, with the step and counters it carries."""
        self._pending = None
        step = event.step
        if step in self._done_steps:
            return
        steps_lib.sync_trained_state(self.model)  # after Keras's epoch validation
        crash_point("save", step)
        self._keep_other_runs_aside()
        meta = self._run_meta(self.model, step)
        counters = (event.global_counter, event.counters)
        self._save_began = time.monotonic()
        if self.every_seconds is not None:
            self._arm_timer()
        try:
            if self.async_save:
                self._finish_background(due=True)  # at most one save in flight
                self.store.save_async(self.model, meta, self._saved, counters)
            else:
                self._saved(self.store.save(self.model, meta, counters))
            self._done_steps.add(step)
            value = meta.get("monitor", {}).get("value")
            if value is not None and self._monitor is not None:
                self._best[step] = value
                self._best = ranked(self._best, self.mode, self.keep_best)
        except NonFiniteStateError as error:
            self._done_steps.add(step)
            logger.error("%s The last finite checkpoint is kept.", error)

    def _finish_background(self, due: bool = False) -> None:
        """Waits for the background save in flight, raising its error (`due`: a
        save is due now, see `CheckpointStore.wait_for_writer`).

        A save refused because the state is not finite is no error (the store logs
        it). Any other error of the background write is raised; `fit()` then ends
        with it (no `on_run_end` follows), so the lock and the signal handlers are
        given back first.
        """
        try:
            self.store.wait_for_writer(due)
        except BaseException:
            self._leave()
            raise

    def _wake(self, error: BaseException | None = None) -> None:
        """Acts at the next batch end, due or not (after a signal, or a background
        save that failed with `error`)."""
        if self._run is not None:
            self._run.wake()

    def flush(self) -> None:
        if self._pending is not None:
            self._save_now(self._pending)

    def on_run_end(self, final_step: int) -> None:
        if self._monitor is not None:
            self._monitor.end(self.run)
        try:
            if self.signal_received is not None:
                # The signal may have come after the final step's dispatch: save
                # that step too (`_save_now` skips it if it was saved).
                self.interrupted = True
                last = self._last
                final = last is not None and last.step == final_step
                if final and self.run.non_finite_at != final_step:
                    self._pending = self._pending or last
            self.flush()
            self._finish_background()
        finally:
            if self._timer is not None:
                self._timer.cancel()
            self._leave()

    def _leave(self) -> None:
        if self._stop is not None:
            self._stop.restore()
        self._lock.release()

    # -- signals --------------------------------------------------------------------
    def request_stop(self, signum: int = signal.SIGTERM) -> bool:
        """Stops training after the step in progress and saves it, as a first
        signal does.

        Where `fit()` runs off the main thread (Ray Train's workers, a thread of
        your own), Python installs no signal handler for it: call this from a
        handler of the main thread, or from the cluster's preemption hook. It may
        be called from any thread.

        Args:
            signum: The signal reported as received (`signal_received`), default
                SIGTERM.

        Returns:
            True if the run in progress will save and stop; False when no run is in
            progress, or it already stops.

        Example:

        >>> import tempfile, keras, numpy as np
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> checkpoint = StepCheckpoint(tempfile.mkdtemp(), every=100)
        >>> preempt = keras.callbacks.LambdaCallback(
        ...     on_train_batch_end=lambda batch, logs: batch == 2
        ...     and checkpoint.request_stop()
        ... )
        >>> x = np.zeros((20, 1))
        >>> callbacks = [checkpoint, preempt]
        >>> _ = model.fit(x, x, batch_size=2, verbose=0, callbacks=callbacks)
        >>> checkpoint.interrupted, checkpoint.last_saved.step
        (True, 3)
        """
        (signum,) = _signals.check_signals([signum], "signum")
        running = self._run is not None and not self._run.ended
        if not running or self.signal_received is not None:
            return False
        self._on_signal(signum)
        return True

    def _on_signal(self, signum: int) -> None:
        self.signal_received = signum
        # Keras checks the flag after each batch end: training stops after the step
        # in progress, whichever thread Keras runs batch ends on. Set on the run's
        # model, not through `Callback.model`, which on JAX syncs the trained state:
        # a handler runs between any two bytecodes of the training thread, where a
        # sync could attach a state that the step in progress has donated.
        self._run.model.stop_training = True
        self._wake()
        logger.warning(
            "StepCheckpoint: received %s; stopping training after the step in "
            "progress and saving a checkpoint of it.",
            signal.Signals(signum).name,
        )
