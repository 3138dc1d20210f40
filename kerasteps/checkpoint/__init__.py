"""Checkpoints: what a restore hands to the next run.

Example:

>>> from kerasteps.checkpoint import ResumeState
>>> ResumeState(step=100).step
100
"""

from kerasteps.checkpoint.resume_state import ResumeState

__all__ = ["ResumeState"]
