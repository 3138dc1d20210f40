"""`StepCSVLogger`: one CSV row per logged global step."""

from __future__ import annotations

import csv
import io
import os
from typing import Any

import tensorflow as tf

from kerasteps._files import _atomic
from kerasteps._validate import check_path, check_separator
from kerasteps.callbacks.step_sink import StepSink
from kerasteps.schedule import Every

__all__ = ["StepCSVLogger"]


class StepCSVLogger(StepSink):
    """Writes one CSV row per logged global step, as `keras.callbacks.CSVLogger`
    writes one per epoch.

    Columns: `step`, `time`, then every value in the order it first appears: the
    values `JSONLinesLogger` writes, under the same keys (see `StepSink`). A
    column that appears later (validation, at its first step) rewrites the file
    with the wider header; earlier rows leave it empty. On resume, the rows after
    the start step are dropped, as in every sink. Suits runs of up to some
    thousands of rows: the rows are kept in memory.

    Args:
        path: The CSV file (parent directories are created).
        every: Positive int or `kerasteps.Every`, default 100.
        reduce: `"mean"` (default), `"last"` or `"epoch"` (see `StepCallback`).
        write_learning_rate: Bool, default True.
        write_counters: Bool, default True.
        separator: One character, default `","`: the column separator (not a
            quote `"`, not a line break). A run that would continue a file written
            with another separator is refused when it begins, before training.

    Example:

    >>> import numpy as np, keras, pandas as pd, tempfile, os
    >>> from kerasteps.callbacks import StepCSVLogger
    >>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> _ = model.fit(np.ones((40, 2)), np.ones((40, 1)), batch_size=2, verbose=0,
    ...               callbacks=[StepCSVLogger(path, every=5)])
    >>> pd.read_csv(path)["step"].tolist()
    [5, 10, 15, 20]
    """

    record_unit = "row(s)"

    def __init__(
        self,
        path: str | os.PathLike,
        every: int | Every = 100,
        reduce: str = "mean",
        write_learning_rate: bool = True,
        write_counters: bool = True,
        separator: str = ",",
    ):
        path = check_path("path", path)  # required: a sink of this file
        separator = check_separator("separator", separator)
        super().__init__(path, every, reduce, write_learning_rate, write_counters)
        self.path, self.separator = self.place, separator
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] = []

    def _read(self) -> list[tuple[int | None, dict[str, Any]]]:
        if not tf.io.gfile.exists(self.path):
            return []
        with tf.io.gfile.GFile(self.path, "r") as handle:
            text = handle.read()
        self._check_separator(text)
        lines = io.StringIO(text, newline="")
        rows = list(csv.DictReader(lines, delimiter=self.separator))
        torn = [None in row.values() or None in row for row in rows]  # a killed run's
        return [
            (None if bad or not row["step"].isdigit() else int(row["step"]), row)
            for row, bad in zip(rows, torn, strict=True)
        ]

    def _check_separator(self, text: str) -> None:
        """Refuses a file whose header (`step`, `time`, ...) has another separator."""
        header = text.partition("\n")[0]  # `step`, `time`, ...: its 5th character
        found = header[4:5]
        ours = header.startswith("step") and header[5:9] == "time"
        if ours and found != self.separator:
            raise ValueError(
                f"StepCSVLogger: {self.path} was written with the separator {found!r}, "
                f"and `separator` is {self.separator!r}: pass separator={found!r} to "
                "continue it, or another `path`."
            )

    def held_records(self, start_step: int) -> tuple[bool, bool]:
        rows = self._read()
        return bool(rows), any(step is None or step > start_step for step, _ in rows)

    def drop_after(self, step: int) -> int:
        rows = self._read()
        self._rows = [row for at, row in rows if at is not None and at <= step]
        if len(self._rows) != len(rows):
            self._rewrite()
        return len(rows) - len(self._rows)

    def open(self, start_step: int) -> None:
        self._rows = [row for at, row in self._read() if at is not None]
        self._columns = list(dict.fromkeys(k for row in self._rows for k in row))

    def write(self, step: int, values: dict[str, Any], time: float) -> None:
        self._rows.append({"step": step, "time": round(time, 6), **values})
        if set(self._rows[-1]) <= set(self._columns):
            with tf.io.gfile.GFile(self.path, "a") as handle:
                handle.write(self._text(self._rows[-1:], header=False))
        else:
            self._rewrite()

    def amend(self, step: int, values: dict[str, Any], time: float) -> None:
        if self._rows and int(self._rows[-1]["step"]) == step:
            self._rows[-1].update(values)
            self._rewrite()

    def _rewrite(self) -> None:
        self._columns = list(dict.fromkeys(k for row in self._rows for k in row))
        _atomic.write_text(self.path, self._text(self._rows, header=True))

    def _text(self, rows: list[dict[str, Any]], header: bool) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, self._columns, delimiter=self.separator)
        if header:
            writer.writeheader()
        writer.writerows(rows)
        return out.getvalue()
