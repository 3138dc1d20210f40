"""TensorBoard event files: writing, and dropping the steps after a resume (private).

Files are TensorBoard's protos in TFRecord files, written with TensorFlow's
`tf.io.TFRecordWriter` (its C++ checksums cost 2 us a record where TensorBoard's
pure-Python record writer takes 40 us), through TensorFlow's file systems, so remote
log directories (`gs://...`) work like local ones.

File names sort in the order they were written (`events.out.tfevents.<seconds>.<seq>.
<host>.<pid>.kerasteps`): TensorBoard reads the files of a run in name order, so a
resumed run's file always comes after the files it continues.

Resume: when a run restarts from step `s`, every event file of a run directory that
holds a summary at a step after `s` is rewritten without those events (and without
duplicated `(tag, step)` pairs); the rewritten data replaces the first file
atomically, the other old files are then removed. TensorBoard's readers (the Python
`EventAccumulator` and the data server behind `tensorboard --logdir`) then simply
never see the dropped steps. A run directory this process wrote last, unchanged
since, is not read again when the new run starts at or after its last step (see
`kerasteps._files._logcache`).
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.histogram import metadata as histogram_metadata
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.util import tensor_util

from kerasteps._files import _atomic, _logcache
from kerasteps._files._records import is_event_file, read_events

#: The stamp and, in kerasteps's own names, the sequence number of an event file.
_NAME_RE = re.compile(r"tfevents\.(\d+)(?:\.(\d+)\.)?")
_SEQ_LOCK = threading.Lock()


def event_files(run_dir: str) -> list[str]:
    """Event files directly in `run_dir`, in the order TensorBoard reads them."""
    if not tf.io.gfile.isdir(run_dir):
        return []
    names = [n for n in tf.io.gfile.listdir(run_dir) if is_event_file(n)]
    return [os.path.join(run_dir, n) for n in sorted(names)]


def _new_file_path(run_dir: str) -> str:
    """A new event file name that sorts after every file already in `run_dir`."""
    host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"
    tail = f"{host}.{os.getpid()}.kerasteps"

    def name(stamp: int, seq: int) -> str:
        return f"events.out.tfevents.{stamp:010d}.{seq:04d}.{tail}"

    with _SEQ_LOCK:
        last = max((os.path.basename(p) for p in event_files(run_dir)), default="")
        candidate = name(int(time.time()), 0)
        match = _NAME_RE.search(last)
        if candidate <= last and match and match.group(2):
            candidate = name(int(match.group(1)), int(match.group(2)) + 1)
        if candidate <= last:
            stamp = int(match.group(1)) + 1 if match else int(time.time()) + 1
            candidate = name(stamp, 0)
        return os.path.join(run_dir, candidate)


class EventWriter:
    """Appends events to one new event file of a run directory (private helper)."""

    def __init__(self, run_dir: str):
        tf.io.gfile.makedirs(run_dir)
        self.run_dir = run_dir
        self._sig_before = _logcache.signature(event_files(run_dir))
        self._bound_before = _logcache.bound_if_unchanged(run_dir, self._sig_before)
        self.max_step = 0  # the largest step written (no bound below 0 is needed)
        self.path = _new_file_path(run_dir)
        self._writer = tf.io.TFRecordWriter(self.path)
        self._lock = threading.Lock()
        self._closed = False
        self._writer.write(_first_record())
        self.flush()

    def write_summary(
        self, step: int, values: list[summary_pb2.Summary.Value], wall_time: float
    ) -> None:
        if not values:
            return
        with self._lock:
            self._writer.write(_summary_record(wall_time, int(step), values))
            self.max_step = max(int(step), self.max_step)

    def flush(self) -> None:
        with self._lock:
            self._writer.flush()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writer.close()
            if self._bound_before is None:
                return
            # What this process knows of the directory's steps: the old bound plus
            # this file's steps, if no other file changed meanwhile.
            sig = _logcache.signature(event_files(self.run_dir))
            others = tuple(entry for entry in sig if entry[0] != self.path)
            if others != self._sig_before:
                _logcache.forget(self.run_dir)
                return
            bound = max(self._bound_before, self.max_step)
            _logcache.remember(self.run_dir, sig, bound)


def _first_record() -> bytes:
    """The event that opens every event file: its format version."""
    event = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
    return event.SerializeToString()


def _summary_record(
    wall_time: float, step: int, values: list[summary_pb2.Summary.Value]
) -> bytes:
    summary = summary_pb2.Summary(value=values)
    event = event_pb2.Event(wall_time=wall_time, step=step, summary=summary)
    return event.SerializeToString()


def scalar_value(tag: str, value: float) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, simple_value=float(value))


def _tensor_value(
    tag: str, metadata: Any, array: np.ndarray, dtype: Any
) -> summary_pb2.Summary.Value:
    """A TF2-style summary value of one tensor, with its plugin's `metadata`."""
    return summary_pb2.Summary.Value(
        tag=tag,
        metadata=metadata.create_summary_metadata(display_name=tag, description=""),
        tensor=tensor_util.make_tensor_proto(array, dtype=dtype),
    )


