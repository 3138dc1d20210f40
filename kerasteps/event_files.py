"""Read scalar summaries back from TensorBoard event files.

`read_scalars(log_dir)` returns every scalar of every run under a log directory, read
with TensorBoard's own event-file reader
(`tensorboard.backend.event_processing.event_file_loader.EventFileLoader`):

- a **run** is each directory under `log_dir`, at any depth, that holds event files
  (files whose name contains `tfevents`); it is named by its path relative to
  `log_dir` with `/` separators, and `"."` when the event files are in `log_dir`
  itself;
- both encodings of a scalar are read: TF1 `simple_value` summaries and TF2 tensor
  summaries written by `tf.summary.scalar` (whose plugin metadata is written only
  with the first point of a tag);
- all event files of a run are read in name order, as TensorBoard reads them
  (writers put the creation time first in the name, so a resumed run's new file
  comes last), and nothing is purged or deduplicated: unlike TensorBoard's
  `EventAccumulator`, a step written twice is returned twice, so tests can check
  that a sink never repeats a step or goes backwards.

It is used by `kerasteps plot` and `kerasteps summary`, and by tests that read back
what a callback wrote.

Damaged files: no reader here asks for more bytes than a file holds. A file's
records are counted first, from their length fields, and the reader reads that many:
TensorBoard's readers trust a record's length (one that claims 2**40 bytes ends in a
`MemoryError`, or a crash under TensorFlow). A record that runs past the end of the
file ends the reading of that file: silently when it may still be being written (as
TensorBoard does), with a WARNING of the `kerasteps` logger naming the file and the
byte when it cannot be a record (its length's checksum is wrong, or it claims more
than an event can hold); the events before it are read. Only regular files are read,
and the walk never enters `/proc` or `/sys`, nor the file system's root through a
link.

Example:

>>> import tempfile, tensorflow as tf
>>> from kerasteps.event_files import read_scalars
>>> log_dir = tempfile.mkdtemp()
>>> with tf.summary.create_file_writer(f"{log_dir}/train").as_default():
...     for step in (1, 2, 3):
...         _ = tf.summary.scalar("loss", 1.0 / step, step=step)
>>> read_scalars(log_dir)["train"]["loss"][-1]
(3, 0.3333333432674408)
"""

from __future__ import annotations

import os
from pathlib import Path

from kerasteps._files._paths import in_pseudo_file_system, is_file_system_root
from kerasteps._files._records import is_event_file, read_events

__all__ = ["find_runs", "is_event_file", "read_scalars"]

_SCALARS_PLUGIN = "scalars"


def find_runs(log_dir: str | os.PathLike) -> dict[str, list[Path]]:
    """Finds the runs under a log directory and their event files.

    Args:
        log_dir: A directory. Runs are the directories under it, at any depth and
            including `log_dir` itself, that hold event files (links are followed,
            but never into `/proc`, `/sys` or the file system's root).

    Returns:
        A `dict` sorted by run name, mapping each run name (its path relative to
        `log_dir`, `/`-separated, `"."` for `log_dir` itself) to its event files in
        name order (the order TensorBoard reads them). Empty when there are no
        event files.

    Raises:
        FileNotFoundError: if `log_dir` does not exist.
        NotADirectoryError: if `log_dir` is not a directory.

    Example:

    >>> import tempfile, tensorflow as tf
    >>> from kerasteps.event_files import find_runs
    >>> log_dir = tempfile.mkdtemp()
    >>> tf.summary.create_file_writer(f"{log_dir}/a/train").close()
    >>> list(find_runs(log_dir))
    ['a/train']
    """
    root = Path(log_dir)
    if not root.exists():
        raise FileNotFoundError(f"`log_dir` does not exist, received {str(log_dir)!r}.")
    if not root.is_dir():
        raise NotADirectoryError(
            f"`log_dir` must be a directory, received {str(log_dir)!r}."
        )
    runs: dict[str, list[Path]] = {}
    seen: set[str] = set()  # real paths, so that symlink cycles end
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        through_link_to_root = dirpath != str(root) and is_file_system_root(real)
        if real in seen or in_pseudo_file_system(real) or through_link_to_root:
            dirnames.clear()
            continue
        seen.add(real)
        dirnames.sort()
        files = [  # regular files (through links): no FIFO, device or socket
            Path(dirpath) / name
            for name in sorted(filenames)
            if is_event_file(name) and os.path.isfile(os.path.join(dirpath, name))
        ]
        if files:
            runs[Path(dirpath).relative_to(root).as_posix()] = files
    return dict(sorted(runs.items()))


def _scalar_value(value, plugins: dict[str, str]) -> float | None:
    """Returns the float of a scalar summary value, or None if not a scalar."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if value.metadata.plugin_data.plugin_name:
        plugins[value.tag] = value.metadata.plugin_data.plugin_name
    elif value.metadata.data_class == summary_pb2.DATA_CLASS_SCALAR:
        plugins[value.tag] = _SCALARS_PLUGIN
    if kind != "tensor" or plugins.get(value.tag) != _SCALARS_PLUGIN:
        return None
    array = tensor_util.make_ndarray(value.tensor)
    return float(array.item()) if array.size == 1 else None


def read_scalars(
    log_dir: str | os.PathLike, *, sort: bool = True, wall_time: bool = False
) -> dict[str, dict[str, list[tuple]]]:
    """Reads every scalar summary of every run under a log directory.

    Args:
        log_dir: A directory holding event files, directly or in subdirectories
            (one run per directory that holds event files).
        sort: Bool, default True. Sort each tag's points by step (a stable sort:
            points with equal steps keep their write order). With False, points
            are in the order they were written, to check that steps never go
            backwards.
        wall_time: Bool, default False. Return `(step, value, wall_time)` triples
            instead of `(step, value)` pairs.

    Returns:
        `{run: {tag: [(step, value), ...]}}`, runs and tags sorted by name; `step`
        is an `int`, `value` a `float`, `wall_time` seconds since the epoch. Runs
        without scalars are left out; an empty `dict` means no scalars at all.

    Raises:
        FileNotFoundError: if `log_dir` does not exist.
        NotADirectoryError: if `log_dir` is not a directory.

    Example:

    >>> import tempfile, tensorflow as tf
    >>> from kerasteps.event_files import read_scalars
    >>> log_dir = tempfile.mkdtemp()
    >>> with tf.summary.create_file_writer(log_dir).as_default():
    ...     _ = tf.summary.scalar("accuracy", 0.5, step=10)
    >>> read_scalars(log_dir)
    {'.': {'accuracy': [(10, 0.5)]}}
    """
    result: dict[str, dict[str, list[tuple]]] = {}
    for run, files in find_runs(log_dir).items():
        tags: dict[str, list[tuple]] = {}
        plugins: dict[str, str] = {}  # tag -> plugin name, per run
        for path in files:
            for event in read_events(path):
                for value in event.summary.value:  # none in an event of another kind
                    number = _scalar_value(value, plugins)
                    if number is None:
                        continue
                    point = (int(event.step), number)
                    if wall_time:
                        point += (float(event.wall_time),)
                    tags.setdefault(value.tag, []).append(point)
        if tags:
            result[run] = {
                tag: sorted(points, key=lambda point: point[0]) if sort else points
                for tag, points in sorted(tags.items())
            }
    return result
