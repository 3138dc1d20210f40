"""The checkpoint format and index (private): a checkpoint folder `ckpt-<step>`
holds `state.h5` (every array of the model's state) and `meta.json` (the step, the
counters, the format tag, each file's size and checksum); the directory's
`checkpoint.json` index is the commit point of every save. Reading never trusts a
file it has not verified.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from kerasteps._files import _atomic
from kerasteps._validate import check_int, check_name, check_number, check_that
from kerasteps.checkpoint import _model_state

logger = logging.getLogger("kerasteps")

#: The index file of a checkpoint directory (the commit point of every save).
INDEX_FILE = "checkpoint.json"
#: Format tag written in the index and in each checkpoint's `meta.json`.
FORMAT = "kerasteps.StepCheckpoint/2"
META_FILE = "meta.json"
STATE_FILE = "state.h5"
NAME_RE = re.compile(r"^ckpt-(\d+)$")
_CRC_RE = re.compile(r"^crc32:[0-9a-f]{8}$")
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"


def read_state(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Reads the arrays of a checkpoint, by structure key, after verifying them.

    For a partial restore: pick the arrays you want and assign them yourself.

    Args:
        path: A `ckpt-<step>` folder.

    Raises:
        ValueError: if the folder is incomplete or its `state.h5` is damaged.

    Example:

    >>> import numpy as np, keras, tempfile
    >>> from kerasteps.checkpoint._format import read_state
    >>> from kerasteps.checkpoint.store import CheckpointStore
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> info = CheckpointStore(tempfile.mkdtemp()).save(model)
    >>> sorted(read_state(info.path))[:2]
    ['layers/dense/vars/0', 'layers/dense/vars/1']
    """
    path = os.fspath(path).rstrip("/")
    return read_verified(path, checked_meta(path))


def checked_meta(path: str) -> dict:
    """The `meta.json` of a complete checkpoint folder of this format, else raises."""
    reason = check_folder(path)
    if reason is not None:
        raise ValueError(f"The checkpoint {path!r} is incomplete: {reason}.")
    meta = read_meta(path)
    if meta.get("format") != FORMAT:
        raise ValueError(
            f"The checkpoint {path!r} has the format {meta.get('format')!r}; this "
            f"kerasteps reads {FORMAT!r}. (kerasteps 0.1.0 wrote tf.train.Checkpoint "
            "files, which are not converted: restore them with that version.)"
        )
    return meta


def read_verified(path: str, meta: dict) -> dict[str, np.ndarray]:
    """The arrays of `state.h5`, after checking its CRC-32 against `meta`."""
    state = os.path.join(path, STATE_FILE)
    expected = meta["files"][STATE_FILE].get("crc32")
    local = _atomic.is_local(state)
    try:
        with (open if local else tf.io.gfile.GFile)(state, "rb") as handle:
            actual = _model_state.crc32_of(handle.read)
            if actual != expected:
                raise ValueError(f"{STATE_FILE} has {actual}, {expected} was written")
            # HDF5 reads a local file itself, and seeks in a remote one.
            return _model_state.read_arrays(state if local else handle)
    except Exception as error:  # noqa: BLE001 - any read error: damaged data
        raise ValueError(
            f"The checkpoint {path!r} is damaged: {type(error).__name__}: {error}"
        ) from error


