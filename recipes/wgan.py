"""Train a WGAN on points: n_critic critic steps per generator step, d_step and g_step.

The question
------------

TF1 code trained a Wasserstein GAN with two step variables and RMSprop:

    G_global_step = tf.Variable(0, name='G_global_step', trainable=False)
    D_global_step = tf.Variable(0, name='D_global_step', trainable=False)
    minimizer = tf.train.RMSPropOptimizer(learning_rate=0.00005)
    G_solver = minimizer.minimize(G_loss, var_list=params, global_step=G_global_step)
    D_solver = minimizer.minimize(D_loss, var_list=params, global_step=D_global_step)

because a WGAN updates its critic D `n_critic` times for every update of its
generator G: "the step" is two numbers. How is such a model trained, counted, logged
and resumed in Keras 3?

`kerasteps.models.WGAN` makes both updates in one `train_step` and keeps two counters
saved with the model: `d_step` (critic updates) and `g_step` (generator updates, the
global step), with `d_step == n_critic * g_step`. This recipe trains it on points, where
a generator that drops modes can be caught by counting them, in the two variants of the
papers:

    --variant gp     WGAN-GP: gradient penalty and Adam, `WGAN`'s defaults
    --variant clip   the original WGAN: weights clipped to +-0.01, RMSprop 5e-5

The same on images is the recipe `wgan_images`.

What a run shows
----------------

Every --log-every generator steps: a log line `d_loss=... g_loss=... wasserstein=...
d_step=... at step N` (N = g_step), the same values, both counters and the mode
coverage in TensorBoard (`counters/d_step`, `counters/g_step`) and in
LOG_DIR/run-N/log.jsonl, a scatter plot of samples in TensorBoard's images tab, and a
checkpoint that --resume continues from. At the end the run saves the model and a
picture of its samples, and prints the generator's mode coverage.

The file reads top to bottom: the data, the model and its settings, the mode
coverage, training, and what a run leaves to look at; `main`, at the bottom, puts
them together. Run it with `kerasteps run wgan` (`-h` lists the options).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

import click

import kerasteps
from kerasteps import Every, recipe
from kerasteps.formatting import format_value

if TYPE_CHECKING:  # imported where they are used, so that `-h` stays fast
    import numpy as np
    import tensorflow as tf
    from matplotlib.figure import Figure

    from kerasteps.models import WGAN


# ======================================================================================
# The data
#
# The two mode-collapse benchmarks of PacGAN (Lin et al., 2018), 100,000 points each
# (`kerasteps.mixtures`): `--data ring`, 8 Gaussians on a circle of radius 1 with a
# standard deviation of 0.01, and `--data grid`, 25 Gaussians on a 5x5 grid of spacing
# 2 with a standard deviation of 0.05. `--data FILE.npy`: your own points `(N, d)`,
# d >= 2 (their modes are not known, so no coverage is measured).
#
# Each generator step takes `n_critic` fresh real batches, one per critic update, so
# the data must hold at least `n_critic * batch_size` points.


class Data(NamedTuple):
    """The points, and the mixture's modes where they are known."""

    x: np.ndarray  # points (N, d)
    centres: np.ndarray | None  # the mixture's mode centres (ring and grid only)
    mode_std: float | None  # their standard deviation (ring and grid only)


def bad_data(message: str) -> click.BadParameter:
    """The usage error for a `--data` that cannot be trained on."""
    return click.BadParameter(message, param_hint="'--data'")


def load_points(data: str, seed: int) -> Data:
    """The points of `--data`: a PacGAN mixture, or a `.npy` file of finite numbers."""
    from kerasteps import mixtures

    if data in mixtures.PACGAN_STD:
        return Data(*mixtures.pacgan_mixture(data, 100_000, seed=seed))
    if not data.endswith(".npy"):
        raise bad_data(f"expected ring, grid or a .npy file, received {data!r}.")
    (x,) = recipe.load_arrays(data)
    if x.ndim != 2 or x.shape[1] < 2:
        raise bad_data(f"points must have shape (N, d), d >= 2; received {x.shape}.")
    return Data(x, None, None)


