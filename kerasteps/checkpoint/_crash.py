"""`crash_point`: where a test kills a checkpointing process on purpose (private).

The kill -9 tests stop a run at seeded instants that no timing hits reliably:
`KERASTEPS_CRASH_AT=POINT@STEP` in a process's environment kills it with SIGKILL
when it reaches `POINT` for the save of global step `STEP`. The points, in the order
a save passes them: `save` (the step's validation judged and decided, nothing of
its checkpoint written), `write` (its state file written in the temporary folder,
on the background writer's thread when saves are async), `commit` (its folder
renamed into place, the index not yet replaced). Unset, it costs one dictionary
lookup per save.
"""

from __future__ import annotations

import os
import signal

ENV = "KERASTEPS_CRASH_AT"


def crash_point(point: str, step: int) -> None:
    """Kills this process with SIGKILL if `KERASTEPS_CRASH_AT` is `point@step`.

    Example:

    >>> from kerasteps.checkpoint._crash import crash_point
    >>> crash_point("commit", 10)  # unset: nothing happens
    """
    if os.environ.get(ENV) == f"{point}@{step}":
        os.kill(os.getpid(), signal.SIGKILL)
