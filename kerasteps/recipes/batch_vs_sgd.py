"""Full-batch gradient descent vs per-example SGD vs mini-batches, measured.

The seed question: a 3-layer sigmoid MLP maps an n_fft-point spectrum to another
n_fft-point spectrum; there are 3000 training pairs, the loss is the mean squared
error and the optimizer `GradientDescentOptimizer(0.3)`. Is one update on all 3000
examples per pass ("training 1") different from 3000 updates on one example each
("training 2")? This recipe answers by measurement. It trains the same network
(`build_mlp(n_fft, widths=(n_fft, n_fft), output_dim=n_fft, activation="sigmoid",
output_activation="sigmoid")`, the same initial weights in every mode) with plain SGD
at the same learning rate (--lr, 0.3 as in the seed) for the same number of passes
over the data (--epochs), in four modes:

    full_batch     batch = all examples: 1 update per epoch (gradient descent)
    minibatch_128  batch 128: ceil(3000/128) = 24 updates per epoch
    minibatch_32   batch 32: ceil(3000/32) = 94 updates per epoch
    sgd            batch 1: 3000 updates per epoch (per-example SGD)

It prints one row per mode (updates, i.e. the mode's global step; the final MSE on
all examples; the training time; examples/s) and plots the MSE on all examples
against epochs, against updates and against training time (--png).

What it shows (defaults, 2 CPU cores, about 20 s; docs/batch_vs_sgd.png): at one
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

The data is generated (no download): each input spectrum is a few Gaussian peaks on a
sloping noise floor, scaled to a peak of 1; its target is the same spectrum shifted up
by n_fft/16 bins, smoothed, and compressed with a square root into [0.05, 0.95].
--data FILE.npz uses your own pairs instead (arrays `x` and `y`, such as the seed's
`spec_train` and `spec_target`, with `y` in [0, 1]).

What is written under --logdir: each run in a folder of its own, `LOGDIR/run-N` (N
one more than the last; --resume continues the latest), so a new run never touches
an earlier one. In it: one TensorBoard run per mode side by side
(`full_batch/train`, `minibatch_128/train`, `minibatch_32/train`, `sgd/train`) with,
against the global step, every --log-every global steps (every step of an epoch
shorter than that) and at the end of the mode: `loss` (Keras's training loss, the
mean over the batches of the epoch so far), `full_data_mse` (the MSE on all examples)
and `train_seconds`; at step 0 `full_data_mse` of the initial network (the same in
every mode, so every curve starts from it) and `train_seconds` 0. Per mode also a
JSON-lines log with the same points (`<mode>/log.jsonl`), checkpoints
(`<mode>/checkpoints`) and the trained model (`<mode>/model.keras`, a plain Keras
model: `keras.saving.load_model`); then `run.json` (the settings a --resume must
keep) and the PNG (`batch_vs_sgd.png`).

Timing: `train_seconds` counts only the time inside the compiled training calls. A
warm-up call traces them first and its updates are undone, so compilation is not
counted; evaluating, logging and checkpointing are not counted either. Keras runs
several updates per call (`steps_per_execution`) so that per-example SGD does not pay
Python overhead on each of its updates: per mode the largest number that divides its
updates per epoch and its logging period, at most --steps-per-execution
(`--steps-per-execution 1`, one Python call per update, makes per-example SGD about
five times slower here).

The common options, for this epoch-based recipe: --steps caps each mode's global step
(each trains for --epochs epochs or until its global step reaches STEPS, whichever is
first; the default never binds); --log-every is the period of the points above;
--resume continues every mode of the latest run from its latest checkpoint (saved at
every epoch end, at the end of each mode, and on SIGTERM, after which the recipe stops
and exits with status 143). The resumed run must use the same data and rate
(--examples, --n-fft, --data, --lr and --seed are checked against its run.json); its
pipeline skips the batches already trained on, so the result is the same as an
uninterrupted run, and a run with more --epochs extends each curve. The table and the
PNG are read back from the event files, so they cover the whole run; `train_seconds`
continues from its value at the checkpoint's step.
"""

import click

from kerasteps.formatting import format_table, format_value
from kerasteps.recipe import common_options, log_to_console, open_run, print_log_hint

# Mode name -> batch size (None: all examples), in the order of the table.
MODES = {"full_batch": None, "minibatch_128": 128, "minibatch_32": 32, "sgd": 1}
# What must not change between a run and its --resume.
RUN_FILE = "run.json"


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


