"""The WGAN's training step on JAX (private).

In the style of Keras's JAX trainer (`keras/src/backend/jax/trainer.py`): a
stateless `train_step(state, data) -> (logs, state)` that Keras compiles with
`jax.jit`. Networks run through `stateless_call`, optimizers through
`stateless_apply`, metrics through `stateless_update_state`, and the noise's seed
state through a `StatelessScope`. Within the step, the state's values are kept in
one dict by variable (`id(variable)`), from which each network, optimizer and
metric reads its own and into which it writes its new ones.

Keras's JAX trainer carries the variables of one optimizer, `model.optimizer`, from
step to step; the WGAN has two. `JaxSteps` therefore carries both, the generator's
then the critic's, in the trainer's optimizer slot: the four trainer methods that
read `model.optimizer.variables` are redefined with both optimizers' variables where
Keras has one's (`kerasteps._compat.JaxTrainerWithOptimizers`), and are otherwise
Keras's own.
"""

from __future__ import annotations

from typing import Any

import jax
import keras

from kerasteps import _compat
from kerasteps.models._wgan_step import (
    CriticResult,
    critic_batches,
    critic_result,
    penalty_terms,
    scores,
    tracked_values,
)


def _read(values: dict, variables: list) -> list:
    """The values of `variables` in `values`, a dict by variable id."""
    return [values[id(v)] for v in variables]


def _write(values: dict, variables: list, new: list) -> None:
    """Puts the `new` values of `variables` into `values`."""
    values.update(zip(map(id, variables), new, strict=True))


def _scale(optimizer: Any, values: dict, loss: Any) -> Any:
    """`optimizer.scale_loss(loss)` for a `LossScaleOptimizer`, its state read
    from `values`; `loss` itself for another optimizer."""
    if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return loss
    mapping = [(v, values[id(v)]) for v in optimizer.variables]
    with keras.StatelessScope(state_mapping=mapping):
        return optimizer.scale_loss(loss)


def _call(layer: Any, values: dict, x: Any, trainable: list | None = None) -> tuple:
    """`layer(x, training=True)` statelessly on its values in `values` (its
    trainable ones `trainable` where given); returns the output and the layer's
    new non-trainable values."""
    if trainable is None:
        trainable = _read(values, layer.trainable_variables)
    non_trainable = _read(values, layer.non_trainable_variables)
    return layer.stateless_call(trainable, non_trainable, x, training=True)


