"""`WGAN`: a Wasserstein GAN `keras.Model` with its own step counters."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from kerasteps import data
from kerasteps.models import _wgan_checks as checks

__all__ = ["WGAN"]

#: Key of the seed generator's state in the WGAN's own `.keras` variables.
_SEED_KEY = "seed_state"

#: The default WGAN-GP optimizers' rate: linear from the first to the second over
#: the run (`compile`'s `total_steps`), measured on PacGAN's ring and grid with
#: the point networks (`benchmarks/wgan_candidates.py`, docs/benchmarks.md).
DEFAULT_LEARNING_RATE, DEFAULT_FINAL_LEARNING_RATE = 2e-3, 1e-5
#: The run's default length in generator steps (`compile`'s `total_steps`).
DEFAULT_TOTAL_STEPS = 6000

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

    **Logs.** `d_loss` (critic loss, mean over the critic updates), `g_loss`,
    `wasserstein` (the critic's estimate `E[D(real)] - E[D(fake)]`),
    `gradient_penalty` (WGAN-GP only, the unweighted mean penalty), `d_step` and
    `g_step`. The metrics are `keras.metrics.Mean` trackers reset every epoch.

    **Optimizers.** `compile(d_optimizer, g_optimizer, total_steps=...)`; without
    them WGAN-GP uses Adam (beta_1 0.5, beta_2 0.9) with a rate decaying
    linearly from 2e-3 to 1e-5 over the run's `total_steps` generator steps (the
    critic's over `n_critic` times as many updates), which trains the point
    networks of `build_point_generator` and `build_point_critic`; weight
    clipping uses the original WGAN's `RMSprop(5e-5)`. For images, pass the
    WGAN-GP paper's `Adam(1e-4, beta_1=0.5, beta_2=0.9)` and
    `gradient_penalty=10.0` (docs/wgan.md). Both optimizers are saved
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
            weight clipping. Defaults to `0.1`, measured on points with the
            default `compile()`; the WGAN-GP paper's images use `10.0`.
        clip_value: Bound of the critic weights for weight clipping (> 0), or
            `None` (the default) for WGAN-GP. Exactly one of `gradient_penalty`
            and `clip_value` must be set.
        seed: Optional int seed of the latent and interpolation noise. Defaults
            to `None`.
        **kwargs: Passed to `keras.Model` (e.g. `name`).

    Example:

    >>> import keras, numpy as np
    >>> from kerasteps.models import WGAN
    >>> generator = keras.Sequential(
    ...     [keras.Input((2,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(2)])
    >>> critic = keras.Sequential(
    ...     [keras.Input((2,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(1)])
    >>> gan = WGAN(generator, critic, latent_dim=2, n_critic=5)
    >>> gan.compile()  # Adam, 2e-3 decaying to 1e-5 over 6000 generator steps
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
        gradient_penalty: float | None = 0.1,
        clip_value: float | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ):
        latent_dim, n_critic, gradient_penalty, clip_value, seed = checks.arguments(
            latent_dim, n_critic, gradient_penalty, clip_value, seed
        )
        sample_shape = checks.networks(generator, critic, latent_dim)
        super().__init__(**kwargs)
        self.generator = generator
        self.critic = critic
        self.latent_dim = latent_dim
        self.n_critic = n_critic
        self.gradient_penalty = gradient_penalty
        self.clip_value = clip_value
        self.seed = seed
        self._sample_shape = sample_shape
        self._seed_generator = keras.random.SeedGenerator(seed, name="wgan_seed")
        self.d_step = self._add_counter("d_step")
        self.g_step = self._add_counter("g_step")
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
        self.wasserstein_tracker = keras.metrics.Mean(name="wasserstein")
        self.gp_tracker = None
        if gradient_penalty is not None:
            self.gp_tracker = keras.metrics.Mean(name="gradient_penalty")
        self.d_optimizer = None
        self.total_steps = None
        self.g_optimizer = None
        self.built = True

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
        total_steps: int = DEFAULT_TOTAL_STEPS,
        steps_per_execution: int = 1,
        jit_compile: bool | str = "auto",
        run_eagerly: bool = False,
    ) -> None:
        """Configures the model for training with one optimizer per network.

        Default optimizers, one instance per network: WGAN-GP uses Adam
        (beta_1 0.5, beta_2 0.9) whose rate decays linearly from 2e-3 to 1e-5
        (`keras.optimizers.schedules.PolynomialDecay`) over `total_steps`
        generator updates, and over `n_critic * total_steps` critic updates;
        weight clipping uses `RMSprop(5e-5)` for both (Arjovsky et al. 2017).
        The schedules are part of the optimizers, saved with the model: a later
        `fit()` or a restored checkpoint continues on the same schedule.
        `model.optimizer` is `g_optimizer`.

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
            total_steps: Int >= 1, the run's length in generator steps, over
                which the default WGAN-GP optimizers' rates decay (kept as
                `model.total_steps`; an optimizer you pass keeps its own rate).
                Defaults to `6000`.
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
        >>> gan.compile(total_steps=1000)
        >>> round(float(gan.d_optimizer.learning_rate), 6), gan.total_steps
        (0.002, 1000)
        >>> gan.compile(keras.optimizers.Adam(1e-4), keras.optimizers.Adam(1e-4))
        >>> gan.optimizer is gan.g_optimizer
        True
        """
        total_steps = checks.integer("total_steps", total_steps)
        d_optimizer = self._resolve_optimizer(
            "d_optimizer", d_optimizer, self.n_critic * total_steps
        )
        g_optimizer = self._resolve_optimizer("g_optimizer", g_optimizer, total_steps)
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
        self.total_steps = total_steps
        # Create slot variables now, so that loading a saved model finds them.
        if not g_optimizer.built:
            g_optimizer.build(self.generator.trainable_variables)
        if not d_optimizer.built:
            d_optimizer.build(self.critic.trainable_variables)
        self._wgan_compile_config = {
            "total_steps": total_steps,
            "steps_per_execution": steps_per_execution,
            "jit_compile": jit_compile,
            "run_eagerly": run_eagerly,
        }

    def _resolve_optimizer(self, name: str, optimizer: Any, updates: int) -> Any:
        """`optimizer` (an instance or name) as an optimizer, or for `None` the
        default optimizer of a network updated `updates` times in a run."""
        if optimizer is None:
            if self.gradient_penalty is None:
                return keras.optimizers.RMSprop(learning_rate=5e-5)
            rate = keras.optimizers.schedules.PolynomialDecay(
                DEFAULT_LEARNING_RATE, updates, DEFAULT_FINAL_LEARNING_RATE
            )
            return keras.optimizers.Adam(learning_rate=rate, beta_1=0.5, beta_2=0.9)
        try:
            return keras.optimizers.get(optimizer)
        except (ValueError, TypeError) as e:
            raise ValueError(
                f"`{name}` must be a keras optimizer or its name, received "
                f"{optimizer!r}."
            ) from e

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
        return {
            **super().get_config(),
            "generator": keras.saving.serialize_keras_object(self.generator),
            "critic": keras.saving.serialize_keras_object(self.critic),
            "latent_dim": self.latent_dim,
            "n_critic": self.n_critic,
            "gradient_penalty": self.gradient_penalty,
            "clip_value": self.clip_value,
            "seed": self.seed,
        }

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
        return trackers if self.gp_tracker is None else [*trackers, self.gp_tracker]

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
        import tensorflow as tf

        steps_per_epoch = kwargs.get("steps_per_epoch")
        checks.fit_data(
            x, batch_size, steps_per_epoch, self._sample_shape, self.n_critic
        )
        if isinstance(x, tf.data.Dataset):
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
        z = np.random.default_rng(seed).standard_normal((n, self.latent_dim))
        z = z.astype(self.generator.compute_dtype)
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