# ======================================================================================
# The model and its settings
#
# A generator maps noise to a point, a critic scores how real one looks, and
# `kerasteps.models.WGAN` trains the pair: every generator step is `n_critic` critic
# updates on fresh real batches, then one generator update. Both networks are ReLU
# MLPs of 3x128 (`build_point_generator`, `build_point_critic`), given the data so
# that they work in its standardized units: the critic's first layer divides by the
# data's standard deviation and the generator's last multiplies by it. The WGAN keeps
# its defaults, which were measured on PacGAN's ring and grid
# (`benchmarks/wgan_quality.py`, docs/benchmarks.md): 2-D noise, `n_critic` 5, batch
# 128, gradient penalty 0.1, and `compile(total_steps=--steps)`, Adam (beta_1 0.5,
# beta_2 0.9) at 2e-3 decaying linearly to 1e-5 at --steps (6000 by default). The
# schedule is part of the run: a --resume keeps the --steps it was planned with.
# Weight clipping uses the original WGAN's clip of 0.01 and RMSprop at 5e-5; --lr
# gives either variant a constant rate instead.


class Settings(NamedTuple):
    """What a WGAN is built and trained with."""

    latent_dim: int  # size of the generator's noise
    batch_size: int  # examples per critic batch and per generator batch
    n_critic: int  # critic updates per generator update
    steps: int  # generator steps of a run
    gradient_penalty: float | None  # penalty weight; None with weight clipping
    clip_value: float | None  # critic weights clipped to +-clip_value; or None
    learning_rate: float | None  # constant, or None: WGAN's default schedule


DEFAULTS = Settings(2, 128, 5, 6000, 0.1, None, None)
#: What weight clipping replaces.
CLIPPING = {"gradient_penalty": None, "clip_value": 0.01, "learning_rate": 5e-5}


def choose_settings(variant: str, **given: Any) -> Settings:
    """The variant's settings, with the options that were given in their place."""
    if variant == "clip" and given.get("gradient_penalty") is not None:
        raise click.BadParameter(
            "is for --variant gp; --variant clip clips weights instead.",
            param_hint="'--gradient-penalty'",
        )
    chosen = DEFAULTS._replace(**CLIPPING) if variant == "clip" else DEFAULTS
    return chosen._replace(**{k: v for k, v in given.items() if v is not None})


def build_wgan(x: np.ndarray, settings: Settings, seed: int) -> WGAN:
    """The compiled WGAN of two 3x128 MLPs, in the data's standardized units."""
    import keras

    from kerasteps.models import WGAN, build_point_critic, build_point_generator

    if len(x) < settings.n_critic * settings.batch_size:
        raise bad_data(
            f"{len(x)} points are fewer than one step's n_critic * batch_size = "
            f"{settings.n_critic * settings.batch_size}."
        )
    model = WGAN(
        build_point_generator(settings.latent_dim, data=x),
        build_point_critic(data=x),
        latent_dim=settings.latent_dim,
        n_critic=settings.n_critic,
        gradient_penalty=settings.gradient_penalty,
        clip_value=settings.clip_value,
        seed=seed,
    )
    rate = settings.learning_rate
    if rate is None:
        model.compile(total_steps=settings.steps)
    elif settings.clip_value is not None:
        model.compile(keras.optimizers.RMSprop(rate), keras.optimizers.RMSprop(rate))
    else:
        adam = functools.partial(keras.optimizers.Adam, rate, beta_1=0.5, beta_2=0.9)
        model.compile(adam(), adam())
    return model


def describe(settings: Settings, data: str, start: int) -> str:
    """The line printed before training: which WGAN, on what, from where to where."""
    kind = (
        f"WGAN with weight clipping ({settings.clip_value:g})"
        if settings.clip_value is not None
        else f"WGAN-GP (gradient penalty {settings.gradient_penalty:g})"
    )
    return (
        f"{kind} on {data}: n_critic {settings.n_critic}, batch "
        f"{settings.batch_size}, g_step {start} -> {settings.steps}."
    )


def run_settings(data: str, variant: str, settings: Settings) -> dict[str, Any]:
    """What a --resume must keep: the data, the model's settings and, where the
    learning rate decays over the run, its length."""
    kept = {"data": data, "variant": variant, **settings._asdict()}
    if settings.learning_rate is not None:
        del kept["steps"]  # a constant rate: a resume may train further
    return kept


# ======================================================================================
# Mode coverage: did the generator find every mode?
#
# A GAN that collapses draws convincing samples of a few modes only, and its losses
# do not tell. On a mixture it can be measured (`kerasteps.mixtures.mode_coverage`):
# each sample goes to its nearest mode and is of high quality within 3 standard
# deviations of it; a mode is captured when it receives at least a fifth of its
# uniform share of the high-quality samples; and the reverse KL divergence compares
# the histogram of high-quality samples over the modes with the uniform one (0 when
# every mode is drawn equally often, inf when no sample is of high quality).
#
# Every --log-every steps a provider measures 2000 samples and hands the three numbers
# to the sinks, which record them beside the losses; at the end 2500 samples (PacGAN's
# count) are measured once more and the result printed. A share within 3 sigma above
# exact samples' 98.9 % means cut tails, not a better generator.


