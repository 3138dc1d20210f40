"""Callbacks that act every N global steps; drop them into any `model.fit`.

Example:

>>> from kerasteps import Every
>>> from kerasteps.callbacks import LogEvery, StepTensorBoard, JSONLinesLogger
>>> callbacks = [LogEvery(Every(100, start=1))]
"""

from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.jsonlines_logger import JSONLinesLogger
from kerasteps.callbacks.log_every import LogEvery
from kerasteps.callbacks.step_tensorboard import StepTensorBoard

__all__ = ["StepCallback", "LogEvery", "StepTensorBoard", "JSONLinesLogger"]