def load_pairs(path):
    """Returns `(x, y)` from an .npz file with arrays `x` and `y`; checks them."""
    import numpy as np

    hint = "'--data'"
    try:
        with np.load(path) as arrays:
            if "x" not in arrays or "y" not in arrays:
                raise click.BadParameter(
                    f"{path!r} must hold arrays named x and y, it holds "
                    f"{sorted(arrays.files)}.",
                    param_hint=hint,
                )
            x = np.asarray(arrays["x"], dtype="float32")
            y = np.asarray(arrays["y"], dtype="float32")
    except (OSError, ValueError) as error:
        raise click.BadParameter(
            f"cannot read {path!r} as .npz: {error}", param_hint=hint
        ) from None
    if x.ndim != 2 or x.shape != y.shape or len(x) < 2:
        raise click.BadParameter(
            f"x and y must have the same shape (examples >= 2, n_fft), received "
            f"{x.shape} and {y.shape}.",
            param_hint=hint,
        )
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise click.BadParameter("x and y must be finite.", param_hint=hint)
    if y.min() < 0.0 or y.max() > 1.0:
        raise click.BadParameter(
            f"y must lie in [0, 1], the range of the sigmoid output, received "
            f"[{y.min():g}, {y.max():g}]; scale it first.",
            param_hint=hint,
        )
    return x, y


def calls_per_execution(steps_per_epoch, period, target, start, limit):
    """Updates per compiled call: divides every step that must be a call boundary.

    The epoch ends, the logging period, the final step and the start step all fall
    on call boundaries; `limit` (0: none) caps the result.
    """
    import math

    common = math.gcd(math.gcd(steps_per_epoch, period), math.gcd(target, start))
    if not limit or common <= limit:
        return common
    return max(d for d in range(1, limit + 1) if common % d == 0)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@common_options(steps=1_000_000, log_every=100, logdir="logs/batch_vs_sgd")
