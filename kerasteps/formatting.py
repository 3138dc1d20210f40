"""How kerasteps prints numbers: one rule for log lines, `kerasteps summary` and tables.

`format_value(value, name=None, precision=6)` turns one logged value into text, and
`format_table(rows)` aligns rows of cells into columns. `LogEvery` lines, the
`kerasteps summary` table and the recipes' tables all use them, so a value reads the
same wherever it is printed. The rule, for the default `precision=6`:

- an int prints as an int: `25`;
- nan and infinities print as `nan`, `inf`, `-inf`; zero prints as `0.000000`, never
  with a sign;
- a float from 0.001 up to 1e6 (magnitude) prints with `precision` digits after the
  point, the seed's style: `1.396970`, `-0.052996`, `0.001235`;
- a smaller or larger nonzero float prints with 5 significant digits in Python's `g`
  style (an exponent below 1e-4 and from 1e6 up, no trailing zeros): `0.00012346`,
  `1.0995e-05`, `-3.2e-07`, `1.2346e+07`. So no nonzero value ever prints as
  `0.000000` or `-0.000000`;
- a throughput (a `name` ending in `_per_second`, as `kerasteps.callbacks.Throughput`
  provides) prints with 4 significant digits and no exponent: `16.27`, `520.5`,
  `52053`;
- a step counter read back from TensorBoard (a `name` starting with `counters/`, as
  `StepTensorBoard` writes them, as floats) prints a whole value as an int: `1000`.

In general the fixed style is used while it shows at least `min(max(precision, 1), 4)`
significant digits (from `10 ** (digits - 1 - precision)` up to 1e6), and the `g`
style then shows one significant digit more than that.

This module imports neither Keras nor TensorFlow.

Example:

>>> from kerasteps.formatting import format_value
>>> [format_value(v) for v in (1.39697, 2.5e-7, -0.0, 3, float("nan"))]
['1.396970', '2.5e-07', '0.000000', '3', 'nan']
>>> format_value(520.534397, name="examples_per_second")
'520.5'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from kerasteps._validate import check_int, is_int

__all__ = ["format_table", "format_value"]

#: Below this many significant digits the fixed style gives way to the `g` style.
_FIXED_DIGITS = 4
#: From this magnitude up, floats print in the `g` style.
_LARGE = 1e6
#: Significant digits of a throughput (`*_per_second`).
_THROUGHPUT_DIGITS = 4
_THROUGHPUT_SUFFIX = "_per_second"
#: Tags of step counters (`StepTensorBoard`): whole floats print as ints.
_COUNTER_PREFIX = "counters/"
#: A table cell that does not apply (`kerasteps summary`).
_MISSING = "-"


def _check_precision(precision: object) -> int:
    return check_int("precision", precision, minimum=0, wrong_type=ValueError)


def _is_integer(value: object) -> bool:
    if is_int(value):
        return True
    # A 0-d NumPy (or framework) integer array.
    dtype = getattr(value, "dtype", None)
    return getattr(dtype, "kind", None) in ("i", "u") and getattr(value, "ndim", 1) == 0


def _throughput(x: float) -> str:
    """At least `_THROUGHPUT_DIGITS` significant digits, no exponent."""
    rounded = float(f"{x:.{_THROUGHPUT_DIGITS - 1}e}")
    exponent = math.floor(math.log10(abs(rounded)))
    decimals = max(0, _THROUGHPUT_DIGITS - 1 - exponent)
    return f"{x:.{decimals}f}"


def format_value(value: object, name: str | None = None, precision: int = 6) -> str:
    """Returns the text of one logged value, by kerasteps's one number rule.

    See the module docstring for the rule: ints as ints; `nan`, `inf`, `-inf`;
    zero without a sign; floats with `precision` digits after the point while that
    shows at least `min(max(precision, 1), 4)` significant digits and their
    magnitude is below 1e6, otherwise one significant digit more than that in the
    `g` style (`1.0995e-05`); throughputs (`name` ending in `_per_second`) with 4
    significant digits and no exponent; whole step counters (`name` starting with
    `counters/`) as ints. A value that is not a number (a string, a bool) prints
    as `str(value)`.

    Args:
        value: An int, a float, a NumPy scalar or 0-d array, or any other value.
        name: Optional name of the value (a metric or tag name); a name ending in
            `_per_second` selects the throughput style, one starting with
            `counters/` prints whole values as ints.
        precision: Int >= 0, default 6: digits after the point in the fixed style.

    Returns:
        The text, e.g. `"1.396970"`.

    Raises:
        ValueError: If `precision` is not an int >= 0.

    Example:

    >>> from kerasteps.formatting import format_value
    >>> format_value(0.0576)
    '0.057600'
    >>> format_value(-3.2e-07, name="d_loss")
    '-3.2e-07'
    >>> format_value(16.2667, name="steps_per_second")
    '16.27'
    >>> format_value(0.0576, precision=2)
    '0.0576'
    """
    precision = _check_precision(precision)
    if isinstance(value, str | bool):
        return str(value)
    if _is_integer(value):
        return str(int(value))  # type: ignore[call-overload]
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if name is not None and name.startswith(_COUNTER_PREFIX) and x.is_integer():
        return str(int(x))
    if x == 0:
        return f"{0.0:.{precision}f}"
    if name is not None and name.endswith(_THROUGHPUT_SUFFIX):
        return _throughput(x)
    digits = min(max(precision, 1), _FIXED_DIGITS)
    if 10.0 ** (digits - 1 - precision) <= abs(x) < _LARGE:
        return f"{x:.{precision}f}"
    return f"{x:.{digits + 1}g}"


def _is_number_cell(cell: object) -> bool:
    if not isinstance(cell, str):
        return isinstance(cell, numbers.Number) and not isinstance(cell, bool)
    try:
        float(cell.replace(",", ""))
    except ValueError:
        return cell == _MISSING
    return True


def format_table(rows: Sequence[Sequence[object]], precision: int = 6) -> str:
    """Returns rows of cells as aligned text columns, the first row the header.

    A cell that is a string is shown as it is (format a value with a `name`
    beforehand, e.g. a throughput); any other cell goes through
    `format_value(cell, precision=precision)`. A column whose cells below the
    header are all numbers (or `-`, a cell that does not apply) is right-aligned,
    any other column left-aligned; columns are two spaces apart and lines carry no
    trailing spaces.

    Args:
        rows: A sequence of rows, all of the same length; the first is the header.
        precision: Int >= 0, default 6, passed to `format_value`.

    Returns:
        The table, lines joined with `"\\n"`, without a final newline (`""` for no
        rows).

    Raises:
        ValueError: If the rows are not all as long as the header, or `precision`
            is not an int >= 0.

    Example:

    >>> from kerasteps.formatting import format_table
    >>> print(format_table([("mode", "MSE"), ("sgd", 0.004689), ("full", 2.5e-7)]))
    mode       MSE
    sgd   0.004689
    full   2.5e-07
    """
    precision = _check_precision(precision)
    rows = [list(row) for row in rows]
    if not rows:
        return ""
    width = len(rows[0])
    for index, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(
                f"Every table row must have {width} cells like the header "
                f"{rows[0]!r}; row {index} has {len(row)}: {row!r}."
            )
    # A column of numbers (below the header) is right-aligned, any other left-aligned.
    pads = [
        str.rjust if len(col) > 1 and all(map(_is_number_cell, col[1:])) else str.ljust
        for col in zip(*rows, strict=True)
    ]
    cells = [[format_value(cell, precision=precision) for cell in row] for row in rows]
    widths = [max(map(len, column)) for column in zip(*cells, strict=True)]
    lines = []
    for row in cells:
        padded = (pad(c, w) for pad, c, w in zip(pads, row, widths, strict=True))
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)
