"""Train a WGAN with n_critic critic steps per generator step, d_step and g_step logged.

TF1 code trained a WGAN with two step variables, `D_global_step` and `G_global_step`,
and `RMSPropOptimizer(5e-5)`: the critic D is updated `n_critic` times for every
update of the generator G. `kerasteps.models.WGAN` does that in one `train_step` with
two saved counters, `d_step` and `g_step` (the global step), `d_step == n_critic *
g_step`, and this recipe trains it:

    --variant gp     WGAN-GP: gradient penalty (1 on points, 10 on images), Adam
                     (default)
    --variant clip   the original WGAN: weights clipped to +-0.01, RMSprop 5e-5

on 2-D mixtures (`--data ring`, 8 Gaussians on a circle; `--data grid`, 25 on a
grid, which takes wider networks and `--steps 6000`), where every --log-every steps
the mode coverage (modes captured, share of high-quality samples within 3 sigma of a
mode, reverse KL of the mode histogram) is measured on 2000 samples and a scatter
plot goes to TensorBoard; or on small images (`--data images`: generated 28x28
discs), where a grid of samples goes to TensorBoard.
`--data FILE.npy` takes your own points `(N, 2)` or images `(N, 28|32, 28|32[, C])`
in [0, 255] or [0, 1].

Every --log-every generator steps: a log line `d_loss=... g_loss=... wasserstein=...
d_step=... at step N` (N = g_step), the same values and both counters in TensorBoard
(`counters/d_step`, `counters/g_step`) and in LOGDIR/log.jsonl, and a checkpoint that
--resume continues from.
"""

import click

