"""`WGAN`: a Wasserstein GAN `keras.Model` with its own step counters."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from kerasteps._validate import check_int, check_positive_number

__all__ = ["WGAN"]

#: Key of the seed generator's state in the WGAN's own `.keras` variables.
_SEED_KEY = "seed_state"

_GP_NORM_EPSILON = 1e-12


def _check_positive_float(name: str, value: Any) -> float:
    return check_positive_number(name, value, allowed=" or None")


def _check_int(name: str, value: Any, minimum: int = 1) -> int:
    return check_int(name, value, minimum, wrong_type=ValueError)


def _shape_str(shape: Any) -> str:
    return str(tuple(shape))


def _uses_float16(layer: keras.Layer) -> bool:
    """Whether the layer or any layer inside it computes in float16."""
    flatten = getattr(layer, "_flatten_layers", None)
    layers = list(flatten(include_self=True)) if callable(flatten) else [layer]
    return any(getattr(sub, "compute_dtype", None) == "float16" for sub in layers)


def _inner_optimizer(optimizer: Any) -> Any:
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.inner_optimizer
    return optimizer


@keras.saving.register_keras_serializable(package="kerasteps")
class WGAN(keras.Model):
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
    non-trainable int64 variables of the model, saved in `.keras` files and by
    `save_weights`. They count *applied* updates: each grows by the increase of
    its optimizer's `iterations`, so `d_step == d_optimizer.iterations` and
    `g_step == g_optimizer.iterations` (for optimizers compiled fresh, with
    `iterations == 0`). The global step is `g_step`
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

    **Optimizers.** `compile(d_optimizer, g_optimizer)`; without them WGAN-GP
    uses `Adam(1e-4, beta_1=0.5, beta_2=0.9)` and weight clipping uses
    `RMSprop(5e-5)`, one instance per network, as in the papers. Both are saved
    with the model, iterations and slot variables included.

    Losses are means over the per-example terms of the local batch, scaled by
    `1 / num_replicas_in_sync`, so that under `tf.distribute` the summed
    gradients are those of the global-batch mean.

    The model's `call(z)` runs the generator on latent vectors `z`.
    Only the TensorFlow backend is supported.

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
        **kwargs: Any,
    ):
        latent_dim = _check_int("latent_dim", latent_dim)
        n_critic = _check_int("n_critic", n_critic)
        if gradient_penalty is not None and clip_value is not None:
            raise ValueError(
                "Pass exactly one of `gradient_penalty` (WGAN-GP) and `clip_value` "
                f"(weight clipping), received gradient_penalty={gradient_penalty!r} "
                f"and clip_value={clip_value!r}. For weight clipping pass "
                "`gradient_penalty=None`."
            )
        if gradient_penalty is None and clip_value is None:
            raise ValueError(
                "Pass exactly one of `gradient_penalty` (WGAN-GP) and `clip_value` "
                "(weight clipping), received gradient_penalty=None and "
                "clip_value=None."
            )
        if gradient_penalty is not None:
            gradient_penalty = _check_positive_float(
                "gradient_penalty", gradient_penalty
            )
        if clip_value is not None:
            clip_value = _check_positive_float("clip_value", clip_value)
        if seed is not None:
            seed = _check_int("seed", seed, 0)
        for name, layer in (("generator", generator), ("critic", critic)):
            if not isinstance(layer, keras.Layer):
                raise ValueError(
                    f"`{name}` must be a keras.Model or keras.Layer, received "
                    f"{layer!r} of type {type(layer).__name__}."
                )
        if keras.backend.backend() != "tensorflow":
            raise ValueError(
                "kerasteps.models.WGAN needs the TensorFlow backend, the Keras "
                f"backend is {keras.backend.backend()!r}."
            )
        super().__init__(**kwargs)
        self.generator = generator
        self.critic = critic
        self.latent_dim = latent_dim
        self.n_critic = n_critic
        self.gradient_penalty = gradient_penalty
        self.clip_value = clip_value
        self.seed = seed
        self._sample_shape = self._build_and_check_networks()
        self._seed_generator = keras.random.SeedGenerator(seed, name="wgan_seed")
        self.d_step = self.add_weight(
            shape=(),
            dtype="int64",
            initializer="zeros",
            trainable=False,
            aggregation="only_first_replica",
            name="d_step",
        )
        self.g_step = self.add_weight(
            shape=(),
            dtype="int64",
            initializer="zeros",
            trainable=False,
            aggregation="only_first_replica",
            name="g_step",
        )
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
        self.wasserstein_tracker = keras.metrics.Mean(name="wasserstein")
        self.gp_tracker = (
            keras.metrics.Mean(name="gradient_penalty")
            if gradient_penalty is not None
            else None
        )
        self.d_optimizer = None
        self.g_optimizer = None
        self.built = True

    # ------------------------------------------------------------------ checks

    def _build_and_check_networks(self) -> tuple[int, ...]:
        """Builds generator and critic and checks their shapes; returns the
        sample shape (without the batch axis)."""
        latent_spec = keras.KerasTensor((None, self.latent_dim))
        inputs = getattr(self.generator, "inputs", None)
        if inputs:
            if len(inputs) != 1 or len(inputs[0].shape) != 2:
                raise ValueError(
                    "The generator must take one input of shape (batch, latent_dim), "
                    f"it takes {[_shape_str(t.shape) for t in inputs]}."
                )
            if inputs[0].shape[-1] not in (None, self.latent_dim):
                raise ValueError(
                    f"`latent_dim`={self.latent_dim} does not match the generator's "
                    f"input dimension {inputs[0].shape[-1]} (generator input shape "
                    f"{_shape_str(inputs[0].shape)})."
                )
        try:
            if not self.generator.built:
                self.generator.build((None, self.latent_dim))
            fake_spec = self.generator.compute_output_spec(latent_spec)
        except Exception as e:
            raise ValueError(
                f"The generator cannot take latent vectors of shape (batch, "
                f"{self.latent_dim}) (`latent_dim`={self.latent_dim}): {e}"
            ) from e
        if not isinstance(fake_spec, keras.KerasTensor):
            raise ValueError(
                "The generator must return a single tensor of samples, it returns "
                f"{fake_spec!r}."
            )
        sample_shape = tuple(fake_spec.shape[1:])
        if any(d is None for d in sample_shape):
            raise ValueError(
                "The generator's output shape must be known except for the batch "
                f"axis, it is {_shape_str(fake_spec.shape)}."
            )
        try:
            if not self.critic.built:
                self.critic.build(fake_spec.shape)
            score_spec = self.critic.compute_output_spec(fake_spec)
        except Exception as e:
            raise ValueError(
                "The critic cannot take the generator's samples of shape "
                f"{_shape_str(fake_spec.shape)}: {e}"
            ) from e
        score_shape = getattr(score_spec, "shape", None)
        if not isinstance(score_spec, keras.KerasTensor) or tuple(
            score_shape[1:]
        ) not in ((), (1,)):
            raise ValueError(
                "The critic must return one value per example, shape (batch, 1) "
                f"or (batch,); its output shape is "
                f"{_shape_str(score_shape) if score_shape is not None else score_spec}."
            )
        return sample_shape

    def _check_data_shape(self, shape: Any, what: str) -> None:
        """Raises ValueError if a statically known data shape breaks the contract."""
        shape = tuple(shape)
        expected_rank = len(self._sample_shape) + 1
        if len(shape) != expected_rank:
            raise ValueError(
                f"Each training element must have shape (n_critic * batch_size, "
                f"*{self._sample_shape}) = rank {expected_rank} to match the "
                f"critic input, {what} has shape {_shape_str(shape)}. See the "
                "WGAN data contract; `WGAN.make_dataset` builds a suitable dataset."
            )
        for got, want in zip(shape[1:], self._sample_shape, strict=True):
            if got is not None and got != want:
                raise ValueError(
                    f"Each training example must have shape {self._sample_shape} "
                    f"(the generator's sample shape), {what} has shape "
                    f"{_shape_str(shape)}."
                )
        if shape[0] is not None and (
            shape[0] < self.n_critic or shape[0] % self.n_critic
        ):
            raise ValueError(
                f"Each training element must hold n_critic * batch_size examples "
                f"(n_critic={self.n_critic}), {what} has {shape[0]}, which is not a "
                f"multiple of {self.n_critic}. Use `fit(x, batch_size=n_critic * B)` "
                "or `WGAN.make_dataset(x, batch_size=B, n_critic=n_critic)`."
            )

    # --------------------------------------------------------------- compile

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
        if _inner_optimizer(d_optimizer) is _inner_optimizer(g_optimizer):
            raise ValueError(
                "`d_optimizer` and `g_optimizer` must be two different optimizer "
                f"instances, received the same object twice: {d_optimizer!r}."
            )
        steps_per_execution = _check_int("steps_per_execution", steps_per_execution)
        critic_fp16 = _uses_float16(self.critic)
        generator_fp16 = _uses_float16(self.generator)
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
        self._check_fit_data(x, batch_size, kwargs.get("steps_per_epoch"))
        if isinstance(x, tf.data.Dataset):
            # A dataset is shuffled by its own pipeline; Keras's default
            # `shuffle=True` would only warn.
            kwargs.setdefault("shuffle", False)
        return super().fit(x, y, batch_size=batch_size, **kwargs)

    def _check_fit_data(
        self, x: Any, batch_size: int | None, steps_per_epoch: int | None
    ) -> None:
        if isinstance(x, tf.data.Dataset):
            spec = x.element_spec
            if isinstance(spec, tuple):
                spec = spec[0]
            if isinstance(spec, tf.TensorSpec):
                self._check_data_shape(spec.shape.as_list(), "the dataset element")
            return
        shape = getattr(x, "shape", None)
        if shape is None or isinstance(x, (dict, list, tuple)):
            return
        shape = tuple(shape)
        self._check_data_shape((None, *shape[1:]), "`x`")
        size = 32 if batch_size is None else batch_size
        if size % self.n_critic:
            raise ValueError(
                f"`batch_size` must be a multiple of n_critic={self.n_critic}, "
                f"received batch_size={batch_size!r}: each element holds n_critic "
                "critic batches of batch_size / n_critic examples."
            )
        if steps_per_epoch is None and 0 < shape[0] % size < self.n_critic:
            raise ValueError(
                f"`x` has {shape[0]} examples, so the last batch of "
                f"batch_size={size} holds {shape[0] % size} < n_critic="
                f"{self.n_critic} examples. Drop or add examples, or use "
                "`WGAN.make_dataset`, which drops the remainder."
            )

    def _real_batches(self, data: Any) -> tf.Tensor:
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        if isinstance(x, (tuple, list)):
            if len(x) != 1:
                raise ValueError(
                    "Each training element must be one tensor of real examples, "
                    f"received a structure of {len(x)} tensors."
                )
            x = x[0]
        if isinstance(x, dict):
            raise ValueError(
                "Each training element must be one tensor of real examples, "
                f"received a dict with keys {sorted(x)}."
            )
        x = tf.convert_to_tensor(x)
        self._check_data_shape(x.shape.as_list(), "the element")
        batch = tf.shape(x)[0] // self.n_critic
        if x.shape[0] is None:
            x = x[: batch * self.n_critic]
        # Row j * n_critic + i is example j of critic batch i. With this strided
        # split, tf.distribute's contiguous split of an element across replicas
        # gives each replica its share of every critic batch, so training with
        # R replicas matches training on one device.
        x = tf.reshape(x, (batch, self.n_critic, *self._sample_shape))
        return x

    def _replica_scale(self) -> float:
        return 1.0 / tf.distribute.get_strategy().num_replicas_in_sync

    def _critic(self, x: tf.Tensor) -> tf.Tensor:
        """Critic scores in float32, as a vector of shape (batch,)."""
        return tf.cast(tf.reshape(self.critic(x, training=True), (-1,)), tf.float32)

    @staticmethod
    def _apply(optimizer: Any, tape: tf.GradientTape, loss: tf.Tensor, variables):
        """Applies the gradients of `loss` (scaled first by a
        `LossScaleOptimizer`, which unscales them and skips the update if they
        are not finite); returns how much `optimizer.iterations` grew (1 if the
        update was applied, 0 if it was skipped), as int64."""
        before = tf.cast(tf.identity(optimizer.iterations), tf.int64)
        gradients = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(gradients, variables, strict=True))
        return tf.cast(tf.identity(optimizer.iterations), tf.int64) - before

    def _replica_share(self, draw: Any, batch: tf.Tensor) -> tf.Tensor:
        """Returns this replica's rows of a draw for the global batch.

        Under tf.distribute every replica draws the same global tensor (the seed
        state is shared) and keeps its own slice, so the noise matches training
        on one device.
        """
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        context = tf.distribute.get_replica_context()
        if replicas == 1 or context is None:
            return draw(batch)
        replica = tf.cast(context.replica_id_in_sync_group, batch.dtype)
        return draw(batch * replicas)[replica * batch : (replica + 1) * batch]

    def _latent(self, batch: tf.Tensor) -> tf.Tensor:
        return self._replica_share(
            lambda size: keras.random.normal(
                (size, self.latent_dim),
                dtype=self.generator.compute_dtype,
                seed=self._seed_generator,
            ),
            batch,
        )

    def _uniform(self, batch: tf.Tensor, dtype: Any) -> tf.Tensor:
        """Interpolation weights, shape (batch, 1, ..., 1)."""
        ones = (1,) * len(self._sample_shape)
        return self._replica_share(
            lambda size: keras.random.uniform(
                (size, *ones), dtype=dtype, seed=self._seed_generator
            ),
            batch,
        )

    def _critic_update(
        self, real: tf.Tensor, fake: tf.Tensor, e: tf.Tensor | None
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None]:
        """One critic update; returns (d_loss, wasserstein, penalty or None,
        1 if the update was applied else 0)."""
        variables = self.critic.trainable_variables
        penalty = None
        with tf.GradientTape() as tape:
            d_real = self._critic(real)
            d_fake = self._critic(fake)
            per_example = d_fake - d_real
            if e is not None:
                x_hat = e * real + (1.0 - e) * fake
                with tf.GradientTape() as gp_tape:
                    gp_tape.watch(x_hat)
                    d_hat = self._critic(x_hat)
                grads = tf.cast(gp_tape.gradient(d_hat, x_hat), tf.float32)
                axes = list(range(1, len(self._sample_shape) + 1))
                norm = tf.sqrt(
                    tf.reduce_sum(tf.square(grads), axis=axes) + _GP_NORM_EPSILON
                )
                per_example_penalty = tf.square(norm - 1.0)
                penalty = tf.reduce_mean(per_example_penalty)
                per_example = per_example + self.gradient_penalty * per_example_penalty
            d_loss = tf.reduce_mean(per_example)
            scaled_loss = d_loss * self._replica_scale()
            if isinstance(self.d_optimizer, keras.optimizers.LossScaleOptimizer):
                scaled_loss = self.d_optimizer.scale_loss(scaled_loss)
        applied = self._apply(self.d_optimizer, tape, scaled_loss, variables)
        if self.clip_value is not None:
            for v in variables:
                v.assign(tf.clip_by_value(v, -self.clip_value, self.clip_value))
        wasserstein = tf.reduce_mean(d_real) - tf.reduce_mean(d_fake)
        return d_loss, wasserstein, penalty, applied

    def _generator_update(self, batch: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """One generator update; returns (g_loss, 1 if applied else 0)."""
        z = self._latent(batch)
        variables = self.generator.trainable_variables
        with tf.GradientTape() as tape:
            fake = self.generator(z, training=True)
            g_loss = -tf.reduce_mean(self._critic(fake))
            scaled_loss = g_loss * self._replica_scale()
            if isinstance(self.g_optimizer, keras.optimizers.LossScaleOptimizer):
                scaled_loss = self.g_optimizer.scale_loss(scaled_loss)
        applied = self._apply(self.g_optimizer, tape, scaled_loss, variables)
        return g_loss, applied

    def train_step(self, data: Any) -> dict[str, Any]:
        """`n_critic` critic updates on fresh real batches, then one generator
        update; returns the metrics and both counters."""
        n = self.n_critic
        real = self._real_batches(data)
        batch = tf.shape(real)[0]
        # Unrolled in the traced graph: n_critic is small, and one graph lets
        # TF (and XLA with jit_compile=True) schedule all updates together.
        results = []
        for i in range(n):
            fake = self.generator(self._latent(batch), training=True)
            e = None
            if self.gradient_penalty is not None:
                e = self._uniform(batch, fake.dtype)
            real_i = tf.cast(real[:, i], fake.dtype)
            results.append(self._critic_update(real_i, fake, e))
        # Count applied updates only: a LossScaleOptimizer skips an update with
        # non-finite gradients without increasing its iterations.
        self.d_step.assign_add(tf.add_n([r[3] for r in results]))
        g_loss, g_applied = self._generator_update(batch)
        self.g_step.assign_add(g_applied)

        # Every train_step has n_critic critic updates, so updating the mean
        # trackers once with the mean over them equals updating them n times.
        self.d_loss_tracker.update_state(tf.reduce_mean([r[0] for r in results]))
        self.wasserstein_tracker.update_state(tf.reduce_mean([r[1] for r in results]))
        if self.gp_tracker is not None:
            self.gp_tracker.update_state(tf.reduce_mean([r[2] for r in results]))
        self.g_loss_tracker.update_state(g_loss)
        logs = {m.name: m.result() for m in self.metrics}
        logs["d_step"] = tf.identity(self.d_step)
        logs["g_step"] = tf.identity(self.g_step)
        return logs

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
        n = _check_int("n", n, 0)
        batch_size = _check_int("batch_size", batch_size)
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

    @classmethod
    def make_dataset(
        cls,
        x: Any,
        batch_size: int,
        n_critic: int = 5,
        *,
        shuffle: bool = True,
        seed: int | None = None,
        repeat: bool = False,
    ) -> tf.data.Dataset:
        """Turns real examples into the dataset that `WGAN.fit` expects.

        Each element holds `n_critic * batch_size` examples, that is `n_critic`
        fresh critic batches of `batch_size`; the remainder that does not fill an
        element is dropped.

        Args:
            x: A NumPy array or tensor of examples (first axis = examples), or a
                `tf.data.Dataset` of single (unbatched) examples.
            batch_size: Int >= 1, the critic (and generator) batch size `B`.
            n_critic: Int >= 1, the model's `n_critic`. Defaults to `5`.
            shuffle: Bool, reshuffle the examples every epoch. Defaults to `True`.
            seed: Optional int shuffle seed. Defaults to `None`.
            repeat: Bool, repeat forever (then pass `steps_per_epoch` to `fit`).
                Defaults to `False`.

        Returns:
            A `tf.data.Dataset` of tensors of shape
            `(n_critic * batch_size, *example_shape)`.

        Example:

        >>> import numpy as np
        >>> from kerasteps.models import WGAN
        >>> ds = WGAN.make_dataset(np.zeros((100, 2), "float32"), 8, n_critic=5)
        >>> ds.element_spec.shape.as_list(), int(ds.cardinality())
        ([40, 2], 2)
        """
        batch_size = _check_int("batch_size", batch_size)
        n_critic = _check_int("n_critic", n_critic)
        size = n_critic * batch_size
        if isinstance(x, tf.data.Dataset):
            return cls._dataset_from_dataset(x, size, shuffle, seed, repeat)
        x = np.asarray(x)
        if x.ndim < 2:
            raise ValueError(
                "`x` must be an array of examples of rank >= 2, shape "
                f"(n_examples, *example_shape), received shape {x.shape}."
            )
        if np.issubdtype(x.dtype, np.floating) and x.dtype != np.float32:
            x = x.astype(np.float32)
        n = len(x)
        if n < size:
            raise ValueError(
                f"`x` has {n} examples, fewer than one element of n_critic * "
                f"batch_size = {n_critic} * {batch_size} = {size}."
            )
        # Shuffle indices once per pass and gather whole elements: much cheaper
        # than shuffling and batching example by example.
        elements = n // size
        examples = tf.constant(x)
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        seeds = seeds if repeat else seeds.take(1)

        def one_pass(pass_seed: tf.Tensor) -> tf.data.Dataset:
            order = tf.range(n, dtype=tf.int64)
            if shuffle:
                order = tf.random.experimental.stateless_shuffle(
                    order, seed=tf.stack([pass_seed, tf.constant(0, tf.int64)])
                )
            order = tf.reshape(order[: elements * size], (elements, size))
            return tf.data.Dataset.from_tensor_slices(order)

        ds = seeds.flat_map(one_pass)
        ds = ds.map(
            lambda idx: tf.gather(examples, idx), num_parallel_calls=tf.data.AUTOTUNE
        )
        cardinality = tf.data.INFINITE_CARDINALITY if repeat else elements
        ds = ds.apply(tf.data.experimental.assert_cardinality(cardinality))
        return ds.prefetch(tf.data.AUTOTUNE)

    @staticmethod
    def _dataset_from_dataset(
        ds: tf.data.Dataset,
        size: int,
        shuffle: bool,
        seed: int | None,
        repeat: bool,
    ) -> tf.data.Dataset:
        if isinstance(ds.element_spec, tuple):
            ds = ds.map(lambda *t: t[0])
        shape = getattr(ds.element_spec, "shape", None)
        if shape is None or shape.rank is None or shape.rank < 1:
            raise ValueError(
                "`x` must be a dataset of single examples of rank >= 1, its "
                f"element spec is {ds.element_spec}."
            )
        n = int(ds.cardinality())
        if 0 <= n < size:
            raise ValueError(
                f"`x` has {n} examples, fewer than one element of n_critic * "
                f"batch_size = {size}."
            )
        if shuffle:
            buffer = 10_000 if n < 0 else min(n, 100_000)
            ds = ds.shuffle(max(buffer, 1), seed=seed, reshuffle_each_iteration=True)
        if repeat:
            ds = ds.repeat()
        ds = ds.batch(size, drop_remainder=True)
        return ds.prefetch(tf.data.AUTOTUNE)
