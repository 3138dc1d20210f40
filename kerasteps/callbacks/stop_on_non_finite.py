"""`StopOnNonFinite`: stops training at the first NaN or infinite logged loss."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

from kerasteps._files._paths import writable_dir
from kerasteps._validate import check_names
from kerasteps.callbacks.base import StepCallback
from kerasteps.callbacks.step_event import StepEvent, scalar_items
from kerasteps.checkpoint import _finite, _model_state
from kerasteps.checkpoint.store import Capture, CheckpointInfo, CheckpointStore
from kerasteps.schedule import Every

__all__ = ["StopOnNonFinite"]

logger = logging.getLogger("kerasteps")

_KEYS = "a sequence of value names"


def is_loss_key(name: str) -> bool:
    """True for the names `StopOnNonFinite` watches by default: `loss`, `*_loss`."""
    return name == "loss" or name.endswith("_loss")


def _store_of(checkpoint: Any) -> CheckpointStore | None:
    """The store the last finite state is written to: a `CheckpointStore`, the
    public `store` of a `StepCheckpoint` (or any object that has one), or a new
    store in a directory."""
    if checkpoint is None:
        return None
    if isinstance(checkpoint, CheckpointStore):
        return checkpoint
    if isinstance(getattr(checkpoint, "store", None), CheckpointStore):
        return checkpoint.store  # a StepCheckpoint: its directory
    if isinstance(checkpoint, (str, os.PathLike)):
        return CheckpointStore(writable_dir(checkpoint, "checkpoint"), keep=3)
    raise TypeError(
        "`checkpoint` must be a StepCheckpoint, a CheckpointStore or a directory "
        f"path, received {checkpoint!r} of type {type(checkpoint).__name__}."
    )


class StopOnNonFinite(StepCallback):
    """Stops training at the first step where a logged loss is NaN or infinite.

    Unlike `keras.callbacks.TerminateOnNaN`, which looks only at `loss`, it watches
    every logged loss: `loss` and every `*_loss` value (a WGAN's `d_loss` and
    `g_loss`, validation's `val_loss` at the steps `ValidateEvery` ran), or the
    `keys` you give. At the first non-finite value it sets `model.stop_training`,
    logs an ERROR on the logger `"kerasteps"` naming the step and the key, e.g.
    `StopOnNonFinite: d_loss is nan at step 7; stopping training.`, and keeps that
    message in `message` (and the step and key in `stopped_step`, `stopped_key`).
    Sinks still record that step, so the NaN is visible where it happened.

    Last finite state: with `checkpoint=` (a `StepCheckpoint`, whose public `store`
    it writes to, a `kerasteps.checkpoint.store.CheckpointStore`, or a directory), a
    copy of the model and optimizer variables is kept in memory at every check
    whose losses and variables are all finite; when a loss goes non-finite, that
    copy is saved as a checkpoint (`checkpoint_saved`), the newest of the
    directory, which `StepCheckpoint.restore_latest` then resumes from. A
    `StepCheckpoint`'s background save in flight commits first; one refused there
    because the state had already turned non-finite is only logged, and `fit()`
    ends normally. The model itself keeps its non-finite state, and its global
    step, so the sinks and the step stay consistent. The copy costs one host copy
    of every variable per check, into two sets of buffers kept in memory (twice
    the state's size): use a larger `every` for big models (the saved state is
    then up to `every` steps old).

    It acts before the sinks and the checkpoints at a step (its `role` is
    `"guard"`); a scheduled `StepCheckpoint` does not save the step where this
    callback stopped.

    Args:
        keys: Optional sequence of value names (non-empty strings, at least one)
            to watch instead of the losses.
        every: Positive int or `kerasteps.Every`, default 1: how often to check.
            Keras's `loss` is a running mean, so a NaN is still seen at the next
            check; a custom `train_step`'s raw values may not be.
        checkpoint: Optional `StepCheckpoint`, `CheckpointStore` or directory path
            where the last finite state is saved when training stops on a
            non-finite value.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StopOnNonFinite
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(1e30), "mse")
    >>> x, y = np.full((64, 1), 1e10), np.zeros((64, 1))
    >>> stop = StopOnNonFinite()
    >>> _ = model.fit(x, y, batch_size=2, verbose=0, callbacks=[stop])
    >>> stop.stopped_key, stop.stopped_step < 32
    ('loss', True)
    """

    role = "guard"
    async_safe = True
    reads_model = False  # its events' values only
    stops_training = True  # at ends on the training thread (`StepCallback`)
    reads_values = False

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        every: int | Every = 1,
        checkpoint: Any = None,
    ):
        super().__init__(Every.coerce(every, name="every"))
        self.keys = check_names("keys", keys, empty=False, what=_KEYS)
        self._store = _store_of(checkpoint)
        self.checkpoint = checkpoint
        self._pair = (_model_state.Snapshot(), _model_state.Snapshot())
        self._reset()

    def on_run_begin(self, start_step: int) -> None:
        self._reset()

    def _reset(self) -> None:
        #: The error message when training was stopped, else None.
        self.message: str | None = None
        #: The global step of the first non-finite value, else None.
        self.stopped_step: int | None = None
        #: The key of the first non-finite value (`"loss"`), else None.
        self.stopped_key: str | None = None
        #: `CheckpointInfo` of the last finite state saved on stopping, else None.
        self.checkpoint_saved: CheckpointInfo | None = None
        self._snapshot: Capture | None = None
        self._held: _model_state.Snapshot | None = None
        self._warned_missing = False

    def _watched(self, values: dict[str, Any]) -> dict[str, Any]:
        if self.keys is None:
            return {k: v for k, v in values.items() if is_loss_key(k)}
        found = {k: values[k] for k in self.keys if k in values}
        if not found and not self._warned_missing:
            self._warned_missing = True
            logger.warning(
                "StopOnNonFinite: none of the keys %s is logged (logged: %s).",
                self.keys,
                sorted(values),
            )
        return found

    def on_step(self, event: StepEvent) -> None:
        if self.stopped_step is not None:
            return
        values = {**scalar_items(event.logs), **scalar_items(event.extras)}
        for key, value in self._watched(values).items():
            if not math.isfinite(float(value)):
                self._stop(event.step, key, float(value))
                return
        if self._store is not None:
            self._take_snapshot(event)

    def _stop(self, step: int, key: str, value: float) -> None:
        self.stopped_step = step
        self.run.mark_non_finite(step)  # checkpoints do not save this step
        self.stopped_key = key
        self.message = (
            f"StopOnNonFinite: {key} is {value} at step {step}; stopping training."
        )
        logger.error(self.message)
        self.model.stop_training = True
        if self._store is not None:
            self._save_last_finite()

    # -- last finite state ----------------------------------------------------------
    def _take_snapshot(self, event: StepEvent) -> None:
        # Two sets of host buffers, used in turn: the last finite capture is never
        # overwritten by a capture that turns out not to be finite.
        spare = self._pair[0] if self._pair[0] is not self._held else self._pair[1]
        counters = (event.global_counter, event.counters)  # the step the run knows
        capture = self._store.capture(self.model, snapshot=spare, counters=counters)
        if _finite.first_non_finite_array(capture.arrays.items()) is not None:
            return  # keep the previous, finite snapshot
        self._snapshot = capture
        self._held = spare

    def _save_last_finite(self) -> None:
        if self._snapshot is None:
            logger.error(
                "StopOnNonFinite: no finite state was seen in this run; nothing saved."
            )
            return
        self._snapshot.meta.update(saved_by="StopOnNonFinite", stopped_at=self.message)
        # A StepCheckpoint's save in flight commits first (its error, if it failed,
        # is the StepCheckpoint's to raise; a refused non-finite save is no error).
        self._store.writer.join()
        self.checkpoint_saved = self._store.write(self._snapshot)
        logger.error(
            "StopOnNonFinite: saved the last finite state (step %d) to %s.",
            self.checkpoint_saved.step,
            self.checkpoint_saved.path,
        )