@click.option(
    "--epochs",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Passes over the data, the same for every mode.",
)
@click.option(
    "--examples",
    type=click.IntRange(min=2),
    default=3000,
    show_default=True,
    help="Number of generated spectrum pairs (the seed's 3000).",
)
@click.option(
    "--n-fft",
    type=click.IntRange(min=16),
    default=64,
    show_default=True,
    help="Points per spectrum: the input, hidden and output width.",
)
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="An .npz file of your own pairs: arrays `x` and `y` of shape (examples, "
    "n_fft), `y` in [0, 1]; --examples and --n-fft then come from it.  [default: "
    "generated spectra]",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0.0, min_open=True),
    default=0.3,
    show_default=True,
    help="SGD learning rate of every mode (the seed's 0.3).",
)
@click.option(
    "--steps-per-execution",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="At most this many updates per compiled call (0: no limit; 1: one Python "
    "call per update).",
)
@click.option(
    "--png",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the plot.  [default: LOGDIR/run-N/batch_vs_sgd.png]",
)
def main(
    steps,
    log_every,
    logdir,
    seed,
    resume,
    epochs,
    examples,
    n_fft,
    data,
    lr,
    steps_per_execution,
    png,
):
    """Full-batch gradient descent vs per-example SGD vs mini-batches, measured.

    Trains the seed's sigmoid MLP (n_fft -> n_fft -> n_fft -> n_fft) on generated
    spectrum pairs (or the pairs of --data) with SGD at --lr for --epochs epochs in
    four modes: full_batch (all examples per update), minibatch_128, minibatch_32
    and sgd (one example per update). Prints updates, final MSE, training time and
    examples/s per mode, and plots the MSE against epochs, updates and training
    time (--png), every curve from the initial network's MSE at step 0. Each run
    writes to its own LOGDIR/run-N, with a model.keras per mode.

    The recipe is epoch-based: --steps only caps each mode's global step (the
    default never binds); --log-every is the period of the logged points (at least
    one per epoch); --resume continues every mode of the latest run from its latest
    checkpoint, with the same --examples, --n-fft, --data, --lr and --seed, so that
    a run with more --epochs extends the curves.
    """
    import json
    import logging
    import math
    import os
    import sys
    import time

    import keras
    import numpy as np
    import tensorflow as tf

    import kerasteps
    from kerasteps import Every, events
    from kerasteps.callbacks import (
        JSONLinesLogger,
        StepCallback,
        StepCheckpoint,
        StepProgressBar,
        StepTensorBoard,
        StopAtStep,
    )
    from kerasteps.data import skip_consumed
    from kerasteps.models import build_mlp

    log_to_console(logging.WARNING)

    if data is None:
        x, y = make_spectra(examples, n_fft, seed)
    else:
        x, y = load_pairs(data)
        examples, n_fft = x.shape
        data = os.path.abspath(data)
    config = {"examples": examples, "n_fft": n_fft, "lr": lr, "seed": seed}
    config["data"] = data
    # Each run writes to its own folder, LOGDIR/run-N; --resume continues the latest
    # (it creates nothing then, so a refused --resume below leaves no trace).
    run = open_run(logdir, resume)
    resume = run.resumed
    run_file = os.path.join(run.path, RUN_FILE)
    if resume and os.path.exists(run_file):
        with open(run_file) as handle:
            saved = json.load(handle)
        changed = {k: (saved.get(k), v) for k, v in config.items() if saved.get(k) != v}
        if changed:
            details = ", ".join(
                f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items()
            )
            raise click.UsageError(
                f"--resume needs the settings of the run in {run.path}, but {details}."
            )
    if not resume:
        click.echo(f"New run: {run.path}")
    png = png or os.path.join(run.path, "batch_vs_sgd.png")
    with open(run_file, "w") as handle:
        json.dump(config, handle)

    def build_model(calls):
        keras.utils.set_random_seed(seed)  # the same initial weights for every mode
        model = build_mlp(
            n_fft,
            widths=(n_fft, n_fft),
            output_dim=n_fft,
            activation="sigmoid",
            output_activation="sigmoid",
        )
        model.compile(keras.optimizers.SGD(lr), "mse", steps_per_execution=calls)
        return model

    def full_data_mse(model):
        error = keras.ops.stop_gradient(model(x, training=False)) - y
        return float(keras.ops.mean(keras.ops.square(error)))

    class TrainingClock(keras.callbacks.Callback):
        """Sums the time spent inside the compiled training calls."""

        def __init__(self, seconds):
            super().__init__()
            self.seconds = seconds
            self._began = None

        def on_train_batch_begin(self, batch, logs=None):
            self._began = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if self._began is not None:
                self.seconds += time.perf_counter() - self._began
                self._began = None

    class FullDataCurve(StepCallback):
        """Provides `full_data_mse` and `train_seconds` to the sinks."""

        role = "provider"  # adds values: acts before the sinks

        def __init__(self, every, clock):
            super().__init__(every)
            self.clock = clock

        def on_step(self, event):
            return {
                "full_data_mse": full_data_mse(self.model),
                "train_seconds": self.clock.seconds,
            }

    def warm_up(model, data, calls):
        """Traces the training call, then puts every variable back."""
        variables = {id(v): v for v in model.weights}
        variables.update({id(v): v for v in model.optimizer.variables})
        saved = [(v, np.array(v.numpy(), copy=True)) for v in variables.values()]
        model.fit(data, steps_per_epoch=calls, epochs=1, verbose=0, shuffle=False)
        for variable, value in saved:
            variable.assign(value)

    initial_mse = full_data_mse(build_model(1))
    click.echo(
        f"{examples} {'spectrum' if data is None else 'data'} pairs of {n_fft} "
        f"points; MSE of the initial network (the same in every mode): "
        f"{format_value(initial_mse)}"
    )
    interrupted = None
    for mode, batch_size in MODES.items():
        batch_size = min(batch_size or examples, examples)
        mode_dir = os.path.join(run.path, mode)
        checkpoints = os.path.join(mode_dir, "checkpoints")
        steps_per_epoch = math.ceil(examples / batch_size)
        target = min(steps, epochs * steps_per_epoch)
        period = min(log_every, steps_per_epoch)
        latest = StepCheckpoint.latest(checkpoints) if resume else None
        start = latest.step if latest else 0
        calls = calls_per_execution(
            steps_per_epoch, period, target, start, steps_per_execution
        )
        if keras.backend.backend() == "torch":
            calls = 1  # Keras's PyTorch trainer runs one update per call
        model = build_model(calls)
        seconds = 0.0
        model_file = os.path.join(mode_dir, "model.keras")
        if resume:
            restored = StepCheckpoint.restore_latest(model, checkpoints)
            if restored is None:
                click.echo(
                    f"{mode}: no checkpoint in {checkpoints} yet: starting at step 0."
                )
            else:
                checkpoint_path = os.path.join(checkpoints, f"ckpt-{restored}")
                click.echo(
                    f"{mode}: resumed from step {restored} (checkpoint "
                    f"{checkpoint_path})"
                )
            start = restored or 0
            train = events.read_scalars(mode_dir).get("train", {}) if start else {}
            before = [v for s, v in train.get("train_seconds", []) if s <= start]
            seconds = before[-1] if before else 0.0
        stop = StopAtStep(target)
        click.echo(
            f"{mode}: batch {batch_size}, {steps_per_epoch} update(s) per epoch, "
            f"{calls} per call; global step {start} -> {target}"
        )
        if stop.remaining(model) == 0:
            click.echo(f"{mode}: already at step {start}; nothing to train.")
            if not os.path.exists(model_file):
                model.save(model_file)
            continue
        if start == 0:
            # Step 0, the initial network: every mode's curve starts from it.
            write_initial_point(
                mode_dir, {"full_data_mse": initial_mse, "train_seconds": 0.0}
            )

        def pipeline(batch_size=batch_size, start=start):
            data = tf.data.Dataset.from_tensor_slices((x, y))
            if batch_size < examples:
                data = data.shuffle(examples, seed=seed)
            return skip_consumed(data.batch(batch_size).repeat(), start)

        # A pipeline of its own: a shuffle's order depends on how many times its
        # dataset object was iterated, so fit() gets a fresh one (exact resume).
        warm_up(model, pipeline(), calls)
        clock = TrainingClock(seconds)
        every = Every(period, last=True)
        checkpoint = StepCheckpoint(
            checkpoints, every=Every(steps_per_epoch, last=True), keep=2
        )
        callbacks = [
            clock,  # first: its batch-end time is taken before the others run
            FullDataCurve(every, clock),
            StepTensorBoard(mode_dir, every=every),
            JSONLinesLogger(os.path.join(mode_dir, "log.jsonl"), every=every),
            checkpoint,
            stop,
        ]
        if sys.stdout.isatty():
            callbacks.append(StepProgressBar(target, keys=["loss", "full_data_mse"]))
        model.fit(
            pipeline(),
            epochs=math.ceil((target - start) / steps_per_epoch),
            steps_per_epoch=steps_per_epoch,
            verbose=0,
            shuffle=False,  # the dataset is shuffled (with a seed) already
            callbacks=callbacks,
        )
        model.save(model_file)  # the model at the mode's latest step
        if checkpoint.interrupted:
            interrupted = (mode, kerasteps.global_step(model))
            break

    rows = read_rows(run.path, examples)
    print_table(rows, examples)
    if rows:
        plot_curves(rows, png, f"{examples} examples, SGD lr {lr}")
        click.echo(f"Plot written to {png}")
    click.echo(f"Models: {os.path.join(run.path, '<mode>', 'model.keras')}")
    print_log_hint(run.path)
    if interrupted:
        mode, step = interrupted
        click.echo(
            f"Interrupted in mode {mode} at step {step}; run again with --resume "
            "to continue.",
            err=True,
        )
        raise SystemExit(143)


