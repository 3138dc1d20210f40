"""The checkpoint store: a directory of atomic, verified checkpoints of a model.

`StepCheckpoint` decides *when* to save; this module is *how*: what a checkpoint
holds, how a save commits, how a directory is read, repaired and restored from.
Layout::

    <directory>/checkpoint.json     index: the committed checkpoints, oldest first
    <directory>/ckpt-<step>/state.h5, meta.json

**The format is kerasteps's own and the same on every Keras backend** (TensorFlow,
JAX, PyTorch): `state.h5` is an HDF5 file with one array per state variable, keyed
by the model's structure as Keras keys `.weights.h5` files (`layers/dense/vars/0`,
`optimizer/vars/3`; see `kerasteps.checkpoint._model_state`), so it restores into any
identically built model, on any backend. It holds the weights, the non-trainable
variables, every optimizer's variables (`iterations` and the learning rate
included), the step counters and the seed generators' states. `meta.json` holds the
global step, the counters, the optimizer classes, the Keras version and backend, and
the size and CRC-32 of `state.h5`. The rooms: the format, the index and verified
reading (`_format.py`); copying a model's state out and back in (`_transfer.py`);
the background writer (`_writer.py`); this module, the directory: its saves,
repairs and restores.

A save copies the state to host memory (on the training thread: `capture`), then
writes a new `.tmp-*` folder (`state.h5`, then `meta.json`), renames it
to `ckpt-<step>`, and replaces the index atomically (`write`): a process killed at
any moment leaves the previous checkpoint listed and complete. `save_async` runs
the writing on a background thread, one save at a time. Remote paths (`gs://`) go
through `tf.io.gfile`: HDF5 needs a seekable file, so `state.h5` is written to a
local temporary file first, then copied into the temporary folder.

What the store guarantees:

- **Nothing lost.** A complete checkpoint is never deleted because the index could not
  be read: an unreadable, empty or stale index is rebuilt from the folders on disk
  (a complete folder that the index does not list, from a kill between the rename and
  the index write, is verified and adopted), with a WARNING. Only temporary leftovers
  of killed saves are removed, and only the `keep` newest checkpoints are kept.
- **Deletions are atomic.** A checkpoint that the store deletes (the `keep` rotation,
  or one of the same step replaced by a new save) is first renamed to a `.trash-*`
  name, then removed: a process killed during the removal leaves only trash, which
  the next run removes without a word, never a `ckpt-<step>` folder with part of a
  checkpoint in it.
- **Incomplete folders are left as they are.** A `ckpt-<step>` folder that is not a
  complete checkpoint (no `meta.json`, a listed file missing or of another size, a
  malformed field of `meta.json`: see `check_folder`) is never deleted and never
  restored: the store cannot tell a user's half-copied checkpoint from debris, and a
  `state.h5` still holds the arrays. It is named in one WARNING, with why; the index
  records it (under `incomplete`), so that later runs do not warn again until it
  changes. The one exception is an *empty* `ckpt-<step>` folder (from a clean-up of an
  older kerasteps, killed midway): it holds nothing, and a run's start removes it.
- **Nothing let in.** Index entries must be `ckpt-<int>` names directly inside the
  directory; any other entry (`../victim`, an absolute path, `""`) is ignored with a
  WARNING, and no code path removes anything outside the directory.
- **Verified restores.** A checkpoint is restored only if its `meta.json` is well
  formed, its files are all there with the sizes recorded at the save and `state.h5`
  has the recorded CRC-32.
  `restore_latest` falls back to the newest checkpoint that restores completely,
  with a WARNING naming each broken one and why. A restore is all or nothing: a
  failed one puts back the model's variables as they were.
- **Strict restores.** Every state variable of the model must be in the checkpoint
  and every array of the checkpoint must belong to the model, with its shape; a
  `ValueError` names the keys that differ. For a partial restore (a new head on a
  trained body), read the arrays yourself with `read_state(path)` and assign those
  you want; the keys are
  `kerasteps.checkpoint._model_state.StateLayout.of(model).variables`.
- **Optimizers built later.** The slots of an optimizer that is not built yet (a
  custom `train_step`'s `d_optimizer` before the first step) are assigned the moment
  it builds them, before its first update; its `iterations` at once. A plain
  model's optimizer is built by the restore.
- **Finite only.** A state with a NaN or an infinity in its weights or optimizer
  variables is never written (the save is refused with a `NonFiniteStateError`).
- **Mismatches refused.** The optimizer classes are recorded; restoring an Adam
  checkpoint into an SGD model raises a `ValueError` before anything is restored.

Checkpoints of kerasteps 0.1.0's `tf.train.Checkpoint` format (`weights.index`) are
not read: the restore names them and says so.

Example:

>>> import numpy as np, keras, tempfile
>>> from kerasteps.checkpoint.store import CheckpointStore
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
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from typing import NamedTuple

import keras
import tensorflow as tf

from kerasteps import distribute
from kerasteps._files import _atomic
from kerasteps._validate import check_path
from kerasteps.checkpoint import _finite, _model_state, _transfer
from kerasteps.checkpoint._crash import crash_point
from kerasteps.checkpoint._format import (
    INDEX_FILE,
    META_FILE,
    NAME_RE,
    STATE_FILE,
    TMP_PREFIX,
    TRASH_PREFIX,
    CheckpointInfo,
    checkpoint_folders,
    monitored,
    read_index,
    read_meta,
    scan_folders,
    write_index,
    write_state,
)
from kerasteps.checkpoint._retention import Retention, infer_mode
from kerasteps.checkpoint._transfer import Capture, Counters, reads_in_lockstep
from kerasteps.checkpoint._writer import BackgroundWriter

__all__ = ["CheckpointInfo", "CheckpointStore", "NonFiniteStateError"]

logger = logging.getLogger("kerasteps")

#: A save that training waits this long for, to start the next, is said (once).
_BEHIND_WARNING_S = 0.5


class NonFiniteStateError(ValueError):
    """The state to save holds a NaN or an infinity: the checkpoint is refused."""


class _View(NamedTuple):
    """A checkpoint directory as read, its index repaired from the folders."""

    #: The committed checkpoints, oldest save first.
    entries: list[CheckpointInfo]
    #: What was repaired, one note each.
    notes: list[str]
    #: Whether the index must be rewritten.
    changed: bool
    #: The incomplete `ckpt-<step>` folders, `{name: reason}` (the index records
    #: them once their notes are logged, so that each is warned about once).
    incomplete: dict[str, str]
    #: Those of them that the index records already, with the same reason.
    warned: dict[str, str]


class CheckpointStore:
    """Reads and writes the checkpoints of one directory (see module docstring).

    Args:
        directory: The checkpoint directory, a path (it may not exist yet).
        keep: Positive int, default 3: how many of the newest checkpoints a save
            keeps; or a `kerasteps.checkpoint._retention.Retention`, the whole rule
            (the newest, the best, one every N steps or hours).

    Attributes:
        writer: The background writer of `save_async`: `writer.wait()` waits for
            the save in flight and raises its error; `writer.failed`,
            `writer.in_flight` and `writer.on_error` (called with the error on the
            writer thread) tell of it.

    Example:

    >>> import tempfile
    >>> from kerasteps.checkpoint.store import CheckpointStore
    >>> CheckpointStore(tempfile.mkdtemp(), keep=3).latest() is None
    True
    """

    def __init__(self, directory: str | os.PathLike, keep: int | Retention = 3):
        self.directory = check_path("directory", directory, "directory")
        self.retention = keep if isinstance(keep, Retention) else Retention(keep)
        self.keep = self.retention.keep
        self._lock = threading.Lock()
        self._snapshot = _model_state.Snapshot()
        self.writer = BackgroundWriter()
        self._warned_behind = False

    # -- paths ------------------------------------------------------------------------
    def _inside(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _remove(self, name: str) -> None:
        """Removes `directory/name`: a checkpoint or a leftover, never anything else."""
        ours = NAME_RE.match(name) or name.startswith((TMP_PREFIX, TRASH_PREFIX))
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
    def _view(self) -> _View:
        """The committed checkpoints, the index repaired from the folders on disk.

        The committed checkpoints are the complete folders (those the index does
        not list are adopted, with a note), oldest save first.
        """
        index, known = read_index(self._inside(INDEX_FILE))
        complete, incomplete = scan_folders(self.directory)
        notes = [
            f"{name} is incomplete or damaged ({reason}): left as it is, not used"
            for name, reason in incomplete.items()
            if known.get(name) != reason  # each one warned about once
        ]
        if index is None:
            changed = bool(complete) or bool(incomplete)
            if complete:
                notes.append(
                    f"no readable index: rebuilt it from the {len(complete)} "
                    "complete checkpoint(s) on disk"
                )
        else:
            notes += [
                f"{name} is listed but missing: dropped"
                for name in index
                if name not in complete and name not in incomplete
            ]
            adopted = [name for name in complete if name not in index]
            if adopted:
                notes.append(
                    "adopted the complete checkpoint(s) that the index did not list: "
                    + ", ".join(adopted)
                )
            changed = len(complete) != len(index) or known != incomplete
        entries = sorted(complete.values(), key=lambda info: (info.time, info.step))
        warned = {n: r for n, r in incomplete.items() if known.get(n) == r}
        return _View(entries, notes, changed, incomplete, warned)

    def entries(self) -> list[CheckpointInfo]:
        """The committed checkpoints, oldest save first (read only).

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint.store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).entries()
        []
        """
        return self._view()[0]

    def latest(self) -> CheckpointInfo | None:
        """The newest committed checkpoint, or None.

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint.store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).latest() is None
        True
        """
        entries = self.entries()
        return entries[-1] if entries else None

    def keep_aside(self, names: list[str]) -> str:
        """Moves the checkpoints `names` whole into a new `earlier-N` folder of the
        directory, a checkpoint directory of its own (with its index): nothing is
        deleted, and `restore_latest` of that folder resumes from them.

        Args:
            names: `ckpt-<step>` folders of this directory.

        Returns:
            The new folder.

        Example:

        >>> import keras, os, tempfile
        >>> from kerasteps.checkpoint.store import CheckpointStore
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> store = CheckpointStore(tempfile.mkdtemp())
        >>> kept = store.keep_aside([store.save(model).name])
        >>> os.path.basename(kept), store.entries()
        ('earlier-1', [])
        >>> [info.name for info in CheckpointStore(kept).entries()]
        ['ckpt-0']
        """
        from kerasteps._files._paths import aside_path

        kept = aside_path(self.directory, is_file=False)
        tf.io.gfile.makedirs(kept)
        with self._lock:
            for name in names:
                if NAME_RE.match(name) and os.path.basename(name) == name:
                    tf.io.gfile.rename(self._inside(name), os.path.join(kept, name))
            there = CheckpointStore(kept, keep=max(self.keep, len(names)))
            view = there._view()
            there._write_index(view.entries, view.incomplete)
            view = self._view()
            self._write_index(view.entries, view.warned)
        return kept

    def set_aside(self) -> list[tuple[str, list[int], float]]:
        """The `earlier-N` folders of the directory (`keep_aside`) that hold
        checkpoints: each one's path, its checkpoints' steps and when it was set
        aside (its index's time, seconds since the epoch).

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint.store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).set_aside()
        []
        """
        found = []
        if not tf.io.gfile.isdir(self.directory):
            return found
        names = [name.rstrip("/") for name in tf.io.gfile.listdir(self.directory)]
        for name in sorted(names, key=lambda n: (len(n), n)):
            if not name.startswith("earlier-") or not name[8:].isdigit():
                continue
            path = self._inside(name)
            steps = [entry.step for entry in CheckpointStore(path).entries()]
            index = os.path.join(path, INDEX_FILE)
            if steps and tf.io.gfile.exists(index):
                found.append((path, steps, tf.io.gfile.stat(index).mtime_nsec / 1e9))
        return found

    # -- repairing --------------------------------------------------------------------
    def recover(self) -> None:
        """Repairs the directory when a run begins: the index, and killed saves' files.

        Logs a WARNING for each repair. Removes only temporary leftovers (of killed
        saves and clean-ups) and empty `ckpt-<step>` folders; an incomplete
        checkpoint folder is warned about once and left as it is (see the module
        docstring).

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint.store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).recover()
        """
        if not tf.io.gfile.isdir(self.directory):
            return
        with self._lock:
            for name in tf.io.gfile.listdir(self.directory):
                name = name.rstrip("/")
                if name.startswith((TMP_PREFIX, TRASH_PREFIX)):
                    self._remove(name)
                elif _atomic.is_temporary(name) or (
                    name.startswith(INDEX_FILE) and name.endswith(".tmp")
                ):
                    tf.io.gfile.remove(self._inside(name))
            for name in checkpoint_folders(self.directory):
                # Empty (an older kerasteps's clean-up, killed midway): nothing lost.
                path = self._inside(name)
                if _atomic.is_local(path):
                    with contextlib.suppress(OSError):  # removes an empty folder only
                        os.rmdir(path)
                        logger.info(
                            "StepCheckpoint: removed the empty folder %s.", path
                        )
            view = self._view()
            for note in view.notes:
                logger.warning("StepCheckpoint: %s: %s.", self.directory, note)
            if view.changed:
                self._write_index(view.entries, view.incomplete)

    def _write_index(
        self, entries: list[CheckpointInfo], incomplete: dict[str, str]
    ) -> None:
        table = self.retention.table(entries)
        write_index(self._inside(INDEX_FILE), entries, incomplete, table)

    # -- saving -----------------------------------------------------------------------
    def capture(
        self,
        model: keras.Model,
        extra_meta: dict | None = None,
        snapshot: _model_state.Snapshot | None = None,
        counters: Counters | None = None,
    ) -> Capture:
        """Copies the model's state to host memory, with its step and counters.

        This is the part of a save that runs on the training thread. Nothing is
        written until `write(capture)` (see `_transfer.capture`).
        """
        return _transfer.capture(model, extra_meta, snapshot, counters)

    def write(self, capture: Capture) -> CheckpointInfo:
        """Writes a captured state as a checkpoint, atomically (any thread).

        Raises:
            NonFiniteStateError: if an array holds a NaN or an infinity (nothing is
                written).
        """
        with self._lock:
            return self._write(capture)

    def save(
        self,
        model: keras.Model,
        extra_meta: dict | None = None,
        counters: Counters | None = None,
    ) -> CheckpointInfo:
        """Writes a checkpoint of the model's current state, atomically; blocking.

        A background save in flight (`save_async`) completes first.

        Args:
            model: The model.
            extra_meta: More fields for `meta.json`.
            counters: The step counters of the state as the run knows them,
                `(global counter's name, {counter: value})`; default read from the
                model.

        Raises:
            NonFiniteStateError: if a weight or optimizer variable holds a NaN or an
                infinity (nothing is written).
        """
        self.writer.wait()
        return self.write(self.capture(model, extra_meta, self._snapshot, counters))

    def save_async(
        self,
        model: keras.Model,
        extra_meta: dict | None = None,
        done: Callable[[CheckpointInfo], None] | None = None,
        counters: Counters | None = None,
    ) -> int:
        """Copies the state to host memory now and writes it on a background thread.

        At most one save is in flight (`writer`): this first waits for the
        previous one (and raises its error, if it failed). A save refused because
        the state is not finite is no error: it is logged at ERROR on the writer
        thread (`StepCheckpoint: not saving step 7: ... The last finite checkpoint
        is kept.`), and `writer.wait()` does not raise it. The host copy is kept in
        buffers reused by every save: one extra copy of the state in memory. An
        interpreter that exits waits for the save to complete; a process that is
        killed leaves a temporary folder that `recover` removes.

        Args:
            model: The model.
            extra_meta: More fields for `meta.json`.
            done: Called with the `CheckpointInfo` on the writer thread when the
                save committed.
            counters: As for `save`.

        Returns:
            The global step of the captured state.
        """
        self.wait_for_writer(due=True)
        capture = self.capture(model, extra_meta, self._snapshot, counters)

        def write() -> None:
            try:
                info = self.write(capture)
            except NonFiniteStateError as error:  # refused: not an error of the run
                logger.error("%s The last finite checkpoint is kept.", error)
            else:
                if done is not None:
                    done(info)

        where = (
            f"while writing the checkpoint of step {capture.step} to {self.directory}"
        )
        self.writer.start(write, where)
        return capture.step

    def wait_for_writer(self, due: bool = False) -> None:
        """Waits for the background save in flight, if any, and raises its error.

        With `due` (a save is due now), a save still in flight that training
        waits at least half a second for is said once, at WARNING: saves fall
        behind the steps between them (how long it had been in flight, and how long
        training waited).

        Args:
            due: True when the caller waits to start the next save.

        Example:

        >>> import tempfile
        >>> from kerasteps.checkpoint.store import CheckpointStore
        >>> CheckpointStore(tempfile.mkdtemp()).wait_for_writer()
        """
        behind, now = due and self.writer.in_flight, time.monotonic()
        self.writer.wait()
        waited = time.monotonic() - now
        if behind and waited >= _BEHIND_WARNING_S and not self._warned_behind:
            self._warned_behind = True
            logger.warning(
                "StepCheckpoint: a save was due, but the one before it was still "
                "in flight %.2f s after it began (%s); training waited %.2f s for "
                "it. Saves fall behind the steps between them: save less often (a "
                "larger `every`), or to a faster disk.",
                now - self.writer.began,
                self.writer.where,
                waited,
            )

    def prepare(self, model: keras.Model) -> None:
        """Allocates the host buffers of the saves now (at a run's start).

        Example:

        >>> import keras, tempfile
        >>> from kerasteps.checkpoint.store import CheckpointStore
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> CheckpointStore(tempfile.mkdtemp()).prepare(model)
        """
        if distribute.is_chief(model) or reads_in_lockstep(model):
            self._snapshot.prepare(model)

    def _write(self, capture: Capture) -> CheckpointInfo:
        step = capture.step
        name = f"ckpt-{step}"
        bad = _finite.first_non_finite_array(capture.arrays.items())
        if bad is not None:
            raise NonFiniteStateError(
                f"StepCheckpoint: not saving step {step}: {bad} holds a NaN or an "
                "infinity."
            )
        if not capture.chief:
            return CheckpointInfo(name, step, "", time.time())
        tmp_name = f"{TMP_PREFIX}{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp, final = self._inside(tmp_name), self._inside(name)
        tf.io.gfile.makedirs(tmp)  # and the directory
        try:
            record = write_state(os.path.join(tmp, STATE_FILE), capture.arrays)
            crash_point("write", step)
            saved = time.time()
            meta = {**capture.meta, "time": saved, "files": {STATE_FILE: record}}
            _atomic.write_text(
                os.path.join(tmp, META_FILE), json.dumps(meta, indent=1, sort_keys=True)
            )
            # A checkpoint of the same step from an abandoned run: move it away first.
            trash = self._to_trash(name) if tf.io.gfile.exists(final) else None
            tf.io.gfile.rename(tmp, final)
        except BaseException:
            self._remove(tmp_name)
            raise
        if trash is not None:
            self._remove(trash)
        info = CheckpointInfo(name, step, final, saved, *monitored(meta))
        self._commit(info)
        return info

    def _to_trash(self, name: str) -> str:
        """Renames `directory/name` to a `.trash-*` name (one step: a process killed
        at any moment leaves the folder whole or trash, never a part of it)."""
        trash = f"{TRASH_PREFIX}{name}-{uuid.uuid4().hex[:8]}"
        tf.io.gfile.rename(self._inside(name), self._inside(trash))
        return trash

    def _discard(self, name: str) -> None:
        """Deletes the checkpoint `name`: moved to the trash, then removed.

        A kill during the removal leaves only trash, which `recover` removes at the
        next run, never a `ckpt-<step>` folder without its `meta.json`.
        """
        try:
            trash = self._to_trash(name)
        except (OSError, tf.errors.OpError) as error:
            logger.warning(
                "StepCheckpoint: could not remove %s (%s).", self._inside(name), error
            )
        else:
            self._remove(trash)

    def _commit(self, info: CheckpointInfo) -> None:
        crash_point("commit", info.step)
        view = self._view()
        entries = [e for e in view.entries if e.name != info.name] + [info]
        kept = self.retention.kept(entries)
        # The incomplete folders not warned about yet: at the next `recover`.
        self._write_index([e for e in entries if e.name in kept], view.warned)
        for entry in entries:  # after the commit: a kill leaves them adopted
            if entry.name not in kept:
                self._discard(entry.name)

    # -- restoring --------------------------------------------------------------------
    def restore(self, model: keras.Model, info: CheckpointInfo) -> int:
        """Restores one checkpoint into `model`, all or nothing.

        Raises:
            ValueError: naming the checkpoint, if it is incomplete or damaged, does
                not match the model (its variables or its optimizer classes), or
                holds a state that is not finite. The model is then as it was.
        """
        return _transfer.restore(model, info)

    def restore_latest(self, model: keras.Model) -> CheckpointInfo | None:
        """Restores the newest checkpoint that restores completely; None if none.

        Raises:
            ValueError: if the directory holds checkpoints and none restores,
                naming each and why.
        """
        view = self._view()
        return self._restore_first(model, view, view.entries[::-1], "an older one")

    def restore_best(
        self,
        model: keras.Model,
        monitor: str | None = None,
        weights_only: bool = False,
    ) -> CheckpointInfo | None:
        """Restores the best checkpoint that restores completely, by the value of
        `monitor` (default: the value the newest checkpoint that records one
        monitored) that the checkpoints' `meta.json` record, in the direction
        recorded with it; None if no checkpoint records that value. With
        `weights_only`, the model's weights alone (`restore_best_weights`).

        Raises:
            ValueError: if checkpoints record it and none restores, naming each.
        """
        view = self._view()
        judged = [e for e in view.entries if e.monitor is not None]
        if monitor is None and judged:
            monitor = judged[-1].monitor
        judged = [e for e in judged if e.monitor == monitor]
        if not judged:
            return None
        record = read_meta(judged[-1].path).get("monitor", {})
        mode = record.get("mode") if record.get("mode") in ("min", "max") else "auto"
        mode = infer_mode(monitor, mode)
        ranked = Retention(1, monitor, mode, len(judged)).best(judged)
        return self._restore_first(model, view, ranked, "the next best", weights_only)

    def _restore_first(
        self,
        model: keras.Model,
        view: _View,
        candidates: list[CheckpointInfo],
        fallback: str,
        weights_only: bool = False,
    ) -> CheckpointInfo | None:
        """Restores the first of `candidates` that restores completely."""
        for note in view.notes:
            logger.warning("StepCheckpoint: %s: %s.", self.directory, note)
        failures = []
        for info in candidates:
            try:
                _transfer.restore(model, info, weights_only)
                return info
            except ValueError as error:
                logger.warning(
                    "StepCheckpoint: cannot restore %s (%s); trying %s.",
                    info.path,
                    error,
                    fallback,
                )
                failures.append(f"{info.name}: {error}")
        if failures:
            raise ValueError(
                f"No checkpoint in {self.directory!r} restores into the model "
                f"{model.name!r}:\n  " + "\n  ".join(failures)
            )
        return None
