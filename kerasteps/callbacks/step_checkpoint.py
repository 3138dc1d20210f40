"""`StepCheckpoint`: atomic checkpoints every N global steps, and exact resume."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from kerasteps import distribute
from kerasteps import steps as steps_lib
from kerasteps.callbacks import _windows
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent, StepRecord
from kerasteps.callbacks.step_tensorboard import check_writable_dir
from kerasteps.schedule import Every, _check_positive_int

__all__ = ["StepCheckpoint"]

logger = logging.getLogger("kerasteps")

#: The index file of a checkpoint directory (the commit point of every save).
INDEX_FILE = "checkpoint.json"
#: Format tag written in the index and in each checkpoint's `meta.json`.
FORMAT = "kerasteps.StepCheckpoint/1"
_META_FILE = "meta.json"
_PREFIX = "weights"
_NAME_RE = re.compile(r"^ckpt-(\d+)$")
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint of a `StepCheckpoint` directory.

    Attributes:
        name: Directory name, `ckpt-<step>`.
        step: The global step saved in it.
        path: Full path of the checkpoint directory.
        time: Wall-clock time of the save (seconds since the epoch).
    """

    name: str
    step: int
    path: str
    time: float

    @property
    def prefix(self) -> str:
        """The `tf.train.Checkpoint` prefix inside the directory."""
        return os.path.join(self.path, _PREFIX)


# -- what a checkpoint holds ----------------------------------------------------------
def _optimizers(model: keras.Model) -> dict[str, Any]:
    """Every optimizer of a model, by the name it has in the checkpoint."""
    found: dict[str, Any] = {}
    for name, optimizer in steps_lib.step_optimizers(model).items():
        if optimizer is not None:
            found["optimizer" + (f"_{name}" if name else "")] = optimizer
    default = getattr(model, "optimizer", None)
    if default is not None and all(default is not o for o in found.values()):
        found["optimizer"] = default
    return found


def checkpoint_object(model: keras.Model) -> tf.train.Checkpoint:
    """The `tf.train.Checkpoint` that kerasteps saves for a model.

    It holds the model (its weights, its step-counter variables, the states of its
    seed generators, and every optimizer that is one of its attributes) and each
    optimizer that `kerasteps.steps.step_optimizers(model)` names.
    """
    return tf.train.Checkpoint(model=model, **_optimizers(model))


def build_optimizers(model: keras.Model) -> None:
    """Builds a plain model's optimizer so a restore sets its slots at once.

    Optimizers whose variables are unknown here (a multi-optimizer model's) are left
    alone: `tf.train.Checkpoint` restores their slots the moment they are created
    (at the first training step, or when the model builds them).
    """
    optimizer = getattr(model, "optimizer", None)
    if (
        optimizer is not None
        and not steps_lib._has_protocol(model)
        and not getattr(optimizer, "built", True)
        and model.built
        and model.trainable_variables
    ):
        optimizer.build(model.trainable_variables)


def state_variables(model: keras.Model) -> list[Any]:
    """The variables a checkpoint restores: model variables, then optimizer ones."""
    seen: set[int] = set()
    out = []
    groups = [model.variables] + [o.variables for o in _optimizers(model).values()]
    for group in groups:
        for variable in group:
            if id(variable) not in seen:
                seen.add(id(variable))
                out.append(variable)
    return out


@contextlib.contextmanager
def _keep_root_logger_unconfigured() -> Iterator[None]:
    """Undoes the `logging.basicConfig()` that absl runs when TF logs while saving.

    TF logs at INFO through absl while writing a checkpoint, and absl calls
    `logging.basicConfig()` when the root logger has no handler; the `kerasteps`
    lines (which `LogEvery` prints with its own handler in that case) would then
    be printed twice for the rest of the process.
    """
    root = logging.getLogger()
    unconfigured = not root.handlers
    try:
        yield
    finally:
        if unconfigured:
            for handler in list(root.handlers):
                if type(handler) is logging.StreamHandler:
                    root.removeHandler(handler)