def write_initial_point(mode_dir, values):
    """Writes `values` at step 0 to a mode's TensorBoard run and JSON lines.

    The sinks write at the steps after an update; the initial network's point is
    written here, before `fit()`, where it is not there yet (a `--resume` with no
    checkpoint finds it: the sinks drop only the points after the start step).
    """
    import json
    import os
    import time

    import tensorflow as tf

    from kerasteps import events

    train = os.path.join(mode_dir, "train")
    written = events.read_scalars(train) if os.path.isdir(train) else {}
    if not any(step == 0 for step, _ in written.get(".", {}).get("full_data_mse", [])):
        # Plain `simple_value` scalars, as StepTensorBoard writes them.
        summary = tf.compat.v1.Summary(
            value=[
                tf.compat.v1.Summary.Value(tag=name, simple_value=value)
                for name, value in values.items()
            ]
        )
        writer = tf.summary.create_file_writer(train)
        with writer.as_default():
            tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=0)
        writer.close()

    def at_step_zero(line):
        try:
            return json.loads(line)["step"] == 0
        except (ValueError, KeyError, TypeError):
            return False  # a torn last line of a killed run: the logger drops it

    lines = os.path.join(mode_dir, "log.jsonl")
    text = ""
    if os.path.exists(lines):
        with open(lines) as handle:
            text = handle.read()
    if any(at_step_zero(line) for line in text.splitlines()):
        return
    line = json.dumps({"step": 0, "time": round(time.time(), 6), **values})
    with open(lines, "a") as handle:
        handle.write(("\n" if text and not text.endswith("\n") else "") + line + "\n")


