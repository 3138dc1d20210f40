"""Tests for kerasteps.formatting: the one number rule of log lines and tables."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kerasteps.formatting import format_table, format_value


@pytest.mark.parametrize(
    "value, text",
    [
        # ints as ints, whatever their type
        (0, "0"),
        (25, "25"),
        (-3, "-3"),
        (10**12, "1000000000000"),
        (np.int64(1001), "1001"),
        (np.array(7, dtype=np.int32), "7"),
        # zero: the fixed style, never a sign
        (0.0, "0.000000"),
        (-0.0, "0.000000"),
        (np.float32(-0.0), "0.000000"),
        # the seed's fixed style where it shows >= 4 significant digits
        (1.39697, "1.396970"),
        (1.22139704, "1.221397"),
        (-0.052996, "-0.052996"),
        (0.5, "0.500000"),
        (0.001, "0.001000"),
        (-0.0012345, "-0.001234"),
        (123456.789, "123456.789000"),
        (np.float32(0.25), "0.250000"),
        (np.array(2.5), "2.500000"),
        # small magnitudes: 5 significant digits, `g` style
        (0.00099999, "0.00099999"),
        (0.000123456, "0.00012346"),
        (1.0995e-05, "1.0995e-05"),
        (1e-05, "1e-05"),
        (-3.2e-07, "-3.2e-07"),
        (4e-08, "4e-08"),
        (5e-324, "4.9407e-324"),
        # huge magnitudes: the same
        (1e6, "1e+06"),
        (-12345678.9, "-1.2346e+07"),
        (1e300, "1e+300"),
        # not finite
        (float("nan"), "nan"),
        (np.float32("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        # not numbers
        ("-", "-"),
        (True, "True"),
        (None, "None"),
    ],
)
def test_format_value(value, text):
    assert format_value(value) == text


@pytest.mark.parametrize(
    "value, text",
    [
        (16.2667, "16.27"),
        (520.534397, "520.5"),
        (52053.4397, "52053"),
        (3725.9, "3726"),
        (325783.2, "325783"),
        (9.9996, "10.00"),  # rounds to 4 significant digits first
        (1.0, "1.000"),
        (0.5, "0.5000"),
        (0.0012345, "0.001234"),
        (0.0, "0.000000"),
        (float("inf"), "inf"),
        (float("nan"), "nan"),
        (12, "12"),
    ],
)
def test_throughput_gets_four_significant_digits(value, text):
    assert format_value(value, name="steps_per_second") == text
    assert format_value(value, name="examples_per_second") == text
    assert format_value(value, name="throughput/steps_per_second") == text


def test_whole_step_counters_read_back_as_floats_print_as_ints():
    assert format_value(1000.0, name="counters/d_step") == "1000"
    assert format_value(np.float32(12), name="counters/step") == "12"
    assert format_value(2.5, name="counters/step") == "2.500000"
    assert format_value(-0.0, name="counters/step") == "0"
    assert format_value(float("nan"), name="counters/step") == "nan"
    assert format_value(1000.0, name="d_step") == "1000.000000"


def test_other_names_do_not_change_the_rule():
    for name in ("loss", "val_loss", "learning_rate/d", "per_second_loss"):
        assert format_value(16.2667, name=name) == "16.266700"
        assert format_value(1.0995e-05, name=name) == "1.0995e-05"


@pytest.mark.parametrize(
    "value, precision, text",
    [
        (1.39697, 3, "1.397"),
        (0.1234, 3, "0.123"),
        (0.0576, 2, "0.0576"),  # fixed would show 0.06: one digit
        (0.0576, 3, "0.0576"),
        (0.1234, 2, "0.12"),
        (2.5e-7, 2, "2.5e-07"),
        (1.5, 0, "2"),
        (0.3, 0, "0.3"),  # never "0"
        (0.0, 0, "0"),
        (-0.0, 2, "0.00"),
        (0.00012345678, 10, "0.0001234568"),
        (1.5e-8, 10, "1.5e-08"),
        (3, 2, "3"),
    ],
)
def test_precision_sets_the_fixed_decimals(value, precision, text):
    assert format_value(value, precision=precision) == text


@pytest.mark.parametrize(
    "value",
    [1e-7, -1e-7, 4.9e-7, -5e-7, 1e-12, -2.2e-16, 0.0004, -0.00049999, 1e-320],
)
@pytest.mark.parametrize("precision", [0, 1, 2, 3, 6, 9])
def test_no_nonzero_value_prints_as_zero(value, precision):
    text = format_value(value, precision=precision)
    assert float(text) != 0, text
    assert (text.startswith("-")) == (value < 0), text


@pytest.mark.parametrize("precision", [-1, 1.5, "6", True, None])
def test_bad_precision(precision):
    with pytest.raises(ValueError, match=r"`precision` must be an int >= 0, received"):
        format_value(1.0, precision=precision)
    with pytest.raises(ValueError, match=r"`precision` must be an int >= 0, received"):
        format_table([("a",), (1.0,)], precision=precision)


def test_format_table_aligns_numbers_right_and_text_left():
    rows = [
        ("RUN", "TAG", "POINTS", "LAST", "BEST"),
        ("a/train", "loss", 3, 0.5, 2.5e-07),
        ("b", "learning_rate", 1, 1e-05, "-"),
        ("c", "steps_per_second", 2, format_value(16.2667, "steps_per_second"), "-"),
    ]
    assert format_table(rows).splitlines() == [
        "RUN      TAG               POINTS      LAST     BEST",
        "a/train  loss                   3  0.500000  2.5e-07",
        "b        learning_rate          1     1e-05        -",
        "c        steps_per_second       2     16.27        -",
    ]
    assert format_table(rows, precision=2).splitlines()[1] == (
        "a/train  loss                   3   0.50  2.5e-07"
    )


def test_format_table_edges():
    assert format_table([]) == ""
    assert format_table([("A", "B")]) == "A  B"
    # thousands separators still count as numbers; trailing spaces are dropped
    assert format_table([("x", "name"), ("1,024", "")]).splitlines() == [
        "    x  name",
        "1,024",
    ]
    with pytest.raises(ValueError, match=r"row 2 has 1: \['c'\]"):
        format_table([("A", "B"), ("a", 1), ("c",)])


def test_imports_neither_keras_nor_tensorflow():
    code = (
        "import sys, kerasteps.formatting; "
        "print(sorted(m for m in ('keras', 'tensorflow', 'jax', 'torch') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