# -- the directory ------------------------------------------------------------------
def _read_meta(info: CheckpointInfo) -> dict:
    """The checkpoint's `meta.json`, or `{}` when it cannot be read."""
    try:
        with tf.io.gfile.GFile(os.path.join(info.path, _META_FILE), "r") as handle:
            meta = json.loads(handle.read())
    except (ValueError, OSError, tf.errors.OpError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _is_local(path: str) -> bool:
    return "://" not in path


def _write_text_atomic(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    with tf.io.gfile.GFile(tmp, "w") as handle:
        handle.write(text)
        if _is_local(path):
            handle.flush()
    if _is_local(path):
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    else:
        tf.io.gfile.rename(tmp, path, overwrite=True)


def _remove_tree(path: str) -> None:
    try:
        if _is_local(path):
            shutil.rmtree(path, ignore_errors=True)
        elif tf.io.gfile.exists(path):
            tf.io.gfile.rmtree(path)
    except Exception as error:  # noqa: BLE001 - cleanup is best effort
        logger.warning("StepCheckpoint: could not remove %s (%s).", path, error)


class _CheckpointDirectory:
    """Reads and writes the checkpoints of one directory (private helper).

    Layout::

        <directory>/checkpoint.json     index: the committed checkpoints, oldest first
        <directory>/ckpt-<step>/weights.index, weights.data-*, meta.json

    A save writes a new `.tmp-*` directory, renames it to `ckpt-<step>` and then
    replaces the index (write to a temporary file, then rename): the index is the
    commit point, so a process killed at any moment leaves the previous checkpoint
    listed and complete.
    """

    def __init__(self, directory: str, keep: int):
        self.directory = directory
        self.keep = keep
        self._lock = threading.Lock()

    # -- reading ----------------------------------------------------------------------
    def _read_index(self) -> list[CheckpointInfo] | None:
        path = os.path.join(self.directory, INDEX_FILE)
        if not tf.io.gfile.exists(path):
            return None
        try:
            with tf.io.gfile.GFile(path, "r") as handle:
                data = json.loads(handle.read())
            entries = [
                CheckpointInfo(
                    name=str(entry["name"]),
                    step=int(entry["step"]),
                    path=os.path.join(self.directory, str(entry["name"])),
                    time=float(entry.get("time", 0.0)),
                )
                for entry in data["checkpoints"]
            ]
        except (ValueError, KeyError, TypeError) as error:
            logger.warning(
                "StepCheckpoint: unreadable index %s (%s); scanning the directory.",
                path,
                error,
            )
            return None
        return entries

    def _scan(self) -> list[CheckpointInfo]:
        """Complete checkpoint directories (with `meta.json`), oldest save first."""
        found = []
        if not tf.io.gfile.isdir(self.directory):
            return found
        for name in tf.io.gfile.listdir(self.directory):
            name = name.rstrip("/")
            match = _NAME_RE.match(name)
            path = os.path.join(self.directory, name)
            meta_path = os.path.join(path, _META_FILE)
            if not match or not tf.io.gfile.exists(meta_path):
                continue
            try:
                with tf.io.gfile.GFile(meta_path, "r") as handle:
                    meta = json.loads(handle.read())
                saved = float(meta.get("time", 0.0))
            except (ValueError, TypeError):
                continue
            found.append(CheckpointInfo(name, int(match.group(1)), path, saved))
        found.sort(key=lambda info: (info.time, info.step))
        return found

    def entries(self) -> list[CheckpointInfo]:
        entries = self._read_index()
        if entries is None:
            entries = self._scan()
        return [e for e in entries if tf.io.gfile.exists(e.prefix + ".index")]

    def latest(self) -> CheckpointInfo | None:
        entries = self.entries()
        return entries[-1] if entries else None

    # -- writing ----------------------------------------------------------------------
    def clean_stale(self) -> None:
        """Removes what killed saves left: temporary and unlisted directories."""
        if not tf.io.gfile.isdir(self.directory):
            return
        listed = {e.name for e in (self._read_index() or [])}
        index_exists = tf.io.gfile.exists(os.path.join(self.directory, INDEX_FILE))
        for name in tf.io.gfile.listdir(self.directory):
            name = name.rstrip("/")
            path = os.path.join(self.directory, name)
            if name.startswith((_TMP_PREFIX, _TRASH_PREFIX)):
                _remove_tree(path)
            elif index_exists and _NAME_RE.match(name) and name not in listed:
                _remove_tree(path)  # renamed, but the index was never updated
            elif name.startswith(INDEX_FILE) and name.endswith(".tmp"):
                tf.io.gfile.remove(path)

    def save(
        self, model: keras.Model, extra_meta: dict | None = None
    ) -> CheckpointInfo:
        """Writes a checkpoint of the model's current state, atomically."""
        with self._lock:
            return self._save(model, extra_meta or {})

    def _save(self, model: keras.Model, extra_meta: dict) -> CheckpointInfo:
        counters = steps_lib.step_counters(model)
        step = counters[steps_lib.global_step_name(model)]
        name = f"ckpt-{step}"
        if not distribute.is_chief(model):
            # Other workers take part in the save (distributed variables may need
            # them) but write to a private temporary folder, removed at once.
            scratch = tempfile.mkdtemp(prefix="kerasteps-worker-ckpt-")
            try:
                with _keep_root_logger_unconfigured():
                    checkpoint_object(model).write(os.path.join(scratch, _PREFIX))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return CheckpointInfo(name, step, "", time.time())
        final = os.path.join(self.directory, name)
        tmp = os.path.join(
            self.directory, f"{_TMP_PREFIX}{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        )
        tf.io.gfile.makedirs(tmp)
        try:
            with _keep_root_logger_unconfigured():
                checkpoint_object(model).write(os.path.join(tmp, _PREFIX))
            saved = time.time()
            meta = {
                "format": FORMAT,
                "step": step,
                "counters": counters,
                "global_counter": steps_lib.global_step_name(model),
                "time": saved,
                "model": model.name,
                "optimizers": sorted(_optimizers(model)),
                "keras_version": keras.__version__,
                **extra_meta,
            }
            with tf.io.gfile.GFile(os.path.join(tmp, _META_FILE), "w") as handle:
                handle.write(json.dumps(meta, indent=1, sort_keys=True))
            self._move_into_place(tmp, final)
        except BaseException:
            _remove_tree(tmp)
            raise
        info = CheckpointInfo(name, step, final, saved)
        self._commit(info)
        return info

    def _move_into_place(self, tmp: str, final: str) -> None:
        trash = None
        if tf.io.gfile.exists(final):
            # A checkpoint of the same step from an abandoned run: move it away first.
            trash = os.path.join(
                self.directory,
                f"{_TRASH_PREFIX}{os.path.basename(final)}-{uuid.uuid4().hex[:8]}",
            )
            tf.io.gfile.rename(final, trash)
        tf.io.gfile.rename(tmp, final)
        if trash is not None:
            _remove_tree(trash)

    def _commit(self, info: CheckpointInfo) -> None:
        entries = [
            e for e in (self._read_index() or self._scan()) if e.name != info.name
        ]
        entries.append(info)
        kept, dropped = entries[-self.keep :], entries[: -self.keep]
        index = {
            "format": FORMAT,
            "latest": info.name,
            "latest_step": info.step,
            "checkpoints": [
                {"name": e.name, "step": e.step, "time": e.time} for e in kept
            ],
        }
        _write_text_atomic(
            os.path.join(self.directory, INDEX_FILE), json.dumps(index, indent=1)
        )
        kept_names = {e.name for e in kept}
        for entry in dropped:
            if entry.name not in kept_names:
                _remove_tree(entry.path)

    # -- restoring --------------------------------------------------------------------
    @staticmethod
    def restore(model: keras.Model, info: CheckpointInfo) -> int:
        build_optimizers(model)
        try:
            with _keep_root_logger_unconfigured():
                status = checkpoint_object(model).read(info.prefix)
            try:
                status.assert_existing_objects_matched()
            finally:
                status.expect_partial()  # values of objects not built yet wait
        except (AssertionError, ValueError, tf.errors.OpError) as error:
            raise ValueError(
                f"The checkpoint {info.path!r} does not match the model "
                f"{model.name!r} (which may now be partly restored): {error}"
            ) from error
        restored = steps_lib.global_step(model)
        windows = _read_meta(info).get("windows")
        if isinstance(windows, dict):
            # The sinks' windows that began before the save continue in the next run.
            _windows.attach_carry(model, restored, windows)
        if restored != info.step:
            logger.warning(
                "StepCheckpoint: %s was saved at step %d but the model's global step "
                "after restoring is %d.",
                info.path,
                info.step,
                restored,
            )
        logger.info("StepCheckpoint: restored %s; global step %d.", info.path, restored)
        return restored


class StepCheckpoint(StepCallback):
    """Saves an atomic checkpoint every N global steps, for an exact resume.

    A checkpoint holds the model's weights, the state of every optimizer (its
    `iterations` and slot variables: the protocol's optimizers from
    `kerasteps.steps.step_optimizers(model)` and any optimizer that is an attribute
    of the model), the step counters (which are model or optimizer variables), the
    states of the seed generators, and a `meta.json` with the global step, the
    counters, and what the sinks' open windows hold (the metrics' `total`/`count`
    since each schedule's previous point), so that the first point after a resume
    is the same mean as in an uninterrupted run; the global step is all that
    kerasteps callbacks need to resume (sinks drop what they wrote after it). It is
    a `tf.train.Checkpoint`, which restores the slots of an optimizer that is not
    built yet the moment it builds them, so custom multi-optimizer models (a WGAN)
    restore like plain ones.

    Layout of `directory`: `ckpt-<step>/` folders and an index `checkpoint.json`.
    Each save writes a temporary folder, renames it to `ckpt-<step>`, then replaces
    the index atomically (temporary file and rename): a process killed during a save
    leaves the previous checkpoint listed and usable. The newest `keep` saves are
    kept. On a local disk every step is atomic; on object stores (`gs://`) the index
    is the commit point.

    **Resume** with one call *before* `fit()` (the run hub reads the start step when
    training begins): `StepCheckpoint.restore_latest(model, directory)` restores the
    newest checkpoint and returns its global step, or `None` when there is none.
    Training then continues at that step and every kerasteps sink drops what it
    wrote after it. The data position is the script's: with a repeatable pipeline
    (seeded, deterministic, `.repeat()`-ed and fed with `steps_per_epoch`),
    `kerasteps.data.skip_consumed(dataset, step)` skips the batches already trained
    on, which makes the resume exact.

    **Signals**: while `fit()` runs, SIGTERM (and any other signal in `signals`)
    makes the callback save a checkpoint at the next batch end and stop training
    (`model.stop_training = True`); `interrupted` is then True, so the script can
    exit. A second signal is handed to the previous handler (SIGTERM then kills).
    Handlers are installed on the main thread when the run begins and restored when
    it ends.

    A checkpoint scheduled at a step that ends an epoch is written at the epoch end,
    after the sinks wrote that step (with Keras's validation values). A step where
    `StopOnNonFinite` stopped training is not saved.

    Args:
        directory: Directory of the checkpoints (created if missing).
        every: Positive int or `kerasteps.Every`, when to save. `Every(n, last=True)`
            also saves at the final step of each run.
        keep: Positive int, default 3: how many of the newest checkpoints to keep.
        signals: Signals that save and stop, default `(signal.SIGTERM,)`; `()` for
            none.
        verbose: `0` (default) or `1`, as in `keras.callbacks.ModelCheckpoint`:
            `1` logs each save at INFO (`StepCheckpoint: saved ... at step n.`),
            `0` at DEBUG. Restores are always logged at INFO.

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

    phase = 80
    reads_values = False

    def __init__(
        self,
        directory: str | os.PathLike,
        every: int | Every,
        keep: int = 3,
        signals: Iterable[int] = (signal.SIGTERM,),
        verbose: int = 0,
    ):
        super().__init__(every)
        keep = _check_positive_int("keep", keep)
        if verbose not in (0, 1) or not isinstance(verbose, int):
            raise ValueError(f"`verbose` must be 0 or 1, received {verbose!r}.")
        self.verbose = int(verbose)
        self.directory = check_writable_dir(directory, "directory")
        self.keep = keep
        try:
            self.signals = tuple(signal.Signals(s) for s in signals)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"`signals` must be signal numbers, received {signals!r}."
            ) from error
        self._store = _CheckpointDirectory(self.directory, keep)
        self._previous_handlers: dict[signal.Signals, Any] = {}
        self._signal_received: int | None = None
        self._pending = False
        self._saved_steps: set[int] = set()
        #: True after a signal made the callback save and stop training.
        self.interrupted = False
        #: The `CheckpointInfo` of the last save of this callback, or None.
        self.last_saved: CheckpointInfo | None = None

    # -- public API -----------------------------------------------------------------
    @staticmethod
    def list_checkpoints(directory: str | os.PathLike) -> list[CheckpointInfo]:
        """Returns the committed checkpoints of a directory, oldest save first.

        Args:
            directory: A `StepCheckpoint` directory.

        Example:

        >>> import tempfile
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> StepCheckpoint.list_checkpoints(tempfile.mkdtemp())
        []
        """
        return _CheckpointDirectory(os.fspath(directory), keep=1).entries()

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
        return _CheckpointDirectory(os.fspath(directory), keep=1).latest()

    @staticmethod
    def restore_latest(model: keras.Model, directory: str | os.PathLike) -> int | None:
        """Restores the newest checkpoint into `model`; call it BEFORE `fit()`.

        Restores weights, optimizer states and step counters. A plain model's
        optimizer is built first, so its slots hold the saved values when this
        returns; the slots of optimizers built later (a custom `train_step`'s)
        get their values when they are created.

        Args:
            model: The compiled model, built like the one that was saved.
            directory: A `StepCheckpoint` directory (it may not exist yet).

        Returns:
            The restored global step, or None when the directory holds no checkpoint
            (the model is left untouched).

        Raises:
            ValueError: if the newest checkpoint does not match the model.

        Example:

        >>> import tempfile, keras
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("adam", "mse")
        >>> StepCheckpoint.restore_latest(model, tempfile.mkdtemp()) is None
        True
        """
        steps_lib.global_step(model)  # validates model and compile state
        info = StepCheckpoint.latest(directory)
        if info is None:
            return None
        return _CheckpointDirectory.restore(model, info)

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

        Example:

        >>> from kerasteps.callbacks import StepCheckpoint
        >>> # step = StepCheckpoint.restore_checkpoint(model, "ckpts/ckpt-40")
        """
        if not isinstance(path, CheckpointInfo):
            path = os.fspath(path).rstrip("/")
            match = _NAME_RE.match(os.path.basename(path))
            if not match or not tf.io.gfile.exists(
                os.path.join(path, _PREFIX + ".index")
            ):
                raise ValueError(
                    f"`path` must be a StepCheckpoint folder `ckpt-<step>`, "
                    f"received {path!r}."
                )
            path = CheckpointInfo(os.path.basename(path), int(match.group(1)), path, 0)
        return _CheckpointDirectory.restore(model, path)

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

        Example:

        >>> import tempfile, keras
        >>> from kerasteps.callbacks import StepCheckpoint
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("adam", "mse")
        >>> StepCheckpoint(tempfile.mkdtemp(), every=100).save(model).step
        0
        """
        model = model if model is not None else self.model
        hub = self._hub
        meta = {}
        if (
            hub is not None
            and hub.model is model
            and hub.step == (steps_lib.global_step(model))
        ):
            # What the sinks' windows hold since their last point: a resumed run
            # writes the same values as an uninterrupted one.
            meta["windows"] = hub.carry()
        info = self._store.save(model, meta)
        self._saved_steps.add(info.step)
        self.last_saved = info
        if info.path:
            logger.log(
                logging.INFO if self.verbose else logging.DEBUG,
                "StepCheckpoint: saved %s at step %d.",
                info.path,
                info.step,
            )
        return info

    # -- run ------------------------------------------------------------------------
    def on_run_begin(self, start_step: int) -> None:
        if self.hub.is_chief:
            self._store.clean_stale()
        later = [e.step for e in self._store.entries() if e.step > start_step]
        if later:
            logger.warning(
                "StepCheckpoint: the run starts at step %d but %s holds checkpoints "
                "of later steps %s (restore with StepCheckpoint.restore_latest before "
                "fit to resume from them); they are replaced as new ones are saved.",
                start_step,
                self.directory,
                later,
            )
        self._saved_steps = {start_step}  # never re-save the state it starts from
        self._pending = False
        self._signal_received = None
        self.interrupted = False
        self._install_handlers()

    def on_step(self, event: StepEvent) -> None:
        if self._stopped_non_finite(event.step):
            logger.warning(
                "StepCheckpoint: not saving step %d, where a loss is not finite.",
                event.step,
            )
            return
        self._save_or_defer(event)

    def _dispatch_step(self, record: StepRecord, fired: bool) -> None:
        super()._dispatch_step(record, fired)
        if self._signal_received is not None and not self.interrupted:
            self.interrupted = True
            self.model.stop_training = True
            if not self._stopped_non_finite(record.step):
                self._save_or_defer(record)

    def _save_or_defer(self, event: StepEvent | StepRecord) -> None:
        if event.epoch_last and not event.final:
            self._pending = True  # after the epoch's validation values were written
            return
        self._save_now()

    def _save_now(self) -> None:
        self._pending = False
        if steps_lib.global_step(self.model) in self._saved_steps:
            return
        self.save(self.model)

    def flush(self) -> None:
        if self._pending:
            self._save_now()

    def on_run_end(self, final_step: int) -> None:
        try:
            if self._signal_received is not None and not self.interrupted:
                self.interrupted = True  # the signal came after the last batch end
                self._pending = True
            if self._pending:
                self._save_now()
        finally:
            self._restore_handlers()

    def _stopped_non_finite(self, step: int) -> bool:
        from kerasteps.callbacks.stop_on_non_finite import StopOnNonFinite

        return any(
            isinstance(cb, StopOnNonFinite) and cb.stopped_step == step
            for cb in self.hub.callbacks
        )

    # -- signals --------------------------------------------------------------------
    def _install_handlers(self) -> None:
        self._restore_handlers()
        if not self.signals:
            return
        if threading.current_thread() is not threading.main_thread():
            logger.warning(
                "StepCheckpoint: fit() runs outside the main thread; no signal "
                "handlers installed."
            )
            return
        for sig in self.signals:
            self._previous_handlers[sig] = signal.signal(sig, self._handle_signal)

    def _restore_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, previous in self._previous_handlers.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous_handlers = {}

    def _handle_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self._signal_received is not None:
            logger.warning("StepCheckpoint: second %s; not waiting any longer.", name)
            self._restore_handlers()
            signal.raise_signal(signum)
            return
        self._signal_received = signum
        if self._hub is not None:
            self._hub.wake()  # act at the next batch end, due or not
        logger.warning(
            "StepCheckpoint: received %s; saving a checkpoint at the next batch end, "
            "then stopping training.",
            name,
        )
