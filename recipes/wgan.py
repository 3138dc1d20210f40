"""Train a WGAN with n_critic critic steps per generator step, d_step and g_step logged.

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
global step), with `d_step == n_critic * g_step`. This recipe trains it in the two
variants of the papers:

    --variant gp     WGAN-GP: gradient penalty and Adam (default); on points
                     `WGAN`'s defaults, on images the paper's
    --variant clip   the original WGAN: weights clipped to +-0.01, RMSprop 5e-5

What a run shows
----------------

Every --log-every generator steps: a log line `d_loss=... g_loss=... wasserstein=...
d_step=... at step N` (N = g_step), the same values and both counters in TensorBoard
(`counters/d_step`, `counters/g_step`) and in LOG_DIR/run-N/log.jsonl, a picture of
samples in TensorBoard's images tab, and a checkpoint that --resume continues from.
On PacGAN's mixtures the mode coverage is measured and logged as well. At the end the
run saves the model and a picture of its samples.

The file reads top to bottom: the data, the model and its settings, the mode
coverage, training, and what a run leaves to look at; `main`, at the bottom, puts
them together. Run it with `kerasteps run wgan` (`-h` lists the options).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING, Any, NamedTuple

import click

import kerasteps
from kerasteps import Every
from kerasteps.formatting import format_value
from kerasteps.recipe import (
    Run,
    common_options,
    log_to_console,
    print_log_hint,
    start_run,
    tracking_callbacks,
)

if TYPE_CHECKING:  # imported where they are used, so that `-h` stays fast
    import numpy as np
    import tensorflow as tf

    from kerasteps.models import WGAN


# ======================================================================================
# The data
#
# The two mode-collapse benchmarks of PacGAN (Lin et al., 2018), 100,000 points each
# (`kerasteps.mixtures`): `--data ring`, 8 Gaussians on a circle of radius 1 with a
# standard deviation of 0.01, and `--data grid`, 25 Gaussians on a 5x5 grid of spacing
# 2 with a standard deviation of 0.05. A generator that collapses onto a few modes can
# be caught there by counting them (see "Mode coverage" below). `--data images`:
# 20,000 generated 28x28 grey images of one bright disc, nothing to download.
# `--data FILE.npy`: your own points `(N, d)` with d >= 2, or images
# `(N, 28|32, 28|32[, C])` in [0, 255] or [0, 1], scaled to [-1, 1], the range of the
# generator's tanh.
#
# Each generator step takes `n_critic` fresh real batches, one per critic update, so
# the data must hold at least `n_critic * batch_size` examples.


class Data(NamedTuple):
    """What the recipe trains on, and what it knows of it."""

    x: np.ndarray  # points (N, d), or images (N, H, W, C) in [-1, 1]
    centres: np.ndarray | None  # the mixture's mode centres (ring and grid only)
    mode_std: float | None  # their standard deviation (ring and grid only)


def load_data(data: str, seed: int) -> Data:
    """The points or images of `--data`, with their modes where they are known."""
    from kerasteps import mixtures

    if data in mixtures.PACGAN_STD:
        return Data(*mixtures.pacgan_mixture(data, 100_000, seed=seed))
    if data == "images":
        return Data(disc_images(20_000, size=28, seed=seed), None, None)
    return Data(as_points_or_images(read_npy(data), data), None, None)


def disc_images(n: int, size: int, seed: int) -> np.ndarray:
    """`n` grey images in [-1, 1]: one bright disc of random centre and radius."""
    import numpy as np

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype("float32")
    cy, cx = rng.uniform(8, size - 8, (2, n, 1, 1)).astype("float32")
    radius = rng.uniform(3, 7, (n, 1, 1)).astype("float32")
    inside = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2) <= radius
    return (inside.astype("float32") * 2.0 - 1.0)[..., None]


def bad_data(message: str) -> click.BadParameter:
    """The usage error for a `--data` that cannot be trained on."""
    return click.BadParameter(message, param_hint="'--data'")


def read_npy(path: str) -> np.ndarray:
    """The float32 array of a `.npy` file of finite numbers, 2 to 4 axes."""
    import numpy as np

    if not os.path.isfile(path) or not path.endswith(".npy"):
        raise bad_data(
            f"expected ring, grid, images or a .npy file, received {path!r}."
        )
    try:
        x = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:  # pickled objects, not an array
        raise bad_data(f"{path!r} is not a numeric .npy array ({error}).") from None
    if x.dtype.kind not in "biuf" or x.ndim not in (2, 3, 4) or not x.size:
        raise bad_data(
            f"{path!r} must hold numbers, points (N, d) or images (N, H, W[, C]); "
            f"it holds {x.dtype} with shape {x.shape}."
        )
    x = x.astype("float32")
    if not np.isfinite(x).all():
        raise bad_data(f"{path!r} holds NaN or infinite values.")
    return x


def as_points_or_images(x: np.ndarray, path: str) -> np.ndarray:
    """Points `(N, d)` as they are; images scaled to [-1, 1], with a channel axis."""
    if x.ndim == 2 and x.shape[1] < 2:
        raise bad_data(f"points must have shape (N, d), d >= 2; received {x.shape}.")
    if x.ndim == 2:
        return x
    if x.max() > 1.0:
        x = x / 255.0
    x = x * 2.0 - 1.0  # the generator's tanh range
    return x[..., None] if x.ndim == 3 else x


def check_one_step(x: np.ndarray, n_critic: int, batch_size: int) -> None:
    """Refuses data smaller than the `n_critic` real batches of one generator step."""
    if len(x) < n_critic * batch_size:
        raise bad_data(
            f"{len(x)} examples are fewer than one step's n_critic * batch_size = "
            f"{n_critic * batch_size}."
        )


# ======================================================================================
# The model and its settings
#
# A generator maps noise to a point or an image, a critic scores how real one looks,
# and `kerasteps.models.WGAN` trains the pair: every generator step is `n_critic`
# critic updates on fresh real batches, then one generator update.
#
# On points, both networks are ReLU MLPs of 3x128 (`build_point_generator`,
# `build_point_critic`), given the data so that they work in its standardized units:
# the critic's first layer divides by the data's standard deviation and the
# generator's last multiplies by it, so the networks see numbers of order 1 at any
# scale (the penalty's weight is still in the data's units). The
# WGAN keeps its defaults, which were measured on PacGAN's ring and grid
# (`benchmarks/wgan_quality.py`, docs/benchmarks.md): 2-D noise, `n_critic` 5, batch
# 128, gradient penalty 0.1, and `compile(total_steps=--steps)`, Adam (beta_1 0.5,
# beta_2 0.9) at 2e-3 decaying linearly to 1e-5 at --steps (6000 by default). The
# schedule is part of the run: a --resume keeps the --steps it was planned with.
#
# On images both networks are DCGAN-shaped convolutions with --base-filters filters
# (`build_image_generator`, `build_image_critic`), trained with the WGAN-GP paper's
# settings, passed explicitly: penalty 10 and Adam(1e-4, beta_1 0.5, beta_2 0.9) for
# both networks, `n_critic` 5, batch 64. Weight clipping uses the original WGAN's
# clip of 0.01 and RMSprop at 5e-5, on images and on points. --lr gives any variant a
# constant rate instead. Nothing here depends on time, so --steps and --resume stay
# exact.


class Settings(NamedTuple):
    """What a WGAN is built and trained with."""

    latent_dim: int  # size of the generator's noise
    batch_size: int  # examples per critic batch and per generator batch
    n_critic: int  # critic updates per generator update
    steps: int  # generator steps of a run
    gradient_penalty: float | None  # penalty weight; None with weight clipping
    clip_value: float | None  # critic weights clipped to +-clip_value; or None
    learning_rate: float | None  # constant, or None: WGAN's default schedule


POINTS = Settings(2, 128, 5, 6000, 0.1, None, None)
IMAGES = Settings(64, 64, 5, 2000, 10.0, None, 1e-4)
#: What weight clipping replaces, on points and on images.
CLIPPING = {"gradient_penalty": None, "clip_value": 0.01, "learning_rate": 5e-5}


class Options(NamedTuple):
    """The options that replace a default when given (None: not given)."""

    steps: int | None
    n_critic: int | None
    batch_size: int | None
    gradient_penalty: float | None
    lr: float | None


class Training(NamedTuple):
    """The compiled model, the settings it is trained with, and its name for people."""

    model: WGAN
    settings: Settings
    kind: str  # e.g. "WGAN-GP (gradient penalty 10)"


def choose_settings(x: np.ndarray, variant: str, options: Options) -> Settings:
    """The settings of points or images, with the options in their place."""
    chosen = POINTS if x.ndim == 2 else IMAGES
    if variant == "clip":
        chosen = chosen._replace(**CLIPPING)
    given = {
        "steps": options.steps,
        "n_critic": options.n_critic,
        "batch_size": options.batch_size,
        "gradient_penalty": options.gradient_penalty,
        "learning_rate": options.lr,
    }
    return chosen._replace(**{k: v for k, v in given.items() if v is not None})


def check_variant(variant: str, gradient_penalty: float | None) -> None:
    """Refuses a penalty weight for the clipping variant, which has no penalty."""
    if variant == "clip" and gradient_penalty is not None:
        raise click.BadParameter(
            "is for --variant gp; --variant clip clips weights instead.",
            param_hint="'--gradient-penalty'",
        )


def make_training(
    x: np.ndarray, variant: str, options: Options, base_filters: int, seed: int
) -> Training:
    """The compiled WGAN for `x` and its settings (`main` sets its steps per call,
    `steps_per_call`, once the run's start is known)."""
    settings = choose_settings(x, variant, options)
    check_one_step(x, settings.n_critic, settings.batch_size)
    model = build_wgan(x, settings, base_filters, seed)
    if settings.learning_rate is None:
        model.compile(total_steps=settings.steps)
    else:
        model.compile(optimizer(settings), optimizer(settings))
    kind = (
        f"WGAN with weight clipping ({settings.clip_value:g})"
        if settings.clip_value is not None
        else f"WGAN-GP (gradient penalty {settings.gradient_penalty:g})"
    )
    return Training(model, settings, kind)


def build_wgan(x: np.ndarray, settings: Settings, base_filters: int, seed: int) -> WGAN:
    """A generator and a critic for points or images, in a `WGAN`."""
    from kerasteps.models import (
        WGAN,
        build_image_critic,
        build_image_generator,
        build_point_critic,
        build_point_generator,
    )

    if x.ndim == 2:
        generator = build_point_generator(settings.latent_dim, data=x)
        critic = build_point_critic(data=x)
    else:
        try:
            generator = build_image_generator(
                settings.latent_dim, x.shape[1:], base_filters=base_filters
            )
            critic = build_image_critic(x.shape[1:], base_filters=base_filters)
        except ValueError as error:  # an image size the networks do not take
            raise bad_data(str(error)) from None
    return WGAN(
        generator,
        critic,
        latent_dim=settings.latent_dim,
        n_critic=settings.n_critic,
        gradient_penalty=settings.gradient_penalty,
        clip_value=settings.clip_value,
        seed=seed,
    )


def optimizer(settings: Settings) -> Any:
    """RMSprop for clipping, else Adam (beta_1 0.5, beta_2 0.9), at a constant rate."""
    import keras

    if settings.clip_value is not None:
        return keras.optimizers.RMSprop(settings.learning_rate)
    return keras.optimizers.Adam(settings.learning_rate, beta_1=0.5, beta_2=0.9)


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


def coverage_values(model: WGAN, *, data: Data, seed: int) -> dict[str, float]:
    """The mode coverage of 2000 samples, as the values of a logged point."""
    from kerasteps import mixtures

    coverage = mixtures.mode_coverage(
        model.generate(2000, seed=seed), data.centres, data.mode_std
    )
    return {
        "modes_captured": coverage.modes_captured,
        "high_quality": coverage.high_quality,
        "reverse_kl": coverage.reverse_kl,
    }


#: Samples the final figures are of: PacGAN's count (its `num_log_figure_sample`).
FINAL_SAMPLES = 2500


def print_coverage(model: WGAN, data: Data, seed: int) -> None:
    """Prints the mode coverage of 2500 samples of the generator alone."""
    from kerasteps import mixtures

    samples = model.generate(FINAL_SAMPLES, seed=seed)
    coverage = mixtures.mode_coverage(samples, data.centres, data.mode_std)
    click.echo(
        f"The generator alone, {FINAL_SAMPLES} samples: {coverage.modes_captured}/"
        f"{coverage.n_modes} modes, {coverage.high_quality:.1%} within 3 sigma "
        f"(exact samples: 98.9%), reverse KL {format_value(coverage.reverse_kl)}."
    )


# ======================================================================================
# Training, logged every N generator steps
#
# The global step of a WGAN is `g_step`, so --steps and --log-every count generator
# steps. One schedule, `Every(--log-every, last=True)`, drives every kerasteps
# callback: the mode coverage is measured first (on mixtures), then `LogEvery` writes
# the line, `StepTensorBoard` the scalars, both counters and a picture of samples
# (`pictures`, below), `JSONLinesLogger` the JSON line and `StepCheckpoint` the
# checkpoint that --resume continues from; `run.stop` (`StopAtStep`) ends the run at
# --steps.
#
# The real batches come from `WGAN.make_dataset`: `n_critic` fresh batches per
# generator step, in an order fixed by the seed. A resumed run skips the batches that
# the steps before it consumed (`skip_consumed`), so it sees the batches that an
# uninterrupted run would. With --steps-per-execution K, Keras runs K generator steps
# per compiled call, and the callbacks act at the boundaries of those calls. By
# default K is the most, up to 50, that lands on every log step and on --steps
# (`steps_per_call`): fewer calls cost less (a point WGAN takes 4-8 % less CPU time
# with 50 than with 10), and no call runs past --steps.
#
# The figures printed at the end are the generator's own (`print_coverage`): nothing
# post-processes the trained model, so `model.keras`, `samples.png` and the figures
# are of the same generator.


def step_callbacks(run: Run, data: Data, log_every: int, seed: int) -> list[Any]:
    """The kerasteps callbacks of the run, on one schedule."""
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepTensorBoard,
    )
    from kerasteps.recipe import ProvideEvery

    every = Every(log_every, last=True)
    callbacks = []
    if data.centres is not None:
        coverage = functools.partial(coverage_values, data=data, seed=seed)
        callbacks.append(ProvideEvery(every, coverage))
    images = functools.partial(pictures, real=data.x, seed=seed)
    return callbacks + [
        LogEvery(every),
        StepTensorBoard(run.folder, every=every, images=images),
        JSONLinesLogger(os.path.join(run.folder, "log.jsonl"), every=every),
        *tracking_callbacks(run.folder, every),
        StepCheckpoint(os.path.join(run.folder, "checkpoints"), every=every),
        run.stop,
    ]


