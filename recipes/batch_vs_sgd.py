"""Full-batch gradient descent vs per-example SGD vs mini-batches, measured.

The seed question: a 3-layer sigmoid MLP maps an n_fft-point spectrum to another
n_fft-point spectrum; there are 3000 training pairs, the loss is the mean squared
error and the optimizer `GradientDescentOptimizer(0.3)`. Is one update on all 3000
examples per pass ("training 1") different from 3000 updates on one example each
("training 2")?

This recipe answers by measurement. It trains the same network from the same initial
weights with plain SGD at the same learning rate (--lr, 0.3 as in the seed) for the
same number of passes over the data (--epochs), in four modes:

    full_batch     batch = all examples: 1 update per epoch (gradient descent)
    minibatch_128  batch 128: ceil(3000/128) = 24 updates per epoch
    minibatch_32   batch 32: ceil(3000/32) = 94 updates per epoch
    sgd            batch 1: 3000 updates per epoch (per-example SGD)

It prints one row per mode (updates, i.e. the mode's global step; the final MSE on
all examples; the training time; examples/s) and plots the MSE on all examples
against epochs, against updates and against training time (--png).

What it shows (defaults, 2 quiet CPU cores, about 23 s as `time kerasteps run
batch_vs_sgd` measures it; docs/batch_vs_sgd.png): at one
learning rate the MSE follows nearly the same curve against the number of *updates*
in every mode, so per epoch per-example SGD, with 3000 times the updates of full-batch
descent, gets far lower (0.005 against 0.054 after 20 epochs; the mini-batch modes
are still on a plateau at 0.038). Each of its updates sees one example, so it
processes by far the fewest examples per second (about 7,000 against 350,000 to
400,000 for full batches) and takes the longest per epoch. On this tiny network on a
CPU an update on one example costs about half the time of an update on 32 (0.14 ms
against 0.25 ms), so against training time it is not behind here either; larger
networks and GPUs make batched updates relatively cheaper, which is why mini-batches
(usually with a learning rate scaled to the batch) are the common choice.

The sections below follow the script: the data, the network, the four modes, training
one mode with kerasteps callbacks, and the results. `main`, at the end, is the
outline.
"""

import logging
import math
import os
import sys
from typing import NamedTuple

import click

from kerasteps import Every, recipe
from kerasteps.formatting import format_table, format_value

# Mode name -> examples per update (None: all of them), in the order of the table.
MODES = {"full_batch": None, "minibatch_128": 128, "minibatch_32": 32, "sgd": 1}


# -- The data -------------------------------------------------------------------------
#
# Generated, no download: each input spectrum is a few Gaussian peaks on a sloping
# noise floor, scaled to a peak of 1; its target is the same spectrum shifted up by
# n_fft/16 bins, smoothed, and compressed with a square root into [0.05, 0.95], a range
# the sigmoid output can reach. `--data FILE.npz` takes your own pairs instead (arrays
# `x` and `y`, such as the seed's `spec_train` and `spec_target`, `y` in [0, 1]).


