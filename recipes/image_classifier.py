"""Train and validate a conv image classifier: loss and top-1 accuracy every N steps.

The question
------------

The seed tutorial trains an image classifier in TensorFlow 1 and watches it learn:
the loss is `tf.nn.sparse_softmax_cross_entropy_with_logits` averaged over the batch,
the optimizer `AdamOptimizer` with a `global_step` variable, the accuracy
`tf.nn.in_top_k(logits, labels, 1)` (how many images of the batch are classified
right), and `tf.summary.scalar` writes both, so that one can check that the accuracy
rises steadily and the loss falls, on the training set and on a validation set. How
does that loop read in Keras 3, with train and validation curves at the same steps?

The same loop in Keras 3
------------------------

    TF1                                          Keras 3 and kerasteps
    sparse_softmax_cross_entropy_with_logits     SparseCategoricalCrossentropy(
      + reduce_mean                                from_logits=True)
    AdamOptimizer(lr) + global_step variable     Adam(lr); the global step is
                                                   optimizer.iterations
    in_top_k(logits, labels, 1) + reduce_mean    SparseCategoricalAccuracy
    tf.summary.scalar for loss and accuracy      kerasteps callbacks, every N steps

The callbacks, every --log-every global steps N:

    StepTensorBoard  train `loss` and `accuracy` in the TensorBoard run `train`;
                     validation `loss` and `accuracy` at the same steps N, 2N,
                     3N, ... in the run `validation` (the same tags, so TensorBoard
                     draws train and validation in one chart)
    ValidateEvery    evaluates the validation set at those steps, mid-epoch,
                     without disturbing the training metrics
    LogEvery         one line per N steps: `loss=... accuracy=... val_loss=...
                     val_accuracy=... at step N`
    JSONLinesLogger  the same values in LOG_DIR/run-N/log.jsonl
    StepCheckpoint   a checkpoint every N steps and at the end; --resume continues
                     from the latest one; the --keep-best best by `val_loss` kept
                     beside them, and saved as `best.keras`
    StepEarlyStopping  stops when `val_loss` has not improved in --early-stopping
                     validations
    Throughput       steps/s and examples/s

The file reads top to bottom: the data, the model, training with those callbacks,
and what a run leaves to look at; `main`, at the bottom, puts them together. Run it
with `kerasteps run image_classifier` (`-h` lists the options).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from typing import TYPE_CHECKING, Any

import click

import kerasteps
from kerasteps import Every, recipe

if TYPE_CHECKING:  # imported where they are used, so that `-h` stays fast
    import keras
    import numpy as np
    import tensorflow as tf


# ======================================================================================
# The data
#
# By default the images are generated, so nothing is downloaded: two classes of
# noisy --image-size pixel RGB images, class 0 with horizontal stripes and class 1
# with vertical stripes (random period, phase and colours), which a small network
# learns within a few hundred steps on a CPU. --examples images are generated and
# --validation-split of them held out.
#
# With --data DIR the images are read from a directory with one sub-folder per class
# (`keras.utils.image_dataset_from_directory`), resized to --image-size, with the
# same --validation-split (split with --seed).
#
# Either way the training examples are repeated, then shuffled with --seed, in
# batches (one stream, which a resume skips into exactly), and the validation set is
# what `ValidateEvery` evaluates: arrays, or a dataset of batches.

#: The classes of the generated images, by label.
STRIPES = ["horizontal", "vertical"]


def load_data(
    data: str | None,
    image_size: int,
    examples: int,
    validation_split: float,
    batch_size: int,
    seed: int,
) -> tuple[tf.data.Dataset, Any, list[str]]:
    """Returns `(train, validation, class_names)`, and prints what was loaded."""
    if data is None:
        images, labels = make_images(examples, image_size, seed)
        train, validation, source = split_images(
            images, labels, validation_split, batch_size, seed
        )
        class_names = STRIPES
    else:
        train, validation, class_names = read_directory(
            data, image_size, validation_split, batch_size, seed
        )
        source = f"images of {data}"
    click.echo(f"Classes {class_names}; {source}.")
    return train, validation, class_names


def make_images(examples: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns `(images, labels)`: float32 RGB images in [0, 255], int32 labels.

    Class 0 has horizontal stripes, class 1 vertical stripes, each with a random
    period (4 to 10 pixels), phase and pair of colours, plus Gaussian noise.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=examples)
    coords = np.arange(size, dtype="float32")
    period = rng.uniform(4.0, 10.0, size=(examples, 1, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(examples, 1, 1))
    rows, cols = coords[None, :, None], coords[None, None, :]
    along = np.where(labels[:, None, None] == 0, rows, cols)
    wave = 0.5 + 0.5 * np.sin(2 * np.pi * along / period + phase)
    dark = rng.uniform(0.0, 255.0, size=(examples, 1, 1, 3))
    light = rng.uniform(0.0, 255.0, size=(examples, 1, 1, 3))
    images = dark + (light - dark) * wave[..., None]
    images += rng.normal(0.0, 40.0, size=images.shape)
    return np.clip(images, 0.0, 255.0).astype("float32"), labels.astype("int32")


def split_images(
    images: np.ndarray,
    labels: np.ndarray,
    validation_split: float,
    batch_size: int,
    seed: int,
) -> tuple[tf.data.Dataset, tuple[np.ndarray, np.ndarray], str]:
    """Holds out the first images for validation; batches the rest, shuffled.

    Returns `(train, validation, source)`: the training batches, the validation
    arrays, and how many images each holds.
    """
    import tensorflow as tf

    examples = len(images)
    held_out = max(1, round(examples * validation_split))
    if examples - held_out < batch_size:
        raise click.BadParameter(
            f"{examples} images with a validation split of {validation_split} "
            f"leave {examples - held_out} for training, fewer than one batch "
            f"of {batch_size}.",
            param_hint="'--examples'",
        )
    train = tf.data.Dataset.from_tensor_slices((images[held_out:], labels[held_out:]))
    train = shuffled_batches(train, batch_size, seed)
    validation = (images[:held_out], labels[:held_out])
    source = f"{examples - held_out} generated training images, {held_out} validation"
    return train, validation, source


def shuffled_batches(
    examples: tf.data.Dataset, batch_size: int, seed: int, load: Any = None
) -> tf.data.Dataset:
    """`examples` repeated, then shuffled with the seed (one seed for the whole
    stream, so a resume is exact on every backend), loaded, in whole batches."""
    import tensorflow as tf

    stream = examples.repeat().shuffle(int(examples.cardinality()), seed=seed)
    if load is not None:
        stream = stream.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    return stream.batch(batch_size, drop_remainder=True)


def read_directory(
    data: str, image_size: int, validation_split: float, batch_size: int, seed: int
) -> tuple[tf.data.Dataset, tf.data.Dataset, list[str]]:
    """The training batches, validation batches and class names of a folder of
    class sub-folders."""
    import keras
    import tensorflow as tf

    try:
        train, validation = keras.utils.image_dataset_from_directory(
            data,
            label_mode="int",
            image_size=(image_size, image_size),
            batch_size=batch_size,
            seed=seed,
            validation_split=validation_split,
            subset="both",
        )
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--data'") from None
    if len(train.class_names) < 2:
        raise click.BadParameter(
            f"{data!r} must hold one sub-folder per class, at least two; found "
            f"{list(train.class_names)}.",
            param_hint="'--data'",
        )
    # Keras's split, read again from the file names: its training set shuffles
    # before the run's `.repeat()`, which a resume on JAX cannot follow exactly.
    names = list(train.class_names)
    labels = [
        names.index(os.path.relpath(p, data).split(os.sep)[0]) for p in train.file_paths
    ]

    def load(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = tf.io.decode_image(tf.io.read_file(path), 3, expand_animations=False)
        return tf.image.resize(image, (image_size, image_size)), label

    pairs = tf.data.Dataset.from_tensor_slices((train.file_paths, labels))
    return shuffled_batches(pairs, batch_size, seed, load), validation, names


# ======================================================================================
# The model
#
# `kerasteps.models.build_image_classifier`: per entry of --filters a block of two
# 3x3 convolutions and a 2x2 pooling, then global average pooling, a dense layer and
# one logit per class. Logits, so the loss is the sparse softmax cross-entropy *on
# logits* (`from_logits=True`), TF1's `sparse_softmax_cross_entropy_with_logits`
# averaged over the batch. The accuracy is top-1: the class of the largest logit,
# compared with the label (`in_top_k(logits, labels, 1)`). Adam counts its updates in
# `optimizer.iterations`, the global step, saved with the model.


def build_model(
    image_size: int, num_classes: int, filters: tuple[int, ...], lr: float
) -> keras.Model:
    """The classifier, compiled with its loss, Adam and top-1 accuracy."""
    import keras

    from kerasteps.models import build_image_classifier

    model = build_image_classifier(
        (image_size, image_size, 3),
        num_classes=num_classes,
        filters=filters,
        binary_single_logit=False,  # one logit per class: sparse softmax
    )
    model.compile(
        optimizer=keras.optimizers.Adam(lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


# ======================================================================================
# Training, validated every N steps
#
# One schedule, `Every(--log-every)`, fires at steps N, 2N, 3N, ...: there
# `ValidateEvery` evaluates the validation set and `Throughput` measures the speed
# (both providers: they act first), then `LogEvery`, `StepTensorBoard` and
# `JSONLinesLogger` record the train and validation values together. The checkpoint
# uses the same period and also fires on the last step (`last=True`), so --resume
# continues from where the run stopped.
#
# One Keras epoch is one logging period (`steps_per_epoch=N`), so the train `loss`
# and `accuracy` at a logged step are the means over the N steps before it. A run
# resumed from a step that is not a multiple of N (after SIGTERM, or a --steps that
# is not) has its epochs shifted, and its points then average fewer steps.
# Validation values are over the whole validation set, computed at that step. The
# run's own folder, LOG_DIR/run-N, gets everything; `run.stop` (`StopAtStep`) ends the
# run at --steps.


def step_callbacks(
    run: recipe.Run,
    log_every: int,
    validation: Any,
    batch_size: int,
    keep_best: int,
    early: Any,
) -> list[Any]:
    """The kerasteps callbacks of the run: validation and recording every N steps,
    the best checkpoints and the early stop."""
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepProgressBar,
        StepTensorBoard,
        Throughput,
        ValidateEvery,
    )

    every = Every(log_every)  # steps N, 2N, 3N, ...: train and validation together
    callbacks = [
        ValidateEvery(every, validation_data=validation, batch_size=batch_size),
        Throughput(every, batch_size=batch_size),
        LogEvery(every),
        StepTensorBoard(run.folder, every=every),
        JSONLinesLogger(os.path.join(run.folder, "log.jsonl"), every=every),
        *recipe.option_callbacks(run.folder, every),
        StepCheckpoint(
            os.path.join(run.folder, "checkpoints"),
            every=Every(log_every, last=True),
            monitor="val_loss" if keep_best else None,
            keep_best=keep_best or None,
        ),
        run.stop,
    ]
    if early is not None:  # a decider: it acts before the sinks and the checkpoint
        callbacks.append(early)
    if sys.stdout.isatty():  # one bar below the lines, on a terminal
        callbacks.append(StepProgressBar(run.stop.max_steps, keys=["loss", "val_loss"]))
    return callbacks


# ======================================================================================
# What a run leaves to look at
#
# In LOG_DIR/run-N: the event files of the TensorBoard runs `train` and `validation`
# (`kerasteps board LOG_DIR` draws the train and validation curves of each tag in one
# chart, and every run side by side), `log.jsonl`, `checkpoints/` and the trained
# classifier, `model.keras` (`kerasteps.load_model` or `keras.saving.load_model`).
# The global step after training is the number of updates, one per batch.


def save_model(model: keras.Model, run: recipe.Run, best: keras.Model | None) -> None:
    """Saves `model.keras` in the run's folder and prints the global step; with
    `best` (a model of the same build), restores the best checkpoint into it and
    saves it as `best.keras`."""
    from kerasteps.callbacks import StepCheckpoint

    model.save(os.path.join(run.folder, "model.keras"))
    click.echo(f"Global step after training: {kerasteps.global_step(model)}.")
    checkpoints = os.path.join(run.folder, "checkpoints")
    if best is not None and StepCheckpoint.restore_best(best, checkpoints):
        best.save(os.path.join(run.folder, "best.keras"))
        step = kerasteps.global_step(best)
        click.echo(f"Best val_loss at step {step}: saved as best.keras.")


# ======================================================================================
# The command: the sections above, in order


def parse_filters(
    ctx: click.Context, param: click.Parameter, value: str
) -> tuple[int, ...]:
    """Click callback: `"16,32"` -> `(16, 32)`."""
    try:
        filters = tuple(int(part) for part in value.split(","))
    except ValueError:
        filters = ()
    if not filters or min(filters) < 1:
        raise click.BadParameter(
            f"expected comma-separated positive ints such as 16,32, got {value!r}."
        )
    return filters


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@recipe.common_options(
    steps=400, log_every=20, log_dir="logs/image_classifier", validates=True
)
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, dir_okay=True),
    help="Directory of images with one sub-folder per class (default: "
    "generated stripes).",
)
@click.option(
    "--image-size",
    type=click.IntRange(min=4),
    default=32,
    help="Height and width of the images (generated, or --data resized to it).",
)
@click.option(
    "--examples",
    type=click.IntRange(min=2),
    default=2500,
    help="Number of generated images, training and validation (without --data).",
)
@click.option(
    "--validation-split",
    type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
    default=0.2,
    help="Fraction of the images held out for validation.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=32,
    help="Examples per update (one global step).",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0.0, min_open=True),
    default=1e-3,
    help="Adam learning rate.",
)
@click.option(
    "--filters",
    default="16,32",
    callback=parse_filters,
    help="Filters of each convolution block (one 2x2 pooling per block).",
)
@click.option(
    "--keep-best",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Keep the K checkpoints of lowest val_loss beside the newest, and save "
    "the best as RUN/best.keras (0: none).",
)
@click.option(
    "--early-stopping",
    metavar="PATIENCE",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Stop when val_loss has not improved in PATIENCE validations in a row "
    "(0: never).",
)
def main(
    steps,
    log_every,
    log_dir,
    seed,
    resume,
    data,
    image_size,
    examples,
    validation_split,
    batch_size,
    lr,
    filters,
    keep_best,
    early_stopping,
):
    """Train and validate a conv image classifier: loss and accuracy every N steps.

    Sparse softmax cross-entropy on logits, Adam, top-1 accuracy. Train and
    validation loss and accuracy go to TensorBoard (runs RUN/train and
    RUN/validation, tags `loss` and `accuracy`, RUN = LOG_DIR/run-N) at global steps
    N, 2N, 3N, ... (N = --log-every), with a log line and a JSON line
    (RUN/log.jsonl) each, and a checkpoint (RUN/checkpoints) that --resume
    continues from. The train values
    are means over the N steps before each point. Data: generated stripe images
    (class 0 horizontal, class 1 vertical), or --data DIR with one sub-folder of
    images per class.
    """
    import keras

    from kerasteps.callbacks import StepEarlyStopping
    from kerasteps.data import skip_consumed

    recipe.log_to_console(logging.INFO)
    keras.utils.set_random_seed(seed)
    train, validation, class_names = load_data(
        data, image_size, examples, validation_split, batch_size, seed
    )
    model = build_model(image_size, len(class_names), filters, lr)
    # Each run writes to its own folder, LOG_DIR/run-N; --resume continues the latest.
    run = recipe.start_run(log_dir, resume, model=model, steps=steps)
    early = StepEarlyStopping(patience=early_stopping) if early_stopping else None
    if early is not None and early.stopped(model):
        click.echo(f"{early.stopped(model)}; nothing to train.")
        recipe.print_log_hint(run.folder)
        return
    if run.stop is None:
        return
    callbacks = step_callbacks(run, log_every, validation, batch_size, keep_best, early)
    model.fit(
        skip_consumed(train, run.start),  # less the batches of earlier steps
        steps_per_epoch=log_every,  # one Keras epoch per logging period
        epochs=math.ceil((steps - run.start) / log_every),
        verbose=0,
        shuffle=False,  # the dataset is shuffled (with a seed) already
        callbacks=callbacks,
    )
    best = build_model(image_size, len(class_names), filters, lr) if keep_best else None
    save_model(model, run, best)
    recipe.print_log_hint(run.folder)
    recipe.exit_if_interrupted(callbacks)  # after a signal: 128 + its number


if __name__ == "__main__":
    main()
