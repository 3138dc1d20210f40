"""`MixtureLatent`: a layer that turns Gaussian noise into a Gaussian mixture's draw."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from kerasteps._validate import check_int, check_positive_number

__all__ = ["MixtureLatent"]


@keras.saving.register_keras_serializable(package="kerasteps")
class MixtureLatent(keras.layers.Layer):
    """Maps standard normal noise to a draw of a fixed mixture of small Gaussians.

    A generator that starts from one connected Gaussian latent must draw points
    *between* the separate modes of multi-modal data: a continuous map of a
    connected set is connected. Put this layer first in the generator and its
    latent is a mixture of `K` separate small Gaussians instead, so that each
    mode of the data can be the image of its own components.

    The input holds `d + 1` standard normal numbers per example. The last one
    picks the component, `k` with probability `probabilities[k]` (through the normal
    CDF, so a standard normal input gives exactly those probabilities); the
    first `d` give the position, `centres[k] + scales[k] * z[:d]`. The layer
    has no trainable weights: its probabilities, centres and scales are
    non-trainable variables, which `assign_probabilities` and
    `assign_components` set after training, saved with the model.

    `WGAN.for_points` puts one, `MixtureLatent.grid(d)`, in front of its
    generator: equal components on a regular grid in the standardized data's
    range.

    Input shape: `(batch, d + 1)`. Output shape: `(batch, d)`.

    Args:
        centres: `K` centres of dimension `d`, array-like of shape `(K, d)`.
        probabilities: `K` probabilities of the components (non-negative,
            normalized here), or `None` for equal ones. Defaults to `None`.
        scale: Standard deviation of every component, a number > 0.
            Defaults to `0.1`.
        scales: Optional `K` standard deviations, one per component (numbers
            > 0), in place of `scale`. Defaults to `None`.
        **kwargs: Passed to `keras.layers.Layer` (e.g. `name`).

    Example:

    >>> import numpy as np
    >>> from kerasteps.models import MixtureLatent
    >>> layer = MixtureLatent([[-1.0, 0.0], [1.0, 0.0]], scale=0.01)
    >>> z = np.random.default_rng(0).standard_normal((1000, 3)).astype("float32")
    >>> points = np.asarray(layer(z))
    >>> points.shape, sorted(set(np.round(points[:, 0]).tolist()))
    ((1000, 2), [-1.0, 1.0])
    """

    def __init__(
        self,
        centres: Any,
        probabilities: Any = None,
        scale: float = 0.1,
        scales: Any = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        centres = np.asarray(centres, dtype="float32")
        if centres.ndim != 2 or not centres.size or not np.isfinite(centres).all():
            raise ValueError(
                "`centres` must be finite numbers of shape (K, d) with K, d >= 1, "
                f"received shape {centres.shape}."
            )
        self.scale = check_positive_number("scale", scale)
        # Variables, so that checkpoints and `.keras` weights carry what
        # `assign_probabilities` and `assign_components` set.
        k, d = centres.shape
        self.probabilities = self._state((k,), "probabilities")
        self._centres = self._state((k, d), "centres")
        self._scales = self._state((k,), "scales")
        self.assign_probabilities(
            np.ones(k) if probabilities is None else probabilities
        )
        self.assign_components(
            centres, np.full(k, self.scale) if scales is None else scales
        )

    def _state(self, shape: tuple[int, ...], name: str) -> keras.Variable:
        return self.add_weight(
            shape=shape, initializer="ones", dtype="float32", trainable=False, name=name
        )

    def assign_probabilities(self, probabilities: Any) -> None:
        """Sets the components' probabilities (non-negative, normalized here).

        Args:
            probabilities: `K` non-negative numbers, not all zero.

        Example:

        >>> import numpy as np
        >>> from kerasteps.models import MixtureLatent
        >>> layer = MixtureLatent([[0.0], [1.0]])
        >>> layer.assign_probabilities([3, 1])
        >>> np.asarray(layer.probabilities).tolist()
        [0.75, 0.25]
        """
        k = len(self.centres)
        p = np.asarray(probabilities, dtype="float64")
        if p.shape != (k,) or not np.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
            raise ValueError(
                f"`probabilities` must be {k} non-negative numbers, one per centre, "
                f"not all zero; received {p.tolist()!r}."
            )
        self.probabilities.assign((p / p.sum()).astype("float32"))

    def assign_components(self, centres: Any, scales: Any) -> None:
        """Sets the components' centres and standard deviations.

        Args:
            centres: Finite numbers of shape `(K, d)`, as the layer has.
            scales: `K` numbers > 0.

        Example:

        >>> from kerasteps.models import MixtureLatent
        >>> layer = MixtureLatent([[0.0], [1.0]])
        >>> layer.assign_components([[0.0], [3.0]], [0.1, 0.01])
        >>> layer.centres.tolist(), [round(float(s), 3) for s in layer.scales]
        ([[0.0], [3.0]], [0.1, 0.01])
        """
        shape = tuple(self._centres.shape)
        c = np.asarray(centres, dtype="float64")
        s = np.asarray(scales, dtype="float64")
        if c.shape != shape or not np.isfinite(c).all():
            raise ValueError(
                f"`centres` must be finite numbers of shape {shape}, received "
                f"shape {c.shape}."
            )
        if s.shape != shape[:1] or not np.isfinite(s).all() or (s <= 0).any():
            raise ValueError(
                f"`scales` must be {shape[0]} numbers > 0, one per centre; "
                f"received {s.tolist()!r}."
            )
        self._centres.assign(c.astype("float32"))
        self._scales.assign(s.astype("float32"))

    @property
    def centres(self) -> np.ndarray:
        """The components' centres, shape `(K, d)` (a copy)."""
        return keras.ops.convert_to_numpy(self._centres)

    @property
    def scales(self) -> np.ndarray:
        """The components' standard deviations, shape `(K,)` (a copy)."""
        return keras.ops.convert_to_numpy(self._scales)

    @property
    def dim(self) -> int:
        """The dimension `d` of the points."""
        return int(self._centres.shape[1])

    def load_own_variables(self, store: Any) -> None:
        """Loads the variables; a layer saved before centres and scales were
        variables (one variable) keeps those of its config."""
        if len(store.keys()) == 1:
            self.probabilities.assign(store["0"])
        else:
            super().load_own_variables(store)

    def component(self, choice: Any, probabilities: Any = None) -> Any:
        """The component each standard normal `choice` picks: `k` with probability
        `probabilities[k]`, as `call` picks it from its inputs' last number.

        Args:
            choice: Standard normal numbers, shape `(batch,)`.
            probabilities: The components' probabilities, a vector (a tensor
                that can be traced, e.g. learned ones), or `None` for the
                layer's own. Defaults to `None`.

        Returns:
            The components' indices, int32 of shape `(batch,)`.

        Example:

        >>> from kerasteps.models import MixtureLatent
        >>> layer = MixtureLatent([[0.0], [1.0]])
        >>> [int(k) for k in layer.component([-1.0, 1.0])]
        [0, 1]
        """
        ops = keras.ops
        choice = ops.cast(ops.convert_to_tensor(choice), "float32")
        cdf = 0.5 * (1.0 + ops.erf(choice / np.sqrt(2.0)))
        # Component k is drawn when cdf(z) falls in [bounds[k - 1], bounds[k]).
        if probabilities is None:
            probabilities = self.probabilities
        probabilities = ops.cast(ops.convert_to_tensor(probabilities), "float32")
        bounds = ops.cumsum(probabilities)[:-1]
        return ops.sum(ops.cast(cdf[:, None] >= bounds[None, :], "int32"), 1)

    def centres_of(self, component: Any) -> Any:
        """The centres of the components `component` (int indices), as a tensor
        `(batch, d)` that can be traced, where `centres` is a NumPy copy.

        Args:
            component: Int indices of shape `(batch,)`.

        Example:

        >>> from kerasteps.models import MixtureLatent
        >>> layer = MixtureLatent([[0.0], [5.0]])
        >>> [float(c[0]) for c in layer.centres_of([1, 0])]
        [5.0, 0.0]
        """
        return keras.ops.take(keras.ops.convert_to_tensor(self._centres), component, 0)

    def call(self, inputs: Any) -> Any:
        ops = keras.ops
        inputs = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        position, component = inputs[:, : self.dim], self.component(inputs[:, self.dim])
        centres = ops.take(ops.cast(self._centres, self.compute_dtype), component, 0)
        scales = ops.take(ops.cast(self._scales, self.compute_dtype), component, 0)
        return centres + scales[:, None] * position

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.dim)

    def get_config(self) -> dict[str, Any]:
        """Returns the constructor arguments: centres, probabilities, scale and
        scales, as they are now."""
        return {
            **super().get_config(),
            "centres": self.centres.tolist(),
            "probabilities": keras.ops.convert_to_numpy(self.probabilities).tolist(),
            "scale": self.scale,
            "scales": self.scales.tolist(),
        }

    #: The most components `grid` makes.
    MAX_GRID_COMPONENTS = 10_000

    @staticmethod
    def grid_shape(dim: int, components: int = 100) -> tuple[int, int]:
        """`(points per axis, components)` of `grid(dim, components)`.

        Args:
            dim: Int >= 1, the dimension of the points.
            components: Int >= 1, about how many components.

        Example:

        >>> from kerasteps.models import MixtureLatent
        >>> MixtureLatent.grid_shape(2, 400), MixtureLatent.grid_shape(13, 400)
        ((20, 400), (2, 8192))
        """
        per_axis = max(2, round(components ** (1.0 / dim)))
        return per_axis, per_axis**dim

    @staticmethod
    def max_grid_dim(components: int = 100) -> int:
        """The largest dimension `grid(dim, components)` takes: beyond it the grid
        has more than `MAX_GRID_COMPONENTS` components.

        Args:
            components: Int >= 1, about how many components.

        Example:

        >>> from kerasteps.models import MixtureLatent
        >>> MixtureLatent.max_grid_dim(400)
        13
        """
        dim = 1
        while (
            MixtureLatent.grid_shape(dim + 1, components)[1]
            <= MixtureLatent.MAX_GRID_COMPONENTS
        ):
            dim += 1
        return dim

    @classmethod
    def grid(
        cls,
        dim: int,
        components: int = 100,
        extent: float = 2.0,
        scale: float = 0.1,
        **kwargs: Any,
    ) -> MixtureLatent:
        """Equal components on a regular grid over `[-extent, extent]^dim`.

        The grid has `n = max(2, round(components ** (1 / dim)))` points per axis
        (`n ** dim` components: 100 for `dim=2`, 125 for 3, 81 for 4) and each
        component's standard deviation is `scale` times the grid's spacing,
        `2 * extent / (n - 1)`.

        Args:
            dim: Int >= 1, the dimension of the points.
            components: Int >= 1, about how many components. Defaults to `100`.
            extent: Half the width of the grid, > 0. Defaults to `2.0`.
            scale: Component standard deviation over grid spacing, > 0.
                Defaults to `0.1`.
            **kwargs: Passed to the layer (e.g. `name`).

        Returns:
            A `MixtureLatent` of dimension `dim`.

        Raises:
            ValueError: for a bad argument, or more than 10,000 components.

        Example:

        >>> from kerasteps.models import MixtureLatent
        >>> layer = MixtureLatent.grid(2)
        >>> layer.centres.shape, round(layer.scale, 4)
        ((100, 2), 0.0444)
        """
        dim = check_int("dim", dim)
        components = check_int("components", components)
        extent = check_positive_number("extent", extent)
        per_axis, total = cls.grid_shape(dim, components)
        if total > cls.MAX_GRID_COMPONENTS:
            raise ValueError(
                f"A grid of {per_axis} points per axis in {dim} dimensions has "
                f"{total} components, more than 10,000 (at most "
                f"{cls.max_grid_dim(components)} dimensions); pass centres to "
                "`MixtureLatent(centres, ...)` instead."
            )
        axis = np.linspace(-extent, extent, per_axis)
        centres = np.stack(np.meshgrid(*[axis] * dim, indexing="ij"), -1)
        spacing = 2.0 * extent / (per_axis - 1)
        scale = check_positive_number("scale", scale) * spacing
        return cls(centres.reshape(-1, dim), scale=scale, **kwargs)
