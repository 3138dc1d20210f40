"""The WGAN's training step on TensorFlow (private).

In the style of Keras's TensorFlow trainer: a `train_step` that Keras traces into
one graph, with `tf.GradientTape`s and stateful optimizer updates. It supports
`tf.distribute`: losses are scaled by `1 / num_replicas_in_sync` and every replica
takes its share of one global noise draw.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from kerasteps.models import _wgan_checks as checks
from kerasteps.models._wgan_step import (
    CriticResult,
    critic_result,
    penalty_terms,
    real_examples,
    scores,
    tracked_values,
)


class TensorFlowSteps:
    """`WGAN.train_step` for the TensorFlow backend (a mixin of `WGAN`)."""

    def _real_batches(self, data: Any) -> tf.Tensor:
        x = tf.convert_to_tensor(real_examples(data))
        checks.data_shape(
            x.shape.as_list(), self._sample_shape, self.n_critic, "the element"
        )
        batch = tf.shape(x)[0] // self.n_critic
        if x.shape[0] is None:
            x = x[: batch * self.n_critic]
        # Row j * n_critic + i is example j of critic batch i. With this strided
        # split, tf.distribute's contiguous split of an element across replicas
        # gives each replica its share of every critic batch, so training with
        # R replicas matches training on one device.
        return tf.reshape(x, (batch, self.n_critic, *self._sample_shape))

    def _critic(self, x: tf.Tensor) -> tf.Tensor:
        """Critic scores in float32, as a vector of shape (batch,)."""
        return scores(self.critic(x, training=True))

    @staticmethod
    def _scaled(optimizer: Any, loss: tf.Tensor) -> tf.Tensor:
        """`loss` scaled by `1 / num_replicas_in_sync`, then by a
        `LossScaleOptimizer`'s loss scale."""
        loss = loss * (1.0 / tf.distribute.get_strategy().num_replicas_in_sync)
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            loss = optimizer.scale_loss(loss)
        return loss

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

    def _replica_share(self, draw: Any, batch: tf.Tensor, *args: Any) -> tf.Tensor:
        """Returns this replica's rows of `draw(size, *args)` for the global batch.

        Under tf.distribute every replica draws the same global tensor (the seed
        state is shared) and keeps its own slice, so the noise matches training
        on one device.
        """
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        context = tf.distribute.get_replica_context()
        if replicas == 1 or context is None:
            return draw(batch, *args)
        replica = tf.cast(context.replica_id_in_sync_group, batch.dtype)
        return draw(batch * replicas, *args)[replica * batch : (replica + 1) * batch]

    def _critic_update(
        self, real: tf.Tensor, fake: tf.Tensor, e: tf.Tensor | None
    ) -> CriticResult:
        """One critic update on a real and a fake batch."""
        variables = self.critic.trainable_variables
        terms = None
        with tf.GradientTape() as tape:
            d_real = self._critic(real)
            d_fake = self._critic(fake)
            if e is not None:
                x_hat = e * real + (1.0 - e) * fake
                with tf.GradientTape() as gp_tape:
                    gp_tape.watch(x_hat)
                    d_hat = self._critic(x_hat)
                terms = penalty_terms(
                    gp_tape.gradient(d_hat, x_hat), len(self._sample_shape)
                )
            result = critic_result(d_real, d_fake, terms, self.gradient_penalty)
            scaled_loss = self._scaled(self.d_optimizer, result.d_loss)
        applied = self._apply(self.d_optimizer, tape, scaled_loss, variables)
        if self.clip_value is not None:
            for v in variables:
                v.assign(tf.clip_by_value(v, -self.clip_value, self.clip_value))
        return result._replace(applied=applied)

    def _generator_update(self, batch: tf.Tensor) -> tuple:
        """One generator update; returns (g_loss, 1 if applied else 0)."""
        z = self._replica_share(self._draw_latent, batch)
        variables = self.generator.trainable_variables
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(self._critic(self.generator(z, training=True)))
            scaled_loss = self._scaled(self.g_optimizer, g_loss)
        applied = self._apply(self.g_optimizer, tape, scaled_loss, variables)
        return g_loss, applied

    def train_step(self, data: Any) -> dict[str, Any]:
        """`n_critic` critic updates on fresh real batches, then one generator
        update; returns the metrics and both counters."""
        real = self._real_batches(data)
        batch = tf.shape(real)[0]
        # Unrolled in the traced graph: n_critic is small, and one graph lets
        # TF (and XLA with jit_compile=True) schedule all updates together.
        results = []
        for i in range(self.n_critic):
            latent = self._replica_share(self._draw_latent, batch)
            fake = self.generator(latent, training=True)
            e = None
            if self.gradient_penalty is not None:
                e = self._replica_share(self._draw_uniform, batch, fake.dtype)
            real_i = tf.cast(real[:, i], fake.dtype)
            results.append(self._critic_update(real_i, fake, e))
        # Count applied updates only: a LossScaleOptimizer skips an update with
        # non-finite gradients without increasing its iterations.
        self.d_step.assign_add(tf.add_n([r.applied for r in results]))
        g_loss, g_applied = self._generator_update(batch)
        self.g_step.assign_add(g_applied)
        tracked = tracked_values(results, g_loss)
        for metric in self.metrics:
            metric.update_state(tracked[metric.name])
        logs = {m.name: m.result() for m in self.metrics}
        logs["d_step"] = tf.identity(self.d_step)
        logs["g_step"] = tf.identity(self.g_step)
        return logs