def coverage(model: WGAN, data: Data, samples: int, seed: int) -> Any:
    """The mode coverage of `samples` points of the generator."""
    from kerasteps import mixtures

    return mixtures.mode_coverage(
        model.generate(samples, seed=seed), data.centres, data.mode_std
    )


def coverage_values(model: WGAN, *, data: Data, seed: int) -> dict[str, float]:
    """The mode coverage of 2000 samples, as the values of a logged point."""
    measured = coverage(model, data, 2000, seed)
    return {
        "modes_captured": measured.modes_captured,
        "high_quality": measured.high_quality,
        "reverse_kl": measured.reverse_kl,
    }


# ======================================================================================
# Training, logged every N generator steps
#
# The global step of a WGAN is `g_step`, so --steps and --log-every count generator
# steps. One schedule, `Every(--log-every, last=True)`, drives every kerasteps
# callback: the mode coverage is measured first (on mixtures), then `LogEvery` writes
# the line, `StepTensorBoard` the scalars, both counters and a scatter plot of
# samples, `JSONLinesLogger` the JSON line and `StepCheckpoint` the checkpoint that
# --resume continues from; `run.stop` (`StopAtStep`) ends the run at --steps. On a
# terminal, `StepProgressBar` shows the run's progress below the lines.
#
# The real batches come from `WGAN.make_dataset`: `n_critic` fresh batches per
# generator step, in an order fixed by the seed. A resumed run skips the batches that
# the steps before it consumed (`skip_consumed`), so it sees the batches that an
# uninterrupted run would. With --steps-per-execution K, Keras runs K generator steps
# per compiled call, and the callbacks act at the boundaries of those calls. By
# default K is the most, up to 50, that lands on every log step and on --steps
# (`kerasteps.recipe.steps_per_call`): fewer calls cost less (a point WGAN takes
# 4-8 % less CPU time with 50 than with 10), and no call runs past --steps.


def step_callbacks(run: recipe.Run, data: Data, log_every: int, seed: int) -> list[Any]:
    """The kerasteps callbacks of the run, on one schedule."""
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepProgressBar,
        StepTensorBoard,
    )
    from kerasteps.recipe import ProvideEvery

    every = Every(log_every, last=True)
    pictures = functools.partial(scatter_picture, real=data.x[:1000], seed=seed)
    callbacks = []
    if data.centres is not None:
        measure = functools.partial(coverage_values, data=data, seed=seed)
        callbacks.append(ProvideEvery(every, measure))
    callbacks += [
        LogEvery(every),
        StepTensorBoard(run.folder, every=every, images=pictures),
        JSONLinesLogger(os.path.join(run.folder, "log.jsonl"), every=every),
        *recipe.option_callbacks(run.folder, every),
        StepCheckpoint(os.path.join(run.folder, "checkpoints"), every=every),
        run.stop,
    ]
    if sys.stdout.isatty():  # one bar below the lines, on a terminal
        callbacks.append(StepProgressBar(run.stop.max_steps, keys=["d_loss", "g_loss"]))
    return callbacks


def real_batches(
    x: np.ndarray, settings: Settings, seed: int, start: int
) -> tf.data.Dataset:
    """`n_critic` real batches per generator step, repeated, from g_step `start` on."""
    from kerasteps.data import skip_consumed
    from kerasteps.models import WGAN

    batches = WGAN.make_dataset(
        x, settings.batch_size, n_critic=settings.n_critic, seed=seed, repeat=True
    )
    return skip_consumed(batches, start)  # less those of the steps before `start`


# ======================================================================================
# What a run leaves to look at
#
# The two counters after training: `g_step`, and `d_step = n_critic * g_step`. In the
# run's folder: `model.keras`, the generator and the critic with both counters
# (`kerasteps.load_model(path)` loads it; `model.generate(n)` draws samples), and
# `samples.png`, 2000 generated points over 2000 real ones (500x500 pixels).
# `kerasteps board LOG_DIR` shows the curves and the scatter plots of every run side
# by side. The figures printed are the generator's own: nothing post-processes the
# trained model, so `model.keras`, `samples.png` and the figures are of the same
# generator.