#: The most generator steps `steps_per_call` puts in one compiled call.
MAX_STEPS_PER_CALL = 50


def steps_per_call(given: int | None, log_every: int, steps_left: int) -> int:
    """Generator steps per compiled call: 1 on PyTorch (Keras's PyTorch trainer
    runs one step per call), else --steps-per-execution if `given`, else the most,
    up to 50, that divide both --log-every and the steps left to train, so that
    every log step and the last step end a call."""
    import math

    import keras

    if keras.backend.backend() == "torch":
        return 1
    if given is not None:
        return given
    whole = math.gcd(log_every, steps_left)
    return max(n for n in range(1, MAX_STEPS_PER_CALL + 1) if whole % n == 0)


def real_batches(
    x: np.ndarray, batch_size: int, n_critic: int, seed: int, start: int
) -> tf.data.Dataset:
    """The real batches of the steps from `start` on: `n_critic` per step."""
    from kerasteps.data import skip_consumed
    from kerasteps.models import WGAN

    dataset = WGAN.make_dataset(
        x, batch_size, n_critic=n_critic, seed=seed, repeat=True
    )
    return skip_consumed(dataset, start)


def describe(training: Training, data: str, start: int) -> str:
    """The line printed before training: which WGAN, on what, from where to where."""
    return (
        f"{training.kind} on {data}: n_critic {training.model.n_critic}, batch "
        f"{training.settings.batch_size}, g_step {start} -> "
        f"{training.settings.steps}."
    )


