"""`WGAN`: a Wasserstein GAN `keras.Model` with its own step counters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from kerasteps import data
from kerasteps.models import _wgan_checks as checks

if TYPE_CHECKING:
    from kerasteps.models.point_settings import PointSettings

__all__ = ["WGAN"]

#: Key of the seed generator's state in the WGAN's own `.keras` variables.
_SEED_KEY = "seed_state"

if keras.backend.backend() == "jax":
    from kerasteps.models._wgan_jax import JaxSteps as _BackendSteps
elif keras.backend.backend() == "torch":
    from kerasteps.models._wgan_torch import TorchSteps as _BackendSteps
else:
    from kerasteps.models._wgan_tf import TensorFlowSteps as _BackendSteps


@keras.saving.register_keras_serializable(package="kerasteps")
class WGAN(_BackendSteps, keras.Model):
    """Wasserstein GAN (WGAN-GP or weight-clipped WGAN) with step counters.

    Each `train_step` makes `n_critic` critic updates, each on a fresh batch of
    real examples, then one generator update. The critic is regularised by
    exactly one of:

    - a gradient penalty (WGAN-GP, Gulrajani et al. 2017): `gradient_penalty *
      (||grad D(x_hat)|| - 1)^2` at `x_hat = e * real + (1 - e) * fake`, with
      `e ~ U[0, 1]` drawn per example and the norm computed as
      `sqrt(sum(g^2) + 1e-12)` so that it is safe at zero;
    - weight clipping (original WGAN, Arjovsky et al. 2017): after every critic
      update each critic weight is clipped to `[-clip_value, clip_value]`. Pass
      `gradient_penalty=None` to use it.

    The whole step (all critic updates and the generator update) is one traced
    graph; `compile(..., jit_compile=True)` compiles it with XLA and
    `steps_per_execution=K` runs K such steps per call from Python.

    **Data contract.** Each element that `fit` receives holds
    `n_critic * B` real examples: a tensor of shape `(n_critic * B,
    *sample_shape)`, or a tuple whose first item is one (any `y` is ignored).
    `train_step` splits it into `n_critic` fresh critic batches of `B` examples
    (critic batch `i` takes rows `i, i + n_critic, i + 2 * n_critic, ...`, so
    that a split across `tf.distribute` replicas gives each replica its share
    of every critic batch); the generator update also uses batch size `B`. Either call
    `fit(x, batch_size=n_critic * B)` on an array (`fit` checks before training
    that `batch_size` is a multiple of `n_critic` and that the examples have the
    generator's sample shape), or pass the dataset built by
    `WGAN.make_dataset(x, batch_size=B, n_critic=n_critic)` (reshuffled each
    epoch, no partial element). A last, partial element is cut to a multiple of
    `n_critic`; a wrong rank, sample shape or a statically known size that is
    not a multiple of `n_critic` raises `ValueError`.

    **Counters.** `d_step` (critic updates) and `g_step` (generator updates) are
    non-trainable integer variables of the model (the dtype of an optimizer's
    `iterations`: int64, or int32 on JAX without `jax_enable_x64`), saved in
    `.keras` files and by `save_weights`. They count *applied* updates: each
    grows by the increase of its optimizer's `iterations`, so `d_step ==
    d_optimizer.iterations` and `g_step == g_optimizer.iterations` (for
    optimizers compiled fresh, with `iterations == 0`). The global step is `g_step`
    (`kerasteps.global_step(model)`), and `model.optimizer` is the generator
    optimizer, so `model.optimizer.iterations == g_step` too. Both counters are
    also returned in the logs of every step. Without loss scaling every update
    is applied and `d_step == n_critic * g_step` holds exactly.

    **Mixed precision.** Under a `mixed_float16` or `mixed_bfloat16` dtype
    policy (`keras.mixed_precision.set_dtype_policy`, or networks built with
    one) the losses are computed in float32 (the critic scores are cast). With
    float16, `compile` wraps the optimizers in
    `keras.optimizers.LossScaleOptimizer` for dynamic loss scaling: the critic
    optimizer when the critic computes in float16, the generator optimizer when
    the generator or the critic does (the generator loss flows through the
    critic). An optimizer that is already a `LossScaleOptimizer` is used as it
    is; bfloat16 needs no loss scaling. A loss-scaled update whose gradients
    are not finite is skipped (the loss scale is halved) and is *not* counted,
    exactly as the `LossScaleOptimizer`'s own `iterations` does not grow. So
    under float16 loss scaling `d_step == n_critic * g_step` holds only while
    no update was skipped; what always holds is `d_step ==
    d_optimizer.iterations <= n_critic * s` and `g_step ==
    g_optimizer.iterations <= s` after `s` calls of `train_step`, with
    `n_critic * s - d_step` and `s - g_step` the numbers of skipped critic and
    generator updates.

    **Energy term.** With `energy_weight > 0` the generator's loss is
    `-E[D(fake)] + energy_weight * ED`, where `ED` is the energy distance between
    the generator batch and the first critic batch of real examples (Szekely and
    Rizzo's `2 E|x - y|^b - E|x - x'|^b - E|y - y'|^b`, its unbiased estimate
    over distinct pairs, `b = energy_exponent` in (0, 2), distances in units of
    `energy_unit`, times `energy_unit`). A 1-Lipschitz critic barely sees modes much
    narrower than the distances between them, and the generator draws them
    narrower than the data; the energy distance pulls each generated point toward
    the real ones and pushes it from the other generated ones, at every scale,
    and is 0 in expectation only when the two distributions are equal.
    `WGAN.for_points` turns it on.

    **Real-gradient penalty.** With `real_gradient_penalty > 0` the critic's loss
    adds `real_gradient_penalty * E[||grad D(real)||^2]` (the R1 penalty of
    Mescheder et al., 2018), included in `d_loss`. A critic with a peak at each
    mode pulls the generated points toward its top, and the generator draws modes
    narrower than the data (on PacGAN's grid, 0.44-0.82 times as wide); flat where
    the real examples are, the critic no longer narrows them. `WGAN.for_points`
    leaves it off by default: its likelihood term makes the modes as wide.

    **Likelihood term.** With `likelihood_weight > 0` the generator's loss adds
    `-likelihood_weight * E[log p(real)]`, the negative log-density of the first
    critic batch under the generator's own distribution. The generator must have
    one, a layer with `log_density` such as `GaussianComponents`, whose samples
    are a Gaussian mixture. The critic and the energy term bring each component
    to a mode but leave it narrower than the data; the log-density, which is
    highest when the components cover the real points as widely as they lie,
    makes them as wide. It cannot find the modes alone: started from random
    components, maximum likelihood leaves most of the data to a few.
    `WGAN.for_points` turns it on.

    **Anchor term.** With `anchor_weight > 0` the generator's loss adds
    `anchor_weight * sum_k p_k min_j |m_k - real_j|`: the distance from each
    component's mean `m_k` to the nearest example of the first critic batch,
    weighted by the component's probability `p_k` (the generator needs
    `GaussianComponents`, as for the likelihood term). The likelihood weighs a
    component by the share of the real examples it explains, and the critic
    barely resolves modes much narrower than the distances between them: a
    component left beside a mode, or between two, feels neither. This pulls it
    in with a force that does not fade with its distance. `WGAN.for_points`
    turns it on.

    **Likelihood phase.** With `likelihood_from=N`, every generator update from
    generator step `N` on (counted by `g_step`, so it holds across `fit` calls
    and resumes) trains the generator by maximum likelihood alone: its loss is
    `-E[log p(real)]` over the first critic batch, without the critic's score
    or the other terms (the critic keeps training, and `g_loss` reports this
    loss). The adversarial phase finds the modes, which maximum likelihood
    alone does not; this phase then fits the mixture to the data: each
    component as wide as the data it covers and, with
    `GaussianComponents(learn_weights=True)`, each component's probability
    its share of the data, which empties a component left between modes. The
    generator needs a `log_density`, as for the likelihood term.
    `WGAN.for_points` runs it over the last tenth of the steps
    (`settings.likelihood_phase`).

    **Logs.** `d_loss` (critic loss, mean over the critic updates), `g_loss`
    (energy, likelihood and anchor terms included), `wasserstein` (the critic's
    estimate `E[D(real)] - E[D(fake)]`), `gradient_penalty` (WGAN-GP only, the
    unweighted mean penalty), `energy_distance` (with the energy term only,
    unweighted), `d_step` and `g_step`. The metrics are `keras.metrics.Mean`
    trackers reset every epoch.

    **Optimizers.** `compile(d_optimizer, g_optimizer)`; without them WGAN-GP
    uses `Adam(1e-4, beta_1=0.5, beta_2=0.9)` and weight clipping uses
    `RMSprop(5e-5)`, one instance per network, as in the papers. Both are saved
    with the model, iterations and slot variables included.

    Losses are means over the per-example terms of the local batch, scaled by
    `1 / num_replicas_in_sync`, so that under `tf.distribute` the summed
    gradients are those of the global-batch mean.

    The model's `call(z)` runs the generator on latent vectors `z`.

    **Backends.** TensorFlow, JAX and PyTorch, with the same API, counters, logs
    and `.keras` format: a model saved on one backend loads and continues training
    on another. Each backend has its own training core in the style of its Keras
    trainer: a traced graph with `tf.GradientTape`s on TensorFlow, a stateless
    `jax.jit`-compiled step on JAX, an eager step on PyTorch. The noise is drawn
    from the model's seed state by each backend's own generator, so the same seed
    gives other numbers on another backend. `tf.distribute` is TensorFlow's own.

    Args:
        generator: A `keras.Model` (or layer) mapping latent vectors of shape
            `(batch, latent_dim)` to samples.
        critic: A `keras.Model` (or layer) mapping samples to one score per
            example, shape `(batch, 1)` or `(batch,)`.
        latent_dim: Int >= 1, the size of the latent vectors.
        n_critic: Int >= 1, critic updates per generator update. Defaults to `5`.
        gradient_penalty: Weight of the gradient penalty (> 0), or `None` to use
            weight clipping. Defaults to `10.0`.
        clip_value: Bound of the critic weights for weight clipping (> 0), or
            `None` (the default) for WGAN-GP. Exactly one of `gradient_penalty`
            and `clip_value` must be set.
        seed: Optional int seed of the latent and interpolation noise. Defaults
            to `None`.
        energy_weight: Weight (>= 0) of the energy distance in the generator's
            loss (see "Energy term"). Defaults to `0.0`: none.
        energy_exponent: The exponent `b` of the distances in the energy term,
            in (0, 2). Defaults to `1.0`.
        energy_unit: The length (> 0) that the energy term measures distances
            in (`WGAN.for_points`: the data's standard deviation). Defaults to
            `1.0`.
        real_gradient_penalty: Weight (>= 0) of a zero-centred gradient
            penalty on the real examples (see "Real-gradient penalty").
            Defaults to `0.0`: none.
        likelihood_weight: Weight (>= 0) of the real batch's negative
            log-density in the generator's loss (see "Likelihood term").
            Defaults to `0.0`: none.
        anchor_weight: Weight (>= 0) of the components' distance to the real
            batch in the generator's loss (see "Anchor term"). Defaults to
            `0.0`: none.
        likelihood_from: The generator step (>= 0) from which the generator
            trains by maximum likelihood alone (see "Likelihood phase"), or
            `None` for never. Defaults to `None`.
        **kwargs: Passed to `keras.Model` (e.g. `name`).

    Example:

    >>> import keras, numpy as np
    >>> from kerasteps.models import WGAN
    >>> generator = keras.Sequential(
    ...     [keras.Input((2,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(2)])
    >>> critic = keras.Sequential(
    ...     [keras.Input((2,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(1)])
    >>> gan = WGAN(generator, critic, latent_dim=2, n_critic=5)
    >>> gan.compile()  # Adam(1e-4, beta_1=0.5, beta_2=0.9) for both
    >>> x = np.random.normal(size=(640, 2)).astype("float32")
    >>> _ = gan.fit(x, batch_size=5 * 64, verbose=0)  # 2 steps
    >>> gan.step_counters()
    {'d_step': 10, 'g_step': 2}
    >>> gan.generate(3, seed=0).shape
    (3, 2)
    """

    #: Name of the counter that is the global step (kerasteps step protocol).
    kerasteps_global_counter = "g_step"

    def __init__(
        self,
        generator: keras.Layer,
        critic: keras.Layer,
        latent_dim: int,
        n_critic: int = 5,
        gradient_penalty: float | None = 10.0,
        clip_value: float | None = None,
        seed: int | None = None,
        energy_weight: float = 0.0,
        energy_exponent: float = 1.0,
        energy_unit: float = 1.0,
        real_gradient_penalty: float = 0.0,
        likelihood_weight: float = 0.0,
        anchor_weight: float = 0.0,
        likelihood_from: int | None = None,
        **kwargs: Any,
    ):
        args = checks.arguments(
            latent_dim,
            n_critic,
            gradient_penalty,
            clip_value,
            seed,
            (energy_weight, energy_exponent, energy_unit),
            real_gradient_penalty,
            likelihood_weight,
            anchor_weight,
            likelihood_from,
        )
        sample_shape = checks.networks(generator, critic, args.latent_dim)
        density = checks.density_layer(generator, args)
        super().__init__(**kwargs)
        self.generator = generator
        self.critic = critic
        self.latent_dim = args.latent_dim
        self.n_critic = args.n_critic
        self.gradient_penalty = args.gradient_penalty
        self.clip_value = args.clip_value
        self.seed = args.seed
        self.energy_weight = args.energy_weight
        self.energy_exponent = args.energy_exponent
        self.energy_unit = args.energy_unit
        self.real_gradient_penalty = args.real_gradient_penalty
        self.likelihood_weight = args.likelihood_weight
        self.anchor_weight = args.anchor_weight
        self.likelihood_from = args.likelihood_from
        # Bound methods, not the layer: the generator already tracks the layer.
        self._log_density = getattr(density, "log_density", None)
        self._mean_distances = getattr(density, "mean_distances", None)
        self._sample_shape = sample_shape
        self._seed_generator = keras.random.SeedGenerator(args.seed, name="wgan_seed")
        self.d_step = self._add_counter("d_step")
        self.g_step = self._add_counter("g_step")
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
        self.wasserstein_tracker = keras.metrics.Mean(name="wasserstein")
        self.gp_tracker = (
            keras.metrics.Mean(name="gradient_penalty")
            if args.gradient_penalty is not None
            else None
        )
        self.energy_tracker = (
            keras.metrics.Mean(name="energy_distance") if args.energy_weight else None
        )
        self.d_optimizer = None
        self.g_optimizer = None
        self.built = True

    @classmethod
    def for_points(
        cls,
        x: Any,
        settings: PointSettings | None = None,
        *,
        seed: int | None = None,
        **compile_kwargs: Any,
    ) -> WGAN:
        """A compiled WGAN-GP with the settings that work on points `(N, d)`.

        `WGAN(...)`'s defaults are the WGAN-GP paper's, for images (penalty
        10, Adam 1e-4, `n_critic` 5); on low-dimensional points they leave
        modes out. This builds what was measured to capture every mode of the
        2-D ring and grid mixtures (`benchmarks/wgan_quality.py`), from `x`:

        - both networks work in standardized units: the generator ends by
          mapping back to the data's mean and scale, and the critic starts by
          standardizing and multiplies its score by the data's standard
          deviation (the penalty weights too), so the same settings fit data
          of any scale;
        - the generator draws from a mixture of Gaussians
          (`GaussianComponents`): its noise picks one of the about
          `settings.components` components of a `MixtureLatent` grid over
          [-2, 2]^d, with probabilities that training learns
          (`settings.learn_weights`), and an MLP of that component's centre
          gives its mean and shape, so that it need not draw points between
          separate modes (a single Gaussian latent must); its input has
          `d + 1` numbers (`latent_dim`);
        - the generator's loss has the energy term (`settings.energy_weight`,
          `settings.energy_exponent`, distances in the data's standard
          deviation), the likelihood term (`settings.likelihood_weight`) and
          the anchor term (`settings.anchor_weight`): without the first two
          the generator draws each mode narrower than the data, without the
          last some components stay off the data; the critic's real-gradient
          penalty is `settings.real_gradient_penalty` (0 by default);
        - the last `settings.likelihood_phase` of the generator steps are the
          likelihood phase (`likelihood_from`): maximum likelihood alone fits
          the components' widths and, with `settings.learn_weights`, their
          probabilities;
        - both networks are ReLU MLPs of `settings.widths`; both optimizers are
          Adam (beta_1 0.5, beta_2 0.9) with the rate decaying linearly from
          `settings.learning_rate` to `settings.final_learning_rate` over
          `settings.steps` generator steps (`n_critic` times as many critic
          updates).

        On TensorFlow, for 5000 steps or more, it compiles the training step
        with XLA (`jit_compile=True`) unless `compile_kwargs` say otherwise:
        Keras's `"auto"` leaves XLA off on CPU-only machines, where these small
        networks train faster with it once its compile time is paid back (10000
        steps on the ring, alone on 2 cores: 0.78-0.98x the wall time and
        0.63-0.82x the CPU time; `benchmarks/wgan_quality.py --jit on|auto`).

        Train it for `settings.steps` steps on `WGAN.make_dataset(x,
        settings.batch_size, settings.n_critic)`. Everything, the latent's
        components and the data's scale included, is saved in `.keras` files.

        Args:
            x: The training points, array-like of shape `(N, d)`, finite.
            settings: A `PointSettings`; `None` (the default) for its defaults.
            seed: Optional int seed of the WGAN's noise.
            **compile_kwargs: Passed to `compile` (e.g. `steps_per_execution`;
                `jit_compile` defaults to `True` on TensorFlow for 5000 steps
                or more, see above, else to `"auto"`).

        Returns:
            A compiled `WGAN`.

        Example:

        >>> import numpy as np
        >>> from kerasteps import mixtures
        >>> from kerasteps.models import WGAN, PointSettings
        >>> x, centres = mixtures.ring_of_gaussians(2000, radius=1.0, seed=0)
        >>> settings = PointSettings(components=9, steps=2)
        >>> gan = WGAN.for_points(x, settings, seed=0)
        >>> batches = WGAN.make_dataset(
        ...     x, settings.batch_size, settings.n_critic, seed=0, repeat=True)
        >>> _ = gan.fit(batches, steps_per_epoch=settings.steps, verbose=0)
        >>> gan.step_counters(), gan.generate(5, seed=0).shape
        ({'d_step': 6, 'g_step': 2}, (5, 2))
        """
        from kerasteps.models import _point_wgan
        from kerasteps.models.point_settings import PointSettings

        settings = PointSettings() if settings is None else settings
        x = _point_wgan.check_points(x, settings.components)
        generator, critic, scaling = _point_wgan.networks(x, settings)
        model = cls(
            generator,
            critic,
            latent_dim=x.shape[1] + 1,
            n_critic=settings.n_critic,
            gradient_penalty=settings.gradient_penalty * scaling.std,
            seed=seed,
            energy_weight=settings.energy_weight,
            energy_exponent=settings.energy_exponent,
            energy_unit=scaling.std,
            real_gradient_penalty=settings.real_gradient_penalty * scaling.std,
            likelihood_weight=settings.likelihood_weight * scaling.std,
            anchor_weight=settings.anchor_weight,
            likelihood_from=_point_wgan.likelihood_from(settings),
        )
        compile_kwargs.setdefault("jit_compile", _point_wgan.jit_compile(settings))
        model.compile(
            _point_wgan.adam(settings, settings.n_critic * settings.steps),
            _point_wgan.adam(settings, settings.steps),
            **compile_kwargs,
        )
        return model

    def _add_counter(self, name: str) -> keras.Variable:
        """A step counter: an integer scalar saved with the model, counted once
        per step under `tf.distribute` (the first replica's value).

        Its dtype is Keras's `"int"`, as an optimizer's `iterations`: int64, but
        int32 on JAX without `jax_enable_x64`, where an int64 variable would be
        truncated to int32 anyway, with a UserWarning at every conversion.
        """
        return self.add_weight(
            shape=(),
            dtype="int",
            initializer="zeros",
            trainable=False,
            aggregation="only_first_replica",
            name=name,
        )

    def compile(
        self,
        d_optimizer: keras.optimizers.Optimizer | str | None = None,
        g_optimizer: keras.optimizers.Optimizer | str | None = None,
        *,
        steps_per_execution: int = 1,
        jit_compile: bool | str = "auto",
        run_eagerly: bool = False,
    ) -> None:
        """Configures the model for training with one optimizer per network.

        Default optimizers: WGAN-GP uses `Adam(1e-4, beta_1=0.5, beta_2=0.9)`
        for both networks (Gulrajani et al. 2017); weight clipping uses
        `RMSprop(5e-5)` for both (Arjovsky et al. 2017). `model.optimizer` is
        `g_optimizer`. Both optimizers are saved with the model.

        With float16 networks (`mixed_float16` policy) the critic optimizer is
        wrapped in `keras.optimizers.LossScaleOptimizer` when the critic
        computes in float16, and the generator optimizer when the generator or
        the critic does; an optimizer that already is a `LossScaleOptimizer` is
        kept as it is.

        Args:
            d_optimizer: Critic optimizer (instance or name). Defaults to `None`,
                the default above.
            g_optimizer: Generator optimizer (instance or name). Defaults to
                `None`, the default above. Must not be the same object as
                `d_optimizer`.
            steps_per_execution: Int >= 1, training steps per call from Python.
                Defaults to `1`.
            jit_compile: Bool or `"auto"`: compile the training step with XLA.
                `"auto"` (the default) turns it on where Keras does (on GPUs and
                TPUs, not on CPU-only machines).
            run_eagerly: Bool, run the step eagerly for debugging. Defaults to
                `False`.

        Example:

        >>> import keras
        >>> from kerasteps.models import WGAN
        >>> g = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
        >>> c = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> gan = WGAN(g, c, latent_dim=2)
        >>> gan.compile(keras.optimizers.Adam(1e-4), keras.optimizers.Adam(1e-4))
        >>> gan.optimizer is gan.g_optimizer
        True
        """
        d_optimizer = self._resolve_optimizer("d_optimizer", d_optimizer)
        g_optimizer = self._resolve_optimizer("g_optimizer", g_optimizer)
        if checks.inner_optimizer(d_optimizer) is checks.inner_optimizer(g_optimizer):
            raise ValueError(
                "`d_optimizer` and `g_optimizer` must be two different optimizer "
                f"instances, received the same object twice: {d_optimizer!r}."
            )
        steps_per_execution = checks.integer("steps_per_execution", steps_per_execution)
        critic_fp16 = checks.uses_float16(self.critic)
        generator_fp16 = checks.uses_float16(self.generator)
        d_optimizer = self._maybe_loss_scale(d_optimizer, critic_fp16)
        g_optimizer = self._maybe_loss_scale(g_optimizer, generator_fp16 or critic_fp16)
        super().compile(
            optimizer=g_optimizer,
            loss=None,
            steps_per_execution=steps_per_execution,
            jit_compile=jit_compile,
            run_eagerly=run_eagerly,
            auto_scale_loss=False,
        )
        self.g_optimizer = g_optimizer
        self.d_optimizer = d_optimizer
        # Create slot variables now, so that loading a saved model finds them.
        if not g_optimizer.built:
            g_optimizer.build(self.generator.trainable_variables)
        if not d_optimizer.built:
            d_optimizer.build(self.critic.trainable_variables)
        self._wgan_compile_config = {
            "steps_per_execution": steps_per_execution,
            "jit_compile": jit_compile,
            "run_eagerly": run_eagerly,
        }

    def _default_optimizer(self) -> keras.optimizers.Optimizer:
        if self.gradient_penalty is not None:
            return keras.optimizers.Adam(learning_rate=1e-4, beta_1=0.5, beta_2=0.9)
        return keras.optimizers.RMSprop(learning_rate=5e-5)

    def _resolve_optimizer(self, name: str, optimizer: Any) -> Any:
        if optimizer is None:
            return self._default_optimizer()
        try:
            optimizer = keras.optimizers.get(optimizer)
        except (ValueError, TypeError) as e:
            raise ValueError(
                f"`{name}` must be a keras optimizer or its name, received "
                f"{optimizer!r}."
            ) from e
        return optimizer

    @staticmethod
    def _maybe_loss_scale(optimizer: Any, float16: bool) -> Any:
        """Wraps `optimizer` for dynamic loss scaling if `float16` and it is not
        a `LossScaleOptimizer` already."""
        if float16 and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            return keras.optimizers.LossScaleOptimizer(optimizer)
        return optimizer

    def get_compile_config(self) -> dict[str, Any]:
        """Returns the compile arguments, both optimizers included, for saving."""
        if not self.compiled or self.d_optimizer is None:
            return {}
        return {
            "d_optimizer": keras.saving.serialize_keras_object(self.d_optimizer),
            "g_optimizer": keras.saving.serialize_keras_object(self.g_optimizer),
            **self._wgan_compile_config,
        }

    def compile_from_config(self, config: dict[str, Any]) -> None:
        """Compiles from `get_compile_config()` output and builds both optimizers,
        so that loading then restores their iterations and slot variables."""
        config = dict(config)
        for name in ("d_optimizer", "g_optimizer"):
            config[name] = keras.saving.deserialize_keras_object(config[name])
        self.compile(**config)

    # ---------------------------------------------------------------- config

    def get_config(self) -> dict[str, Any]:
        """Returns the constructor arguments, generator and critic serialized."""
        config = super().get_config()
        config.update(
            {
                "generator": keras.saving.serialize_keras_object(self.generator),
                "critic": keras.saving.serialize_keras_object(self.critic),
                "latent_dim": self.latent_dim,
                "n_critic": self.n_critic,
                "gradient_penalty": self.gradient_penalty,
                "clip_value": self.clip_value,
                "seed": self.seed,
                "energy_weight": self.energy_weight,
                "energy_exponent": self.energy_exponent,
                "energy_unit": self.energy_unit,
                "real_gradient_penalty": self.real_gradient_penalty,
                "likelihood_weight": self.likelihood_weight,
                "anchor_weight": self.anchor_weight,
                "likelihood_from": self.likelihood_from,
            }
        )
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects=None) -> WGAN:
        """Creates a `WGAN` from `get_config()` output."""
        config = dict(config)
        for name in ("generator", "critic"):
            config[name] = keras.saving.deserialize_keras_object(
                config[name], custom_objects=custom_objects
            )
        return cls(**config)

    def save_own_variables(self, store: Any) -> None:
        """Saves the counters, and the noise's seed state that Keras would skip.

        Keras's `.keras` format saves a layer's weights, not the state of its
        `keras.random.SeedGenerator`s; the WGAN adds its own, so a reloaded model
        draws the noise the original would have drawn next.
        """
        super().save_own_variables(store)
        store[_SEED_KEY] = self._seed_generator.state

    def load_own_variables(self, store: Any) -> None:
        """Loads what `save_own_variables` saved (files without the seed state too)."""
        keys = list(store.keys())
        if _SEED_KEY in keys:
            state = self._seed_generator.state
            state.assign(np.asarray(store[_SEED_KEY]).astype(state.dtype))
            store = {key: store[key] for key in keys if key != _SEED_KEY}
        super().load_own_variables(store)

    # ------------------------------------------------------- step protocol

    def kerasteps_counters(self) -> dict[str, keras.Variable]:
        """Returns `{"d_step": ..., "g_step": ...}`, the counter variables."""
        return {"d_step": self.d_step, "g_step": self.g_step}

    def kerasteps_optimizers(self) -> dict[str, keras.optimizers.Optimizer]:
        """Returns `{"d": d_optimizer, "g": g_optimizer}` once compiled, else `{}`."""
        if self.d_optimizer is None:
            return {}
        return {"d": self.d_optimizer, "g": self.g_optimizer}

    def step_counters(self) -> dict[str, int]:
        """Returns the current counter values, e.g. `{"d_step": 10, "g_step": 2}`."""
        return {
            name: int(keras.ops.convert_to_numpy(v))
            for name, v in self.kerasteps_counters().items()
        }

    @property
    def metrics(self) -> list[keras.metrics.Metric]:
        """The `Mean` trackers of the logged losses; Keras resets them per epoch."""
        trackers = [self.d_loss_tracker, self.g_loss_tracker, self.wasserstein_tracker]
        if self.gp_tracker is not None:
            trackers.append(self.gp_tracker)
        if self.energy_tracker is not None:
            trackers.append(self.energy_tracker)
        return trackers

    # ------------------------------------------------------------- training

    def call(self, inputs: Any, training: bool = False) -> Any:
        """Runs the generator on latent vectors `inputs`."""
        return self.generator(inputs, training=training)

    def fit(
        self, x: Any = None, y: Any = None, batch_size: int | None = None, **kwargs
    ):
        """`keras.Model.fit`, checking the data contract before training.

        For array input, `batch_size` (default 32, as in Keras) must be a multiple
        of `n_critic`: each element holds `n_critic` critic batches.
        """
        checks.fit_data(
            x,
            batch_size,
            kwargs.get("steps_per_epoch"),
            self._sample_shape,
            self.n_critic,
        )
        if _is_dataset(x):
            # A dataset is shuffled by its own pipeline; Keras's default
            # `shuffle=True` would only warn.
            kwargs.setdefault("shuffle", False)
        return super().fit(x, y, batch_size=batch_size, **kwargs)

    # ---------------------------------------------------------------- noise

    def _draw_latent(self, size: Any) -> Any:
        """Latent vectors, shape (size, latent_dim), from the model's seed state."""
        return keras.random.normal(
            (size, self.latent_dim),
            dtype=self.generator.compute_dtype,
            seed=self._seed_generator,
        )

    def _draw_uniform(self, size: Any, dtype: Any) -> Any:
        """Interpolation weights, shape (size, 1, ..., 1), from the seed state."""
        ones = (1,) * len(self._sample_shape)
        return keras.random.uniform(
            (size, *ones), dtype=dtype, seed=self._seed_generator
        )

    def test_step(self, data: Any) -> dict[str, Any]:
        """Not supported: a WGAN has no validation loss."""
        raise NotImplementedError(
            "WGAN has no evaluation step: evaluate samples with `generate()` and "
            "e.g. `kerasteps.mixtures.mode_coverage`."
        )

    # ------------------------------------------------------------- sampling

    def generate(
        self, n: int, seed: int | None = None, batch_size: int = 4096
    ) -> np.ndarray:
        """Returns `n` samples of the generator as a NumPy array.

        Args:
            n: Number of samples, an int >= 0.
            seed: Optional int seed of the latent vectors; the same seed gives
                the same samples. Defaults to `None`.
            batch_size: Int >= 1, samples generated per generator call.
                Defaults to `4096`.

        Returns:
            A NumPy array of shape `(n, *sample_shape)`.

        Example:

        >>> import keras
        >>> from kerasteps.models import WGAN
        >>> g = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
        >>> c = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> WGAN(g, c, latent_dim=2).generate(5, seed=1).shape
        (5, 2)
        """
        n = checks.integer("n", n, 0)
        batch_size = checks.integer("batch_size", batch_size)
        rng = np.random.default_rng(seed)
        z = rng.standard_normal((n, self.latent_dim)).astype(
            self.generator.compute_dtype
        )
        chunks = [
            keras.ops.convert_to_numpy(
                self.generator(z[i : i + batch_size], training=False)
            )
            for i in range(0, n, batch_size)
        ]
        if not chunks:
            return np.zeros((0, *self._sample_shape), dtype=np.float32)
        return np.concatenate(chunks, axis=0)

    #: Turns real examples into the dataset that `WGAN.fit` expects: elements of
    #: `n_critic` fresh critic batches (`kerasteps.data.gan_batches`, documented
    #: there; `WGAN.make_dataset(x, batch_size, n_critic, seed=...)`).
    make_dataset = staticmethod(data.gan_batches)


def _is_dataset(x: Any) -> bool:
    try:
        import tensorflow as tf
    except ImportError:  # pragma: no cover - TensorFlow is a dependency
        return False
    return isinstance(x, tf.data.Dataset)
