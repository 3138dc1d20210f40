"""Train a WGAN on images with the WGAN-GP paper's settings, d_step and g_step logged.

The question
------------

The recipe `wgan` trains a WGAN on points, where a collapsed generator can be
counted. Most WGANs are trained on images: how does the same `kerasteps.models.WGAN`,
with its two counters `d_step` (critic updates) and `g_step` (generator updates, the
global step), train convolutional networks, and what does a run leave to look at?

This recipe trains DCGAN-shaped networks (`build_image_generator`,
`build_image_critic`) with the WGAN-GP paper's settings (Gulrajani et al., 2017):
gradient penalty 10, Adam(1e-4, beta_1 0.5, beta_2 0.9) for both networks, `n_critic`
5, batch 64. `--variant clip` trains the original WGAN instead: weights clipped to
+-0.01 and RMSprop at 5e-5. Nothing depends on time, so --steps and --resume stay
exact.

What a run shows
----------------

Every --log-every generator steps: a log line `d_loss=... g_loss=... wasserstein=...
d_step=... at step N` (N = g_step), the same values and both counters in TensorBoard
and in LOG_DIR/run-N/log.jsonl, a 6x6 grid of samples in TensorBoard's images tab,
and a checkpoint that --resume continues from. At the end the run saves the model and
`samples.png`, a 6x6 grid of generated images, each pixel drawn 3x3.

The file reads top to bottom: the data, the model, training and the pictures; `main`,
at the bottom, puts them together. Run it with `kerasteps run wgan_images`.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import click

import kerasteps
from kerasteps import Every, recipe

if TYPE_CHECKING:  # imported where they are used, so that `-h` stays fast
    import numpy as np
    import tensorflow as tf

    from kerasteps.models import WGAN


# ======================================================================================
# The data
#
# `--data discs` (the default): 20,000 generated 28x28 grey images of one bright disc
# of random centre and radius, nothing to download. `--data FILE.npy`: your own images
# `(N, 28|32, 28|32[, C])` in [0, 255] or [0, 1]. Both are scaled to [-1, 1], the
# range of the generator's tanh. Each generator step takes `n_critic` fresh real
# batches, so the data must hold at least `n_critic * batch_size` images.


def bad_data(message: str) -> click.BadParameter:
    """The usage error for a `--data` that cannot be trained on."""
    return click.BadParameter(message, param_hint="'--data'")


def disc_images(n: int, size: int, seed: int) -> np.ndarray:
    """`n` grey images in [-1, 1]: one bright disc of random centre and radius."""
    import numpy as np

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype("float32")
    cy, cx = rng.uniform(8, size - 8, (2, n, 1, 1)).astype("float32")
    radius = rng.uniform(3, 7, (n, 1, 1)).astype("float32")
    inside = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2) <= radius
    return (inside.astype("float32") * 2.0 - 1.0)[..., None]


def load_images(data: str, seed: int) -> np.ndarray:
    """The images of `--data` in [-1, 1], with a channel axis."""
    if data == "discs":
        return disc_images(20_000, size=28, seed=seed)
    if not data.endswith(".npy"):
        raise bad_data(f"expected discs or a .npy file, received {data!r}.")
    (x,) = recipe.load_arrays(data)
    if x.ndim not in (3, 4):
        raise bad_data(f"images must have shape (N, H, W[, C]); received {x.shape}.")
    x = (x / 255.0 if x.max() > 1.0 else x) * 2.0 - 1.0
    return x[..., None] if x.ndim == 3 else x


# ======================================================================================
# The model
#
# The generator maps 64-dimensional noise through a dense layer and two transposed
# convolutions to an image; the critic is three strided convolutions with layer
# normalization (batch norm would break the penalty's per-example gradients).
# --base-filters sets the width: 16 by default, 64 is DCGAN's (about 15x slower).


def build_wgan(x: np.ndarray, variant: str, options: dict[str, Any], seed: int) -> WGAN:
    """The compiled WGAN-GP (or clipping WGAN) for images of `x`'s shape."""
    import keras

    from kerasteps.models import WGAN, build_image_critic, build_image_generator

    if len(x) < options["n_critic"] * options["batch_size"]:
        raise bad_data(
            f"{len(x)} images are fewer than one step's n_critic * batch_size = "
            f"{options['n_critic'] * options['batch_size']}."
        )
    try:
        generator = build_image_generator(
            64, x.shape[1:], base_filters=options["base_filters"]
        )
        critic = build_image_critic(x.shape[1:], base_filters=options["base_filters"])
    except ValueError as error:  # an image size the networks do not take
        raise bad_data(str(error)) from None
    clip = variant == "clip"
    model = WGAN(
        generator,
        critic,
        latent_dim=64,
        n_critic=options["n_critic"],
        gradient_penalty=None if clip else options["gradient_penalty"],
        clip_value=0.01 if clip else None,
        seed=seed,
    )
    rate = options["lr"] or (5e-5 if clip else 1e-4)
    if clip:
        optimizer = functools.partial(keras.optimizers.RMSprop, rate)
    else:
        optimizer = functools.partial(keras.optimizers.Adam, rate, 0.5, 0.9)
    model.compile(optimizer(), optimizer())
    return model


