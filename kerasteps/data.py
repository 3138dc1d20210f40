"""Data helpers for step-planned runs: resume a repeatable pipeline exactly, and
feed a GAN step its fresh critic batches."""

from __future__ import annotations

import logging
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from kerasteps import _compat
from kerasteps import steps as steps_lib
from kerasteps._resume_state import ResumeState
from kerasteps._validate import check_int, is_int

__all__ = ["gan_batches", "skip_consumed"]

logger = logging.getLogger("kerasteps")


def _check_batch_size(dataset: tf.data.Dataset, model: keras.Model) -> None:
    """A model restored from a checkpoint resumes on batches of the same size."""
    state = ResumeState.of(model)
    expected = None if state is None else state.examples_per_step
    spec = tf.nest.flatten(dataset.element_spec)
    shapes = [s.shape for s in spec if hasattr(s, "shape") and s.shape.rank]
    size = shapes[0][0] if shapes else None
    if expected is None or size is None or size == expected:
        return
    raise ValueError(
        f"`dataset` yields batches of {size} examples, but the checkpoint the model "
        f"was restored from ({state.source}) was trained on {expected}: skipping "
        "its batches would not skip the data it trained on. Resume with batches of "
        f"{expected}, or start a new run."
    )


def skip_consumed(
    dataset: tf.data.Dataset, step: int | keras.Model, batches_per_step: int = 1
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

    Shuffle after `.repeat()` (`dataset.repeat().shuffle(n, seed=s).batch(b)`) for
    an exact resume on every backend. On JAX, Keras's `fit()` iterates the dataset
    once before training when the model's metrics are not built yet (a fresh
    process), then starts a new iterator; a shuffle *before* `.repeat()` draws a new
    seed for each pass, from a seed generator that every iterator of the dataset
    shares, and the resumed run's first iteration walks through the skipped passes:
    its training then sees the passes after them in another order than the
    uninterrupted run (measured: exact resumes up to step 30 of 32-batch passes,
    not from 31 on). TensorFlow's `fit()` does not iterate first: both orders
    resume exactly there. On JAX, `skip_consumed` logs a WARNING when it sees a
    shuffle before `.repeat()` (at step 0 too, so the first run learns of it).

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
    if not is_int(step) or step < 0:
        raise ValueError(f"`step` must be an int >= 0 or a model, received {step!r}.")
    consumed = int(step) * check_int("batches_per_step", batches_per_step)
    if keras.backend.backend() == "jax" and _compat.shuffles_before_repeat(dataset):
        logger.warning(
            "skip_consumed: `dataset` shuffles before `.repeat()`; on JAX the "
            "resumed run then sees its passes in another order than an uninterrupted "
            "run after the first pass. Shuffle after the repeat for an exact resume: "
            "dataset.repeat().shuffle(n, seed=s).batch(b)"
        )
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


