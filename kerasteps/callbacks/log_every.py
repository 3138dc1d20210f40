"""`LogEvery`: Python `logging` lines every N global steps."""

from __future__ import annotations

import logging
import string
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kerasteps._validate import check_int, check_name, check_names, check_that
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.formatting import format_value
from kerasteps.schedule import Every

__all__ = ["LogEvery"]

DEFAULT_FORMAT = "{metrics} at step {step}"
_DEFAULT_HANDLER_FORMAT = "%(levelname)s:%(name)s:%(message)s"
_ALWAYS = ("metrics", "step")
_FMT = "a format string or a callable"
_FMT_EMPTY = "a non-empty format string or a callable"
_LOGGER_HINT = " (a logger's name) or a logging.Logger"


class _Missing:
    """Shown for a value that a line does not hold (`val_loss` between validations)."""

    def __format__(self, spec: str) -> str:
        return "-"


class _Named:
    """A value for a `fmt` field: `{loss}` reads as in `{metrics}`, `{loss:.3f}`
    as Python formats it."""

    __slots__ = ("name", "precision", "value")

    def __init__(self, name: str, value: Any, precision: int):
        self.name, self.value, self.precision = name, value, precision

    def __format__(self, spec: str) -> str:
        if not spec:
            return format_value(self.value, self.name, self.precision)
        return format(self.value, spec)

    def __str__(self) -> str:  # {loss!s}
        return str(self.value)

    def __repr__(self) -> str:  # {loss!r}
        return repr(self.value)


def _fields(fmt: str) -> list[str]:
    """The value names of a format string; `ValueError` for what cannot work."""
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as error:
        raise ValueError(
            f"`fmt` is not a valid format string ({error}): {fmt!r}."
        ) from None
    names = []
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field.isidentifier():
            raise ValueError(
                f"`fmt` fields must be value names such as {{loss}} or {{step}}, "
                f"received {{{field}}} in {fmt!r}."
            )
        if conversion not in (None, "s", "r", "a"):
            raise ValueError(f"`fmt` has an unknown conversion !{conversion}: {fmt!r}.")
        if field != "metrics":  # `{step}` and the values are numbers
            try:
                format(101 if field == "step" else 1.5, spec)
            except (ValueError, TypeError) as error:
                raise ValueError(
                    f"`fmt` field {{{field}:{spec}}} cannot format a number ({error})."
                ) from None
        names.append(field)
    return names