def make_spectra(examples, n_fft, seed):
    """Returns `(x, y)`: input spectra and their targets, float32 in [0, 1]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    freqs = np.linspace(0.0, 1.0, n_fft)
    peaks = 4
    centers = rng.uniform(0.05, 0.95, size=(examples, peaks, 1))
    widths = rng.uniform(0.01, 0.08, size=(examples, peaks, 1))
    heights = rng.uniform(0.0, 1.0, size=(examples, peaks, 1))
    x = (heights * np.exp(-0.5 * ((freqs - centers) / widths) ** 2)).sum(axis=1)
    x += rng.uniform(0.0, 0.3, size=(examples, 1)) * (1.0 - 0.5 * freqs)
    x /= x.max(axis=1, keepdims=True)
    # Target: shift up by n_fft/16 bins, smooth (Gaussian, 1.5 bins), compress.
    shift = max(1, n_fft // 16)
    shifted = np.concatenate([np.repeat(x[:, :1], shift, axis=1), x[:, :-shift]], 1)
    bins = np.arange(n_fft)
    kernel = np.exp(-0.5 * ((bins[:, None] - bins[None, :]) / 1.5) ** 2)
    kernel /= kernel.sum(axis=0, keepdims=True)
    y = 0.05 + 0.9 * np.sqrt(np.clip(shifted @ kernel, 0.0, 1.0))
    return x.astype("float32"), y.astype("float32")


def bad_data(message):
    """The usage error for a `--data` that cannot be trained on."""
    return click.BadParameter(message, param_hint="'--data'")


def load_pairs(path):
    """Returns `(x, y)` from an .npz file with arrays `x` and `y`; checks them."""
    x, y = recipe.load_arrays(path, ("x", "y"))
    if x.ndim != 2 or x.shape != y.shape or len(x) < 2:
        raise bad_data(
            f"x and y must have the same shape (examples >= 2, n_fft), received "
            f"{x.shape} and {y.shape}."
        )
    if y.min() < 0.0 or y.max() > 1.0:
        raise bad_data(
            f"y must lie in [0, 1], the range of the sigmoid output, received "
            f"[{y.min():g}, {y.max():g}]; scale it first."
        )
    return x, y


# -- The network ----------------------------------------------------------------------
#
# The seed's network, n_fft -> n_fft -> n_fft -> n_fft with sigmoids everywhere
# (`kerasteps.models.build_mlp`), the mean squared error, plain SGD at --lr. The
# random seed is set before each build, so every mode starts from the same weights.
# The modes are compared on the MSE of the network on all examples, `full_data_mse`:
# Keras's `loss` is the mean over the batches of an epoch so far, each one seen by
# other weights.


def build_model(n_fft, lr, seed):
    """The seed's MLP with SGD."""
    import keras

    from kerasteps.models import build_mlp

    keras.utils.set_random_seed(seed)  # the same initial weights for every mode
    model = build_mlp(
        n_fft, (n_fft, n_fft), n_fft, activation="sigmoid", output_activation="sigmoid"
    )
    model.compile(keras.optimizers.SGD(lr), "mse")
    return model


def full_data_mse(model, x, y):
    """The mean squared error of the network on all examples."""
    import keras

    return float(keras.ops.mean(keras.ops.square(model(x, training=False) - y)))


# -- Four ways through the same data --------------------------------------------------
#
# A mode is a batch size. One update, one global step, sees one batch, so an epoch is
# ceil(examples / batch) updates, and each mode trains to --epochs times that. The
# examples come in the same shuffled order in every mode and every run (pass p
# shuffled with (--seed, p)), unless one batch holds them all; a resumed mode skips
# the batches it has trained on (`skip_consumed`), so it goes on as an uninterrupted
# run would.
#
# Keras runs several updates per compiled call (`steps_per_execution`), so that
# per-example SGD does not pay Python's overhead on each of its updates: per mode the
# largest number that divides its updates per epoch, its logging period and the step
# it resumes from (every epoch end and every logged step then ends a call), at most
# --steps-per-execution (`--steps-per-execution 1`, one Python call per update, makes
# per-example SGD about five times slower here).


class Mode(NamedTuple):
    """One way through the data (`plan_mode`)."""

    name: str
    folder: str  # LOG_DIR/run-N/<mode>
    batch_size: int
    per_epoch: int  # updates per epoch
    target: int  # the global step it trains to: --epochs epochs
    period: int  # the logging period: --log-every, at least one point per epoch


def plan_mode(name, run_folder, examples, epochs, log_every):
    """The batch, updates per epoch, target step and logging period of a mode."""
    batch_size = min(MODES[name] or examples, examples)
    per_epoch = math.ceil(examples / batch_size)
    folder = os.path.join(run_folder, name)
    period = min(log_every, per_epoch)
    return Mode(name, folder, batch_size, per_epoch, epochs * per_epoch, period)


def calls_per_execution(mode, start, limit):
    """The largest divisor of the mode's epoch, its period and its start step, at
    most `limit` (0: no limit); 1 on PyTorch (one update per call there)."""
    import keras

    if keras.backend.backend() == "torch":
        return 1
    common = math.gcd(mode.per_epoch, mode.period, start)
    return max(n for n in range(1, min(common, limit or common) + 1) if common % n == 0)


def pipeline(x, y, batch_size, seed, start):
    """The batches of a mode, from the `start`-th on, repeated without end."""
    import tensorflow as tf

    from kerasteps.data import skip_consumed

    def one_pass(number):  # the examples in the order of pass `number`, in batches
        order = tf.range(len(x), dtype=tf.int64)
        if batch_size < len(x):
            pass_seed = tf.stack([tf.constant(seed, tf.int64), number])
            order = tf.random.experimental.stateless_shuffle(order, seed=pass_seed)
        examples = (tf.gather(x, order), tf.gather(y, order))
        return tf.data.Dataset.from_tensor_slices(examples).batch(batch_size)

    # Repeat, then shuffle each pass statelessly: a resume is exact on every backend.
    data = tf.data.Dataset.counter().flat_map(one_pass)
    return skip_consumed(data, start)