def pictures(model: WGAN, step: int, *, real: np.ndarray, seed: int) -> dict[str, Any]:
    """TensorBoard's picture at a step: a scatter plot of points, or an image grid."""
    if real.ndim == 2:
        return {"samples": scatter_image(model.generate(1000, seed=seed), real[:1000])}
    return {"samples": image_grid(model.generate(36, seed=seed))}


def scatter_image(samples: np.ndarray, real: np.ndarray) -> np.ndarray:
    """A scatter plot of generated (orange) over real (grey) points, as an array."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axes = plt.subplots(figsize=(3.2, 3.2), dpi=80)
    axes.scatter(real[:, 0], real[:, 1], s=2, c="0.6", label="real")
    axes.scatter(samples[:, 0], samples[:, 1], s=2, c="tab:orange", label="generated")
    limit = float(np.abs(real).max()) * 1.3
    axes.set_xlim(-limit, limit)
    axes.set_ylim(-limit, limit)
    axes.set_aspect("equal")
    figure.tight_layout()
    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()
    plt.close(figure)
    return image


def image_grid(images: np.ndarray) -> np.ndarray:
    """A square grid of images in [-1, 1] (6x6 for 36), as an array in [0, 1]."""
    import numpy as np

    images = (np.asarray(images) + 1.0) / 2.0
    n, height, width, channels = images.shape
    side = int(np.ceil(np.sqrt(n)))
    grid = np.ones((side * (height + 1) + 1, side * (width + 1) + 1, channels))
    for index, image in enumerate(images):
        row, col = divmod(index, side)
        top, left = 1 + row * (height + 1), 1 + col * (width + 1)
        grid[top : top + height, left : left + width] = image
    return grid


# ======================================================================================
# What a run leaves to look at
#
# The two counters after training: `g_step`, and `d_step = n_critic * g_step`. In the
# run's folder: `model.keras`, the generator and the critic with both counters
# (`kerasteps.load_model(path)` loads it; `model.generate(n)` draws samples), and
# `samples.png`, 2000 generated points over 2000 real ones (500x500 pixels) or a 6x6
# grid of generated images, each pixel drawn 3x3. `kerasteps board LOG_DIR` shows the
# curves and the pictures of every run side by side.


def print_results(model: WGAN, data: Data, seed: int) -> None:
    """Prints both counters and, on a mixture, the generator's own figures."""
    counters = kerasteps.step_counters(model)
    click.echo(
        f"Trained to g_step {counters['g_step']} with d_step {counters['d_step']} "
        f"({model.n_critic} critic updates per generator update)."
    )
    if data.centres is not None:
        print_coverage(model, data, seed)