# ======================================================================================
# Training, and the pictures
#
# One schedule, `Every(--log-every, last=True)`, drives every kerasteps callback:
# `LogEvery` writes the line, `StepTensorBoard` the scalars, both counters and a grid
# of 36 samples, `JSONLinesLogger` the JSON line and `StepCheckpoint` the checkpoint
# that --resume continues from; `run.stop` (`StopAtStep`) ends the run at --steps. On
# a terminal, `StepProgressBar` shows the run's progress below the lines. The real
# batches come from `WGAN.make_dataset` (`n_critic` per generator step, in an order
# fixed by the seed), and a resumed run skips those the steps before it consumed.


def image_grid(images: np.ndarray) -> np.ndarray:
    """A 6x6 grid of 36 images in [-1, 1], as an array in [0, 1]."""
    import numpy as np

    images = (np.asarray(images) + 1.0) / 2.0
    _, height, width, channels = images.shape
    grid = np.ones((6 * (height + 1) + 1, 6 * (width + 1) + 1, channels))
    for index, image in enumerate(images):
        top, left = 1 + (index // 6) * (height + 1), 1 + (index % 6) * (width + 1)
        grid[top : top + height, left : left + width] = image
    return grid


def step_callbacks(run: recipe.Run, log_every: int, seed: int) -> list[Any]:
    """The kerasteps callbacks of the run, on one schedule."""
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCheckpoint,
        StepProgressBar,
        StepTensorBoard,
    )

    def pictures(model: WGAN, step: int) -> dict[str, np.ndarray]:
        return {"samples": image_grid(model.generate(36, seed=seed))}

    every = Every(log_every, last=True)
    callbacks = [
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


def describe(
    variant: str, options: dict[str, Any], data: str, start: int, steps: int
) -> str:
    """The line printed before training: which WGAN, on what, from where to where."""
    kind = (
        "WGAN with weight clipping (0.01)"
        if variant == "clip"
        else f"WGAN-GP (gradient penalty {options['gradient_penalty']:g})"
    )
    return (
        f"{kind} on {data}: n_critic {options['n_critic']}, batch "
        f"{options['batch_size']}, g_step {start} -> {steps}."
    )


def real_batches(
    model: WGAN, x: np.ndarray, batch_size: int, seed: int, start: int
) -> tf.data.Dataset:
    """`n_critic` real batches per generator step, repeated, from g_step `start` on."""
    from kerasteps.data import skip_consumed

    batches = model.make_dataset(
        x, batch_size, n_critic=model.n_critic, seed=seed, repeat=True
    )
    return skip_consumed(batches, start)  # less those of the steps before `start`


def report(model: WGAN, folder: str, seed: int) -> None:
    """Prints both counters; saves `model.keras` and `samples.png`."""
    import matplotlib.image
    import numpy as np

    counters = kerasteps.step_counters(model)
    click.echo(
        f"Trained to g_step {counters['g_step']} with d_step {counters['d_step']} "
        f"({model.n_critic} critic updates per generator update)."
    )
    model.save(os.path.join(folder, "model.keras"))  # kerasteps.load_model(path)
    grid = image_grid(model.generate(36, seed=seed))
    grid = np.repeat(np.repeat(grid, 3, axis=0), 3, axis=1)  # each pixel 3x3
    samples = os.path.join(folder, "samples.png")
    matplotlib.image.imsave(samples, grid.squeeze(), cmap="gray", vmin=0, vmax=1)
    click.echo(f"Model: {folder}/model.keras; samples: {samples}")


# ======================================================================================
# The command: the sections above, in order


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@recipe.common_options(steps=2000, log_every=200, log_dir="logs/wgan_images")
@click.option(
    "--data",
    default="discs",
    help="discs, or the path of a .npy file of images (N, 28|32, 28|32[, C]).",
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
    default=5,
    help="Critic updates per generator update.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=64,
    help="Images per critic (and generator) batch.",
)
@click.option(
    "--base-filters",
    type=click.IntRange(min=1),
    default=16,
    help="Filters of the generator's last and the critic's first convolution "
    "(doubled per layer inward); 64 is DCGAN's size, about 15x slower.",
)
@click.option(
    "--gradient-penalty",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    help="Weight of the gradient penalty (gp only).",
)
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    help="Learning rate of both optimizers [default: gp 1e-4, clip 5e-5].",
)
@click.option(
    "--steps-per-execution",
    type=click.IntRange(min=1),
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
    steps_per_execution,
    **options,
):
    """Train a WGAN on images: n_critic critic steps per generator step, counted."""
    import keras

    recipe.log_to_console(logging.INFO)
    keras.utils.set_random_seed(seed)
    x = load_images(data, seed)
    model = build_wgan(x, variant, options, seed)
    kept = {"data": data, "variant": variant, **options}
    if variant == "clip":
        del kept["gradient_penalty"]  # weights are clipped instead
    # Each run writes to its own folder, LOG_DIR/run-N; --resume continues the latest,
    # with the same settings.
    run = recipe.start_run(log_dir, resume, model=model, steps=steps, settings=kept)
    if run.stop is None:
        return
    model.steps_per_execution = recipe.steps_per_call(
        steps_per_execution, log_every, steps - run.start
    )
    click.echo(describe(variant, options, data, run.start, steps))
    callbacks = step_callbacks(run, log_every, seed)
    model.fit(
        real_batches(model, x, options["batch_size"], seed, run.start),
        steps_per_epoch=steps - run.start,
        epochs=1,
        verbose=0,
        shuffle=False,  # the batches are shuffled (with the seed) already
        callbacks=callbacks,
    )
    report(model, run.folder, seed)
    recipe.print_log_hint(run.folder)
    recipe.exit_if_interrupted(callbacks)  # after a signal: 128 + its number


if __name__ == "__main__":
    main()
