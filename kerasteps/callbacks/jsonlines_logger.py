"""`JSONLinesLogger`: one JSON object per logged global step."""

from __future__ import annotations

import json
import logging
import math
import os
from typing import Any

import tensorflow as tf

from kerasteps._files import _atomic, _logcache
from kerasteps._validate import check_path
from kerasteps.callbacks.step_sink import StepSink
from kerasteps.schedule import Every

__all__ = ["JSONLinesLogger"]

logger = logging.getLogger("kerasteps")


def _encode(record: dict[str, Any]) -> str:
    """One record as a JSON line (with its newline); a non-finite float as a string
    (`"nan"`, `"inf"`: JSON has no literal for them)."""
    out = {
        k: str(v) if isinstance(v, float) and not math.isfinite(v) else v
        for k, v in record.items()
    }
    return json.dumps(out) + "\n"


def _step_of(line: str) -> int | None:
    """The step of a JSON line; None for a torn last line from a killed run (which
    is dropped)."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None


def _replace_last_line(path: str, old: str, new: str) -> bool:
    """Replaces the file's last line `old` by `new`; False if it does not end so.

    A local file is rewritten from that line on, in place (a kill in between
    leaves a torn last line, which the next run drops as it drops any); a remote
    one (`gs://`) is written anew, atomically.
    """
    old_bytes, new_bytes = old.encode(), new.encode()
    if not _atomic.is_local(path):
        with tf.io.gfile.GFile(path, "rb") as handle:
            data = handle.read()
        if not data.endswith(old_bytes):
            return False
        _atomic.write_text(path, (data.removesuffix(old_bytes) + new_bytes).decode())
        return True
    with open(path, "r+b") as handle:
        start = handle.seek(0, os.SEEK_END) - len(old_bytes)
        handle.seek(max(start, 0))
        if start < 0 or handle.read(len(old_bytes)) != old_bytes:
            return False
        handle.seek(start)
        handle.write(new_bytes)
        handle.truncate()
    return True


class JSONLinesLogger(StepSink):
    """Writes one JSON object per logged global step to a JSON-lines file.

    Each line holds `step`, `time` (seconds since the epoch), every logged metric,
    the validation values computed at that step, the learning rate of every
    optimizer (`learning_rate`, or `learning_rate/d`, `learning_rate/g`) and the
    model's step counters (`{"step": n}` for a plain model, `d_step`/`g_step` for
    a WGAN): the values `StepTensorBoard` writes, keyed as `StepSink` says. A training
    value is about its step: by default the mean over the steps since the previous
    line (`reduce="mean"`), exact across epoch ends and resumes. Lines are
    flushed as they are written, so `pandas.read_json(path, lines=True)` reads the
    file while training runs. A step that ends an epoch is written at the epoch end,
    with Keras's validation values of that step in the same line; when the epoch
    ends where nobody knew it would (training stopped mid-epoch, a dataset of
    unknown length ran out), the step's line is out already and is completed in
    place with them.

    Resuming: when `fit()` starts at global step `s` and the file holds lines after
    `s` (a run resumed from an earlier checkpoint), those lines are dropped first
    (the file is rewritten atomically); earlier lines are kept, so no step is ever
    written twice or goes backwards.

    One writer: from the run's start to its end the file is locked (`<path>.lock`)
    by this process; another process that would write it fails before training,
    naming this one.

    Args:
        path: The file to append to (parent directories are created).
        every: Positive int or `kerasteps.Every`, default 100.
        reduce: `"mean"` (default), `"last"` or `"epoch"`: the mean of `loss` and
            of each `Mean`-type metric over the steps since the previous line, the
            value of the step's own batch, or Keras's running mean since the epoch
            began. Other metrics (AUC) are written as Keras computes them.
        write_learning_rate: Bool, default True.
        write_counters: Bool, default True.

    Example:

    >>> import numpy as np, keras, pandas as pd, tempfile, os
    >>> from kerasteps.callbacks import JSONLinesLogger
    >>> path = os.path.join(tempfile.mkdtemp(), "log.jsonl")
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> _ = model.fit(np.ones((40, 2)), np.ones((40, 1)), batch_size=2, verbose=0,
    ...               callbacks=[JSONLinesLogger(path, every=5)])
    >>> pd.read_json(path, lines=True)["step"].tolist()
    [5, 10, 15, 20]
    """

    record_unit = "line(s)"

    def __init__(
        self,
        path: str | os.PathLike,
        every: int | Every = 100,
        reduce: str = "mean",
        write_learning_rate: bool = True,
        write_counters: bool = True,
    ):
        path = check_path("path", path)  # required: a sink of this file
        super().__init__(path, every, reduce, write_learning_rate, write_counters)
        self.path = self.place
        #: The last line this run wrote, as a record and as written (see `amend`).
        self._last_line: tuple[dict[str, Any], str] | None = None
        self._file = None
        self._last_step_written = -1  # the file's last step; -1: none
        #: `[size, inode]` the file has at the run's end if only this run wrote it.
        self._expected: list = [0, None]

    # -- the place --------------------------------------------------------------------
    def _read_lines(self) -> list[tuple[int | None, str]]:
        if not tf.io.gfile.exists(self.path):
            return []
        with tf.io.gfile.GFile(self.path, "r") as handle:
            lines = handle.read().splitlines()
        return [(_step_of(line), line) for line in lines if line.strip()]

    def held_records(self, start_step: int) -> tuple[bool, bool]:
        lines = self._read_lines()
        return bool(lines), any(step is None or step > start_step for step, _ in lines)

    def drop_after(self, step: int) -> int:
        # The last step, when the file is as this process left it: no read.
        sig = _logcache.signature([self.path])
        known = _logcache.bound_if_unchanged(self.path, sig)
        if known is not None and known <= step:
            self._last_step_written = known
            return 0
        lines = self._read_lines()
        keep = [(at, raw) for at, raw in lines if at is not None and at <= step]
        if len(keep) != len(lines):
            _atomic.write_text(self.path, "".join(raw + "\n" for _, raw in keep))
        self._last_step_written = max((at for at, _ in keep), default=-1)
        return len(lines) - len(keep)

    def keep_aside(self, kept: str, upto: int | None) -> None:
        super().keep_aside(kept, upto)
        _logcache.forget(self.path)

    def open(self, start_step: int) -> None:
        self._last_line = None
        held = _logcache.signature([self.path])
        self._expected = [held[0][1], held[0][3]] if held else [0, None]
        self._file = tf.io.gfile.GFile(self.path, "a")

    def close(self) -> None:
        """Closes the file; if it grew by exactly what this logger wrote (and was
        not replaced), remembers its last step so the next run need not read it."""
        self._last_line = None
        if self._file is None:
            return
        self._file.close()
        self._file = None
        sig = _logcache.signature([self.path])
        size, inode = self._expected
        if len(sig) == 1 and sig[0][1] == size and inode in (None, sig[0][3]):
            _logcache.remember(self.path, sig, self._last_step_written)
        else:
            _logcache.forget(self.path)

    # -- writing ------------------------------------------------------------------
    def write(self, step: int, values: dict[str, Any], time: float) -> None:
        record = {"step": step, "time": round(time, 6), **values}
        record["step"] = step  # a plain model's counter `step` is the step
        line = _encode(record)
        self._file.write(line)
        self._expected[0] += len(line.encode())
        self._file.flush()
        self._last_step_written = step
        self._last_line = (record, line)

    def amend(self, step: int, values: dict[str, Any], time: float) -> None:
        """Adds values that come after their step's line was written to that line.

        Keras's epoch-end validation (`validation_data`) comes after the epoch's
        last batch. The run knows that batch in advance when the epoch has a known
        length, and the line then waits for the epoch end; but an epoch can also
        end at a step where nobody knew it would: a stop requested there
        (`StopAtStep` acts after the sinks, `StopOnNonFinite`), or a dataset of
        unknown length running out. Then the step's line is out, and it is
        rewritten in place (the last line only) with the late values added.
        """
        if self._last_line is None or self._last_line[0]["step"] != step:
            return
        written, old = self._last_line
        late = {k: v for k, v in values.items() if k not in ("step", "time")}
        merged = written | late
        if merged == written:
            return
        line = _encode(merged)
        self._file.close()
        try:
            replaced = _replace_last_line(self.path, old, line)
        finally:
            self._file = tf.io.gfile.GFile(self.path, "a")
        if not replaced:  # the file changed under us: leave it, say so
            logger.warning(
                "JSONLinesLogger: %s does not end with the line of step %d any more; "
                "the values %s of that step that came later are not written.",
                self.path,
                written["step"],
                ", ".join(sorted(set(merged) - set(written))),
            )
            return
        self._expected[0] += len(line.encode()) - len(old.encode())
        self._last_line = (merged, line)
