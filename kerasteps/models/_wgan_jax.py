"""The WGAN's training step on JAX (private).

In the style of Keras's JAX trainer (`keras/src/backend/jax/trainer.py`): a
stateless `train_step(state, data) -> (logs, state)` that Keras compiles with
`jax.jit`. Networks run through `stateless_call`, optimizers through
`stateless_apply`, metrics through `stateless_update_state`, and the noise's seed
state through a `StatelessScope`.

Keras's JAX trainer carries the variables of one optimizer, `model.optimizer`, from
step to step; the WGAN has two. `JaxSteps` therefore carries both, the generator's
then the critic's, in the trainer's optimizer slot: the four trainer methods that
read `model.optimizer.variables` are redefined with both optimizers' variables where
Keras has one's (`kerasteps._compat.JaxTrainerWithOptimizers`), and are otherwise
Keras's own.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import keras

from kerasteps import _compat
from kerasteps.models._wgan_step import (
    CriticResult,
    critic_batches,
    mean_of,
    penalty_terms,
    scores,
)


class _Layout(NamedTuple):
    """Where each network's variables sit in the trainer's state lists."""

    g_trainable: list[int]
    c_trainable: list[int]
    g_non_trainable: list[int]
    c_non_trainable: list[int]
    d_step: int
    g_step: int
    seed: int
    g_optimizer: slice
    d_optimizer: slice
    g_iterations: int  # in the generator optimizer's own variables
    d_iterations: int  # in the critic optimizer's own variables


class _Values(NamedTuple):
    """The values of each network's and each optimizer's variables in one step."""

    g_train: list
    c_train: list
    g_nt: list
    c_nt: list
    g_opt: list
    d_opt: list


def _take(
    at: _Layout, trainable: list, non_trainable: list, optimizer_values: list
) -> _Values:
    """Picks each network's and optimizer's values out of the trainer's state."""
    return _Values(
        g_train=[trainable[i] for i in at.g_trainable],
        c_train=[trainable[i] for i in at.c_trainable],
        g_nt=[non_trainable[i] for i in at.g_non_trainable],
        c_nt=[non_trainable[i] for i in at.c_non_trainable],
        g_opt=list(optimizer_values[at.g_optimizer]),
        d_opt=list(optimizer_values[at.d_optimizer]),
    )


def _put(
    at: _Layout, values: _Values, trainable: list, non_trainable: list
) -> tuple[list, list]:
    """New trainable and non-trainable state lists holding the networks' values."""
    trainable, non_trainable = list(trainable), list(non_trainable)
    for positions, new, into in (
        (at.g_trainable, values.g_train, trainable),
        (at.c_trainable, values.c_train, trainable),
        (at.g_non_trainable, values.g_nt, non_trainable),
        (at.c_non_trainable, values.c_nt, non_trainable),
    ):
        for i, value in zip(positions, new, strict=True):
            into[i] = value
    return trainable, non_trainable


def _positions(variables: list, among: list) -> list[int]:
    index = {id(v): i for i, v in enumerate(among)}
    return [index[id(v)] for v in variables]


def _iterations_index(optimizer: Any) -> int:
    return next(
        i for i, v in enumerate(optimizer.variables) if v is optimizer.iterations
    )


def _scale(optimizer: Any, values: list, loss: Any) -> Any:
    """`optimizer.scale_loss(loss)` with the optimizer's state taken from `values`."""
    if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return loss
    mapping = list(zip(optimizer.variables, values, strict=True))
    with keras.StatelessScope(state_mapping=mapping):
        return optimizer.scale_loss(loss)


