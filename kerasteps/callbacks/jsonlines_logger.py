"""`JSONLinesLogger`: one JSON object per logged global step."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from typing import Any

import tensorflow as tf

from kerasteps import _atomic, _lock, _logcache
from kerasteps.callbacks import _sinks
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
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


def check_writable_file(path: str, argument: str) -> str:
    """Raises `ValueError` naming `argument` when `path` cannot be written."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"`{argument}` must be a file path, received {path!r}.")
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        raise ValueError(
            f"`{argument}` must be a file path, received a directory: {path!r}."
        )
    parent = os.path.dirname(path) or "."
    try:
        tf.io.gfile.makedirs(parent)
    except Exception as error:  # noqa: BLE001 - report as bad input
        raise ValueError(
            f"`{argument}` is not writable: cannot create directory {parent!r} "
            f"({error})."
        ) from error
    if "://" not in path and not os.access(parent, os.W_OK):
        raise ValueError(
            f"`{argument}` is not writable: no write permission in {parent!r} "
            f"(received {path!r})."
        )
    if "://" not in path and os.path.exists(path) and not os.access(path, os.W_OK):
        raise ValueError(f"`{argument}` is not writable: {path!r} is read-only.")
    return path


class JSONLinesLogger(StepCallback):
    """Writes one JSON object per logged global step to a JSON-lines file.

    Each line holds `step`, `time` (seconds since the epoch), every logged metric,
    the validation values computed at that step, and the model's step counters
    (`{"step": n}` for a plain model, `d_step`/`g_step` for a WGAN). A training
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

    records_extras = True
    chief_only = True

    def __init__(
        self,
        path: str | os.PathLike,
        every: int | Every = 100,
        reduce: str = "mean",
    ):
        super().__init__(Every.coerce(every, name="every"), reduce=reduce)
        self.path = check_writable_file(path, "path")
        self._lock_file = _lock.DirectoryLock(self.path, "`path`", file=True)
        self._pending: dict[str, Any] | None = None
        self._last_written: int | None = None
        #: The last line this run wrote, as a record and as written (see `_amend`).
        self._last_line: tuple[dict[str, Any], str] | None = None
        self._file = None
        self._bytes_written = 0
        self._sig_at_begin: tuple = ()
        self._lock = threading.Lock()

    # -- reading what is there ----------------------------------------------------
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

    def on_run_begin(self, start_step: int) -> None:
        self._lock_file.acquire()
        self._pending = None
        self._bytes_written = 0
        self._last_written = self._claim(start_step)
        self._sig_at_begin = _logcache.signature([self.path])
        self._file = tf.io.gfile.GFile(self.path, "a")

    def _claim(self, start_step: int) -> int | None:
        """Makes the file this run's: drops its own lines after `start_step`, or
        keeps another run's aside (see `kerasteps.callbacks._sinks`); returns the
        last step kept."""
        owner_path = _sinks.owner_file(self.path, is_file=True)
        owner = _sinks.read_owner(owner_path)
        run_id = self.run.run_id
        if owner == run_id:
            # The file as this process left it: its last step is known, no read.
            sig = _logcache.signature([self.path])
            last = _logcache.bound_if_unchanged(self.path, sig)
            if last is not None and last <= start_step:
                return None if last < 0 else last
        lines = self._read_lines()
        keep = [raw for step, raw in lines if step is not None and step <= start_step]
        claim = _sinks.decide(
            owner,
            run_id,
            self.run.run_known,
            has_records=bool(lines),
            has_records_after=len(keep) != len(lines),
        )
        if claim is _sinks.Claim.PURGE and len(keep) != len(lines):
            _atomic.write_text(self.path, "".join(line + "\n" for line in keep))
            _sinks.report_dropped(
                "JSONLinesLogger",
                start_step,
                len(lines) - len(keep),
                "line(s)",
                self.path,
            )
        elif claim in (_sinks.Claim.ASIDE, _sinks.Claim.CONTINUE):
            kept = _sinks.aside_path(self.path, is_file=True)
            tf.io.gfile.rename(self.path, kept)
            _logcache.forget(self.path)
            _sinks.report_aside("JSONLinesLogger", start_step, self.path, kept, claim)
            if claim is _sinks.Claim.ASIDE:
                lines = []
            else:
                _atomic.write_text(self.path, "".join(line + "\n" for line in keep))
        if owner != run_id:
            _sinks.write_owner(owner_path, run_id)
        steps = [step for step, _ in lines if step is not None and step <= start_step]
        return max(steps) if steps else None

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
        last = -1 if self._last_written is None else self._last_written
        _logcache.remember(self.path, sig, last)

    # -- writing ------------------------------------------------------------------
    def _flush_pending(self) -> None:
        record = self._pending
        self._pending = None
        if record is None or self._file is None:
            return
        if self._last_written is not None and record["step"] <= self._last_written:
            self._amend(record)
            return
        line = _encode(record)
        self._file.write(line)
        self._bytes_written += len(line.encode())
        self._file.flush()
        self._last_written = record["step"]
        self._last_line = (record, line)

    def _amend(self, late: dict[str, Any]) -> None:
        """Adds values that come after their step's line was written to that line.

        Keras's epoch-end validation (`validation_data`) comes after the epoch's
        last batch. The hub knows that batch in advance when the epoch has a known
        length, and this logger then holds the line until `flush()`; but an epoch
        can also end at a step where nobody knew it would: a stop requested there
        (`StopAtStep` acts after the sinks, `StopOnNonFinite`), or a dataset of
        unknown length running out. Then the step's line is out, and it is
        rewritten in place (the last line only) with the late values added.
        """
        if self._last_line is None or self._file is None:
            return
        written, old = self._last_line
        if late["step"] != written["step"]:
            return
        merged = dict(written)
        merged.update((k, v) for k, v in late.items() if k not in ("step", "time"))
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

    def on_step(self, event: StepEvent) -> None:
        with self._lock:
            if self._pending is not None and self._pending["step"] != event.step:
                self._flush_pending()
            if self._pending is None:
                self._pending = {"step": event.step, "time": round(event.time, 6)}
            self._pending.update(event.values())
            if event.scheduled:
                self._pending.update(event.counters)
                self._pending["step"] = event.step
            if not event.epoch_last:
                self._flush_pending()

    def flush(self) -> None:
        with self._lock:
            self._flush_pending()

    def on_run_end(self, final_step: int) -> None:
        with self._lock:
            try:
                self._flush_pending()
                if self._file is not None:
                    self._file.close()
                    self._file = None
                    self._remember_last_step()
            finally:
                self._last_line = None
                self._lock_file.release()