def scatter(samples: np.ndarray, real: np.ndarray, inches: float) -> Figure:
    """A scatter plot of generated (orange) over real (grey) points."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(inches, inches), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.scatter(real[:, 0], real[:, 1], s=3, c="0.6", label="real")
    axes.scatter(samples[:, 0], samples[:, 1], s=3, c="tab:orange", label="generated")
    axes.set_aspect("equal")
    # Above the axes, where it covers no mode (inside, it hid the grid's corner).
    figure.legend(loc="outside upper center", ncols=2, fontsize="small", markerscale=3)
    if real.shape[1] > 2:
        axes.set_title(f"the first 2 of {real.shape[1]} coordinates", fontsize="small")
    return figure


def scatter_picture(
    model: WGAN, step: int, *, real: np.ndarray, seed: int
) -> dict[str, Any]:
    """TensorBoard's picture at a step: 1000 samples over 1000 real points."""
    import numpy as np

    figure = scatter(model.generate(len(real), seed=seed), real, inches=3.2)
    figure.canvas.draw()
    return {"samples": np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()}


def report(model: WGAN, folder: str, data: Data, seed: int) -> None:
    """Prints both counters and the coverage; saves `model.keras` and `samples.png`."""
    counters = kerasteps.step_counters(model)
    click.echo(
        f"Trained to g_step {counters['g_step']} with d_step {counters['d_step']} "
        f"({model.n_critic} critic updates per generator update)."
    )
    if data.centres is not None:
        measured = coverage(model, data, 2500, seed)  # PacGAN's count
        click.echo(
            f"The generator alone, 2500 samples: {measured.modes_captured}/"
            f"{measured.n_modes} modes, {measured.high_quality:.1%} within 3 sigma "
            f"(exact samples: 98.9%), reverse KL {format_value(measured.reverse_kl)}."
        )
    model.save(os.path.join(folder, "model.keras"))  # kerasteps.load_model(path)
    samples = os.path.join(folder, "samples.png")
    scatter(model.generate(2000, seed=seed), data.x[:2000], inches=5).savefig(samples)
    click.echo(f"Model: {folder}/model.keras; samples: {samples}")


# ======================================================================================
# The command: the sections above, in order


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    help="Train until g_step reaches STEPS (a resumed run continues up to it) "
    "[default: 6000].",
)
@click.option(
    "--log-every",
    type=click.IntRange(min=1),
    help="Log every N generator steps [default: a tenth of --steps].",
)
@recipe.common_options(steps=None, log_every=None, log_dir="logs/wgan")
@click.option(
    "--data",
    default="ring",
    help="ring, grid, or the path of a .npy file of points (N, d), d >= 2.",
)
@click.option(
    "--variant",
    type=click.Choice(["gp", "clip"]),
    default="gp",
    help="Gradient penalty (WGAN-GP) or weight clipping (original WGAN).",
)
@click.option(
    "--n-critic",
    type=click.IntRange(min=1),
    help="Critic updates per generator update [default: 5].",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    help="Points per critic batch (and per generator batch) [default: 128].",
)
@click.option(
    "--gradient-penalty",
    type=click.FloatRange(min=0, min_open=True),
    help="Weight of the gradient penalty (gp only) [default: 0.1].",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    help="A constant learning rate [default: gp 2e-3 decaying to 1e-5 at --steps, "
    "clip 5e-5].",
)
@click.option(
    "--steps-per-execution",
    type=click.IntRange(min=1),
    help="Generator steps per compiled call (logging happens at its boundaries) "
    "[default: the most, up to 50, that divides --log-every and the steps left].",
)
def main(
    steps, log_every, log_dir, seed, resume, data, variant, steps_per_execution, **given
):
    """Train a WGAN on points: n_critic critic steps per generator step, counted."""
    import keras

    recipe.log_to_console(logging.INFO)
    settings = choose_settings(
        variant, steps=steps, learning_rate=given.pop("lr"), **given
    )
    keras.utils.set_random_seed(seed)
    points = load_points(data, seed)
    model = build_wgan(points.x, settings, seed)
    # Each run writes to its own folder, LOG_DIR/run-N; --resume continues the latest,
    # with the same settings.
    kept = run_settings(data, variant, settings)
    run = recipe.start_run(
        log_dir, resume, model=model, steps=settings.steps, settings=kept
    )
    if run.stop is None:
        return
    log_every = log_every or max(1, settings.steps // 10)
    model.steps_per_execution = recipe.steps_per_call(
        steps_per_execution, log_every, settings.steps - run.start
    )
    click.echo(describe(settings, data, run.start))
    callbacks = step_callbacks(run, points, log_every, seed)
    model.fit(
        real_batches(points.x, settings, seed, run.start),
        steps_per_epoch=settings.steps - run.start,
        epochs=1,
        verbose=0,
        shuffle=False,  # the batches are shuffled (with the seed) already
        callbacks=callbacks,
    )
    report(model, run.folder, points, seed)
    recipe.print_log_hint(run.folder)
    recipe.exit_if_interrupted(callbacks)  # after a signal: 128 + its number


if __name__ == "__main__":
    main()