# -- Training one mode with kerasteps callbacks ---------------------------------------
#
# Every mode writes to a folder of its own in the run's folder, `LOG_DIR/run-N/<mode>`,
# so TensorBoard shows the four side by side. Every --log-every global steps (and at
# every epoch end when an epoch is shorter, and at the mode's last step) `ProvideEvery`
# measures `full_data_mse` and the training time so far, `train_seconds`; the sinks,
# `StepTensorBoard` and `JSONLinesLogger` (`<mode>/log.jsonl`), write them with Keras's
# `loss` against the global step. `StepCheckpoint` saves the mode at every epoch end
# and at its last step (`<mode>/checkpoints`, the newest two kept), and on SIGTERM or
# Ctrl-C, after which the recipe reports what it trained and exits with status 143
# (130 after Ctrl-C). `StopAtStep` ends the mode at its target step; the trained
# network goes to `<mode>/model.keras`, a plain Keras model (`keras.saving.load_model`).
#
# Each curve starts at step 0 with the initial network, the same in every mode. The
# sinks write at the steps after an update, so the recipe hands them that point
# before training (`StepSink.log_point(0, values)`): they write it as a run begins
# at step 0, and a resumed mode, whose folder holds it, writes nothing.
#
# Timing: `train_seconds` counts only the time inside the compiled training calls
# (`TrainingClock`). `warm_up` traces and compiles them first and undoes its updates,
# so compiling is not counted; evaluating, logging and checkpointing are not either.
# A resumed mode's clock goes on from the time logged at its checkpoint's step.


def train_mode(mode, resume, x, y, lr, seed, limit, initial_mse):
    """Trains one mode with SGD at `lr`, at most `limit` updates per compiled call
    (0: no limit); returns its `StepCheckpoint`, or None when already done."""
    from kerasteps.callbacks import (
        JSONLinesLogger,
        StepCheckpoint,
        StepProgressBar,
        StepTensorBoard,
        StopAtStep,
    )

    model = build_model(x.shape[1], lr, seed)
    checkpoints = os.path.join(mode.folder, "checkpoints")
    start = (
        recipe.resume_from_checkpoint(model, checkpoints, mode.name) if resume else 0
    )
    calls = calls_per_execution(mode, start, limit)
    model.steps_per_execution = calls
    click.echo(
        f"{mode.name}: batch {mode.batch_size}, {mode.per_epoch} update(s) per "
        f"epoch, {calls} per call; global step {start} -> {mode.target}"
    )
    model_file = os.path.join(mode.folder, "model.keras")
    if start >= mode.target:
        click.echo(f"{mode.name}: already at step {start}; nothing to train.")
        if not os.path.exists(model_file):
            model.save(model_file)
        return None
    # Each fit() gets a pipeline of its own: a shuffle's order depends on how many
    # times its dataset was iterated (exact resume).
    recipe.warm_up(model, pipeline(x, y, mode.batch_size, seed, start), calls)
    clock = recipe.TrainingClock.resume(mode.folder, start)
    every = Every(mode.period, last=True)
    sinks = [
        StepTensorBoard(mode.folder, every=every),
        JSONLinesLogger(os.path.join(mode.folder, "log.jsonl"), every=every),
        *recipe.option_callbacks(mode.folder, every),
    ]
    for sink in sinks:  # the initial network's point, if the run begins at 0
        sink.log_point(0, {"full_data_mse": initial_mse, "train_seconds": 0.0})

    def point(model):  # one point of the mode's curve
        mse = full_data_mse(model, x, y)
        return {"full_data_mse": mse, "train_seconds": clock.seconds}

    checkpoint = StepCheckpoint(checkpoints, Every(mode.per_epoch, last=True), keep=2)
    callbacks = [
        clock,  # first: a call's end is timed before the others act
        recipe.ProvideEvery(every, point),
        *sinks,
        checkpoint,
        StopAtStep(mode.target),
    ]
    if sys.stdout.isatty():  # one bar below the lines, on a terminal
        callbacks.append(StepProgressBar(mode.target, keys=["loss", "full_data_mse"]))
    model.fit(
        pipeline(x, y, mode.batch_size, seed, start),
        epochs=math.ceil((mode.target - start) / mode.per_epoch),
        steps_per_epoch=mode.per_epoch,
        verbose=0,
        shuffle=False,  # the pipeline is shuffled (with the seed) already
        callbacks=callbacks,
    )
    model.save(model_file)  # the network at the mode's latest step
    return checkpoint