def save_results(model: WGAN, folder: str, x: np.ndarray, seed: int) -> None:
    """Saves `model.keras` and `samples.png` in the run's folder."""
    model.save(os.path.join(folder, "model.keras"))  # kerasteps.load_model(path)
    samples = os.path.join(folder, "samples.png")
    if x.ndim == 2:
        save_scatter(samples, model.generate(2000, seed=seed), x[:2000])
    else:
        save_grid(samples, model.generate(36, seed=seed))
    click.echo(f"Model: {folder}/model.keras; samples: {samples}")


def save_scatter(path: str, samples: np.ndarray, real: np.ndarray) -> None:
    """Writes a scatter plot of generated (orange) over real (grey) points."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5, 5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.scatter(real[:, 0], real[:, 1], s=3, c="0.6", label="real")
    axes.scatter(samples[:, 0], samples[:, 1], s=3, c="tab:orange", label="generated")
    axes.set_aspect("equal")
    # Above the axes, where it covers no mode (inside, it hid the grid's corner).
    figure.legend(loc="outside upper center", ncols=2, fontsize="small", markerscale=3)
    if real.shape[1] > 2:
        axes.set_title(f"the first 2 of {real.shape[1]} coordinates", fontsize="small")
    figure.savefig(path)


def save_grid(path: str, images: np.ndarray) -> None:
    """Writes a 6x6 grid of images in [-1, 1], each pixel 3x3."""
    import matplotlib.image
    import numpy as np

    grid = np.repeat(np.repeat(image_grid(images), 3, axis=0), 3, axis=1)
    matplotlib.image.imsave(path, grid.squeeze(), cmap="gray", vmin=0.0, vmax=1.0)


# ======================================================================================
# The command: the sections above, in order


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=None,
    help="Train until g_step reaches STEPS (a resumed run continues up to it) "
    "[default: 6000 on points, 2000 on images].",
)
@click.option(
    "--log-every",
    type=click.IntRange(min=1),
    default=None,
    help="Log every N generator steps [default: a tenth of --steps].",
)
@common_options(steps=None, log_every=None, log_dir="logs/wgan")
@click.option(
    "--data",
    default="ring",
    show_default=True,
    help="ring, grid, images, or the path of a .npy file of points (N, d) or images.",
)
@click.option(
    "--variant",
    type=click.Choice(["gp", "clip"]),
    default="gp",
    show_default=True,
    help="Gradient penalty (WGAN-GP) or weight clipping (original WGAN).",
)
@click.option(
    "--n-critic",
    type=click.IntRange(min=1),
    default=None,
    help="Critic updates per generator update [default: 5].",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    help="Examples per critic batch (and per generator batch) [default: 128 on "
    "points, 64 on images].",
)
@click.option(
    "--base-filters",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Images only: filters of the generator's last and the critic's first "
    "convolution (doubled per layer inward); 64 is DCGAN's size, about 15x slower.",
)
@click.option(
    "--gradient-penalty",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Weight of the gradient penalty (gp only) [default: 0.1 on points, 10.0 "
    "on images].",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="A constant learning rate [default: gp on points 2e-3 decaying to 1e-5 "
    "at --steps, gp on images 1e-4, clip 5e-5].",
)
@click.option(
    "--steps-per-execution",
    type=click.IntRange(min=1),
    default=None,
    help="Generator steps per compiled call (logging happens at its boundaries) "
    "[default: the most, up to 50, that divides --log-every and the steps left].",
)
def main(
    steps,
    log_every,
    log_dir,
    seed,
    resume,
    data,
    variant,
    n_critic,
    batch_size,
    base_filters,
    gradient_penalty,
    lr,
    steps_per_execution,
):
    """Train a WGAN: n_critic critic steps per generator step, d_step and g_step."""
    import keras

    log_to_console(logging.INFO)
    check_variant(variant, gradient_penalty)
    keras.utils.set_random_seed(seed)
    points = load_data(data, seed)
    options = Options(steps, n_critic, batch_size, gradient_penalty, lr)
    training = make_training(points.x, variant, options, base_filters, seed)
    model, steps = training.model, training.settings.steps
    # Each run writes to its own folder, LOG_DIR/run-N; --resume continues the latest,
    # with the same settings.
    kept = run_settings(data, variant, training.settings)
    run = start_run(log_dir, resume, model=model, steps=steps, settings=kept)
    if run.stop is None:
        return
    log_every = log_every or max(1, steps // 10)
    model.steps_per_execution = steps_per_call(
        steps_per_execution, log_every, steps - run.start
    )
    callbacks = step_callbacks(run, points, log_every, seed)
    click.echo(describe(training, data, run.start))
    model.fit(
        real_batches(
            points.x, training.settings.batch_size, model.n_critic, seed, run.start
        ),
        steps_per_epoch=steps - run.start,
        epochs=1,
        verbose=0,
        shuffle=False,  # the batches are shuffled (with the seed) already
        callbacks=callbacks,
    )
    print_results(model, points, seed)
    save_results(model, run.folder, points.x, seed)
    print_log_hint(run.folder)


if __name__ == "__main__":
    main()
