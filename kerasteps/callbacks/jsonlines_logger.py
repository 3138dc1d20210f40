"""`JSONLinesLogger`: one JSON object per logged global step."""

from __future__ import annotations

import json
import logging
import math
import os
from typing import Any

import tensorflow as tf

from kerasteps._files import _atomic, _logcache
from kerasteps.callbacks.step_sink import StepSink
from kerasteps.schedule import Every

__all__ = ["JSONLinesLogger"]

logger = logging.getLogger("kerasteps")


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf": JSON has no literal for them
    return value


def _encode(record: dict[str, Any]) -> str:
    """One record as a JSON line (with its newline)."""
    return json.dumps({k: _json_number(v) for k, v in record.items()}) + "\n"


def _replace_last_line(path: str, old: str, new: str) -> bool:
    """Replaces the file's last line `old` by `new`; False if it does not end so.

    A local file is rewritten from that line on, in place (a kill in between
    leaves a torn last line, which the next run drops as it drops any); a remote
    one (`gs://`) is written anew, atomically.
    """
    old_bytes, new_bytes = old.encode(), new.encode()
    if "://" in path:
        with tf.io.gfile.GFile(path, "rb") as handle:
            data = handle.read()
        if not data.endswith(old_bytes):
            return False
        text = (data[: len(data) - len(old_bytes)] + new_bytes).decode()
        _atomic.write_text(path, text)
        return True
    with open(path, "r+b") as handle:
        start = handle.seek(0, os.SEEK_END) - len(old_bytes)
        if start < 0:
            return False
        handle.seek(start)
        if handle.read(len(old_bytes)) != old_bytes:
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
        super().__init__(
            path, every, reduce, write_learning_rate, write_counters, argument="path"
        )
        self.path = self.place
        #: The last line this run wrote, as a record and as written (see `amend`).
        self._last_line: tuple[dict[str, Any], str] | None = None
        self._file = None
        self._bytes_written = 0
        self._last_step_written: int | None = None
        self._sig_at_begin: tuple = ()

    # -- the place --------------------------------------------------------------------
    def _read_lines(self) -> list[tuple[int | None, str]]:
        if not tf.io.gfile.exists(self.path):
            return []
        lines = []
        with tf.io.gfile.GFile(self.path, "r") as handle:
            for raw in handle.read().splitlines():
                if not raw.strip():
                    continue
                try:
                    step = int(json.loads(raw)["step"])
                except (ValueError, KeyError, TypeError):
                    step = None  # a torn last line from a killed run: dropped
                lines.append((step, raw))
        return lines

    def _known_last_step(self) -> int | None:
        """The last step, when the file is as this process left it (no read)."""
        sig = _logcache.signature([self.path])
        return _logcache.bound_if_unchanged(self.path, sig)

    def held_records(self, start_step: int) -> tuple[bool, bool]:
        lines = self._read_lines()
        after = any(step is None or step > start_step for step, _ in lines)
        return bool(lines), after

    def drop_after(self, step: int) -> int:
        known = self._known_last_step()
        if known is not None and known <= step:
            self._last_step_written = None if known < 0 else known
            return 0
        lines = self._read_lines()
        keep = [raw for at, raw in lines if at is not None and at <= step]
        if len(keep) != len(lines):
            _atomic.write_text(self.path, "".join(line + "\n" for line in keep))
        kept = [at for at, _ in lines if at is not None and at <= step]
        self._last_step_written = max(kept) if kept else None
        return len(lines) - len(keep)

    def keep_aside(self, kept: str, upto: int | None) -> None:
        super().keep_aside(kept, upto)
        _logcache.forget(self.path)

    def open(self, start_step: int) -> None:
        self._bytes_written = 0
        self._last_line = None
        self._sig_at_begin = _logcache.signature([self.path])
        self._file = tf.io.gfile.GFile(self.path, "a")

    def close(self) -> None:
        try:
            if self._file is not None:
                self._file.close()
                self._file = None
                self._remember_last_step()
        finally:
            self._last_line = None

    def _remember_last_step(self) -> None:
        """After closing: if the file grew by exactly what this logger wrote,
        remember its last step so the next run need not read it."""
        sig = _logcache.signature([self.path])
        before = self._sig_at_begin[0] if self._sig_at_begin else None
        size_before = before[1] if before else 0
        grown = (
            len(sig) == 1
            and (before is None or sig[0][3] == before[3])  # not replaced
            and sig[0][1] == size_before + self._bytes_written
        )
        if not grown:
            _logcache.forget(self.path)
            return
        last = self._last_step_written
        _logcache.remember(self.path, sig, -1 if last is None else last)

    # -- writing ------------------------------------------------------------------
    def write(self, step: int, values: dict[str, Any], time: float) -> None:
        record = {"step": step, "time": round(time, 6), **values}
        record["step"] = step  # a plain model's counter `step` is the step
        line = _encode(record)
        self._file.write(line)
        self._bytes_written += len(line.encode())
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
        if self._last_line is None or self._file is None:
            return
        written, old = self._last_line
        if step != written["step"]:
            return
        merged = dict(written)
        merged.update((k, v) for k, v in values.items() if k not in ("step", "time"))
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
        self._bytes_written += len(line.encode()) - len(old.encode())
        self._last_line = (merged, line)
