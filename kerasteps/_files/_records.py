"""TensorBoard's event files, record by record: never reading past a file's end.

The format underneath `kerasteps.event_files` (which reads scalars back) and the
writer `kerasteps._files._eventfiles`: which files are event files, and their
`Event` protos, read with TensorBoard's own loader but no more records than the
file holds whole (see `kerasteps.event_files` on damaged files).
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

from kerasteps import _compat

logger = logging.getLogger("kerasteps")

#: A TFRecord: `uint64 length`, `uint32 masked_crc32c(length)`, data, `uint32 crc`.
_HEADER = struct.Struct("<QI")
_FOOTER = 4
#: An `Event` is a protocol buffer, and those are smaller than 2 GiB: a record that
#: claims more is damaged, never a record still being written.
_MAX_RECORD = 2**31


def is_event_file(name: str | os.PathLike) -> bool:
    """Whether a file is a TensorBoard event file: its name contains `tfevents`.

    The rule TensorBoard uses; the writers (kerasteps's and TensorFlow's) name
    their files `events.out.tfevents.<time>...`.

    Example:

    >>> from kerasteps.event_files import is_event_file
    >>> is_event_file("logs/train/events.out.tfevents.1796094668.0000.vm.1.kerasteps")
    True
    >>> is_event_file("logs/log.jsonl")
    False
    """
    return "tfevents" in os.path.basename(os.fspath(name))


def _count_records(handle: BinaryIO, size: int) -> tuple[int, str | None]:
    """How many whole records an event file begins with, and what ends them.

    Reads only the length fields (seeking over the data). Returns the count and,
    when what follows the last whole record cannot be a record (its length's
    checksum is wrong, or it claims more than an event can hold), why; None when
    the file ends there or in a record still being written.
    """
    count = offset = 0
    while True:
        header = handle.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return count, None  # the end, or a header being written
        length, checksum = _HEADER.unpack(header)
        end = offset + _HEADER.size + length + _FOOTER
        if end > size:
            if _compat.masked_crc32c(header[:8]) != checksum:
                why = "the checksum of its length is wrong"
            elif length >= _MAX_RECORD:
                why = f"a record claims {length} bytes, the file has {size - offset}"
            else:
                return count, None  # a record being written
            return count, f"damaged at byte {offset}: {why}"
        handle.seek(end)  # local files and `tf.io.gfile.GFile` both seek
        offset = end
        count += 1


def _size(handle: Any) -> int:
    size = getattr(handle, "size", None)
    if callable(size):
        return int(size())  # tf.io.gfile.GFile
    return os.fstat(handle.fileno()).st_size


def _open(path: str) -> BinaryIO:
    if "://" in path:
        import tensorflow as tf  # remote file systems: the caller imported it

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def read_events(path: str | os.PathLike) -> Iterator[Any]:
    """Yields the `Event` protos of one event file, never reading past its end.

    TensorBoard's loader reads the records, but no more than the file holds whole
    (see the module docstring); a damaged file is read up to the damage, with a
    WARNING naming it.
    """
    path = os.fspath(path)
    with _open(path) as handle:
        count, problem = _count_records(handle, _size(handle))
    if problem:
        logger.warning(
            "kerasteps: the event file %s is %s; read the %d record(s) before it.",
            path,
            problem,
            count,
        )
    if count:
        yield from itertools.islice(_compat.load_events(path), count)