def write_state(path: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Writes `state.h5`, returns its size and CRC-32 for `meta.json`.

    HDF5 needs a seekable local file: a remote `path` is written to a local
    temporary file first, then copied with `tf.io.gfile`. The file is not fsynced
    (as TensorFlow does not fsync its checkpoints): a kill cannot damage it, and a
    power loss that leaves it short or damaged is caught by its size and CRC-32
    at the restore, which then falls back to the checkpoint before it.
    """
    if not _atomic.is_local(path):
        with tempfile.TemporaryDirectory() as scratch:
            local = os.path.join(scratch, STATE_FILE)
            record = write_state(local, arrays)
            tf.io.gfile.copy(local, path, overwrite=True)
        return record
    _model_state.write_arrays(path, arrays)
    with open(path, "rb") as handle:
        crc32 = _model_state.crc32_of(handle.read)
    return {"bytes": os.path.getsize(path), "crc32": crc32}


def read_meta(path: str) -> dict:
    """The `meta.json` of a checkpoint folder, or `{}` when it cannot be read."""
    try:
        with tf.io.gfile.GFile(os.path.join(path, META_FILE), "r") as handle:
            meta = json.loads(handle.read())
    except (ValueError, OSError, tf.errors.OpError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _recorded(record: Any) -> tuple[Any, Any]:
    """The size and the CRC-32 that `meta.json` records for a file (an older
    kerasteps recorded a bare size)."""
    if isinstance(record, dict):
        return record.get("bytes"), record.get("crc32")
    return record, None


def _meta_problem(meta: dict, step: int) -> str | None:
    """What in a `meta.json` a restore could not use, or None (see `check_folder`)."""
    if type(meta.get("step")) is not int or meta["step"] != step:
        return f"{META_FILE} names step {meta.get('step')!r}, not {step}"
    files = meta.get("files")
    if not isinstance(files, dict) or not files:
        return f"{META_FILE} lists no files"
    ours = meta.get("format") == FORMAT  # else the restore names the format
    if ours and STATE_FILE not in files:
        return f"{META_FILE} does not list {STATE_FILE}"
    for file, record in files.items():
        if not file or os.path.basename(file) != file or file in (".", ".."):
            return f"{META_FILE} lists {file!r}, which is not a file of the folder"
        size, crc32 = _recorded(record)  # ours: {"bytes": 123, "crc32": "crc32:..."}
        crc_ok = isinstance(crc32, str) and _CRC_RE.match(crc32) is not None
        if type(size) is not int or size < 0 or (ours and not crc_ok):
            return f"{META_FILE} records {file} as {record!r}, not its size and CRC-32"
    saved = meta.get("time", 0.0)
    if type(saved) not in (int, float) or not math.isfinite(saved):
        return f"{META_FILE} records the time {meta['time']!r}, not a number"
    optimizers = meta.get("optimizers")
    named = isinstance(optimizers, dict) and all(
        isinstance(cls, str) for cls in optimizers.values()
    )
    if ours and optimizers is not None and not named:
        return f"{META_FILE} records the optimizers {optimizers!r}, not class names"
    return None


def monitored(meta: dict) -> tuple[str | None, float | None]:
    """The monitored name and value that a `meta.json` records: `(None, None)`
    when it records none, or a malformed one (such a checkpoint is never best)."""
    record = meta.get("monitor")
    if not isinstance(record, dict):
        return None, None
    name, value = record.get("name"), record.get("value")
    if not isinstance(name, str) or not name or len(name) > 256:
        return None, None
    real = isinstance(value, (int, float)) and not isinstance(value, bool)
    return name, float(value) if real and math.isfinite(value) else None


def check_folder(path: str) -> str | None:
    """Why a checkpoint folder is not complete, or None when it is.

    Complete: its `meta.json` reads, and every field of it that a restore reads is
    well formed: it names the folder's step; it lists `state.h5` (and any other
    file), each with a size and a CRC-32, and every listed file is in the folder
    with that size; the save's time is a number; the optimizer classes are names.
    A folder that fails this is left as it is and not used (see the module
    docstring). The fields that only the next run reads (`windows`,
    `examples_per_step`) are checked when they are handed to it
    (`StepCheckpoint.restore_latest`): a malformed one is dropped with a WARNING.

    Example:

    >>> import tempfile, os
    >>> from kerasteps.checkpoint._format import check_folder
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt-3")
    >>> os.mkdir(path)
    >>> check_folder(path)
    'meta.json is missing or unreadable'
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
    problem = _meta_problem(meta, int(match.group(1)))
    if problem is not None:
        return problem
    for file, record in meta["files"].items():
        size, _ = _recorded(record)
        full = os.path.join(path, file)
        if not tf.io.gfile.exists(full):
            return f"{file} is missing"
        actual = tf.io.gfile.stat(full).length
        if actual != size:
            return f"{file} has {actual} bytes, {size} were written"
    return None


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint of a `StepCheckpoint` directory.

    Each field is checked when the info is made (`TypeError` or `ValueError`
    naming it).

    Attributes:
        name: Directory name, `ckpt-<step>` (a non-empty str).
        step: The global step saved in it (an int >= 0).
        path: Full path of the checkpoint directory (a str; `""` for a save on
            another worker, which has no folder here).
        time: Wall-clock time of the save (seconds since the epoch; a finite
            number, as `meta.json` records it).
        monitor: The name of the value that `StepCheckpoint(monitor=...)` judged
            at this step (`"val_loss"`), or None: none was computed at this step.
        value: That value, or None (not finite, or no `monitor`).

    Example:

    >>> from kerasteps.checkpoint import CheckpointInfo
    >>> CheckpointInfo("ckpt-5", 5, "ckpts/ckpt-5", 0.0).state_file
    'ckpts/ckpt-5/state.h5'
    """

    name: str
    step: int
    path: str
    time: float
    monitor: str | None = None
    value: float | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        check_int("step", self.step, 0)
        check_that("path", self.path, isinstance(self.path, str), "a str")
        check_number("time", self.time, None)  # any clock: a listing never fails
        check_name(self.monitor, "monitor", optional=True)
        if self.value is not None:
            check_number("value", self.value, None)

    @property
    def state_file(self) -> str:
        """The `state.h5` file inside the checkpoint folder."""
        return os.path.join(self.path, STATE_FILE)


# -- the index ------------------------------------------------------------------------
def read_index(path: str) -> tuple[list[str] | None, dict[str, str]]:
    """Reads a directory's index file.

    Returns:
        The index's valid entries (`ckpt-<step>` names inside the directory, each
        once; a WARNING for each other one), or None if there is no index or it
        cannot be read; and the incomplete folders it records as warned about
        (`{name: reason}`).
    """
    if not tf.io.gfile.exists(path):
        return None, {}
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
        return None, {}
    names: list[str] = []
    for entry in raw:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not NAME_RE.match(name) or name in names:
            logger.warning(
                "StepCheckpoint: ignoring the index entry %r of %s: entries must "
                "be `ckpt-<step>` folders inside the directory.",
                entry,
                path,
            )
            continue
        names.append(name)
    known = data.get("incomplete")
    return names, known if isinstance(known, dict) else {}


def write_index(
    path: str,
    entries: list[CheckpointInfo],
    incomplete: dict[str, str],
    best: dict | None = None,
) -> None:
    """Replaces a directory's index file atomically: `entries` oldest save first,
    the `incomplete` folders already warned about (`{name: reason}`), and the best
    table of `entries` (`Retention.table`), a cache of what their `meta.json`
    files record, committed with the index that it describes."""
    latest = entries[-1] if entries else None
    index = {
        "format": FORMAT,
        "latest": latest.name if latest else None,
        "latest_step": latest.step if latest else None,
        "checkpoints": [
            {"name": e.name, "step": e.step, "time": e.time} for e in entries
        ],
        "incomplete": dict(sorted(incomplete.items())),
    }
    if best is not None:
        index["best"] = best
    _atomic.write_text(path, json.dumps(index, indent=1))


def checkpoint_folders(directory: str) -> list[str]:
    """The `ckpt-<step>` names in a directory, sorted."""
    if not tf.io.gfile.isdir(directory):
        return []
    names = [n.rstrip("/") for n in tf.io.gfile.listdir(directory)]
    return sorted(n for n in names if NAME_RE.match(n))


def scan_folders(directory: str) -> tuple[dict[str, CheckpointInfo], dict[str, str]]:
    """The `ckpt-<step>` folders of a directory: `({name: info} complete,
    {name: reason} incomplete)` (see `check_folder`)."""
    complete: dict[str, CheckpointInfo] = {}
    incomplete: dict[str, str] = {}
    for name in checkpoint_folders(directory):
        path = os.path.join(directory, name)
        reason = check_folder(path)
        if reason is None:
            meta = read_meta(path)
            step = int(NAME_RE.match(name).group(1))
            saved = float(meta.get("time", 0.0))
            complete[name] = CheckpointInfo(name, step, path, saved, *monitored(meta))
        else:
            incomplete[name] = reason
    return complete, incomplete
