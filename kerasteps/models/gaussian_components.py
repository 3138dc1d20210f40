"""`GaussianComponents`: a generator of a Gaussian mixture that it can score."""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np

from kerasteps._validate import check_positive_number
from kerasteps.models.mixture_latent import MixtureLatent

__all__ = ["GaussianComponents"]


@keras.saving.register_keras_serializable(package="kerasteps")
class GaussianComponents(keras.layers.Layer):
    """A point generator that draws from a Gaussian mixture, and gives its density.

    Its components are those of a `MixtureLatent`: the last of the `d + 1`
    standard normal inputs picks component `k` with probability
    `probabilities[k]`. An MLP of that component's centre `c_k` gives a mean
    `m_k` and a lower-triangular matrix `L_k` (positive diagonal), and the
    output is `mean + std * (m_k + L_k z)` for the first `d` inputs `z`: a
    draw of the Gaussian `N(mean + std * m_k, std^2 L_k L_k^T)`. Where a plain
    MLP of the latent bends each small latent Gaussian on its way (a component
    that straddles two modes comes out stretched between them), here every
    component stays a Gaussian with its own place and shape.

    Because the samples are an explicit mixture, `log_density(x)` is exact:
    `WGAN(likelihood_weight=...)` adds the real batch's negative log-density to
    the generator's loss, which makes each component as wide as the data it
    covers, where the critic alone leaves them narrow.

    With `learn_weights=True` the components' probabilities are weights of the
    layer too (a softmax of logits that start at the latent's probabilities):
    the likelihood term then also moves probability away from a component that
    covers no data and toward one that covers more data than its share, as a
    mixture's maximum-likelihood weights do. The draws follow the learned
    probabilities (the choice itself passes no gradient).

    `WGAN.for_points` builds its generator from one, on `MixtureLatent.grid`,
    with `mean` and `std` the data's (one standard deviation over all
    coordinates), so that the MLP works in standardized units.

    Input shape: `(batch, d + 1)`. Output shape: `(batch, d)`.

    Args:
        latent: The `MixtureLatent` whose components are drawn (or its
            serialized form).
        widths: Hidden layer widths of the MLP (ReLU). Defaults to
            `(64, 64, 64)`.
        mean: `d` numbers added to the outputs, or `None` for zeros.
            Defaults to `None`.
        std: The outputs' unit, a number > 0. Defaults to `1.0`.
        factor_scale: What the MLP's raw matrix outputs are multiplied by, > 0,
            so that the components start narrow. Defaults to `0.01`.
        learn_weights: Whether the components' probabilities are trained (see
            above) rather than the latent's fixed ones. Defaults to `False`.
        **kwargs: Passed to `keras.layers.Layer` (e.g. `name`).

    Example:

    >>> import numpy as np
    >>> from kerasteps.models import GaussianComponents, MixtureLatent
    >>> layer = GaussianComponents(MixtureLatent.grid(2, 4), widths=(8,))
    >>> z = np.random.default_rng(0).standard_normal((5, 3)).astype("float32")
    >>> density = layer.log_density(np.zeros((7, 2)))
    >>> np.asarray(layer(z)).shape, np.asarray(density).shape
    ((5, 2), (7,))
    """

    def __init__(
        self,
        latent: MixtureLatent | dict[str, Any],
        widths: tuple[int, ...] = (64, 64, 64),
        mean: Any = None,
        std: float = 1.0,
        factor_scale: float = 0.01,
        learn_weights: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if isinstance(latent, dict):
            latent = keras.saving.deserialize_keras_object(latent)
        if not isinstance(latent, MixtureLatent):
            raise ValueError(
                f"`latent` must be a MixtureLatent, received {type(latent).__name__}."
            )
        self.latent = latent
        dim = latent.dim
        self.mean = np.zeros(dim) if mean is None else np.asarray(mean, "float64")
        if self.mean.shape != (dim,) or not np.isfinite(self.mean).all():
            raise ValueError(
                f"`mean` must be {dim} finite numbers, received {np.shape(mean)}."
            )
        self.std = check_positive_number("std", std)
        self.factor_scale = check_positive_number("factor_scale", factor_scale)
        if not isinstance(learn_weights, bool):
            raise TypeError(
                f"`learn_weights` must be True or False, received {learn_weights!r}."
            )
        self.learn_weights = learn_weights
        self.widths = tuple(int(w) for w in widths)
        self.hidden = [keras.layers.Dense(w, activation="relu") for w in self.widths]
        self.head = keras.layers.Dense(dim + dim * dim)

    @property
    def dim(self) -> int:
        """The dimension `d` of the points."""
        return self.latent.dim

    def build(self, input_shape: tuple) -> None:
        shape = (None, self.dim)
        for layer in self.hidden:
            layer.build(shape)
            shape = (None, layer.units)
        self.head.build(shape)
        if self.learn_weights:
            start = np.log(np.maximum(self.latent.probabilities, 1e-30))
            self.logits = self.add_weight(
                shape=start.shape,
                initializer=keras.initializers.Constant(start.astype("float32")),
                trainable=True,
                name="logits",
            )
        self.built = True

    def probabilities(self) -> Any:
        """The components' probabilities: the learned ones with `learn_weights`,
        else the latent's, as a float32 tensor `(K,)`."""
        if not self.built:
            self.build((None, self.dim + 1))
        if self.learn_weights:
            return keras.ops.softmax(keras.ops.cast(self.logits, "float32"))
        return keras.ops.convert_to_tensor(
            np.asarray(self.latent.probabilities, "float32")
        )

    def _log_weights(self) -> Any:
        ops = keras.ops
        if self.learn_weights:
            return ops.log_softmax(ops.cast(self.logits, "float32"))
        return ops.log(
            ops.maximum(ops.convert_to_tensor(self.latent.probabilities), 1e-30)
        )

    def components(self, centres: Any) -> tuple[Any, Any]:
        """The means `(n, d)` and lower-triangular factors `(n, d, d)` that the MLP
        gives the latent centres `(n, d)`, in the units of `std`."""
        ops, d = keras.ops, self.dim
        h = ops.cast(centres, "float32")
        for layer in self.hidden:
            h = layer(h)
        out = ops.cast(self.head(h), "float32")
        raw = ops.reshape(out[:, d:], (-1, d, d)) * self.factor_scale
        diagonal = ops.abs(ops.diagonal(raw, axis1=1, axis2=2)) + 1e-6
        factors = ops.tril(raw, -1) + diagonal[:, :, None] * ops.eye(d)[None]
        return out[:, :d], factors

    def call(self, inputs: Any) -> Any:
        ops, d = keras.ops, self.dim
        inputs = ops.cast(ops.convert_to_tensor(inputs), "float32")
        probabilities = None
        if self.learn_weights:
            probabilities = ops.stop_gradient(self.probabilities())
        component = self.latent.component(inputs[:, d], probabilities)
        return ops.cast(self.draw(component, inputs[:, :d]), self.compute_dtype)

    def draw(self, component: Any, z: Any) -> Any:
        """Draws of the given components, as `call` makes them once it has
        picked them: `mean + std * (m_k + L_k z)`.

        Args:
            component: Int indices of the components, shape `(n,)`.
            z: Standard normal numbers, shape `(n, d)`.

        Returns:
            float32 points of shape `(n, d)`, in the units of the outputs.

        Example:

        >>> import numpy as np
        >>> from kerasteps.models import GaussianComponents, MixtureLatent
        >>> layer = GaussianComponents(MixtureLatent([[0.0], [1.0]]), widths=(4,))
        >>> np.asarray(layer.draw([1, 1, 0], np.zeros((3, 1)))).shape
        (3, 1)
        """
        ops = keras.ops
        if not self.built:
            self.build((None, self.dim + 1))
        means, factors = self.components(self.latent.centres_of(component))
        z = ops.cast(ops.convert_to_tensor(z), "float32")
        y = means + ops.einsum("bij,bj->bi", factors, z)
        return self._output_mean() + self.std * y

    def _output_mean(self) -> Any:
        return keras.ops.convert_to_tensor(self.mean.astype("float32"))

    def _every_component(self, x: Any) -> tuple[Any, Any, Any]:
        """The means and factors of every component, and the points `x` in their
        units (standardized), for `log_density` and `mean_distances`."""
        ops = keras.ops
        if not self.built:
            self.build((None, self.dim + 1))
        every = ops.arange(self.latent.probabilities.shape[0])
        means, factors = self.components(self.latent.centres_of(every))
        x = ops.cast(ops.convert_to_tensor(x), "float32")
        return means, factors, (x - self._output_mean()) / self.std

    def log_density(self, x: Any) -> Any:
        """The log-density of the layer's output distribution at points `x`.

        Args:
            x: Points of shape `(n, d)`, in the units of the outputs.

        Returns:
            float32 numbers of shape `(n,)`.

        Example:

        >>> import numpy as np
        >>> from kerasteps.models import GaussianComponents, MixtureLatent
        >>> layer = GaussianComponents(MixtureLatent([[0.0]]), widths=(4,))
        >>> density = np.exp(np.asarray(layer.log_density(np.zeros((1, 1)))))
        >>> bool(density[0] > 0)
        True
        """
        ops, d = keras.ops, self.dim
        means, factors, y = self._every_component(x)
        offsets = ops.transpose(y[None, :, :] - means[:, None, :], (0, 2, 1))
        u = ops.solve_triangular(factors, offsets, lower=True)  # (K, d, n)
        log_det = ops.sum(ops.log(ops.diagonal(factors, axis1=1, axis2=2)), axis=1)
        weights = ops.cast(self._log_weights(), "float32")
        per_component = -0.5 * ops.sum(u * u, axis=1) + (weights - log_det)[:, None]
        constant = 0.5 * d * math.log(2.0 * math.pi) + d * math.log(self.std)
        return ops.logsumexp(per_component, axis=0) - constant

    def mean_distances(self, x: Any) -> tuple[Any, Any]:
        """The distance from each component's mean to the nearest of the points
        `x`, and the latent's probabilities, by which the anchor term weighs
        them (the fixed ones even with `learn_weights`, so that a component
        whose learned probability has fallen is still pulled to the data).

        Args:
            x: Points of shape `(n, d)`, in the units of the outputs.

        Returns:
            Two float32 vectors of shape `(K,)`: the distances, in the units of
            the outputs, and the latent's probabilities.

        Example:

        >>> import numpy as np
        >>> from kerasteps.models import GaussianComponents, MixtureLatent
        >>> layer = GaussianComponents(MixtureLatent([[0.0], [1.0]]), widths=(4,))
        >>> distances, probabilities = layer.mean_distances([[0.0], [5.0]])
        >>> len(distances), np.asarray(probabilities).tolist()
        (2, [0.5, 0.5])
        """
        ops = keras.ops
        means, _, y = self._every_component(x)
        squared = (
            ops.sum(means * means, axis=1)[:, None]
            + ops.sum(y * y, axis=1)[None, :]
            - 2.0 * ops.matmul(means, ops.transpose(y))
        )
        # Safe at 0, where the gradient of the root is not finite.
        nearest = ops.sqrt(ops.maximum(ops.min(squared, axis=1), 0.0) + 1e-12)
        probabilities = ops.convert_to_tensor(self.latent.probabilities)
        return self.std * nearest, probabilities

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.dim)

    def get_config(self) -> dict[str, Any]:
        """Returns the constructor arguments, the latent serialized."""
        return {
            **super().get_config(),
            "latent": keras.saving.serialize_keras_object(self.latent),
            "widths": list(self.widths),
            "mean": self.mean.tolist(),
            "std": self.std,
            "factor_scale": self.factor_scale,
            "learn_weights": self.learn_weights,
        }
