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

    --variant gp     WGAN-GP: gradient penalty (1 on points, 10 on images), Adam
                     (default)
    --variant clip   the original WGAN: weights clipped to +-0.01, RMSprop 5e-5

What a run shows
----------------

Every --log-every generator steps: a log line `d_loss=... g_loss=... wasserstein=...
d_step=... at step N` (N = g_step), the same values and both counters in TensorBoard
(`counters/d_step`, `counters/g_step`) and in LOGDIR/run-N/log.jsonl, a picture of
samples in TensorBoard's images tab, and a checkpoint that --resume continues from.
On the 2-D mixtures the mode coverage is measured and logged as well. At the end the
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
)

if TYPE_CHECKING:  # imported where they are used, so that `-h` stays fast
    import numpy as np
    import tensorflow as tf

    from kerasteps.models import WGAN


# ======================================================================================
# The data
#
# Two mode-collapse benchmarks of the GAN literature, 100,000 points each
# (`kerasteps.mixtures`): `--data ring`, 8 Gaussians on a circle, and `--data grid`,
# 25 Gaussians on a 5x5 grid, every mode with a standard deviation of 0.02. A
# generator that collapses onto a few modes can be caught there by counting them
# (see "Mode coverage" below). `--data images`: 20,000 generated 28x28 grey images
# of one bright disc, nothing to download. `--data FILE.npy`: your own points
# `(N, 2)`, or images `(N, 28|32, 28|32[, C])` in [0, 255] or [0, 1], scaled to
# [-1, 1], the range of the generator's tanh.
#
# Each generator step takes `n_critic` fresh real batches, one per critic update, so
# the data must hold at least `n_critic * batch_size` examples.


def load_data(data: str, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Returns `(x, centres)`: points `(N, 2)` or images `(N, H, W, C)` in [-1, 1],
    and the centres of the mixture's modes (None unless `data` is ring or grid)."""
    from kerasteps import mixtures

    if data == "ring":
        return mixtures.ring_of_gaussians(100_000, seed=seed)
    if data == "grid":
        return mixtures.grid_of_gaussians(100_000, seed=seed)
    if data == "images":
        return disc_images(20_000, size=28, seed=seed), None
    return as_points_or_images(read_npy(data), data), None


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
            f"{path!r} must hold numbers, points (N, 2) or images (N, H, W[, C]); "
            f"it holds {x.dtype} with shape {x.shape}."
        )
    x = x.astype("float32")
    if not np.isfinite(x).all():
        raise bad_data(f"{path!r} holds NaN or infinite values.")
    return x


def as_points_or_images(x: np.ndarray, path: str) -> np.ndarray:
    """Points `(N, 2)` as they are; images scaled to [-1, 1], with a channel axis."""
    if x.ndim == 2 and x.shape[1] != 2:
        raise bad_data(f"points must have shape (N, 2), received {x.shape}.")
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
# critic updates on fresh real batches, then one generator update. On points both
# networks are three dense layers (`build_point_generator`, `build_point_critic`),
# 64 wide, or 128 on the grid, whose 25 modes need wider networks; on images they are
# DCGAN-shaped convolutions with --base-filters filters (`build_image_generator`,
# `build_image_critic`).
#
# The settings that depend on the data are all here. They are what worked when
# measured (the README's `wgan` section has the numbers): on points a penalty weight
# of 1, because the usual 10 reached all 8 modes on only 3 of 10 seeds at this
# learning rate, and Adam at 2e-3 decaying linearly to 1e-5 over the run; on images
# the WGAN-GP paper's 10 and Adam at 2e-4 (beta_1 0.5 and beta_2 0.9 throughout).
# Weight clipping uses the original WGAN's clip of 0.01 and RMSprop at 5e-5. An
# option given on the command line replaces its default.


class Settings(NamedTuple):
    """What the WGAN is built and trained with, besides the plain options."""

    latent_dim: int  # size of the generator's noise
    widths: tuple[int, ...]  # dense layers of the point networks (not on images)
    batch_size: int  # examples per critic batch and per generator batch
    gradient_penalty: float | None  # penalty weight; None with weight clipping
    clip_value: float | None  # critic weights clipped to +-clip_value; or None
    learning_rate: float  # of both optimizers, at the start
    final_learning_rate: float | None  # reached at --steps; None: constant