# -- The results ----------------------------------------------------------------------
#
# The table and the plot are read back from the event files, so they cover the whole
# run, also when it was resumed: per mode the updates (its global step), the epochs,
# the final MSE on all examples, the training time and the examples per second. The
# plot draws the MSE against epochs, updates and training time, every curve from the
# initial network's point at step 0 (dotted up to its first logged point).


def print_table(rows, examples):
    """Prints one line per mode, and how many more updates per-example SGD makes."""
    header = ("mode", "batch", "updates/epoch", "epochs", "updates", "final MSE")
    lines = [header + ("train s", "examples/s")]
    for mode, steps, epochs, mse, seconds in rows:
        speed = epochs[-1] * examples / seconds[-1] if seconds[-1] > 0 else math.inf
        lines.append(
            (mode.name, mode.batch_size, mode.per_epoch, f"{epochs[-1]:.4g}", steps[-1])
            + (mse[-1], format_value(seconds[-1], precision=3))
            + (format_value(speed, name="examples_per_second"),)  # a throughput
        )
    click.echo("\n" + format_table(lines))
    # Batch 1 makes one update per example, all examples at once a single one.
    if {"sgd", "full_batch"} <= {mode.name for mode, *_ in rows}:
        click.echo(
            f"\nPer-example SGD makes {examples}x the updates per epoch of full-batch "
            f"gradient descent (one per example, {examples} examples)."
        )
    click.echo(
        "train s: time inside the compiled training calls (no compilation, "
        "evaluation or logging).\n"
    )


def plot_curves(rows, path, title):
    """Writes the full-data MSE against epochs, updates and training time.

    The update and time axes are logarithmic above a small threshold and linear
    below it, so that 0 shows.
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 4), dpi=80, layout="constrained")
    panels = by_epoch, by_update, by_time = figure.subplots(1, 3, sharey=True)
    for color, (mode, steps, epochs, mse, seconds) in enumerate(rows):
        for axes, xs in zip(panels, (epochs, steps, seconds), strict=True):
            draw_curve(axes, xs, mse, f"C{color}")
        by_update.lines[-1].set_label(f"{mode.name} (batch {mode.batch_size})")
    by_update.plot([], [], ":", color="grey", label="step 0 to the first logged step")
    # Linear from 0 to the first update (the power of 10 at or above the first
    # logged time), log above.
    positive = [s for *_, seconds in rows for s in seconds if s > 0]
    threshold = 10 ** math.ceil(math.log10(min(positive))) if positive else 1.0
    by_update.set_xscale("symlog", linthresh=1, linscale=0.5)
    by_time.set_xscale("symlog", linthresh=threshold, linscale=0.5)
    by_epoch.set_xlabel("epochs (passes over the data)")
    by_update.set_xlabel("updates (global step; log scale, linear below 1)")
    by_time.set_xlabel(f"training time in s (log scale, linear below {threshold:g})")
    by_epoch.set_ylabel("MSE on all examples (log scale)")
    for axes in panels:
        axes.set_yscale("log")
        axes.grid(True, which="both", alpha=0.3)
    by_update.legend(fontsize="small")
    figure.suptitle(
        f"Full batch vs per-example SGD vs mini-batches ({title}): "
        "the MSE on all examples"
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path)


def draw_curve(axes, xs, mse, color):
    """One mode's curve; its step-0 point (at x 0) dotted up to the next point."""
    first = 1 if xs[0] == 0 else 0
    if first:
        axes.plot(xs[:2], mse[:2], ":", color=color)
        axes.plot(xs[:1], mse[:1], ".", color=color)
    marker = "." if len(mse) <= 40 else None
    axes.plot(xs[first:], mse[first:], color=color, marker=marker)


def report(folder, examples, png, title):
    """Reads each mode's curve back from its event files, prints the table, writes
    the plot, and says where everything is."""
    from kerasteps import event_files

    scalars = event_files.read_scalars(folder)
    rows = []  # (mode, steps, epochs, mse, seconds) of each mode that has a curve
    for name in MODES:
        mode = plan_mode(name, folder, examples, epochs=1, log_every=1)
        train = scalars.get(f"{name}/train", {})
        mse = dict(train.get("full_data_mse", []))
        seconds = dict(train.get("train_seconds", []))
        steps = sorted(set(mse) & set(seconds))
        if steps:
            epochs = [step / mode.per_epoch for step in steps]
            mse, seconds = [mse[s] for s in steps], [seconds[s] for s in steps]
            rows.append((mode, steps, epochs, mse, seconds))
    print_table(rows, examples)
    if rows:
        plot_curves(rows, png, title)
        click.echo(f"Plot written to {png}")
    click.echo(f"Models: {os.path.join(folder, '<mode>', 'model.keras')}")
    recipe.print_log_hint(folder)


