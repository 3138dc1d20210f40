"""Callbacks that act every N global steps; drop them into any `model.fit`.

Example:

>>> from kerasteps import Every
>>> from kerasteps.callbacks import LogEvery, StepTensorBoard, JSONLinesLogger
>>> callbacks = [LogEvery(Every(100, start=1))]
"""

from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.jsonlines_logger import JSONLinesLogger
from kerasteps.callbacks.log_every import LogEvery
from kerasteps.callbacks.mlflow_logger import MLflowLogger
from kerasteps.callbacks.step_checkpoint import StepCheckpoint
from kerasteps.callbacks.step_csv_logger import StepCSVLogger
from kerasteps.callbacks.step_early_stopping import StepEarlyStopping
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.callbacks.step_progress_bar import StepProgressBar
from kerasteps.callbacks.step_reduce_lr_on_plateau import StepReduceLROnPlateau
from kerasteps.callbacks.step_run import StepRun
from kerasteps.callbacks.step_sink import StepSink
from kerasteps.callbacks.step_tensorboard import StepTensorBoard
from kerasteps.callbacks.stop_at_step import StopAtStep
from kerasteps.callbacks.stop_at_time import StopAtTime
from kerasteps.callbacks.stop_on_non_finite import StopOnNonFinite
from kerasteps.callbacks.throughput import Throughput
from kerasteps.callbacks.validate_every import ValidateEvery

__all__ = [
    "StepCallback",
    "StepEvent",
    "StepRun",
    "StepSink",
    "LogEvery",
    "StepTensorBoard",
    "JSONLinesLogger",
    "StepCSVLogger",
    "MLflowLogger",
    "ValidateEvery",
    "StepCheckpoint",
    "StepEarlyStopping",
    "StepReduceLROnPlateau",
    "StopAtStep",
    "StopAtTime",
    "StopOnNonFinite",
    "Throughput",
    "StepProgressBar",
]