POINTS = Settings(
    latent_dim=2,
    widths=(64, 64, 64),
    batch_size=128,
    gradient_penalty=1.0,
    clip_value=None,
    learning_rate=2e-3,
    final_learning_rate=1e-5,
)
GRID = POINTS._replace(widths=(128, 128, 128))
IMAGES = Settings(
    latent_dim=64,
    widths=(),
    batch_size=64,
    gradient_penalty=10.0,
    clip_value=None,
    learning_rate=2e-4,
    final_learning_rate=None,
)
CLIP_VALUE, CLIP_LEARNING_RATE = 0.01, 5e-5


def choose_settings(
    data: str,
    x: np.ndarray,
    variant: str,
    batch_size: int | None,
    gradient_penalty: float | None,
    lr: float | None,
) -> Settings:
    """The defaults for `data`, with the options that were given in their place."""
    chosen = (GRID if data == "grid" else POINTS) if x.ndim == 2 else IMAGES
    if batch_size is not None:
        chosen = chosen._replace(batch_size=batch_size)
    if variant == "clip":
        return chosen._replace(
            gradient_penalty=None,
            clip_value=CLIP_VALUE,
            learning_rate=CLIP_LEARNING_RATE if lr is None else lr,
            final_learning_rate=None,
        )
    if gradient_penalty is not None:
        chosen = chosen._replace(gradient_penalty=gradient_penalty)
    if lr is not None:
        chosen = chosen._replace(learning_rate=lr, final_learning_rate=None)
    return chosen


def check_variant(variant: str, gradient_penalty: float | None) -> None:
    """Refuses a penalty weight for the clipping variant, which has no penalty."""
    if variant == "clip" and gradient_penalty is not None:
        raise click.BadParameter(
            "is for --variant gp; --variant clip clips weights instead.",
            param_hint="'--gradient-penalty'",
        )


def build_wgan(
    x: np.ndarray, settings: Settings, n_critic: int, base_filters: int, seed: int
) -> WGAN:
    """A generator and a critic for the shape of `x`, in a `WGAN`."""
    from kerasteps.models import (
        WGAN,
        build_image_critic,
        build_image_generator,
        build_point_critic,
        build_point_generator,
    )

    if x.ndim == 2:
        generator = build_point_generator(settings.latent_dim, widths=settings.widths)
        critic = build_point_critic(2, widths=settings.widths)
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
        n_critic=n_critic,
        gradient_penalty=settings.gradient_penalty,
        clip_value=settings.clip_value,
        seed=seed,
    )


def optimizer(settings: Settings, updates: int) -> Any:
    """RMSprop for clipping, else Adam; its rate decays over `updates` when asked."""
    import keras

    if settings.clip_value is not None:
        return keras.optimizers.RMSprop(settings.learning_rate)
    rate = settings.learning_rate
    if settings.final_learning_rate is not None:
        rate = keras.optimizers.schedules.PolynomialDecay(
            rate, updates, settings.final_learning_rate
        )
    return keras.optimizers.Adam(rate, beta_1=0.5, beta_2=0.9)


def compile_wgan(
    model: WGAN, settings: Settings, steps: int, steps_per_execution: int
) -> None:
    """One optimizer for the critic's `n_critic * steps` updates, one for the
    generator's `steps`."""
    import keras

    critic_optimizer = optimizer(settings, model.n_critic * steps)
    generator_optimizer = optimizer(settings, steps)
    if keras.backend.backend() == "torch":
        steps_per_execution = 1  # Keras's PyTorch trainer runs one step per call
    model.compile(
        critic_optimizer,
        generator_optimizer,
        steps_per_execution=steps_per_execution,
    )


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
# to the sinks, which record them beside the losses; at the end 10,000 samples are
# measured once more and the result printed.

#: The standard deviation of every mode of the ring and the grid.
MODE_STD = 0.02


def coverage_values(model: WGAN, *, centres: np.ndarray, seed: int) -> dict[str, float]:
    """The mode coverage of 2000 samples, as the values of a logged point."""
    from kerasteps import mixtures

    coverage = mixtures.mode_coverage(
        model.generate(2000, seed=seed), centres, MODE_STD
    )
    return {
        "modes_captured": coverage.modes_captured,
        "high_quality": coverage.high_quality,
        "reverse_kl": coverage.reverse_kl,
    }