class JaxSteps(_compat.JaxTrainerWithOptimizers):
    """`WGAN.train_step` for the JAX backend (a mixin of `WGAN`)."""

    def _all_optimizer_variables(self) -> list:
        if self.d_optimizer is None:
            return list(self.optimizer.variables) if self.optimizer else []
        return [*self.g_optimizer.variables, *self.d_optimizer.variables]

    def train_step(self, state: tuple, data: Any) -> tuple[dict[str, Any], tuple]:
        """`n_critic` critic updates on fresh real batches, then one generator
        update, statelessly; returns the logs and the new state."""
        groups = (
            self.trainable_variables,
            self.non_trainable_variables,
            self._all_optimizer_variables(),
            self.metrics_variables,
        )
        values: dict = {}
        for variables, group_values in zip(groups, state, strict=True):
            _write(values, variables, group_values)
        real = critic_batches(data, self.n_critic, self._sample_shape)
        seed_state = self._seed_generator.state
        with keras.StatelessScope(
            state_mapping=[(seed_state, values[id(seed_state)])]
        ) as noise:
            results = [
                self._critic_update(values, real[:, i]) for i in range(self.n_critic)
            ]
            z = self._draw_latent(real.shape[0])
            values[id(seed_state)] = noise.get_current_value(seed_state)
        g_loss, g_applied = self._generator_update(values, z)
        values[id(self.d_step)] += sum(r.applied for r in results)
        values[id(self.g_step)] += g_applied

        tracked = tracked_values(results, g_loss)
        logs = {}
        for metric in self.metrics:
            own = metric.stateless_update_state(
                _read(values, metric.variables), tracked[metric.name]
            )
            _write(values, metric.variables, own)
            logs[metric.name] = metric.stateless_result(own)
        logs["d_step"] = values[id(self.d_step)]
        logs["g_step"] = values[id(self.g_step)]
        return logs, tuple(_read(values, variables) for variables in groups)

    def _apply(self, values: dict, optimizer: Any, grads: list, variables: list):
        """Applies `grads` to `variables` statelessly, in `values`; returns 1 if
        the update was applied, 0 if a loss-scaling optimizer skipped it."""
        before = values[id(optimizer.iterations)]
        new, optimizer_values = optimizer.stateless_apply(
            _read(values, optimizer.variables), grads, _read(values, variables)
        )
        _write(values, variables, new)
        _write(values, optimizer.variables, optimizer_values)
        applied = values[id(optimizer.iterations)] - before
        return keras.ops.cast(applied, self.d_step.dtype)

    def _critic_loss(self, c_trainable, values, real, fake, e):
        """The critic loss (scaled for a loss-scaling optimizer), its
        `CriticResult` and the critic's new non-trainable values."""

        def critic(x, non_trainable):
            out, non_trainable = self.critic.stateless_call(
                c_trainable, non_trainable, x, training=True
            )
            return scores(out), non_trainable

        def summed(x, non_trainable):
            """The scores' sum (to differentiate by `x`) and the new state."""
            out, non_trainable = critic(x, non_trainable)
            return keras.ops.sum(out), non_trainable

        c_non_trainable = _read(values, self.critic.non_trainable_variables)
        d_real, c_non_trainable = critic(real, c_non_trainable)
        d_fake, c_non_trainable = critic(fake, c_non_trainable)
        terms = None
        if e is not None:
            x_hat = e * real + (1.0 - e) * fake
            grads, c_non_trainable = jax.grad(summed, has_aux=True)(
                x_hat, c_non_trainable
            )
            terms = penalty_terms(grads, len(self._sample_shape))
        result = critic_result(d_real, d_fake, terms, self.gradient_penalty)
        scaled = _scale(self.d_optimizer, values, result.d_loss)
        return scaled, (result, c_non_trainable)

    def _critic_update(self, values: dict, real: Any) -> CriticResult:
        """One critic update on the real batch `real` and a fresh fake batch;
        writes the new values into `values`."""
        generator, critic = self.generator, self.critic
        batch = real.shape[0]
        z = self._draw_latent(batch)
        fake, g_nt = _call(generator, values, z)
        _write(values, generator.non_trainable_variables, g_nt)
        e = None
        if self.gradient_penalty is not None:
            e = self._draw_uniform(batch, fake.dtype)
        real = keras.ops.cast(real, fake.dtype)
        grads, (result, c_nt) = jax.grad(self._critic_loss, has_aux=True)(
            _read(values, critic.trainable_variables), values, real, fake, e
        )
        _write(values, critic.non_trainable_variables, c_nt)
        applied = self._apply(
            values, self.d_optimizer, grads, critic.trainable_variables
        )
        if self.clip_value is not None:
            clipped = [
                keras.ops.clip(v, -self.clip_value, self.clip_value)
                for v in _read(values, critic.trainable_variables)
            ]
            _write(values, critic.trainable_variables, clipped)
        return result._replace(applied=applied)

    def _generator_update(self, values: dict, z: Any) -> tuple[Any, Any]:
        """One generator update on the latent batch `z`, written into `values`;
        returns the generator loss and 1 or 0 (applied or skipped by a
        loss-scaling optimizer)."""
        generator, critic = self.generator, self.critic

        def loss(g_trainable):
            fake, g_nt = _call(generator, values, z, g_trainable)
            out, c_nt = _call(critic, values, fake)
            g_loss = -keras.ops.mean(scores(out))
            return _scale(self.g_optimizer, values, g_loss), (g_loss, g_nt, c_nt)

        grads, (g_loss, g_nt, c_nt) = jax.grad(loss, has_aux=True)(
            _read(values, generator.trainable_variables)
        )
        _write(values, generator.non_trainable_variables, g_nt)
        _write(values, critic.non_trainable_variables, c_nt)
        applied = self._apply(
            values, self.g_optimizer, grads, generator.trainable_variables
        )
        return g_loss, applied