def read_rows(logdir, examples):
    """Reads each mode's curve back from its event files."""
    import math
    import os

    from kerasteps import events

    rows = []
    for mode, batch_size in MODES.items():
        mode_dir = os.path.join(logdir, mode)
        if not os.path.isdir(mode_dir):
            continue
        train = events.read_scalars(mode_dir).get("train", {})
        mse = dict(train.get("full_data_mse", []))
        seconds = dict(train.get("train_seconds", []))
        steps = sorted(set(mse) & set(seconds))
        if not steps:
            continue
        batch_size = min(batch_size or examples, examples)
        per_epoch = math.ceil(examples / batch_size)
        rows.append(
            {
                "mode": mode,
                "batch": batch_size,
                "updates_per_epoch": per_epoch,
                "updates": steps[-1],
                "epochs": [step / per_epoch for step in steps],
                "mse": [mse[step] for step in steps],
                "seconds": [seconds[step] for step in steps],
            }
        )
    return rows


def print_table(rows, examples):
    """Prints one line per mode."""
    header = (
        "mode",
        "batch",
        "updates/epoch",
        "epochs",
        "updates",
        "final MSE",
        "train s",
        "examples/s",
    )
    table = [header]
    for row in rows:
        epochs = row["epochs"][-1]
        seconds = row["seconds"][-1]
        speed = epochs * examples / seconds if seconds > 0 else float("inf")
        table.append(
            (
                row["mode"],
                str(row["batch"]),
                str(row["updates_per_epoch"]),
                f"{epochs:.4g}",
                str(row["updates"]),
                format_value(row["mse"][-1]),
                format_value(seconds, precision=3),
                format_value(speed, name="examples_per_second"),
            )
        )
    click.echo("")
    click.echo(format_table(table))
    by_mode = {row["mode"]: row for row in rows}
    if "sgd" in by_mode and "full_batch" in by_mode:
        ratio = by_mode["sgd"]["updates_per_epoch"] // max(
            1, by_mode["full_batch"]["updates_per_epoch"]
        )
        click.echo(
            f"\nPer-example SGD makes {ratio}x the updates per epoch of full-batch "
            f"gradient descent (one per example, {examples} examples)."
        )
    click.echo(
        "train s: time inside the compiled training calls (no compilation, "
        "evaluation or logging).\n"
    )


def plot_curves(rows, path, title):
    """Writes the full-data MSE against epochs, updates and training time.

    Every curve starts at step 0 (the initial network, at 0 s), dotted up to its
    first logged point (nothing is measured in between); the update and time axes
    are logarithmic above a small threshold and linear below it, so that 0 shows.
    """
    import math
    import os

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 4), dpi=80, layout="constrained")
    FigureCanvasAgg(figure)
    by_epoch, by_update, by_time = figure.subplots(1, 3, sharey=True)
    for color, row in enumerate(rows):
        style = {"color": f"C{color}", "marker": "." if len(row["mse"]) <= 40 else None}
        label = f"{row['mode']} (batch {row['batch']})"
        updates = [epochs * row["updates_per_epoch"] for epochs in row["epochs"]]
        for axes, xs in (
            (by_epoch, row["epochs"]),
            (by_update, updates),
            (by_time, row["seconds"]),
        ):
            first = 1 if xs[0] == 0 else 0  # the step-0 point, drawn dotted to next
            if first:
                axes.plot(xs[:2], row["mse"][:2], ":", color=style["color"])
                axes.plot(xs[:1], row["mse"][:1], ".", color=style["color"])
            axes.plot(xs[first:], row["mse"][first:], **style)
        by_update.lines[-1].set_label(label)
    by_update.plot([], [], ":", color="grey", label="step 0 to the first logged step")
    # Linear from 0 to the first update (the power of 10 at or above the first
    # logged time), log above.
    positive = [s for row in rows for s in row["seconds"] if s > 0]
    threshold = 10 ** math.ceil(math.log10(min(positive))) if positive else 1.0
    by_update.set_xscale("symlog", linthresh=1, linscale=0.5)
    by_time.set_xscale("symlog", linthresh=threshold, linscale=0.5)
    by_epoch.set_xlabel("epochs (passes over the data)")
    by_update.set_xlabel("updates (global step; log scale, linear below 1)")
    by_time.set_xlabel(f"training time in s (log scale, linear below {threshold:g})")
    by_epoch.set_ylabel("MSE on all examples (log scale)")
    for axes in (by_epoch, by_update, by_time):
        axes.set_yscale("log")
        axes.grid(True, which="both", alpha=0.3)
    by_update.legend(fontsize="small")
    figure.suptitle(
        f"Full batch vs per-example SGD vs mini-batches ({title}): "
        "the MSE on all examples"
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path)


if __name__ == "__main__":
    main()