def print_coverage(model: WGAN, centres: np.ndarray, seed: int) -> None:
    """Prints the mode coverage of 10,000 samples of the trained generator."""
    from kerasteps import mixtures

    coverage = mixtures.mode_coverage(
        model.generate(10_000, seed=seed), centres, MODE_STD
    )
    click.echo(
        f"Mode coverage of 10000 samples: {coverage.modes_captured}/"
        f"{coverage.n_modes} modes, {coverage.high_quality:.1%} within 3 sigma, "
        f"reverse KL {format_value(coverage.reverse_kl)}."
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
# per compiled call, and the callbacks act at the boundaries of those calls.


def step_callbacks(
    run: Run,
    x: np.ndarray,
    centres: np.ndarray | None,
    log_every: int,
    seed: int,
) -> list[Any]:
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
    if centres is not None:
        coverage = functools.partial(coverage_values, centres=centres, seed=seed)
        callbacks.append(ProvideEvery(every, coverage))
    images = functools.partial(pictures, real=x, seed=seed)
    return callbacks + [
        LogEvery(every),
        StepTensorBoard(run.folder, every=every, images=images),
        JSONLinesLogger(os.path.join(run.folder, "log.jsonl"), every=every),
        StepCheckpoint(os.path.join(run.folder, "checkpoints"), every=every),
        run.stop,
    ]


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


def describe(model: WGAN, data: str, batch_size: int, start: int, steps: int) -> str:
    """The line printed before training: which WGAN, on what, from where to where."""
    kind = (
        f"WGAN with weight clipping ({model.clip_value:g})"
        if model.clip_value is not None
        else f"WGAN-GP (gradient penalty {model.gradient_penalty:g})"
    )
    return (
        f"{kind} on {data}: n_critic {model.n_critic}, batch {batch_size}, "
        f"g_step {start} -> {steps}."
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
# grid of generated images, each pixel drawn 3x3. `kerasteps board LOGDIR` shows the
# curves and the pictures of every run side by side.


def print_results(model: WGAN, centres: np.ndarray | None, seed: int) -> None:
    """Prints both counters and, on a mixture, the mode coverage at the end."""
    counters = kerasteps.step_counters(model)
    click.echo(
        f"Trained to g_step {counters['g_step']} with d_step {counters['d_step']} "
        f"({model.n_critic} critic updates per generator update)."
    )
    if centres is not None:
        print_coverage(model, centres, seed)


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
    axes.legend(loc="upper right", fontsize="small", markerscale=3)
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
@common_options(steps=2000, log_every=200, logdir="logs/wgan")
@click.option(
    "--data",
    default="ring",
    show_default=True,
    help="ring, grid, images, or the path of a .npy file of points or images.",
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
    default=5,
    show_default=True,
    help="Critic updates per generator update.",
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
    help="Weight of the gradient penalty (gp only) [default: 1.0 on points, 10.0 "
    "on images].",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Learning rate [default: gp on points 2e-3 decaying to 1e-5, gp on "
    "images 2e-4, clip 5e-5].",
)
@click.option(
    "--steps-per-execution",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Generator steps per compiled call (logging happens at its boundaries).",
)
def main(
    steps,
    log_every,
    logdir,
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
    x, centres = load_data(data, seed)
    settings = choose_settings(data, x, variant, batch_size, gradient_penalty, lr)
    check_one_step(x, n_critic, settings.batch_size)
    model = build_wgan(x, settings, n_critic, base_filters, seed)
    compile_wgan(model, settings, steps, steps_per_execution)
    # Each run writes to its own folder, LOGDIR/run-N; --resume continues the latest.
    run = start_run(model, logdir, steps, resume)
    if run.stop is None:
        return
    callbacks = step_callbacks(run, x, centres, log_every, seed)
    click.echo(describe(model, data, settings.batch_size, run.start, steps))
    model.fit(
        real_batches(x, settings.batch_size, n_critic, seed, run.start),
        steps_per_epoch=steps - run.start,
        epochs=1,
        verbose=0,
        shuffle=False,  # the batches are shuffled (with the seed) already
        callbacks=callbacks,
    )
    print_results(model, centres, seed)
    save_results(model, run.folder, x, seed)
    print_log_hint(run.folder)


if __name__ == "__main__":
    main()