def gan_batches(
    x: Any,
    batch_size: int,
    n_critic: int = 5,
    *,
    shuffle: bool = True,
    seed: int | None = None,
    repeat: bool = False,
) -> tf.data.Dataset:
    """Real examples in elements of `n_critic` fresh critic batches, for a GAN step.

    Each element holds `n_critic * batch_size` examples: one GAN step (as
    `kerasteps.models.WGAN` trains it) takes `n_critic` critic batches of
    `batch_size`, each a fresh one. The remainder that does not fill an element is
    dropped. Arrays are shuffled by index, once per pass (a stateless shuffle
    seeded per pass), and gathered as whole elements: cheaper than shuffling and
    batching example by example; with `seed` the stream is repeatable, so
    `skip_consumed` resumes it exactly. `WGAN.make_dataset` is this function.

    Args:
        x: A NumPy array or tensor of examples (first axis = examples), or a
            `tf.data.Dataset` of single (unbatched) examples.
        batch_size: Int >= 1, the critic (and generator) batch size.
        n_critic: Int >= 1, critic batches per element. Defaults to `5`.
        shuffle: Bool, reshuffle the examples every pass. Defaults to `True`.
        seed: Optional int shuffle seed. Defaults to `None`.
        repeat: Bool, repeat forever (then pass `steps_per_epoch` to `fit`).
            Defaults to `False`.

    Returns:
        A `tf.data.Dataset` of tensors of shape
        `(n_critic * batch_size, *example_shape)`.

    Raises:
        ValueError: if `batch_size` or `n_critic` is not an int >= 1, or `x`
            holds fewer examples than one element, or is not an array of
            examples of rank >= 2 (a dataset: of rank >= 1).

    Example:

    >>> import numpy as np
    >>> from kerasteps.data import gan_batches
    >>> ds = gan_batches(np.zeros((100, 2), "float32"), 8, n_critic=5)
    >>> ds.element_spec.shape.as_list(), int(ds.cardinality())
    ([40, 2], 2)
    """
    batch_size = check_int("batch_size", batch_size, wrong_type=ValueError)
    n_critic = check_int("n_critic", n_critic, wrong_type=ValueError)
    size = n_critic * batch_size
    if isinstance(x, tf.data.Dataset):
        ds = _from_dataset(x, size, shuffle, seed, repeat)
    else:
        x = _examples_array(x, n_critic, batch_size)
        examples = tf.constant(x)
        ds = _index_elements(len(x), size, shuffle, seed, repeat)
        ds = ds.map(
            lambda idx: tf.gather(examples, idx), num_parallel_calls=tf.data.AUTOTUNE
        )
        cardinality = tf.data.INFINITE_CARDINALITY if repeat else len(x) // size
        ds = ds.apply(tf.data.experimental.assert_cardinality(cardinality))
    # tf.data's autotuning off (its `AUTOTUNE` sizes then fixed): with it on,
    # destroying the iterator at the end of `fit` waits for the autotuning thread
    # to wake up: measured on TF 2.21 (2 CPUs), `fit` returned 6-8 s after
    # `on_train_end` for 8000 WGAN steps (up to 35 s seen in the `wgan` recipe),
    # and 0.00 s with autotuning off, training as fast.
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options)


def _examples_array(x: Any, n_critic: int, batch_size: int) -> np.ndarray:
    """`x` as an array of at least one element's examples (floats as float32)."""
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(
            "`x` must be an array of examples of rank >= 2, shape "
            f"(n_examples, *example_shape), received shape {x.shape}."
        )
    if np.issubdtype(x.dtype, np.floating) and x.dtype != np.float32:
        x = x.astype(np.float32)
    size = n_critic * batch_size
    if len(x) < size:
        raise ValueError(
            f"`x` has {len(x)} examples, fewer than one element of n_critic * "
            f"batch_size = {n_critic} * {batch_size} = {size}."
        )
    return x


def _index_elements(
    n: int, size: int, shuffle: bool, seed: int | None, repeat: bool
) -> tf.data.Dataset:
    """Rows of `size` example indices, `n // size` a pass; the indices shuffled
    once per pass (a stateless shuffle seeded per pass), one pass or forever."""
    # Shuffle indices once per pass and gather whole elements: much cheaper
    # than shuffling and batching example by example.
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    seeds = seeds if repeat else seeds.take(1)

    def one_pass(pass_seed: tf.Tensor) -> tf.data.Dataset:
        order = tf.range(n, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([pass_seed, tf.constant(0, tf.int64)])
            )
        order = tf.reshape(order[: n // size * size], (-1, size))
        return tf.data.Dataset.from_tensor_slices(order)

    return seeds.flat_map(one_pass)


def _from_dataset(
    ds: tf.data.Dataset, size: int, shuffle: bool, seed: int | None, repeat: bool
) -> tf.data.Dataset:
    """Elements of `size` examples of a dataset of single examples."""
    if isinstance(ds.element_spec, tuple):
        ds = ds.map(lambda *t: t[0])
    shape = getattr(ds.element_spec, "shape", None)
    if shape is None or shape.rank is None or shape.rank < 1:
        raise ValueError(
            "`x` must be a dataset of single examples of rank >= 1, its "
            f"element spec is {ds.element_spec}."
        )
    n = int(ds.cardinality())
    if 0 <= n < size:
        raise ValueError(
            f"`x` has {n} examples, fewer than one element of n_critic * "
            f"batch_size = {size}."
        )
    if shuffle:
        buffer = 10_000 if n < 0 else min(n, 100_000)
        ds = ds.shuffle(max(buffer, 1), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    return ds.batch(size, drop_remainder=True)
