"""Checkpoints: the store (atomic saves, rotation, recovery, the state format),
and what a restore hands to the next run.

`StepCheckpoint` (in `kerasteps.callbacks`) decides when to save and restores;
`CheckpointStore` writes and reads a checkpoint directory; `ResumeState` carries
what a restored checkpoint hands to the model's next `fit()`.

Example:

>>> from kerasteps.checkpoint import ResumeState
>>> ResumeState(step=100).step
100
"""

from kerasteps._resume_state import ResumeState
from kerasteps.checkpoint.store import (
    CheckpointInfo,
    CheckpointStore,
    NonFiniteStateError,
)

__all__ = ["CheckpointInfo", "CheckpointStore", "NonFiniteStateError", "ResumeState"]
