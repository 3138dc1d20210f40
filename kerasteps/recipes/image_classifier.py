"""Train and validate a conv image classifier: loss and top-1 accuracy every N steps.

The TensorFlow 1 training-and-validation loop of the seed tutorial, with Keras 3 and
kerasteps: `tf.nn.sparse_softmax_cross_entropy_with_logits` averaged over the batch
becomes `SparseCategoricalCrossentropy(from_logits=True)`, `AdamOptimizer` with a
`global_step` becomes `Adam` (the global step is `optimizer.iterations`),
`tf.nn.in_top_k(logits, labels, 1)` becomes `SparseCategoricalAccuracy`, and the
`tf.summary.scalar` calls for loss and accuracy become kerasteps callbacks:

    StepTensorBoard  train `loss` and `accuracy` every --log-every global steps, in
                     the run LOGDIR/train; validation `loss` and `accuracy` at the
                     same steps N, 2N, 3N, ... in the run LOGDIR/validation (the same
                     tags, so TensorBoard draws train and validation in one chart)
    ValidateEvery    evaluates the validation set at those steps, mid-epoch,
                     without disturbing the training metrics
    LogEvery         one line per N steps: `loss=... accuracy=... val_loss=...
                     val_accuracy=... at step N`
    JSONLinesLogger  the same values in LOGDIR/log.jsonl
    StepCheckpoint   a checkpoint every N steps and at the end (LOGDIR/checkpoints);
                     --resume continues from the latest one
    Throughput       steps/s and examples/s

The model is `kerasteps.models.build_image_classifier` with one logit per class.
The train `loss` and `accuracy` at a logged step are means over the --log-every
steps before it (one Keras epoch is --log-every steps; a run resumed from a step that
is not a multiple of it, after SIGTERM or a --steps that is not, has its epochs
shifted, so its points average fewer steps); validation values are over the whole
validation set, computed at that step.

Data: by default generated images, no download: two classes of noisy --image-size
pixel RGB images, class 0 with horizontal stripes and class 1 with vertical stripes
(random period, phase and colours), learnt within a few hundred steps on a CPU.
--examples images are generated and --validation-split of them held out. With
--data DIR, images are read from a directory with one sub-folder per class
(`keras.utils.image_dataset_from_directory`, resized to --image-size, the same
--validation-split with --seed).
"""

import click

from kerasteps.recipe import (
    common_options,
    log_to_console,
    print_log_hint,
    start_run,
)


def make_images(examples, size, seed):
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


def parse_filters(ctx, param, value):
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


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@common_options(steps=400, log_every=20, logdir="logs/image_classifier")
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, dir_okay=True),
    default=None,
    help="Directory of images with one sub-folder per class (default: "
    "generated stripes).",
)
@click.option(
    "--image-size",
    type=click.IntRange(min=4),
    default=32,
    show_default=True,
    help="Height and width of the images (generated, or --data resized to it).",
)
@click.option(
    "--examples",
    type=click.IntRange(min=2),
    default=2500,
    show_default=True,
    help="Number of generated images, training and validation (without --data).",
)
@click.option(
    "--validation-split",
    type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
    default=0.2,
    show_default=True,
    help="Fraction of the images held out for validation.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Examples per update (one global step).",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0.0, min_open=True),
    default=1e-3,
    show_default=True,
    help="Adam learning rate.",
)
@click.option(
    "--filters",
    default="16,32",
    show_default=True,
    callback=parse_filters,
    help="Filters of each convolution block (one 2x2 pooling per block).",
)
def main(
    steps,
    log_every,
    logdir,
    seed,
    resume,
    data,
    image_size,
    examples,
    validation_split,
    batch_size,
    lr,
    filters,
):
    """Train and validate a conv image classifier: loss and accuracy every N steps.

    Sparse softmax cross-entropy on logits, Adam, top-1 accuracy. Train and
    validation loss and accuracy go to TensorBoard (runs LOGDIR/train and
    LOGDIR/validation, tags `loss` and `accuracy`) at global steps N, 2N, 3N, ...
    (N = --log-every), with a log line and a JSON line (LOGDIR/log.jsonl) each, and
    a checkpoint (LOGDIR/checkpoints) that --resume continues from. The train values
    are means over the N steps before each point. Data: generated stripe images
    (class 0 horizontal, class 1 vertical), or --data DIR with one sub-folder of
    images per class.
    """
    import logging
    import math
    import os

    import keras
    import tensorflow as tf

    import kerasteps
    from kerasteps import Every
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepTensorBoard,
        Throughput,
        ValidateEvery,
    )
    from kerasteps.data import skip_consumed
    from kerasteps.models import build_image_classifier

    log_to_console(logging.INFO)
    keras.utils.set_random_seed(seed)

    if data is None:
        images, labels = make_images(examples, image_size, seed)
        held_out = max(1, round(examples * validation_split))
        if examples - held_out < batch_size:
            raise click.BadParameter(
                f"{examples} images with a validation split of {validation_split} "
                f"leave {examples - held_out} for training, fewer than one batch "
                f"of {batch_size}.",
                param_hint="'--examples'",
            )
        train = tf.data.Dataset.from_tensor_slices(
            (images[held_out:], labels[held_out:])
        )
        train = train.shuffle(examples - held_out, seed=seed)
        train = train.batch(batch_size, drop_remainder=True)
        validation = (images[:held_out], labels[:held_out])
        class_names = ["horizontal", "vertical"]
        source = (
            f"{examples - held_out} generated training images, {held_out} validation"
        )
    else:
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
        class_names = list(train.class_names)
        if len(class_names) < 2:
            raise click.BadParameter(
                f"{data!r} must hold one sub-folder per class, at least two; found "
                f"{class_names}.",
                param_hint="'--data'",
            )
        source = f"images of {data}"
    click.echo(f"Classes {class_names}; {source}.")

    model = build_image_classifier(
        (image_size, image_size, 3),
        num_classes=len(class_names),
        filters=filters,
        binary_single_logit=False,  # one logit per class: sparse softmax
    )
    model.compile(
        optimizer=keras.optimizers.Adam(lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )

    # Each run writes to its own folder, LOGDIR/run-N; --resume continues the latest.
    run = start_run(model, logdir, steps, resume)
    if run.stop is None:
        return

    every = Every(log_every)  # steps N, 2N, 3N, ...: train and validation together
    model.fit(
        skip_consumed(train.repeat(), run.start),
        # One Keras epoch per logging period: the logged train values are the means
        # over the steps since the previous point.
        steps_per_epoch=log_every,
        epochs=math.ceil((steps - run.start) / log_every),
        verbose=0,
        shuffle=False,  # the dataset is shuffled (with a seed) already
        callbacks=[
            ValidateEvery(every, validation_data=validation, batch_size=batch_size),
            Throughput(every, batch_size=batch_size),
            LogEvery(every),
            StepTensorBoard(run.folder, every=every),
            JSONLinesLogger(os.path.join(run.folder, "log.jsonl"), every=every),
            StepCheckpoint(
                os.path.join(run.folder, "checkpoints"),
                every=Every(log_every, last=True),
            ),
            run.stop,
        ],
    )
    model.save(os.path.join(run.folder, "model.keras"))
    click.echo(f"Global step after training: {kerasteps.global_step(model)}.")
    print_log_hint(run.folder)


if __name__ == "__main__":
    main()
