"""Data helpers for step-planned runs: resume a repeatable pipeline exactly."""

from __future__ import annotations

import numbers

import keras
import tensorflow as tf

from kerasteps import steps as steps_lib
from kerasteps._validate import check_int

__all__ = ["skip_consumed"]


def _check_batch_size(dataset: tf.data.Dataset, model: keras.Model) -> None:
    """A model restored from a checkpoint resumes on batches of the same size."""
    from kerasteps.callbacks import _windows

    expected = _windows.peek_examples_per_step(model)
    spec = tf.nest.flatten(dataset.element_spec)
    shapes = [s.shape for s in spec if hasattr(s, "shape") and s.shape.rank]
    size = shapes[0][0] if shapes else None
    if expected is None or size is None or size == expected[0]:
        return
    raise ValueError(
        f"`dataset` yields batches of {size} examples, but the checkpoint the model "
        f"was restored from ({expected[1]}) was trained on {expected[0]}: skipping "
        "its batches would not skip the data it trained on. Resume with batches of "
        f"{expected[0]}, or start a new run."
    )


def skip_consumed(
    dataset: tf.data.Dataset,
    step: int | keras.Model,
    batches_per_step: int = 1,
) -> tf.data.Dataset:
    """Skips the batches that the steps before `step` already trained on.

    A checkpoint restores the model, the optimizers and the global step, not the
    position of the input pipeline. When the pipeline is repeatable (it yields the
    same sequence of batches every time it is built: seeded shuffles,
    deterministic maps) and is fed to `fit()` as one stream (`dataset.repeat()`
    with `steps_per_epoch`, so Keras keeps one iterator across epochs), skipping
    the `step * batches_per_step` batches already consumed makes a resumed run see
    exactly the batches the uninterrupted run would have seen.

    Give `fit()` a dataset that nothing else has iterated: a seeded shuffle yields
    a new order each time the same dataset object is iterated again, so a warm-up
    `fit()` or a `next(iter(dataset))` first would shift what the resumed run sees.
    Build the pipeline afresh for the `fit()` that resumes.

    With Keras's gradient accumulation (`gradient_accumulation_steps=k`) a global
    step is `k` batches, and a checkpoint may fall in the middle of an update: pass
    the restored model, and the batches it trained on
    (`kerasteps.steps.micro_steps(model)`) are skipped.

    Args:
        dataset: The batched `tf.data.Dataset`, built as in the first run.
        step: The global step the run resumes from (what
            `StepCheckpoint.restore_latest` returned), or the restored model (its
            `kerasteps.steps.micro_steps`, which counts every batch of an
            accumulated update).
        batches_per_step: Positive int, default 1: dataset elements consumed per
            global step (1 for `fit()`; more if a `train_step` draws extra batches
            from another iterator of the same dataset).

    Returns:
        `dataset.skip(step * batches_per_step)` (`dataset` itself at step 0).

    Raises:
        ValueError: if `step` is negative, or skips past the end of a finite
            dataset, or (given the restored model) the dataset's batches have
            another size than those the checkpoint was trained on (known when
            the batch size is static, e.g. `batch(..., drop_remainder=True)`;
            otherwise the run refuses at its first step).

    Example:

    >>> import tensorflow as tf
    >>> from kerasteps.data import skip_consumed
    >>> batches = tf.data.Dataset.range(100).batch(10).repeat()
    >>> int(next(iter(skip_consumed(batches, 3)))[0])
    30
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            f"`dataset` must be a tf.data.Dataset, received {type(dataset).__name__}."
        )
    if isinstance(step, keras.Model):
        _check_batch_size(dataset, step)
        step = steps_lib.micro_steps(step)
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise ValueError(f"`step` must be an int >= 0 or a model, received {step!r}.")
    batches_per_step = check_int("batches_per_step", batches_per_step)
    consumed = int(step) * batches_per_step
    if consumed == 0:
        return dataset
    cardinality = int(dataset.cardinality())
    if cardinality >= 0 and consumed >= cardinality:
        raise ValueError(
            f"`step`={step} skips {consumed} batches, but `dataset` has only "
            f"{cardinality}: feed a repeated dataset (`dataset.repeat()`) with "
            "`steps_per_epoch` so the run is one stream of batches."
        )
    return dataset.skip(consumed)