def histogram_value(tag: str, data, buckets: int = 30) -> summary_pb2.Summary.Value:
    """A TF2-style histogram summary value (plugin `histograms`)."""
    data = np.asarray(data, dtype=np.float64).reshape(-1)
    data = data[np.isfinite(data)]
    if data.size == 0:
        table = np.zeros((0, 3))
    elif data.min() == data.max():  # one bucket around the single value
        table = np.array([[data[0] - 0.5, data[0] + 0.5, float(data.size)]])
    else:  # buckets over [min, max]
        counts, edges = np.histogram(data, bins=buckets)
        table = np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], 1)
    return _tensor_value(tag, histogram_metadata, table, np.float64)


def image_value(
    tag: str, png: bytes, width: int, height: int
) -> summary_pb2.Summary.Value:
    """A TF2-style image summary value holding one PNG."""
    content = np.array([str(width).encode(), str(height).encode(), png], dtype=object)
    return _tensor_value(tag, image_metadata, content, np.object_)


def truncate_after(run_dir: str, step: int) -> int:
    """Drops every summary after `step` from a run directory's event files.

    Returns:
        The number of summary values dropped (0 when nothing was after `step`).
    """
    paths = event_files(run_dir)
    sig = _logcache.signature(paths)
    bound = _logcache.bound_if_unchanged(run_dir, sig)
    if bound is not None and bound <= step:
        return 0  # this process wrote the files last, and nothing after `step`
    scan = _scan(paths, step)
    if scan.dropped == 0 and scan.duplicates == 0:
        _logcache.remember(run_dir, sig, scan.max_step)
        return 0
    # One file, steps in order, replacing the first old file atomically; the other
    # old files are then removed.
    _atomic.replace_file(paths[0], _writer_of(scan))
    for path in paths[1:]:
        tf.io.gfile.remove(path)
    _logcache.remember(run_dir, _logcache.signature(event_files(run_dir)), step)
    return scan.dropped


class _Scan(NamedTuple):
    """What a run's event files hold up to a step, and what comes after it."""

    #: (tag, step) -> (wall time, value) of the last summary of each pair kept, in
    #: the order the pairs were first read.
    kept: dict[tuple[str, int], tuple[float, summary_pb2.Summary.Value]]
    #: Events without a summary (graphs, metadata) up to the step.
    others: list[event_pb2.Event]
    #: Summary values after the step.
    dropped: int
    #: Summary values of a (tag, step) pair read before.
    duplicates: int
    #: The largest step of any event.
    max_step: int


def _scan(paths: list[str], step: int) -> _Scan:
    """Reads the event files in order, sorting each summary into kept or dropped."""
    kept: dict[tuple[str, int], tuple[float, summary_pb2.Summary.Value]] = {}
    others: list[event_pb2.Event] = []
    dropped = duplicates = max_step = 0
    for path in paths:
        for event in read_events(path):
            max_step = max(max_step, event.step)
            if not event.HasField("summary"):
                if event.step <= step and not event.file_version:
                    others.append(event)
                continue
            if event.step > step:
                dropped += len(event.summary.value)
                continue
            for value in event.summary.value:
                key = (value.tag, event.step)
                if key in kept:
                    duplicates += 1
                kept[key] = (event.wall_time, value)
    return _Scan(kept, others, dropped, duplicates, max_step)


def max_step(run_dir: str) -> int | None:
    """The largest step of any event in a run directory (or a bound of it that this
    process knows, see `kerasteps._files._logcache`), or None when it has no event file.

    Example:

    >>> import tempfile
    >>> from kerasteps._files._eventfiles import max_step
    >>> max_step(tempfile.mkdtemp()) is None
    True
    """
    paths = event_files(run_dir)
    sig = _logcache.signature(paths)
    bound = _logcache.bound_if_unchanged(run_dir, sig)
    if bound is None:
        steps = (event.step for path in paths for event in read_events(path))
        bound = max(steps, default=0)
        _logcache.remember(run_dir, sig, bound)
    return bound if paths else None


def move_aside(run_dir: str, destination: str) -> list[str]:
    """Moves every event file of `run_dir` into the folder `destination` (created);
    returns their new paths, in TensorBoard's reading order."""
    moved = []
    for path in event_files(run_dir):
        tf.io.gfile.makedirs(destination)
        target = os.path.join(destination, os.path.basename(path))
        tf.io.gfile.rename(path, target)
        moved.append(target)
    _logcache.forget(run_dir)
    return moved


def copy_until(paths: list[str], run_dir: str, step: int) -> None:
    """Writes the summaries of `paths` up to `step` to a new file in `run_dir`."""
    scan = _scan(paths, step)
    if scan.kept or scan.others:
        tf.io.gfile.makedirs(run_dir)
        _atomic.replace_file(_new_file_path(run_dir), _writer_of(scan))
    _logcache.remember(run_dir, _logcache.signature(event_files(run_dir)), step)


def _writer_of(scan: _Scan):
    """Writes one event file of the summaries `scan` kept, steps in order."""
    kept = scan.kept
    order = sorted(kept, key=lambda key: (key[1], kept[key][0]))

    def write(tmp_path: str) -> None:
        with tf.io.TFRecordWriter(tmp_path) as writer:
            writer.write(_first_record())
            for event in scan.others:
                writer.write(event.SerializeToString())
            for tag, step in order:
                wall_time, value = kept[tag, step]
                writer.write(_summary_record(wall_time, step, [value]))

    return write
