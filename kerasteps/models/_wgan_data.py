"""The dataset that `WGAN.fit` expects, built from real examples (private)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from kerasteps.models import _wgan_checks as checks


def make_dataset(
    x: Any,
    batch_size: int,
    n_critic: int,
    shuffle: bool,
    seed: int | None,
    repeat: bool,
) -> tf.data.Dataset:
    """Elements of `n_critic * batch_size` examples; see `WGAN.make_dataset`."""
    batch_size = checks.integer("batch_size", batch_size)
    n_critic = checks.integer("n_critic", n_critic)
    size = n_critic * batch_size
    if isinstance(x, tf.data.Dataset):
        return _from_dataset(x, size, shuffle, seed, repeat)
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(
            "`x` must be an array of examples of rank >= 2, shape "
            f"(n_examples, *example_shape), received shape {x.shape}."
        )
    if np.issubdtype(x.dtype, np.floating) and x.dtype != np.float32:
        x = x.astype(np.float32)
    n = len(x)
    if n < size:
        raise ValueError(
            f"`x` has {n} examples, fewer than one element of n_critic * "
            f"batch_size = {n_critic} * {batch_size} = {size}."
        )
    # Shuffle indices once per pass and gather whole elements: much cheaper
    # than shuffling and batching example by example.
    elements = n // size
    examples = tf.constant(x)
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    seeds = seeds if repeat else seeds.take(1)

    def one_pass(pass_seed: tf.Tensor) -> tf.data.Dataset:
        order = tf.range(n, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([pass_seed, tf.constant(0, tf.int64)])
            )
        order = tf.reshape(order[: elements * size], (elements, size))
        return tf.data.Dataset.from_tensor_slices(order)

    ds = seeds.flat_map(one_pass)
    ds = ds.map(
        lambda idx: tf.gather(examples, idx), num_parallel_calls=tf.data.AUTOTUNE
    )
    cardinality = tf.data.INFINITE_CARDINALITY if repeat else elements
    ds = ds.apply(tf.data.experimental.assert_cardinality(cardinality))
    return ds.prefetch(tf.data.AUTOTUNE)


def _from_dataset(
    ds: tf.data.Dataset,
    size: int,
    shuffle: bool,
    seed: int | None,
    repeat: bool,
) -> tf.data.Dataset:
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
    ds = ds.batch(size, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE)
