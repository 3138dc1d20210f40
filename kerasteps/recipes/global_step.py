"""The global step walkthrough: what it counts, why it starts at 0, log_every_n lines.

TF1 code created `global_step = tf.Variable(0, name='global_step', trainable=False)`
and passed it to `optimizer.minimize(loss, global_step=global_step)`, which added one
after each update, and logged with `tf.logging.log_every_n`:

    INFO:tensorflow:np.mean(loss_evl)= 1.396970 at step 1
    INFO:tensorflow:np.mean(loss_evl)= 1.221397 at step 101

This recipe shows the same with Keras 3 and kerasteps: the global step is the number
of completed training updates (`model.optimizer.iterations`), 0 before the first
update because no update has happened yet, 1 after it; it is saved with the model,
so a resumed run continues it. Lines are logged at steps 1, 101, 201, ... and
TensorBoard draws the loss against the same step.

What a line's value is about: by default (`--reduce mean`) the mean loss of the steps
since the previous line (steps 2 to 101 for the line at step 101), so it is a smooth
curve that a resumed run continues exactly; `--reduce last` prints the loss of that
step's own batch, as TF1's line did; `--reduce epoch` Keras's running mean since the
epoch began.
"""

import click

from kerasteps.recipe import (
    common_options,
    log_to_console,
    print_log_hint,
    start_run,
)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@common_options(steps=301, log_every=100, logdir="logs/global_step")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Examples per update (one global step).",
)
@click.option(
    "--curve-every",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Write the TensorBoard curve every N steps.",
)
@click.option(
    "--reduce",
    type=click.Choice(["mean", "last", "epoch"]),
    default="mean",
    show_default=True,
    help="A logged loss is the mean since the previous point, the step's own "
    "batch (TF1's), or Keras's running mean since the epoch began.",
)
def main(steps, log_every, logdir, seed, resume, batch_size, curve_every, reduce):
    """The global step walkthrough: what it counts, why it starts at 0, log lines."""
    import logging
    import os

    import keras
    import numpy as np
    import tensorflow as tf

    import kerasteps
    from kerasteps import Every
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepTensorBoard,
    )
    from kerasteps.data import skip_consumed

    log_to_console(logging.INFO)
    keras.utils.set_random_seed(seed)

    # A small regression problem: 2000 examples, 8 features, a smooth target.
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2000, 8)).astype("float32")
    y = np.tanh(x @ rng.normal(size=(8, 1))).astype("float32")
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.SGD(0.05), "mse")

    # Each run writes to its own folder, LOGDIR/run-N; --resume continues the latest.
    run = start_run(model, logdir, steps, resume)
    if run.stop is None:
        return
    before = kerasteps.global_step(model)
    why = (
        "no update has happened yet, so the count is 0"
        if before == 0
        else "the updates of the run it resumes, restored with its checkpoint"
    )
    click.echo(f"Global step before training: {before} ({why}).")

    data = tf.data.Dataset.from_tensor_slices((x, y))
    data = data.shuffle(len(x), seed=seed).batch(batch_size, drop_remainder=True)
    data = skip_consumed(data.repeat(), run.start)
    every = Every(log_every, start=1)  # steps 1, 1 + N, 1 + 2N: TF1's log_every_n
    model.fit(
        data,
        epochs=1,
        steps_per_epoch=steps - run.start,
        verbose=0,
        shuffle=False,  # the dataset is shuffled (with a seed) already
        callbacks=[
            LogEvery(every, reduce=reduce),
            StepTensorBoard(
                run.folder, every=Every(curve_every, start=1, last=True), reduce=reduce
            ),
            JSONLinesLogger(
                os.path.join(run.folder, "log.jsonl"), every, reduce=reduce
            ),
            StepCheckpoint(
                os.path.join(run.folder, "checkpoints"),
                every=Every(log_every, last=True),
            ),
            run.stop,
        ],
    )
    model.save(os.path.join(run.folder, "model.keras"))
    click.echo(
        f"Global step after training: {kerasteps.global_step(model)} "
        f"(one per update of {batch_size} examples; saved with the model)."
    )
    print_log_hint(run.folder)


if __name__ == "__main__":
    main()
