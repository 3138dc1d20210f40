"""The WGAN's training step on PyTorch (private).

In the style of Keras's torch trainer (`keras/src/backend/torch/trainer.py`): an
eager `train_step` that zeroes the gradients, calls `backward()` on the (scaled)
loss and applies the `.grad` of each variable under `torch.no_grad()`. The
gradient penalty's gradient with respect to the interpolated samples is taken
with `torch.autograd.grad(..., create_graph=True)`, so that the critic's update
differentiates through it.
"""

from __future__ import annotations

from typing import Any

import keras
import torch

from kerasteps.models._wgan_step import (
    CriticResult,
    critic_batches,
    mean_of,
    penalty_terms,
    scores,
)


class TorchSteps:
    """`WGAN.train_step` for the PyTorch backend (a mixin of `WGAN`)."""

    def _apply(self, optimizer: Any, loss: Any, variables: list) -> Any:
        """Back-propagates `loss` and applies the gradients of `variables`;
        returns how much `optimizer.iterations` grew (0 for a skipped update)."""
        before = keras.ops.copy(optimizer.iterations.value)
        self.zero_grad()
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            loss = optimizer.scale_loss(loss)
        loss.backward()
        gradients = [v.value.grad for v in variables]
        with torch.no_grad():
            optimizer.apply(gradients, variables)
        return keras.ops.cast(optimizer.iterations.value - before, self.d_step.dtype)

    def _critic_update(self, real: Any, fake: Any, e: Any | None) -> CriticResult:
        """One critic update on a real and a fake batch."""
        variables = self.critic.trainable_variables
        d_real = scores(self.critic(real, training=True))
        d_fake = scores(self.critic(fake, training=True))
        per_example = d_fake - d_real
        penalty = None
        if e is not None:
            x_hat = (e * real + (1.0 - e) * fake).detach().requires_grad_(True)
            d_hat = scores(self.critic(x_hat, training=True))
            (grads,) = torch.autograd.grad(d_hat.sum(), x_hat, create_graph=True)
            terms = penalty_terms(grads, len(self._sample_shape))
            penalty = keras.ops.mean(terms)
            per_example = per_example + self.gradient_penalty * terms
        d_loss = keras.ops.mean(per_example)
        applied = self._apply(self.d_optimizer, d_loss, variables)
        if self.clip_value is not None:
            with torch.no_grad():
                for v in variables:
                    v.assign(keras.ops.clip(v, -self.clip_value, self.clip_value))
        wasserstein = keras.ops.mean(d_real) - keras.ops.mean(d_fake)
        return CriticResult(
            d_loss.detach(),
            wasserstein.detach(),
            None if penalty is None else penalty.detach(),
            applied,
        )

    def _generator_update(self, batch: int) -> tuple[Any, Any]:
        """One generator update; returns (g_loss, 1 if applied else 0)."""
        fake = self.generator(self._draw_latent(batch), training=True)
        g_loss = -keras.ops.mean(scores(self.critic(fake, training=True)))
        applied = self._apply(
            self.g_optimizer, g_loss, self.generator.trainable_variables
        )
        return g_loss.detach(), applied

    def train_step(self, data: Any) -> dict[str, Any]:
        """`n_critic` critic updates on fresh real batches, then one generator
        update; returns the metrics and both counters."""
        real = critic_batches(data, self.n_critic, self._sample_shape)
        batch = real.shape[0]
        results = []
        for i in range(self.n_critic):
            with torch.no_grad():  # the critic update does not train the generator
                fake = self.generator(self._draw_latent(batch), training=True)
            e = None
            if self.gradient_penalty is not None:
                e = self._draw_uniform(batch, fake.dtype)
            real_i = keras.ops.cast(real[:, i], fake.dtype)
            results.append(self._critic_update(real_i, fake, e))
        with torch.no_grad():
            self.d_step.assign_add(sum(r.applied for r in results))
        g_loss, g_applied = self._generator_update(batch)
        with torch.no_grad():
            self.g_step.assign_add(g_applied)
        return self._track(results, g_loss)

    def _track(self, results: list[CriticResult], g_loss: Any) -> dict[str, Any]:
        # Once with the mean over the critic updates: equal to n_critic updates.
        self.d_loss_tracker.update_state(mean_of([r.d_loss for r in results]))
        self.wasserstein_tracker.update_state(mean_of([r.wasserstein for r in results]))
        if self.gp_tracker is not None:
            self.gp_tracker.update_state(mean_of([r.penalty for r in results]))
        self.g_loss_tracker.update_state(g_loss)
        logs = {m.name: m.result() for m in self.metrics}
        logs["d_step"] = keras.ops.copy(self.d_step.value)
        logs["g_step"] = keras.ops.copy(self.g_step.value)
        return logs
