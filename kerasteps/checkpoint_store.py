"""The checkpoint store: a directory of atomic, verified checkpoints of a model.

`StepCheckpoint` decides *when* to save; this module is *how*: what a checkpoint
holds, how a save commits, how a directory is read, repaired and restored from.
Layout::

    <directory>/checkpoint.json     index: the committed checkpoints, oldest first
    <directory>/ckpt-<step>/weights.index, weights.data-*, meta.json

A save writes a new `.tmp-*` folder (the model's state, then `meta.json` with the
global step, the counters, the size of every file and `"finite": true`), renames it to
`ckpt-<step>`, then replaces the index atomically: a process killed at any moment
leaves the previous checkpoint listed and complete.

What the store guarantees:

- **Nothing lost.** A complete checkpoint is never deleted because the index could not
  be read: an unreadable, empty or stale index is rebuilt from the folders on disk
  (a complete folder that the index does not list, from a kill between the rename and
  the index write, is verified and adopted), with a WARNING. Only temporary leftovers
  of killed saves are removed, and only the `keep` newest checkpoints are kept.
- **Nothing let in.** Index entries must be `ckpt-<int>` names directly inside the
  directory; any other entry (`../victim`, an absolute path, `""`) is ignored with a
  WARNING, and no code path removes anything outside the directory.
- **Verified restores.** A checkpoint is restored only if its files are all there with
  the sizes recorded at the save and TensorFlow's reader reads every tensor (its
  checksums included). `restore_latest` falls back to the newest checkpoint that
  restores completely, with a WARNING naming each broken one and why. A restore is
  all or nothing: a failed one puts back the model's variables as they were.
- **Finite only.** A state with a NaN or an infinity in its weights or optimizer
  variables is never written (the save is refused with an ERROR), and a checkpoint
  whose restored state is not finite is never returned.
- **Mismatches refused.** The optimizer classes are recorded; restoring an Adam
  checkpoint into an SGD model raises a `ValueError` before anything is restored.

Example:

>>> import numpy as np, keras, tempfile
>>> from kerasteps.checkpoint_store import CheckpointStore
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile("adam", "mse")
>>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2, verbose=0)
>>> store = CheckpointStore(tempfile.mkdtemp(), keep=2)
>>> store.save(model).name
'ckpt-4'
>>> [info.step for info in store.entries()]
[4]
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from kerasteps import _atomic, _finite, distribute
from kerasteps import steps as steps_lib

__all__ = ["CheckpointInfo", "CheckpointStore", "NonFiniteStateError"]

logger = logging.getLogger("kerasteps")

#: The index file of a checkpoint directory (the commit point of every save).
INDEX_FILE = "checkpoint.json"
#: Format tag written in the index and in each checkpoint's `meta.json`.
FORMAT = "kerasteps.StepCheckpoint/1"
META_FILE = "meta.json"
_PREFIX = "weights"
NAME_RE = re.compile(r"^ckpt-(\d+)$")
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"


class NonFiniteStateError(ValueError):
    """The state to save holds a NaN or an infinity: the checkpoint is refused."""


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
def optimizers_of(model: keras.Model) -> dict[str, Any]:
    """Every optimizer of a model, by the name it has in the checkpoint."""
    found: dict[str, Any] = {}
    for name, optimizer in steps_lib.step_optimizers(model).items():
        if optimizer is not None:
            found["optimizer" + (f"_{name}" if name else "")] = optimizer
    default = getattr(model, "optimizer", None)
    if default is not None and all(default is not o for o in found.values()):
        found["optimizer"] = default
    return found


def seed_states(model: keras.Model) -> list[Any]:
    """The state variables of the model's `keras.random.SeedGenerator`s, in order.

    `tf.train.Checkpoint(model=...)` does not reach them (nor does the `.keras`
    format), so a checkpoint lists them itself: Dropout masks and a WGAN's noise
    then continue exactly after a resume.
    """
    return [v for v in model.variables if v.name == "seed_generator_state"]


def checkpoint_object(model: keras.Model) -> tf.train.Checkpoint:
    """The `tf.train.Checkpoint` that kerasteps saves for a model.

    It holds the model (its weights and step-counter variables, and every optimizer
    that is one of its attributes), each optimizer that
    `kerasteps.steps.step_optimizers(model)` names, and the states of the model's
    seed generators.
    """
    return tf.train.Checkpoint(
        model=model, seed_states=seed_states(model), **optimizers_of(model)
    )


def build_optimizers(model: keras.Model) -> None:
    """Builds a plain model's optimizer so a restore sets its slots at once.

    Optimizers whose variables are unknown here (a multi-optimizer model's) are left
    alone: `tf.train.Checkpoint` restores their slots the moment they are created (at
    the first training step, or when the model builds them).
    """
    optimizer = getattr(model, "optimizer", None)
    if (
        optimizer is not None
        and steps_lib.is_plain(model)
        and not getattr(optimizer, "built", True)
        and model.built
        and model.trainable_variables
    ):
        optimizer.build(model.trainable_variables)


def state_variables(model: keras.Model) -> list[Any]:
    """The variables a checkpoint restores: model variables, then optimizer ones."""
    seen: set[int] = set()
    out = []
    groups = [model.variables] + [o.variables for o in optimizers_of(model).values()]
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
    lines (which `LogEvery` prints with its own handler in that case) would then be
    printed twice for the rest of the process.
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


# -- reading folders ------------------------------------------------------------------
def read_meta(path: str) -> dict:
    """The `meta.json` of a checkpoint folder, or `{}` when it cannot be read."""
    try:
        with tf.io.gfile.GFile(os.path.join(path, META_FILE), "r") as handle:
            meta = json.loads(handle.read())
    except (ValueError, OSError, tf.errors.OpError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _file_sizes(folder: str) -> dict[str, int]:
    sizes = {}
    for name in tf.io.gfile.listdir(folder):
        name = name.rstrip("/")
        if name != META_FILE:
            sizes[name] = int(tf.io.gfile.stat(os.path.join(folder, name)).length)
    return sizes


def check_folder(path: str) -> str | None:
    """Why a checkpoint folder is not complete, or None when it is.

    Complete: its `meta.json` reads and names the folder's step, and every file it
    lists is there with the recorded size (a folder of an older kerasteps, without
    sizes, needs its index and data files).
    """
    name = os.path.basename(path.rstrip("/"))
    match = NAME_RE.match(name)
    if not match:
        return f"{name!r} is not a checkpoint name"
    if not tf.io.gfile.isdir(path):
        return "the folder is missing"
    meta = read_meta(path)
    if not meta:
        return f"{META_FILE} is missing or unreadable"
    if meta.get("step") != int(match.group(1)):
        return f"{META_FILE} names step {meta.get('step')!r}, not {match.group(1)}"
    files = meta.get("files")
    if isinstance(files, dict):
        for file, size in files.items():
            full = os.path.join(path, file)
            if not tf.io.gfile.exists(full):
                return f"{file} is missing"
            actual = tf.io.gfile.stat(full).length
            if actual != size:
                return f"{file} has {actual} bytes, {size} were written"
        return None
    names = tf.io.gfile.listdir(path)
    if f"{_PREFIX}.index" not in names or not any(
        n.startswith(f"{_PREFIX}.data-") for n in names
    ):
        return "the weights files are missing"
    return None


def _read_every_tensor(info: CheckpointInfo) -> None:
    """Reads every tensor of a checkpoint (TF checks each tensor's checksum)."""
    reader = tf.train.load_checkpoint(info.prefix)
    for key in reader.get_variable_to_shape_map():
        reader.get_tensor(key)


# -- the directory ------------------------------------------------------------------
class CheckpointStore:
    """Reads and writes the checkpoints of one directory (see module docstring).

    Args:
        directory: The checkpoint directory (it may not exist yet).
        keep: Positive int: how many of the newest checkpoints a save keeps.

    Example:

    >>> import tempfile
    >>> from kerasteps.checkpoint_store import CheckpointStore
    >>> CheckpointStore(tempfile.mkdtemp(), keep=3).latest() is None
    True
    """

    def __init__(self, directory: str | os.PathLike, keep: int = 3):
        self.directory = os.fspath(directory)
        self.keep = keep
        self._lock = threading.Lock()

    # -- paths ------------------------------------------------------------------------
    def _inside(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _remove(self, name: str) -> None:
        """Removes `directory/name`: a checkpoint or a leftover, never anything else."""
        ours = NAME_RE.match(name) or name.startswith((_TMP_PREFIX, _TRASH_PREFIX))
        if not ours or os.path.basename(name) != name or name in (".", ".."):
            logger.error("StepCheckpoint: refusing to remove %r.", name)
            return
        path = self._inside(name)
        try:
            if _atomic.is_local(path):
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                elif os.path.lexists(path):
                    os.remove(path)
            elif tf.io.gfile.exists(path):
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)
        except Exception as error:  # noqa: BLE001 - cleanup is best effort
            logger.warning("StepCheckpoint: could not remove %s (%s).", path, error)

    # -- reading ----------------------------------------------------------------------
    def _read_index(self) -> list[CheckpointInfo] | None:
        """The index's valid entries; None if there is no index or it cannot be read."""
        path = self._inside(INDEX_FILE)
        if not tf.io.gfile.exists(path):
            return None
        try:
            with tf.io.gfile.GFile(path, "r") as handle:
                data = json.loads(handle.read())
            raw = data["checkpoints"]
            if not isinstance(raw, list):
                raise TypeError("`checkpoints` is not a list")
        except (ValueError, KeyError, TypeError, OSError, tf.errors.OpError) as error:
            logger.warning(
                "StepCheckpoint: the index %s cannot be read (%s: %s); the "
                "checkpoints on disk are used instead.",
                path,
                type(error).__name__,
                error,
            )
            return None
        entries, seen = [], set()
        for entry in raw:
            name = entry.get("name") if isinstance(entry, dict) else None
            match = NAME_RE.match(name) if isinstance(name, str) else None
            if not match or name in seen:
                logger.warning(
                    "StepCheckpoint: ignoring the index entry %r of %s: entries must "
                    "be `ckpt-<step>` folders inside the directory.",
                    entry,
                    path,
                )
                continue
            seen.add(name)
            try:
                saved = float(entry.get("time", 0.0))
            except (TypeError, ValueError):
                saved = 0.0
            entries.append(
                CheckpointInfo(name, int(match.group(1)), self._inside(name), saved)
            )
        return entries

    def _folders(self) -> list[str]:
        if not tf.io.gfile.isdir(self.directory):
            return []
        names = [n.rstrip("/") for n in tf.io.gfile.listdir(self.directory)]
        return sorted(n for n in names if NAME_RE.match(n))

    def _view(self) -> tuple[list[CheckpointInfo], list[str], bool]:
        """The committed checkpoints, the index repaired from the folders on disk.

        Returns:
            `(entries, notes, changed)`: the checkpoints oldest save first, what
            was repaired (one note each), and whether the index must be rewritten.
        """
        index = self._read_index()
        complete: dict[str, CheckpointInfo] = {}
        incomplete: dict[str, str] = {}
        for name in self._folders():
            path = self._inside(name)
            reason = check_folder(path)
            if reason is not None:
                incomplete[name] = reason
                continue
            saved = read_meta(path).get("time", 0.0)
            step = int(NAME_RE.match(name).group(1))
            complete[name] = CheckpointInfo(name, step, path, float(saved or 0.0))
        notes = [
            f"{name} is incomplete ({reason}): left as it is, not used"
            for name, reason in incomplete.items()
        ]
        if index is None:
            entries = list(complete.values())
            changed = bool(entries)
            if entries:
                notes.append(
                    f"no readable index: rebuilt it from the {len(entries)} "
                    "complete checkpoint(s) on disk"
                )
        else:
            entries = [complete[info.name] for info in index if info.name in complete]
            missing = [
                info.name
                for info in index
                if info.name not in complete and info.name not in incomplete
            ]
            notes += [f"{name} is listed but missing: dropped" for name in missing]
            listed = {info.name for info in entries}
            adopted = [info for name, info in complete.items() if name not in listed]
            if adopted:
                notes.append(
                    "adopted the complete checkpoint(s) that the index did not list: "
                    + ", ".join(info.name for info in adopted)
                )
            entries += adopted
            changed = len(entries) != len(index)
        entries.sort(key=lambda info: (info.time, info.step))
        return entries, notes, changed

    def entries(self) -> list[CheckpointInfo]:
        """The committed checkpoints, oldest save first (read only).

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint_store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).entries()
        []
        """
        return self._view()[0]

    def latest(self) -> CheckpointInfo | None:
        """The newest committed checkpoint, or None.

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint_store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).latest() is None
        True
        """
        entries = self.entries()
        return entries[-1] if entries else None

    # -- repairing --------------------------------------------------------------------
    def recover(self) -> None:
        """Repairs the directory when a run begins: the index, and killed saves' files.

        Logs a WARNING for each repair. Removes only temporary leftovers.

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint_store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).recover()
        """
        if not tf.io.gfile.isdir(self.directory):
            return
        with self._lock:
            for name in tf.io.gfile.listdir(self.directory):
                name = name.rstrip("/")
                if name.startswith((_TMP_PREFIX, _TRASH_PREFIX)):
                    self._remove(name)
                elif _atomic.is_temporary(name) or (
                    name.startswith(INDEX_FILE) and name.endswith(".tmp")
                ):
                    tf.io.gfile.remove(self._inside(name))
            entries, notes, changed = self._view()
            for note in notes:
                logger.warning("StepCheckpoint: %s: %s.", self.directory, note)
            if changed:
                self._write_index(entries)

    def _write_index(self, entries: list[CheckpointInfo]) -> None:
        latest = entries[-1] if entries else None
        index = {
            "format": FORMAT,
            "latest": latest.name if latest else None,
            "latest_step": latest.step if latest else None,
            "checkpoints": [
                {"name": e.name, "step": e.step, "time": e.time} for e in entries
            ],
        }
        _atomic.write_text(self._inside(INDEX_FILE), json.dumps(index, indent=1))

    # -- saving -----------------------------------------------------------------------
    def save(
        self, model: keras.Model, extra_meta: dict | None = None
    ) -> CheckpointInfo:
        """Writes a checkpoint of the model's current state, atomically.

        Raises:
            NonFiniteStateError: if a weight or optimizer variable holds a NaN or an
                infinity (nothing is written).
        """
        with self._lock:
            return self._save(model, extra_meta or {})

    def _save(self, model: keras.Model, extra_meta: dict) -> CheckpointInfo:
        counters = steps_lib.step_counters(model)
        step = counters[steps_lib.global_step_name(model)]
        name = f"ckpt-{step}"
        bad = _finite.first_non_finite(state_variables(model))
        if bad is not None:
            raise NonFiniteStateError(
                f"StepCheckpoint: not saving step {step}: {bad} holds a NaN or an "
                "infinity."
            )
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
        tf.io.gfile.makedirs(self.directory)
        tmp_name = f"{_TMP_PREFIX}{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = self._inside(tmp_name)
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
                "micro_steps": steps_lib.micro_steps(model),
                "time": saved,
                "model": model.name,
                "optimizers": {
                    key: type(opt).__name__ for key, opt in optimizers_of(model).items()
                },
                "keras_version": keras.__version__,
                "finite": True,
                "files": _file_sizes(tmp),
                **extra_meta,
            }
            _atomic.write_text(
                os.path.join(tmp, META_FILE), json.dumps(meta, indent=1, sort_keys=True)
            )
            self._move_into_place(tmp_name, name)
        except BaseException:
            self._remove(tmp_name)
            raise
        info = CheckpointInfo(name, step, self._inside(name), saved)
        self._commit(info)
        return info

    def _move_into_place(self, tmp_name: str, name: str) -> None:
        final = self._inside(name)
        trash = None
        if tf.io.gfile.exists(final):
            # A checkpoint of the same step from an abandoned run: move it away first.
            trash = f"{_TRASH_PREFIX}{name}-{uuid.uuid4().hex[:8]}"
            tf.io.gfile.rename(final, self._inside(trash))
        tf.io.gfile.rename(self._inside(tmp_name), final)
        if trash is not None:
            self._remove(trash)

    def _commit(self, info: CheckpointInfo) -> None:
        entries = [e for e in self._view()[0] if e.name != info.name]
        entries.append(info)
        kept, dropped = entries[-self.keep :], entries[: -self.keep]
        self._write_index(kept)
        kept_names = {e.name for e in kept}
        for entry in dropped:
            if entry.name not in kept_names:
                self._remove(entry.name)

    # -- restoring --------------------------------------------------------------------
    def restore(self, model: keras.Model, info: CheckpointInfo) -> int:
        """Restores one checkpoint into `model`, all or nothing.

        Raises:
            ValueError: naming the checkpoint, if it is incomplete or damaged, does
                not match the model (its variables or its optimizer classes), or
                holds a state that is not finite. The model is then as it was.
        """
        reason = check_folder(info.path)
        if reason is not None:
            raise ValueError(f"The checkpoint {info.path!r} is incomplete: {reason}.")
        meta = read_meta(info.path)
        self._check_optimizers(model, info, meta)
        try:
            _read_every_tensor(info)
        except Exception as error:  # noqa: BLE001 - any read error: damaged data
            raise ValueError(
                f"The checkpoint {info.path!r} is damaged: "
                f"{type(error).__name__}: {error}"
            ) from error
        build_optimizers(model)
        variables = state_variables(model)
        before = [np.array(keras.ops.convert_to_numpy(v), copy=True) for v in variables]
        try:
            with _keep_root_logger_unconfigured():
                status = checkpoint_object(model).read(info.prefix)
            try:
                status.assert_existing_objects_matched()
            finally:
                status.expect_partial()  # values of objects not built yet wait
            if meta.get("finite") is not True:  # written by an older kerasteps
                bad = _finite.first_non_finite(state_variables(model))
                if bad is not None:
                    raise ValueError(f"{bad} holds a NaN or an infinity")
        except Exception as error:  # noqa: BLE001 - put the model back, then report
            for variable, value in zip(variables, before, strict=True):
                variable.assign(value)
            raise ValueError(
                f"The checkpoint {info.path!r} does not restore into the model "
                f"{model.name!r} (the model is as it was): {error}"
            ) from error
        restored = steps_lib.global_step(model)
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

    @staticmethod
    def _check_optimizers(model: keras.Model, info: CheckpointInfo, meta: dict) -> None:
        saved = meta.get("optimizers")
        if not isinstance(saved, dict):
            return  # written by an older kerasteps: names only
        now = {key: type(opt).__name__ for key, opt in optimizers_of(model).items()}
        for key, cls in saved.items():
            if key in now and now[key] != cls:
                raise ValueError(
                    f"The checkpoint {info.path!r} holds the state of a {cls} "
                    f"(`{key}`), but the model's `{key}` is a {now[key]}: compile the "
                    f"model with a {cls} to resume from it."
                )

    def restore_latest(self, model: keras.Model) -> CheckpointInfo | None:
        """Restores the newest checkpoint that restores completely; None if none.

        Raises:
            ValueError: if the directory holds checkpoints and none restores,
                naming each and why.
        """
        failures = []
        entries, notes, _ = self._view()
        for note in notes:
            logger.warning("StepCheckpoint: %s: %s.", self.directory, note)
        for info in reversed(entries):
            try:
                self.restore(model, info)
            except ValueError as error:
                logger.warning(
                    "StepCheckpoint: cannot restore %s (%s); trying an older one.",
                    info.path,
                    error,
                )
                failures.append(f"{info.name}: {error}")
                continue
            return info
        if failures:
            raise ValueError(
                f"No checkpoint in {self.directory!r} restores into the model "
                f"{model.name!r}:\n  " + "\n  ".join(failures)
            )
        return None