# -- The command ----------------------------------------------------------------------
#
# The common options, for this epoch-based recipe, are --log-every, --log-dir, --seed
# and --resume (there is no --steps: each mode trains for --epochs epochs). A run
# writes to its own folder, `LOG_DIR/run-N`; --resume continues every mode of the
# latest run from its newest checkpoint, so a run with more --epochs extends each
# curve. The data and the rate must stay the same (--examples, --n-fft, --data, --lr
# and --seed are saved in the run's `run.json`; a --resume with others is refused
# before training).


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@recipe.common_options(steps=None, log_every=100, log_dir="logs/batch_vs_sgd")
@click.option(
    "--epochs",
    type=click.IntRange(min=1),
    default=20,
    help="Passes over the data, the same for every mode.",
)
@click.option(
    "--examples",
    type=click.IntRange(min=2),
    default=3000,
    help="Number of generated spectrum pairs (the seed's 3000).",
)
@click.option(
    "--n-fft",
    type=click.IntRange(min=16),
    default=64,
    help="Points per spectrum: the input, hidden and output width.",
)
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False),
    help="An .npz file of your own pairs: arrays `x` and `y` of shape (examples, "
    "n_fft), `y` in [0, 1]; --examples and --n-fft then come from it.  [default: "
    "generated spectra]",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0.0, min_open=True),
    default=0.3,
    help="SGD learning rate of every mode (the seed's 0.3).",
)
@click.option(
    "--steps-per-execution",
    type=click.IntRange(min=0),
    default=0,
    help="At most this many updates per compiled call (0: no limit; 1: one Python "
    "call per update).",
)
@click.option(
    "--png",
    type=click.Path(dir_okay=False),
    help="Where to write the plot.  [default: LOG_DIR/run-N/batch_vs_sgd.png]",
)
def main(
    log_every, log_dir, seed, resume, epochs, data, lr, steps_per_execution, png, **size
):
    """Full-batch gradient descent vs per-example SGD vs mini-batches, measured.

    Trains the seed's sigmoid MLP (n_fft -> n_fft -> n_fft -> n_fft) on generated
    spectrum pairs (or the pairs of --data) with SGD at --lr for --epochs epochs in
    four modes: full_batch (all examples per update), minibatch_128, minibatch_32
    and sgd (one example per update). Prints updates, final MSE, training time and
    examples/s per mode, and plots the MSE against epochs, updates and training
    time (--png), every curve from the initial network's MSE at step 0. Each run
    writes to its own LOG_DIR/run-N, with a model.keras per mode.

    --log-every is the period of the logged points (at least one per epoch);
    --resume continues every mode of the latest run from its latest checkpoint,
    with the same --examples, --n-fft, --data, --lr and --seed, so that a run with
    more --epochs extends the curves.
    """
    recipe.log_to_console(logging.WARNING)
    if data is None:  # size: --examples and --n-fft, of the generated spectra
        x, y = make_spectra(seed=seed, **size)
    else:
        x, y = load_pairs(data)
        data = os.path.abspath(data)
    examples, n_fft = x.shape
    # The run's folder, LOG_DIR/run-N; a --resume with other settings stops here.
    settings = dict(examples=examples, n_fft=n_fft, lr=lr, seed=seed, data=data)
    run = recipe.start_run(log_dir, resume, settings=settings)
    initial_mse = full_data_mse(build_model(n_fft, lr, seed), x, y)
    kind = "spectrum" if data is None else "data"
    click.echo(
        f"{examples} {kind} pairs of {n_fft} points; MSE of the initial network "
        f"(the same in every mode): {format_value(initial_mse)}"
    )
    for name in MODES:
        mode = plan_mode(name, run.folder, examples, epochs, log_every)
        checkpoint = train_mode(
            mode, run.resumed, x, y, lr, seed, steps_per_execution, initial_mse
        )
        if checkpoint is not None and checkpoint.interrupted:
            break  # stopped by a signal: report what was trained, then exit
    png = png or os.path.join(run.folder, "batch_vs_sgd.png")
    report(run.folder, examples, png, f"{examples} examples, SGD lr {lr}")
    recipe.exit_if_interrupted(checkpoint, f"in mode {name}")


if __name__ == "__main__":
    main()
