"""Between a model and its checkpoints (private): `capture` copies the model's
state to host memory with its step and counters (the part of a save on the training
thread), `restore` puts a checkpoint's state back, all or nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np

from kerasteps import distribute
from kerasteps import steps as steps_lib
from kerasteps.checkpoint import _finite, _format, _model_state
from kerasteps.checkpoint._format import CheckpointInfo

logger = logging.getLogger("kerasteps")

#: The step counters of a state as a run knows them: `(global counter's name,
#: {counter: value})`, e.g. `("g_step", {"d_step": 500, "g_step": 100})`.
Counters = tuple[str, dict[str, int]]


@dataclass
class Capture:
    """A model's state copied to host memory, with what `meta.json` will say.

    Attributes:
        step: The global step of the state.
        arrays: Structure key -> host array (see `kerasteps.checkpoint._model_state`).
        meta: The `meta.json` fields known at the capture.
        chief: False on a `tf.distribute` worker that is not the chief (nothing is
            written there).
    """

    step: int
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)
    chief: bool = True


# -- what a checkpoint holds ----------------------------------------------------------
def optimizer_classes(model: keras.Model) -> dict[str, str]:
    """The class of every optimizer of a model, by the name `meta.json` records it
    under."""
    found: dict[str, Any] = {}
    for name, optimizer in steps_lib.step_optimizers(model).items():
        if optimizer is not None:
            found["optimizer" + (f"_{name}" if name else "")] = optimizer
    default = getattr(model, "optimizer", None)
    if default is not None and all(default is not o for o in found.values()):
        found["optimizer"] = default
    return {key: type(optimizer).__name__ for key, optimizer in found.items()}


def build_optimizers(model: keras.Model) -> None:
    """Builds a plain model's optimizer so a restore sets its slots at once.

    Optimizers whose variables are unknown here (a multi-optimizer model's) are left
    alone: their slots are restored when they build them (see `_model_state`).
    """
    optimizer = getattr(model, "optimizer", None)
    if (
        steps_lib.is_plain(model)
        and not getattr(optimizer, "built", True)
        and model.built
        and model.trainable_variables
    ):
        optimizer.build(model.trainable_variables)


def reads_in_lockstep(model: keras.Model) -> bool:
    """Whether every process must read the state the chief reads: JAX processes
    that share global arrays take part in each other's array operations."""
    return distribute.task_of(model)[0] == "process"


def capture(
    model: keras.Model,
    extra_meta: dict | None = None,
    snapshot: _model_state.Snapshot | None = None,
    counters: Counters | None = None,
) -> Capture:
    """Copies the model's state to host memory, with its step and counters.

    This is the part of a save that runs on the training thread. Nothing is
    written until `write(capture)`. On PyTorch the state includes torch's
    global generators (`rng/torch/...`, listed in `meta.json`'s
    `generator_states`): an unseeded `Dropout` draws from them.

    Args:
        model: The model.
        extra_meta: More fields for `meta.json`.
        snapshot: Host buffers to copy into (they are reused: the capture is
            valid until the next one into the same snapshot); default fresh
            ones.
        counters: The state's step counters as the run knows them (a
            `StepEvent`'s); default read from the model.
    """
    snapshot = snapshot or _model_state.Snapshot()
    if counters is None:
        counters = steps_lib.global_step_name(model), steps_lib.step_counters(model)
    name, values = counters
    if not distribute.is_chief(model):
        if reads_in_lockstep(model):  # the same array ops as the chief's
            snapshot.take(model)
        return Capture(values[name], {}, chief=False)
    generators = _model_state.generator_states()  # at the same moment
    arrays = snapshot.take(model) | generators
    meta = {
        "format": _format.FORMAT,
        "step": values[name],
        "counters": dict(values),
        "global_counter": name,
        "micro_steps": (
            values[name]  # the batches are the updates without accumulation
            if steps_lib.accumulation_steps(model) == 1
            else steps_lib.micro_steps(model)
        ),
        "model": model.name,
        "optimizers": optimizer_classes(model),
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "finite": True,
        "generator_states": sorted(generators),
        **(extra_meta or {}),
    }
    return Capture(values[name], arrays, meta)


def restore(
    model: keras.Model, info: CheckpointInfo, weights_only: bool = False
) -> int:
    """Restores one checkpoint into `model`, all or nothing (with `weights_only`,
    the model's weights alone: the optimizers and the step stay as they are).

    Raises:
        ValueError: naming the checkpoint, if it is incomplete or damaged, does
            not match the model (its variables or its optimizer classes), or
            holds a state that is not finite. The model is then as it was.
    """
    meta = _format.checked_meta(info.path)
    if not weights_only:
        _check_optimizers(model, info, meta)
    arrays = _format.read_verified(info.path, meta)
    bad = _finite.first_non_finite_array(arrays.items())
    if bad is not None:
        raise ValueError(
            f"The checkpoint {info.path!r} holds a NaN or an infinity in {bad}."
        )
    if weights_only:
        try:
            count = _model_state.restore_weights(model, arrays)
        except ValueError as error:
            raise ValueError(
                f"The checkpoint {info.path!r} does not hold the weights of the "
                f"model {model.name!r} (the model is as it was): {error}"
            ) from error
        logger.info(
            "StepCheckpoint: restored the %d weights of %s (step %d); global step %d.",
            count,
            info.path,
            info.step,
            steps_lib.global_step(model),
        )
        return info.step
    with distribute.strategy_scope(model):  # builds distributed slots, too
        build_optimizers(model)
        try:
            _model_state.restore_arrays(model, arrays)
        except ValueError as error:
            raise ValueError(
                f"The checkpoint {info.path!r} does not restore into the model "
                f"{model.name!r} (the model is as it was): {error}"
            ) from error
    restored = steps_lib.global_step(model)
    if restored != info.step:
        logger.warning(
            "StepCheckpoint: %s was saved at step %d but the model's global step "
            "after restoring is %d.%s",
            info.path,
            info.step,
            restored,
            steps_lib.undeclared_restore_hint(model, meta.get("global_counter")),
        )
    logger.info("StepCheckpoint: restored %s; global step %d.", info.path, restored)
    return restored


def _check_optimizers(model: keras.Model, info: CheckpointInfo, meta: dict) -> None:
    saved = meta.get("optimizers")
    if not isinstance(saved, dict):
        return  # written by an older kerasteps: names only
    now = optimizer_classes(model)
    for key, cls in saved.items():
        if key in now and now[key] != cls:
            raise ValueError(
                f"The checkpoint {info.path!r} holds the state of a {cls} "
                f"(`{key}`), but the model's `{key}` is a {now[key]}: compile the "
                f"model with a {cls} to resume from it."
            )
