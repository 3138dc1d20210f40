"""What the sinks (`StepTensorBoard`, `JSONLinesLogger`) share (private): whose
records a sink's place holds, and what a new run does with them.

**One run per place, nothing of another run deleted.** A sink's place (a JSON-lines
file, a TensorBoard `log_dir`) records which run wrote it, in a small hidden file
beside the records (`.kerasteps-run` in a directory, `.<file>.kerasteps-run` beside a
file). A run is identified by its run id (`StepRun.run_id`): new when a run
starts at step 0, carried by every checkpoint (`meta.json`'s `run_id`) and from one
`fit()` to the next of the same model. When a run begins, its sinks decide by
`decide`:

- the place holds nothing: the run writes there;
- the place holds this run's records: the points after the start step are dropped
  (TensorFlow 1's purge on resume: the resumed run writes them again), said at INFO;
- the place holds another run's records (a new run at step 0 in a used folder, or a
  run resumed from another run's checkpoint): they are kept whole, moved aside to
  the first free `earlier-N` name (`log.earlier-1.jsonl`, `<log_dir>/earlier-1/`),
  and the run writes the place anew, said at WARNING;
- the run continues a state whose run kerasteps cannot tell (a model loaded from a
  `.keras` file at step `s`, or trained by a plain `fit()` first) and the place holds
  points after `s`: the earlier records are kept whole aside in the same way, and
  the points up to `s` are copied back, so the curve continues where the state does.

A place whose records name no run (written before kerasteps recorded run ids, or by
the script itself: a point at step 0 written before `fit()`) and hold nothing after
the start step is continued as it is; with records after the start it counts as
another run's.
"""

from __future__ import annotations

import enum
import logging
import os
import re
import uuid

import tensorflow as tf

from kerasteps._files import _atomic

logger = logging.getLogger("kerasteps")

#: The name of the owner file in a sink's directory (a file's is `.<name>` + this).
OWNER_NAME = ".kerasteps-run"


def new_run_id() -> str:
    """A new run id (32 hex digits).

    Example:

    >>> from kerasteps.callbacks._sinks import new_run_id
    >>> len(new_run_id()), new_run_id() != new_run_id()
    (32, True)
    """
    return uuid.uuid4().hex


def is_run_id(value: object) -> bool:
    """True for a run id as `new_run_id` makes them (as read back from a file).

    Example:

    >>> from kerasteps.callbacks._sinks import is_run_id, new_run_id
    >>> is_run_id(new_run_id()), is_run_id("../x"), is_run_id(5)
    (True, False, False)
    """
    return isinstance(value, str) and re.fullmatch("[0-9a-f]{1,64}", value) is not None


def owner_file(place: str, is_file: bool) -> str:
    """The owner file of a sink's place: a directory, or with `is_file` a file.

    Example:

    >>> from kerasteps.callbacks._sinks import owner_file
    >>> owner_file("logs/log.jsonl", is_file=True)
    'logs/.log.jsonl.kerasteps-run'
    >>> owner_file("logs/tb", is_file=False)
    'logs/tb/.kerasteps-run'
    """
    if is_file:
        folder, name = os.path.split(place)
        return os.path.join(folder, f".{name}{OWNER_NAME}")
    return os.path.join(place, OWNER_NAME)


def read_owner(path: str) -> str | None:
    """The run id in an owner file, or None (missing, unreadable, not a run id)."""
    try:
        with tf.io.gfile.GFile(path, "r") as handle:
            text = handle.read().strip()
    except (OSError, tf.errors.OpError):
        return None
    return text if is_run_id(text) else None


def write_owner(path: str, run_id: str) -> None:
    """Records, atomically, that `run_id` writes the place of `path`."""
    _atomic.write_text(path, run_id + "\n")


class Claim(enum.Enum):
    """What a sink does with its place when a run begins (see module docstring)."""

    #: Nothing there, or nothing to drop: write on.
    WRITE = "write"
    #: This run's records: drop those after the start step.
    PURGE = "purge"
    #: Another run's records: move them all aside, start the place anew.
    ASIDE = "aside"
    #: Records of a state of unknown run: move them aside, copy back those up to
    #: the start step.
    CONTINUE = "continue"


def decide(
    owner: str | None,
    run_id: str,
    run_known: bool,
    has_records: bool,
    has_records_after: bool,
) -> Claim:
    """Decides what a run does with a place's records (see module docstring).

    Args:
        owner: The run id the place's owner file holds, or None.
        run_id: The run's id.
        run_known: False when the run continues a state whose run is unknown (a
            `.keras` file at step `s > 0`).
        has_records: Whether the place holds any record.
        has_records_after: Whether it holds one after the run's start step.

    Example:

    >>> from kerasteps.callbacks._sinks import Claim, decide
    >>> decide("ab", "ab", True, True, True) is Claim.PURGE
    True
    >>> decide("ab", "cd", True, True, False) is Claim.ASIDE
    True
    >>> decide(None, "cd", False, True, True) is Claim.CONTINUE
    True
    >>> decide(None, "cd", True, True, False) is Claim.WRITE  # a point at step 0
    True
    """
    if not has_records:
        return Claim.WRITE
    if owner == run_id:
        return Claim.PURGE
    if owner is None and not has_records_after:
        return Claim.WRITE  # no run's records, none after the start: continued
    if not run_known:
        return Claim.CONTINUE if has_records_after else Claim.WRITE
    return Claim.ASIDE


def report_dropped(
    sink: str, start_step: int, count: int, unit: str, where: str
) -> None:
    """Says, at INFO, that a resumed run dropped its own `count` points after its
    start step (nothing when `count` is 0).

    Example:

    >>> from kerasteps.callbacks._sinks import report_dropped
    >>> report_dropped("JSONLinesLogger", 0, 0, "line(s)", "log.jsonl")  # nothing
    """
    if count:
        logger.info(
            "%s: run starts at step %d; dropped %d %s after it from %s.",
            sink,
            start_step,
            count,
            unit,
            where,
        )


def report_aside(
    sink: str, start_step: int, where: str, kept: str, claim: Claim
) -> None:
    """Says, at WARNING, that another run's records were moved aside, and where.

    Example:

    >>> from kerasteps.callbacks._sinks import Claim, report_aside
    >>> report_aside("JSONLinesLogger", 0, "a.jsonl", "a.earlier-1.jsonl", Claim.ASIDE)
    """
    if claim is Claim.CONTINUE:
        what = (
            f"points after step {start_step}, and this run's state (at step "
            f"{start_step}) comes with no record of the run that wrote them"
        )
        then = f"the points up to step {start_step} are copied back to {where}"
    else:
        what = "the records of another run"
        then = f"this run writes {where} anew"
    logger.warning(
        "%s: %s held %s: they are kept whole in %s, and %s.",
        sink,
        where,
        what,
        kept,
        then,
    )
