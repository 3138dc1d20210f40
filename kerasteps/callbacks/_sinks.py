"""What the sinks (`StepTensorBoard`, `JSONLinesLogger`) share (private)."""

from __future__ import annotations

import logging

logger = logging.getLogger("kerasteps")


def report_dropped(
    sink: str, start_step: int, count: int, unit: str, where: str
) -> None:
    """Says that a sink dropped `count` earlier points after `start_step`.

    A resumed run (start > 0) drops what was written after its checkpoint: expected,
    said at INFO. A run that starts at step 0 in a folder holding a previous run's
    points replaces that run: said at WARNING, with how to keep a run's logs.

    Args:
        sink: The sink's class name, first in the message.
        start_step: The global step the run starts at.
        count: How many points (lines, values) were dropped; 0 says nothing.
        unit: What a point is, plural: `"line(s)"`, `"value(s)"`.
        where: The file or folder they were dropped from.

    Example:

    >>> from kerasteps.callbacks._sinks import report_dropped
    >>> report_dropped("JSONLinesLogger", 0, 0, "line(s)", "log.jsonl")  # nothing
    """
    if not count:
        return
    if start_step > 0:
        logger.info(
            "%s: run starts at step %d; dropped %d %s after it from %s.",
            sink,
            start_step,
            count,
            unit,
            where,
        )
        return
    logger.warning(
        "%s: this run starts at step 0 in %s, which held %d %s of an earlier run: "
        "they were dropped. To keep an earlier run's logs, give each run its own "
        "directory (the recipes write each run to a new LOGDIR/run-N).",
        sink,
        where,
        count,
        unit,
    )