class LogEvery(StepCallback):
    """Logs the training values every N global steps, like TF1's `log_every_n`.

    Each line goes to the Python logger `kerasteps` (route it like any logger) and
    reads, by default, `loss=1.396970 at step 101`: every logged metric, then the
    model's other step counters (a WGAN's `d_step`), then the true global step.
    A value is about its step: by default the mean over the steps since the previous
    line (`reduce="mean"`), not Keras's running mean since the epoch began.
    Validation values computed at a step (`ValidateEvery`, Keras's epoch-end
    validation) are logged at that step too.

    If neither the `kerasteps` logger nor the root logger has a handler when
    training starts, one handler printing `INFO:kerasteps:...` to stderr is added
    to the `kerasteps` logger, so lines show up without any logging setup; it
    stays silent as soon as the root logger has a handler of its own.

    A run restored from a checkpoint at step `s` (`StepCheckpoint.restore_latest`)
    begins with the line `resumed at step s from PATH: lines above of steps after s
    are superseded by the lines below`: a log stream cannot take back the lines
    that the interrupted run printed after its checkpoint, so it marks them.

    Args:
        every: Positive int or `kerasteps.Every`, default 100. `Every(100, start=1)`
            logs at steps 1, 101, 201 like TF1.
        fmt: Line format, default `"{metrics} at step {step}"`. Fields: `{metrics}`
            (the `name=value` pairs), `{step}`, and any value by name, e.g.
            `"step {step}: loss {loss:.3f}"` (`{loss}` without a spec reads as
            in `{metrics}`). Or a callable `(step, values) -> str`.
            Checked when constructed (syntax, plain names, specs that format a
            number) and at the first line: a name that the run does not log then
            raises `ValueError` listing the names it logs, which stops training. A
            name that only some lines hold (`val_loss` between validations) shows
            as `-`.
        keys: Optional sequence of value names (non-empty strings) to log, in that
            order. Default: all.
        precision: Int, default 6, digits after the point for float values in
            the fixed style (`1.396970`). Values are formatted by
            `kerasteps.formatting.format_value`: ints as ints, small or huge floats
            with significant digits (`1.0995e-05`, `-3.2e-07`: no nonzero value
            shows as `0.000000`), throughputs (`steps_per_second`) with 4
            significant digits (`16.27`).
        level: Logging level, an int >= 0, default `logging.INFO`.
        logger: Logger name (a non-empty str) or `logging.Logger`, default
            `"kerasteps"`.
        reduce: `"mean"` (default), `"last"` or `"epoch"`: the mean of `loss` and
            of each `Mean`-type metric over the steps since the previous line, the
            value of the step's own batch (what TF1's `log_every_n` printed), or
            Keras's running mean since the epoch began. Other metrics (AUC) are
            logged as Keras computes them.

    Example:

    >>> import logging, sys, numpy as np, keras
    >>> from kerasteps import Every
    >>> from kerasteps.callbacks import LogEvery
    >>> logger = logging.getLogger("kerasteps")
    >>> logger.setLevel(logging.INFO)
    >>> handler = logging.StreamHandler(sys.stdout)  # print the lines here
    >>> logger.addHandler(handler)
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> x, y = np.ones((64, 2)), np.ones((64, 1))
    >>> _ = model.fit(x, y, batch_size=2, verbose=0,
    ...               callbacks=[LogEvery(Every(10, start=1))])  # doctest: +ELLIPSIS
    loss=... at step 1
    loss=... at step 11
    loss=... at step 21
    loss=... at step 31
    >>> logger.removeHandler(handler)
    """

    records_extras = True
    chief_only = True
    async_safe = True
    reads_model = False  # its events' values only

    def __init__(
        self,
        every: int | Every = 100,
        fmt: str | Callable[[int, dict[str, Any]], str] = DEFAULT_FORMAT,
        keys: Sequence[str] | None = None,
        precision: int = 6,
        level: int = logging.INFO,
        logger: str | logging.Logger = "kerasteps",
        reduce: str = "mean",
    ):
        super().__init__(Every.coerce(every, name="every"), reduce=reduce)
        check_that("fmt", fmt, isinstance(fmt, str) or callable(fmt), _FMT)
        check_that("fmt", fmt, fmt != "", _FMT_EMPTY, wrong_type=ValueError)
        self.keys = check_names("keys", keys)
        self.fmt = fmt
        self._fields = _fields(fmt) if isinstance(fmt, str) else []
        self.precision = check_int("precision", precision, 0, wrong_type=ValueError)
        self.level = check_int("level", level, 0, kind="a logging level int")
        if not isinstance(logger, logging.Logger):
            logger = logging.getLogger(check_name(logger, "logger", hint=_LOGGER_HINT))
        self.logger = logger

    def on_run_begin(self, start_step: int) -> None:
        self._checked = False
        self._add_handler()
        if self.run.resumed_from is not None:
            # A stream cannot take lines back: it marks where the resume begins.
            self.logger.log(
                self.level,
                "resumed at step %d from %s: lines above of steps after %d are "
                "superseded by the lines below",
                start_step,
                self.run.resumed_from,
                start_step,
            )

    def _add_handler(self) -> None:
        """Adds a handler for the lines when none is anywhere, so they show up."""
        if self.logger.handlers or logging.getLogger().handlers:
            return
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_DEFAULT_HANDLER_FORMAT))
        # Step aside once the root logger gets a handler (the user's basicConfig,
        # or absl's), so that no line is printed twice.
        handler.addFilter(lambda record: not logging.getLogger().handlers)
        self.logger.addHandler(handler)
        if self.logger.level == logging.NOTSET or self.logger.level > self.level:
            self.logger.setLevel(self.level)

    def format_line(self, step: int, values: dict[str, Any]) -> str:
        """Returns the log line for `values` at `step`.

        Args:
            step: The global step.
            values: Name to value, in display order.

        Example:

        >>> from kerasteps.callbacks import LogEvery
        >>> LogEvery().format_line(101, {"loss": 1.39697})
        'loss=1.396970 at step 101'
        """
        if callable(self.fmt):
            return self.fmt(step, values)
        named = {k: _Named(k, v, self.precision) for k, v in values.items()}
        metrics = " ".join(f"{name}={value}" for name, value in named.items())
        missing = {name: _Missing() for name in self._fields}
        return self.fmt.format_map(missing | named | {"metrics": metrics, "step": step})

    def _check_fields(self, event: StepEvent, values: dict[str, Any]) -> None:
        """At the first line: every field must be a name that the run can log."""
        self._checked = True
        unknown = [
            name
            for name in self._fields
            if name not in _ALWAYS
            and name not in values
            and not name.startswith("val_")
            and not event.run.may_provide(name)
        ]
        if unknown:
            event.run.abort()
            raise ValueError(
                f"LogEvery: `fmt` {self.fmt!r} names {unknown[0]!r}, which this run "
                f"does not log. Names it logs: {', '.join(sorted(values))}; and "
                "`metrics`, `step`."
            )

    def on_step(self, event: StepEvent) -> None:
        values = event.values()
        if event.scheduled:
            for name, value in event.counters.items():
                if name != event.global_counter:
                    values[name] = value
        if self.keys is not None:
            values = {k: values[k] for k in self.keys if k in values}
            if not values:
                return
        if event.scheduled and not self._checked and self._fields:
            self._check_fields(event, values)
        if not self.logger.isEnabledFor(self.level):
            return
        try:
            line = self.format_line(event.step, values)
        except (KeyError, IndexError, ValueError) as error:
            line = (
                f"{DEFAULT_FORMAT.format(metrics=values, step=event.step)} "
                f"(fmt {self.fmt!r} failed: {error!r})"
            )
        self.logger.log(self.level, line)
