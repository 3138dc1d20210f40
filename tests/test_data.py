"""Tests for `kerasteps.data`: the GAN step's input pipeline (`gan_batches`) and
`skip_consumed`."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasteps._compat import shuffles_before_repeat
from kerasteps.data import gan_batches, skip_consumed
from kerasteps.models import WGAN
from tests.helpers import as_a_fresh_jax_fit_sees, fit_on_tiny_data, tiny_model

pytestmark = pytest.mark.neutral


def elements(dataset, count):
    return [np.asarray(e) for e in dataset.take(count)]


def test_elements_hold_n_critic_fresh_batches_of_every_example_once_per_pass():
    x = np.arange(50, dtype="float32").reshape(25, 2)
    first_pass = elements(gan_batches(x, 4, n_critic=3, seed=1), 10)
    assert [e.shape for e in first_pass] == [(12, 2), (12, 2)]  # 25 // 12 elements
    rows = np.concatenate(first_pass)[:, 0] // 2
    assert len(set(rows.tolist())) == 24  # no example twice within a pass
    assert sorted(rows.tolist()) != rows.tolist()  # shuffled


def test_a_seeded_stream_is_repeatable_and_resumes_exactly():
    x = np.random.default_rng(0).normal(size=(60, 3)).astype("float32")
    stream = gan_batches(x, 5, n_critic=2, seed=7, repeat=True)
    again = gan_batches(x, 5, n_critic=2, seed=7, repeat=True)
    whole = elements(stream, 9)
    np.testing.assert_array_equal(np.stack(whole), np.stack(elements(again, 9)))
    # Passes differ (reshuffled), and skip_consumed resumes at element 4.
    assert not np.array_equal(whole[0], whole[6])
    resumed = elements(skip_consumed(gan_batches(x, 5, 2, seed=7, repeat=True), 4), 5)
    np.testing.assert_array_equal(np.stack(resumed), np.stack(whole[4:]))


def test_wgan_make_dataset_is_gan_batches_for_the_batch_size_of_fit():
    """`WGAN.make_dataset` is `gan_batches` itself; its elements are what `fit`
    with `batch_size=n_critic * batch_size` trains a WGAN on: a step per element."""
    assert WGAN.make_dataset is gan_batches
    x = np.random.default_rng(1).normal(size=(40, 2)).astype("float32")
    gan = WGAN(
        keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)]),
        keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]),
        latent_dim=2,
        n_critic=2,
    )
    gan.compile()
    gan.fit(WGAN.make_dataset(x, 4, n_critic=2, seed=3), verbose=0)
    assert [e.shape for e in elements(WGAN.make_dataset(x, 4, 2, seed=3), 9)] == [
        (8, 2)
    ] * 5
    assert gan.step_counters() == {"d_step": 10, "g_step": 5}


def test_autotuning_is_off_so_that_fit_returns_at_once():
    """With tf.data's autotuning on, destroying the iterator at the end of `fit`
    waited 6-35 s for the autotuning thread (TF 2.21, measured in the recipe)."""
    x = np.zeros((40, 2), "float32")
    from_array = gan_batches(x, 4, n_critic=2, seed=3, repeat=True)
    from_dataset = gan_batches(tf.data.Dataset.from_tensor_slices(x), 4, 2)
    for dataset in (from_array, from_dataset, skip_consumed(from_array, 3)):
        assert dataset.options().autotune.enabled is False


def test_too_few_examples_and_bad_sizes_are_refused():
    with pytest.raises(ValueError, match=r"fewer than one element of n_critic"):
        gan_batches(np.zeros((9, 2), "float32"), 5, n_critic=2)
    with pytest.raises(ValueError, match=r"`batch_size` must be an int >= 1"):
        gan_batches(np.zeros((9, 2), "float32"), 0)
    with pytest.raises(ValueError, match=r"rank >= 2"):
        gan_batches(np.zeros(9, "float32"), 2, n_critic=1)


def test_skip_consumed_skips_the_batches_of_the_restored_steps():
    batches = tf.data.Dataset.range(100).batch(10).repeat()
    assert next(iter(skip_consumed(batches, 3)))[0] == 30
    assert next(iter(skip_consumed(batches, 2, batches_per_step=2)))[0] == 40
    model = tiny_model()
    fit_on_tiny_data(model, 8, [])  # step 4
    assert next(iter(skip_consumed(batches, model)))[0] == 40
    assert skip_consumed(batches, 0) is batches


def test_skip_consumed_bad_arguments():
    finite = tf.data.Dataset.range(100).batch(10)
    with pytest.raises(ValueError, match="`step`=10 skips 10 batches.*only 10"):
        skip_consumed(finite, 10)
    with pytest.raises(ValueError, match="`step`.*-1"):
        skip_consumed(finite, -1)
    with pytest.raises(ValueError, match="`batches_per_step`.*0"):
        skip_consumed(finite, 1, batches_per_step=0)
    with pytest.raises(TypeError, match="`dataset`.*ndarray"):
        skip_consumed(np.ones(3), 1)


@pytest.mark.parametrize("order", ["shuffle, repeat", "repeat, shuffle"])
def test_a_resume_follows_the_uninterrupted_stream_when_the_shuffle_follows_repeat(
    order,
):
    """On JAX, a shuffle before `.repeat()` draws a seed per pass from a generator
    that the iterators share, so the resumed run's first iterator, walking through
    the skipped passes, changes the order of the passes after them."""

    def build():
        examples = tf.data.Dataset.range(6)
        if order == "shuffle, repeat":
            return examples.shuffle(6, seed=1).batch(2).repeat()
        return examples.repeat().shuffle(6, seed=1).batch(2)

    uninterrupted = as_a_fresh_jax_fit_sees(build(), 15)  # 5 passes
    resumed = as_a_fresh_jax_fit_sees(skip_consumed(build(), 7), 8)
    exact = np.array_equal(np.stack(resumed), np.stack(uninterrupted[7:]))
    assert exact == (order == "repeat, shuffle")
    assert shuffles_before_repeat(build()) == (order == "shuffle, repeat")


def test_skip_consumed_warns_on_jax_of_a_shuffle_before_repeat(caplog):
    examples = tf.data.Dataset.range(6)
    shuffled_first = examples.shuffle(6, seed=1).batch(2).repeat().prefetch(1)
    repeated_first = examples.repeat().shuffle(6, seed=1).batch(2)
    with caplog.at_level(logging.WARNING, logger="kerasteps"):
        skip_consumed(shuffled_first, 0)
        skip_consumed(repeated_first, 3)
        skip_consumed(examples.shuffle(6, reshuffle_each_iteration=False).repeat(), 3)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if keras.backend.backend() == "jax":
        assert len(warned) == 1
        assert "`dataset` shuffles before `.repeat()`" in warned[0]
        assert "dataset.repeat().shuffle(n, seed=s).batch(b)" in warned[0]
    else:
        assert warned == []