class JaxSteps(_compat.JaxTrainerWithOptimizers):
    """`WGAN.train_step` for the JAX backend (a mixin of `WGAN`)."""

    # -- the trainer's state: both optimizers --------------------------------------
    def _all_optimizer_variables(self) -> list:
        if self.d_optimizer is None:
            return list(self.optimizer.variables) if self.optimizer else []
        return [*self.g_optimizer.variables, *self.d_optimizer.variables]

    # -- the step -------------------------------------------------------------------
    def _layout(self) -> _Layout:
        trainable = self.trainable_variables
        non_trainable = self.non_trainable_variables
        n_g = len(self.g_optimizer.variables)
        n_d = len(self.d_optimizer.variables)
        return _Layout(
            g_trainable=_positions(self.generator.trainable_variables, trainable),
            c_trainable=_positions(self.critic.trainable_variables, trainable),
            g_non_trainable=_positions(
                self.generator.non_trainable_variables, non_trainable
            ),
            c_non_trainable=_positions(
                self.critic.non_trainable_variables, non_trainable
            ),
            d_step=_positions([self.d_step], non_trainable)[0],
            g_step=_positions([self.g_step], non_trainable)[0],
            seed=_positions([self._seed_generator.state], non_trainable)[0],
            g_optimizer=slice(0, n_g),
            d_optimizer=slice(n_g, n_g + n_d),
            g_iterations=_iterations_index(self.g_optimizer),
            d_iterations=_iterations_index(self.d_optimizer),
        )

    def _critic_loss(self, c_trainable, c_non_trainable, opt_values, real, fake, e):
        """The critic loss (scaled for a loss-scaling optimizer) and its parts."""

        def critic(x, non_trainable):
            out, non_trainable = self.critic.stateless_call(
                c_trainable, non_trainable, x, training=True
            )
            return scores(out), non_trainable

        def summed(x, non_trainable):
            """The scores' sum (to differentiate by `x`), the scores and state."""
            out, non_trainable = critic(x, non_trainable)
            return keras.ops.sum(out), (out, non_trainable)

        d_real, c_non_trainable = critic(real, c_non_trainable)
        d_fake, c_non_trainable = critic(fake, c_non_trainable)
        per_example = d_fake - d_real
        penalty = None
        if e is not None:
            x_hat = e * real + (1.0 - e) * fake
            grads, (_, c_non_trainable) = jax.grad(summed, has_aux=True)(
                x_hat, c_non_trainable
            )
            terms = penalty_terms(grads, len(self._sample_shape))
            penalty = keras.ops.mean(terms)
            per_example = per_example + self.gradient_penalty * terms
        d_loss = keras.ops.mean(per_example)
        wasserstein = keras.ops.mean(d_real) - keras.ops.mean(d_fake)
        scaled = _scale(self.d_optimizer, opt_values, d_loss)
        return scaled, (d_loss, wasserstein, penalty, c_non_trainable)

    def _generator_loss(
        self,
        g_trainable,
        g_non_trainable,
        c_trainable,
        c_non_trainable,
        opt_values,
        z,
    ):
        fake, g_non_trainable = self.generator.stateless_call(
            g_trainable, g_non_trainable, z, training=True
        )
        out, c_non_trainable = self.critic.stateless_call(
            c_trainable, c_non_trainable, fake, training=True
        )
        g_loss = -keras.ops.mean(scores(out))
        scaled = _scale(self.g_optimizer, opt_values, g_loss)
        return scaled, (g_loss, g_non_trainable, c_non_trainable)

    def train_step(self, state: tuple, data: Any) -> tuple[dict[str, Any], tuple]:
        """`n_critic` critic updates on fresh real batches, then one generator
        update, statelessly; returns the logs and the new state."""
        trainable, non_trainable, optimizer_values, metrics_values = state
        at = self._layout()
        real = critic_batches(data, self.n_critic, self._sample_shape)
        values = _take(at, trainable, non_trainable, optimizer_values)
        seed_state = self._seed_generator.state
        with keras.StatelessScope(
            state_mapping=[(seed_state, non_trainable[at.seed])]
        ) as noise:
            results = []
            for i in range(self.n_critic):
                result, values = self._critic_update(at, values, real[:, i])
                results.append(result)
            z = self._draw_latent(real.shape[0])
            new_seed = noise.get_current_value(seed_state)
        g_loss, g_applied, values = self._generator_update(at, values, z)

        trainable, non_trainable = _put(at, values, trainable, non_trainable)
        d_step = non_trainable[at.d_step] + sum(r.applied for r in results)
        g_step = non_trainable[at.g_step] + g_applied
        non_trainable[at.d_step] = d_step
        non_trainable[at.g_step] = g_step
        non_trainable[at.seed] = new_seed

        logs, metrics_values = self._track(metrics_values, results, g_loss)
        logs["d_step"] = d_step
        logs["g_step"] = g_step
        optimizer_values = [*values.g_opt, *values.d_opt]
        return logs, (trainable, non_trainable, optimizer_values, metrics_values)

    def _critic_update(
        self, at: _Layout, values: _Values, real: Any
    ) -> tuple[CriticResult, _Values]:
        """One critic update on the real batch `real` and a fresh fake batch."""
        batch = real.shape[0]
        z = self._draw_latent(batch)
        fake, g_nt = self.generator.stateless_call(
            values.g_train, values.g_nt, z, training=True
        )
        e = None
        if self.gradient_penalty is not None:
            e = self._draw_uniform(batch, fake.dtype)
        real = keras.ops.cast(real, fake.dtype)
        critic_grad = jax.grad(self._critic_loss, has_aux=True)
        grads, (d_loss, wasserstein, penalty, c_nt) = critic_grad(
            values.c_train, values.c_nt, values.d_opt, real, fake, e
        )
        before = values.d_opt[at.d_iterations]
        c_train, d_opt = self.d_optimizer.stateless_apply(
            values.d_opt, grads, values.c_train
        )
        if self.clip_value is not None:
            c_train = [
                keras.ops.clip(v, -self.clip_value, self.clip_value) for v in c_train
            ]
        applied = keras.ops.cast(d_opt[at.d_iterations] - before, self.d_step.dtype)
        values = values._replace(g_nt=g_nt, c_train=c_train, c_nt=c_nt, d_opt=d_opt)
        return CriticResult(d_loss, wasserstein, penalty, applied), values

    def _generator_update(
        self, at: _Layout, values: _Values, z: Any
    ) -> tuple[Any, Any, _Values]:
        """One generator update on the latent batch `z`; returns the generator
        loss, 1 or 0 (applied or skipped by a loss-scaling optimizer) and the new
        values."""
        generator_grad = jax.grad(self._generator_loss, has_aux=True)
        grads, (g_loss, g_nt, c_nt) = generator_grad(
            values.g_train, values.g_nt, values.c_train, values.c_nt, values.g_opt, z
        )
        before = values.g_opt[at.g_iterations]
        g_train, g_opt = self.g_optimizer.stateless_apply(
            values.g_opt, grads, values.g_train
        )
        applied = keras.ops.cast(g_opt[at.g_iterations] - before, self.d_step.dtype)
        values = values._replace(g_train=g_train, g_nt=g_nt, c_nt=c_nt, g_opt=g_opt)
        return g_loss, applied, values

    def _track(
        self,
        metrics_values: list,
        results: list[CriticResult],
        g_loss: Any,
    ) -> tuple[dict[str, Any], list]:
        """Updates the mean trackers statelessly, once with the mean over the
        critic updates (equal to updating them `n_critic` times)."""
        values = {
            "d_loss": mean_of([r.d_loss for r in results]),
            "g_loss": g_loss,
            "wasserstein": mean_of([r.wasserstein for r in results]),
        }
        if self.gp_tracker is not None:
            values["gradient_penalty"] = mean_of([r.penalty for r in results])
        logs: dict[str, Any] = {}
        new_values: list = []
        start = 0
        for metric in self.metrics:
            own = list(metrics_values[start : start + len(metric.variables)])
            start += len(own)
            own = metric.stateless_update_state(own, values[metric.name])
            logs[metric.name] = metric.stateless_result(own)
            new_values.extend(own)
        return logs, new_values
