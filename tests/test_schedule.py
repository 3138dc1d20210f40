"""Tests for kerasteps.schedule.Every: the one schedule every callback uses."""

import numpy as np
import pytest

from kerasteps import Every


def fired(every: Every, steps: list[int], run_start: int = 0) -> list[int]:
    """Steps at which `every` fires when the step moves through `steps`."""
    out, prev = [], run_start
    for step in steps:
        if every.fires(prev, step, run_start):
            out.append(step)
        prev = step
    return out


def test_every_n_fires_at_multiples():
    assert fired(Every(3), list(range(1, 21))) == [3, 6, 9, 12, 15, 18]


def test_start_one_is_tf1_log_every_n():
    assert fired(Every(100, start=1), list(range(1, 302))) == [1, 101, 201, 301]


def test_start_offset():
    every = Every(5, start=2)
    assert fired(every, list(range(1, 20))) == [2, 7, 12, 17]
    assert every.next_after(0) == 2
    assert every.next_after(2) == 7
    assert every.is_scheduled(12) and not every.is_scheduled(10)


def test_jumps_of_k_fire_once_at_the_boundary_after_a_scheduled_step():
    # steps_per_execution=4, 10 batches per epoch: executions end at 4, 8, 10, ...
    steps = [4, 8, 10, 14, 18, 20]
    assert fired(Every(3), steps) == [4, 8, 10, 14, 18]
    # A jump across two scheduled steps (15 and 18) fires once.
    assert Every(3).crossed(14, 18) is True
    assert Every(3).crossed(18, 20) is False


def test_first_fires_on_first_step_of_a_run_including_a_resumed_one():
    every = Every(10, first=True)
    assert fired(every, list(range(1, 25))) == [1, 10, 20]
    assert fired(every, list(range(41, 55)), run_start=40) == [41, 50]


def test_no_fire_when_step_does_not_move():
    assert Every(1).fires(5, 5) is False
    assert Every(1, first=True).fires(5, 5, run_start=5) is False


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_n_value(bad):
    with pytest.raises(ValueError, match=f"`n` must be an int >= 1, received {bad}"):
        Every(bad)


@pytest.mark.parametrize("bad", [2.5, "3", None, True])
def test_bad_n_type(bad):
    with pytest.raises(TypeError, match="`n` must be an int"):
        Every(bad)


def test_bad_start():
    with pytest.raises(ValueError, match="`start` must be an int >= 1, received 0"):
        Every(5, start=0)


@pytest.mark.parametrize("flag", ["first", "last"])
@pytest.mark.parametrize("bad", ["False", 1, None, np.bool_(True)])
def test_a_flag_is_true_or_false(flag, bad):
    # Issue 46, finding 7: `bool(flag)` made "False" true. NumPy's bool is refused
    # too: `get_config()` is written as JSON, which has no NumPy types.
    with pytest.raises(ValueError, match=f"`{flag}` must be True or False"):
        Every(5, **{flag: bad})


def test_coerce_accepts_int_and_every_and_names_the_argument():
    assert Every.coerce(7) == Every(7)
    every = Every(3, start=1)
    assert Every.coerce(every) is every
    with pytest.raises(
        ValueError, match="`every` must be a positive int .* received 0"
    ):
        Every.coerce(0)
    with pytest.raises(TypeError, match="`histogram_every` .* received '5'"):
        Every.coerce("5", name="histogram_every")


def test_repr_and_config_round_trip():
    every = Every(100, start=1, first=True, last=True)
    assert repr(every) == "Every(100, start=1, first=True, last=True)"
    assert Every(**every.get_config()) == every
