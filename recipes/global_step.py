"""The global step walkthrough: what it counts, why it starts at 0, log_every_n lines.

The question
------------

TF1 code created a step counter and handed it to the optimizer:

    global_step = tf.Variable(0, name='global_step', trainable=False)
    train_op = optimizer.minimize(loss, global_step=global_step)

What does `global_step` count, and why does it start at 0? `minimize` added one to it
after each update of the variables, so it counted the batches the model had learnt
from: 0 before the first update, because none had happened yet, and 1 after it. TF1
scripts logged against it with `tf.logging.log_every_n`:

    INFO:tensorflow:np.mean(loss_evl)= 1.396970 at step 1
    INFO:tensorflow:np.mean(loss_evl)= 1.221397 at step 101

and TensorBoard drew the loss against the same step.

The answer in Keras 3
---------------------

The global step is the number of completed training updates,
`model.optimizer.iterations` (`kerasteps.global_step(model)`): 0 before the first
update, 1 after it, one per batch. It is saved with the model and its checkpoints,
so a resumed run continues it. This recipe prints it before and after training,
logs lines at steps 1, 101, 201, ... as `log_every_n` did, and writes the loss
against the same step for TensorBoard.

What a line's value is about: by default (`--reduce mean`) the mean loss of the
steps since the previous line (steps 2 to 101 for the line at step 101), so it is a
smooth curve that a resumed run continues exactly; `--reduce last` prints the loss
of that step's own batch, as TF1's line did; `--reduce epoch` Keras's running mean
since the epoch began.

The file reads top to bottom: the data and the model, the global step before
training, training with the log lines, and the global step after; `main`, at the
bottom, puts them together. Run it with `kerasteps run global_step` (`-h` lists the
options).
"""

from __future__ import annotations

import logging
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
# The data and the model
#
# A small regression problem, generated from --seed: 2000 examples of 8 features and
# a smooth target. The model is a two-layer network trained with plain SGD on the
# mean squared error; its optimizer's `iterations` is the global step.


def make_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """2000 examples `(x, y)`: 8 normal features, a tanh of a random projection."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2000, 8)).astype("float32")
    y = np.tanh(x @ rng.normal(size=(8, 1))).astype("float32")
    return x, y


def build_model() -> keras.Model:
    """A dense network 8 -> 32 -> 1, compiled with SGD(0.05) and the MSE."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.SGD(0.05), "mse")
    return model


# ======================================================================================
# The global step before training
#
# A new model has made no update yet, so its global step is 0: TF1's
# `tf.Variable(0, ...)` said the same. A run resumed with --resume starts from the
# count restored with its checkpoint, the updates of the run it continues.


def print_step_before(model: keras.Model) -> None:
    """Prints the global step before training, and why it is that number."""
    before = kerasteps.global_step(model)
    why = (
        "no update has happened yet, so the count is 0"
        if before == 0
        else "the updates of the run it resumes, restored with its checkpoint"
    )
    click.echo(f"Global step before training: {before} ({why}).")


# ======================================================================================
# Training: a line at steps 1, 101, 201, ...
#
# `Every(--log-every, start=1)` fires at steps 1, 1 + N, 1 + 2N, ...: TF1's
# `log_every_n`. `LogEvery` prints the line there and `JSONLinesLogger` writes the
# same values to LOG_DIR/run-N/log.jsonl; `StepTensorBoard` writes the loss against
# the global step every --curve-every steps (and at the last step), a finer curve
# than the lines. `StepCheckpoint` saves every --log-every steps and at the end, and
# --resume continues from the latest checkpoint; `run.stop` (`StopAtStep`) ends the
# run when the global step reaches --steps.
#
# The examples are repeated, then shuffled with the seed, and a resumed run skips those
# of the steps it has already made (`skip_consumed`), so it logs what an
# uninterrupted run would.


def batches(
    x: np.ndarray, y: np.ndarray, batch_size: int, seed: int, start: int
) -> tf.data.Dataset:
    """Shuffled batches of `(x, y)`, repeated, from the step `start` on."""
    import tensorflow as tf

    from kerasteps.data import skip_consumed

    # Repeat, then shuffle: one seed for the whole stream, so a resume is exact.
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    data = data.shuffle(len(x), seed=seed).batch(batch_size, drop_remainder=True)
    return skip_consumed(data, start)


def step_callbacks(
    run: recipe.Run, log_every: int, curve_every: int, reduce: str
) -> list[Any]:
    """The kerasteps callbacks: the lines, the curve, the JSON lines, checkpoints."""
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepProgressBar,
        StepTensorBoard,
    )

    every = Every(log_every, start=1)  # steps 1, 1 + N, 1 + 2N: TF1's log_every_n
    curve = Every(curve_every, start=1, last=True)
    callbacks = [
        LogEvery(every, reduce=reduce),
        StepTensorBoard(run.folder, every=curve, reduce=reduce),
        JSONLinesLogger(os.path.join(run.folder, "log.jsonl"), every, reduce=reduce),
        *recipe.option_callbacks(run.folder, curve),
        StepCheckpoint(
            os.path.join(run.folder, "checkpoints"),
            every=Every(log_every, last=True),
        ),
        run.stop,
    ]
    if sys.stdout.isatty():  # one bar below the lines, on a terminal
        callbacks.append(StepProgressBar(run.stop.max_steps, keys=["loss"]))
    return callbacks


# ======================================================================================
# The global step after training
#
# One more per update: after training it equals --steps, the number of batches the
# model has learnt from in all its runs. The model, saved as LOG_DIR/run-N/model.keras,
# keeps the count (`kerasteps.load_model(path).optimizer.iterations`).


def save_and_print_step(model: keras.Model, run: recipe.Run, batch_size: int) -> None:
    """Saves `model.keras` in the run's folder and prints the global step."""
    model.save(os.path.join(run.folder, "model.keras"))
    click.echo(
        f"Global step after training: {kerasteps.global_step(model)} "
        f"(one per update of {batch_size} examples; saved with the model)."
    )


# ======================================================================================
# The command: the sections above, in order


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@recipe.common_options(steps=301, log_every=100, log_dir="logs/global_step")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=32,
    help="Examples per update (one global step).",
)
@click.option(
    "--curve-every",
    type=click.IntRange(min=1),
    default=10,
    help="Write the TensorBoard curve every N steps.",
)
@click.option(
    "--reduce",
    type=click.Choice(["mean", "last", "epoch"]),
    default="mean",
    help="A logged loss is the mean since the previous point, the step's own "
    "batch (TF1's), or Keras's running mean since the epoch began.",
)
def main(steps, log_every, log_dir, seed, resume, batch_size, curve_every, reduce):
    """The global step walkthrough: what it counts, why it starts at 0, log lines."""
    import keras

    recipe.log_to_console(logging.INFO)
    keras.utils.set_random_seed(seed)
    x, y = make_data(seed)
    model = build_model()
    # Each run writes to its own folder, LOG_DIR/run-N; --resume continues the latest.
    run = recipe.start_run(log_dir, resume, model=model, steps=steps)
    if run.stop is None:
        return
    print_step_before(model)
    callbacks = step_callbacks(run, log_every, curve_every, reduce)
    model.fit(
        batches(x, y, batch_size, seed, run.start),
        epochs=1,
        steps_per_epoch=steps - run.start,
        verbose=0,
        shuffle=False,  # the dataset is shuffled (with a seed) already
        callbacks=callbacks,
    )
    save_and_print_step(model, run, batch_size)
    recipe.print_log_hint(run.folder)
    recipe.exit_if_interrupted(callbacks)  # after a signal: 128 + its number


if __name__ == "__main__":
    main()
