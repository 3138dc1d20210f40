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
    penalty_terms,
    real_examples,
    scores,
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

    def _replica_scale(self) -> float:
        return 1.0 / tf.distribute.get_strategy().num_replicas_in_sync

    def _critic(self, x: tf.Tensor) -> tf.Tensor:
        """Critic scores in float32, as a vector of shape (batch,)."""
        return scores(self.critic(x, training=True))

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
        return self._replica_share(self._draw_latent, batch)

    def _uniform(self, batch: tf.Tensor, dtype: Any) -> tf.Tensor:
        """Interpolation weights, shape (batch, 1, ..., 1)."""
        return self._replica_share(lambda size: self._draw_uniform(size, dtype), batch)

    def _critic_update(
        self, real: tf.Tensor, fake: tf.Tensor, e: tf.Tensor | None
    ) -> CriticResult:
        """One critic update on a real and a fake batch."""
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
                terms = penalty_terms(
                    gp_tape.gradient(d_hat, x_hat), len(self._sample_shape)
                )
                penalty = tf.reduce_mean(terms)
                per_example = per_example + self.gradient_penalty * terms
            d_loss = tf.reduce_mean(per_example)
            scaled_loss = d_loss * self._replica_scale()
            if isinstance(self.d_optimizer, keras.optimizers.LossScaleOptimizer):
                scaled_loss = self.d_optimizer.scale_loss(scaled_loss)
        applied = self._apply(self.d_optimizer, tape, scaled_loss, variables)
        if self.clip_value is not None:
            for v in variables:
                v.assign(tf.clip_by_value(v, -self.clip_value, self.clip_value))
        wasserstein = tf.reduce_mean(d_real) - tf.reduce_mean(d_fake)
        return CriticResult(d_loss, wasserstein, penalty, applied)

    def _generator_update(self, batch: tf.Tensor) -> tuple:
        """One generator update; returns (g_loss, 1 if applied else 0)."""
        z = self._latent(batch)
        variables = self.generator.trainable_variables
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(self._critic(self.generator(z, training=True)))
            scaled_loss = g_loss * self._replica_scale()
            if isinstance(self.g_optimizer, keras.optimizers.LossScaleOptimizer):
                scaled_loss = self.g_optimizer.scale_loss(scaled_loss)
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
            fake = self.generator(self._latent(batch), training=True)
            e = None
            if self.gradient_penalty is not None:
                e = self._uniform(batch, fake.dtype)
            real_i = tf.cast(real[:, i], fake.dtype)
            results.append(self._critic_update(real_i, fake, e))
        # Count applied updates only: a LossScaleOptimizer skips an update with
        # non-finite gradients without increasing its iterations.
        self.d_step.assign_add(tf.add_n([r.applied for r in results]))
        g_loss, g_applied = self._generator_update(batch)
        self.g_step.assign_add(g_applied)
        return self._track(results, g_loss)

    def _track(self, results: list[CriticResult], g_loss: Any) -> dict[str, Any]:
        # Every train_step has n_critic critic updates, so updating the mean
        # trackers once with the mean over them equals updating them n times.
        self.d_loss_tracker.update_state(tf.reduce_mean([r.d_loss for r in results]))
        self.wasserstein_tracker.update_state(
            tf.reduce_mean([r.wasserstein for r in results])
        )
        if self.gp_tracker is not None:
            self.gp_tracker.update_state(tf.reduce_mean([r.penalty for r in results]))
        self.g_loss_tracker.update_state(g_loss)
        logs = {m.name: m.result() for m in self.metrics}
        logs["d_step"] = tf.identity(self.d_step)
        logs["g_step"] = tf.identity(self.g_step)
        return logs