from kerasteps.formatting import format_value
from kerasteps.recipe import (
    common_options,
    log_to_console,
    print_log_hint,
    start_run,
)


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
    import logging
    import os

    import keras
    import numpy as np

    import kerasteps
    from kerasteps import Every, mixtures
    from kerasteps.callbacks import (
        JSONLinesLogger,
        LogEvery,
        StepCallback,
        StepCheckpoint,
        StepTensorBoard,
    )
    from kerasteps.data import skip_consumed
    from kerasteps.models import (
        WGAN,
        build_image_critic,
        build_image_generator,
        build_point_critic,
        build_point_generator,
    )

    log_to_console(logging.INFO)
    clip = variant == "clip"
    if clip and gradient_penalty is not None:
        raise click.BadParameter(
            "is for --variant gp; --variant clip clips weights instead.",
            param_hint="'--gradient-penalty'",
        )
    keras.utils.set_random_seed(seed)

    # -- data -----------------------------------------------------------------------
    centres, std = None, None
    if data == "ring":
        x, centres = mixtures.ring_of_gaussians(100_000, seed=seed)
        std = 0.02
    elif data == "grid":
        x, centres = mixtures.grid_of_gaussians(100_000, seed=seed)
        std = 0.02
    elif data == "images":
        x = _disc_images(20_000, size=28, seed=seed)
    else:
        if not os.path.isfile(data) or not data.endswith(".npy"):
            raise click.BadParameter(
                f"expected ring, grid, images or a .npy file, received {data!r}.",
                param_hint="'--data'",
            )
        try:
            x = np.load(data, allow_pickle=False)
        except (ValueError, OSError) as error:  # pickled objects, not an array
            raise click.BadParameter(
                f"{data!r} is not a numeric .npy array ({error}).",
                param_hint="'--data'",
            ) from None
        if x.dtype.kind not in "biuf" or x.ndim not in (2, 3, 4) or not x.size:
            raise click.BadParameter(
                f"{data!r} must hold numbers, points (N, 2) or images (N, H, W[, C]); "
                f"it holds {x.dtype} with shape {x.shape}.",
                param_hint="'--data'",
            )
        x = x.astype("float32")
        if not np.isfinite(x).all():
            raise click.BadParameter(
                f"{data!r} holds NaN or infinite values.", param_hint="'--data'"
            )
        if x.ndim != 2 and x.max() > 1.0:
            x = x / 255.0
        if x.ndim != 2:
            x = x * 2.0 - 1.0  # the generator's tanh range
    points = x.ndim == 2
    if points and x.shape[1] != 2:
        raise click.BadParameter(
            f"points must have shape (N, 2), received {x.shape}.", param_hint="'--data'"
        )
    if not points and x.ndim == 3:
        x = x[..., None]
    if batch_size is None:
        batch_size = 128 if points else 64
    if len(x) < n_critic * batch_size:
        raise click.BadParameter(
            f"{len(x)} examples are fewer than one step's n_critic * batch_size = "
            f"{n_critic * batch_size}.",
            param_hint="'--data'",
        )

    # -- model ----------------------------------------------------------------------
    if points:
        latent_dim = 2
        # The 25 modes of the grid need wider networks than the ring's 8.
        widths = (128, 128, 128) if data == "grid" else (64, 64, 64)
        generator = build_point_generator(latent_dim, widths=widths)
        critic = build_point_critic(2, widths=widths)
    else:
        latent_dim = 64
        try:
            generator = build_image_generator(
                latent_dim, x.shape[1:], base_filters=base_filters
            )
            critic = build_image_critic(x.shape[1:], base_filters=base_filters)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="'--data'") from None
    if gradient_penalty is None:
        gradient_penalty = 1.0 if points else 10.0
    model = WGAN(
        generator,
        critic,
        latent_dim=latent_dim,
        n_critic=n_critic,
        gradient_penalty=None if clip else gradient_penalty,
        clip_value=0.01 if clip else None,
        seed=seed,
    )

    def optimizer(updates):
        if clip:
            return keras.optimizers.RMSprop(lr or 5e-5)
        if points and lr is None:
            rate = keras.optimizers.schedules.PolynomialDecay(2e-3, updates, 1e-5)
        else:
            rate = lr or 2e-4
        return keras.optimizers.Adam(rate, beta_1=0.5, beta_2=0.9)

    if keras.backend.backend() == "torch":
        steps_per_execution = 1  # Keras's PyTorch trainer runs one step per call
    model.compile(
        optimizer(n_critic * steps),
        optimizer(steps),
        steps_per_execution=steps_per_execution,
    )

    # Each run writes to its own folder, LOGDIR/run-N; --resume continues the latest.
    run = start_run(model, logdir, steps, resume)
    if run.stop is None:
        return

    # -- what is measured and drawn every N steps -------------------------------------
    class ModeCoverageEvery(StepCallback):
        """Measures the mode coverage of 2000 samples; the sinks record it."""

        role = "provider"  # adds values: acts before the sinks

        def on_step(self, event):
            coverage = mixtures.mode_coverage(
                model.generate(2000, seed=seed), centres, std
            )
            return {
                "modes_captured": coverage.modes_captured,
                "high_quality": coverage.high_quality,
                "reverse_kl": coverage.reverse_kl,
            }

    def pictures(model_, step):
        if points:
            return {"samples": _scatter(model_.generate(1000, seed=seed), x[:1000])}
        return {"samples": _grid(model_.generate(36, seed=seed))}

    every = Every(log_every, last=True)
    callbacks = []
    if centres is not None:
        callbacks.append(ModeCoverageEvery(every))
    callbacks += [
        LogEvery(every),
        StepTensorBoard(run.folder, every=every, images=pictures),
        JSONLinesLogger(os.path.join(run.folder, "log.jsonl"), every=every),
        StepCheckpoint(os.path.join(run.folder, "checkpoints"), every=every),
        run.stop,
    ]
    dataset = WGAN.make_dataset(
        x, batch_size, n_critic=n_critic, seed=seed, repeat=True
    )
    kind = (
        f"WGAN with weight clipping ({model.clip_value:g})"
        if clip
        else f"WGAN-GP (gradient penalty {model.gradient_penalty:g})"
    )
    click.echo(
        f"{kind} on {data}: n_critic {n_critic}, batch {batch_size}, "
        f"g_step {run.start} -> {steps}."
    )
    model.fit(
        skip_consumed(dataset, run.start),
        steps_per_epoch=steps - run.start,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=callbacks,
    )
    counters = kerasteps.step_counters(model)
    click.echo(
        f"Trained to g_step {counters['g_step']} with d_step {counters['d_step']} "
        f"({n_critic} critic updates per generator update)."
    )
    if centres is not None:
        coverage = mixtures.mode_coverage(
            model.generate(10_000, seed=seed), centres, std
        )
        click.echo(
            f"Mode coverage of 10000 samples: {coverage.modes_captured}/"
            f"{coverage.n_modes} modes, {coverage.high_quality:.1%} within 3 sigma, "
            f"reverse KL {format_value(coverage.reverse_kl)}."
        )
    # What a user wants at the end: the trained model, and what it generates.
    model.save(os.path.join(run.folder, "model.keras"))  # kerasteps.load_model(path)
    samples = os.path.join(run.folder, "samples.png")
    if points:
        _save_scatter(samples, model.generate(2000, seed=seed), x[:2000])
    else:
        _save_grid(samples, model.generate(36, seed=seed))
    click.echo(f"Model: {run.folder}/model.keras; samples: {samples}")
    print_log_hint(run.folder)


def _save_scatter(path, samples, real):
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


def _save_grid(path, images):
    """Writes a 6x6 grid of images in [-1, 1], each pixel 3x3."""
    import matplotlib.image
    import numpy as np

    grid = np.repeat(np.repeat(_grid(images), 3, axis=0), 3, axis=1)
    matplotlib.image.imsave(path, grid.squeeze(), cmap="gray", vmin=0.0, vmax=1.0)


def _disc_images(n, size, seed):
    """`n` grey images in [-1, 1]: one bright disc of random centre and radius."""
    import numpy as np

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype("float32")
    cy, cx = rng.uniform(8, size - 8, (2, n, 1, 1)).astype("float32")
    radius = rng.uniform(3, 7, (n, 1, 1)).astype("float32")
    inside = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2) <= radius
    return (inside.astype("float32") * 2.0 - 1.0)[..., None]


def _scatter(samples, real):
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


def _grid(images):
    """A 6x6 grid of images in [-1, 1], as an array in [0, 1]."""
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


if __name__ == "__main__":
    main()
