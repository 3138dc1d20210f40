"""Reading scalar variables from the device, quickly (private helper).

kerasteps reads a few scalars at the steps where a callback acts: the global step,
the `total`/`count` of each `Mean` metric, a learning rate. On TensorFlow,
`variable.numpy()` runs a read and a copy op (about 80 us per variable on a 2-core
machine); one `ReadVariableOp` per variable costs a quarter of that. Distributed
variables (a `SyncOnRead` metric under `tf.distribute`) are read the normal way,
which aggregates their replicas.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


def _tf_handle(variable: Any) -> Any | None:
    """The resource handle of a plain TensorFlow variable, else None."""
    import tensorflow as tf

    value = getattr(variable, "_value", variable)
    if not isinstance(value, tf.Variable) or isinstance(
        value, tf.distribute.DistributedValues
    ):
        return None
    return getattr(value, "handle", None)


def _read(variable: Any) -> Any:
    """The value of a scalar variable (or tensor) on the host."""
    if keras.backend.backend() == "tensorflow":
        handle = _tf_handle(variable)
        if handle is not None:
            import tensorflow as tf

            dtype = getattr(variable, "_value", variable).dtype
            return tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype).numpy()
    return np.asarray(keras.ops.convert_to_numpy(variable))


class ScalarReader:
    """Reads a fixed list of scalar variables, its handles looked up once.

    Example:

    >>> import keras
    >>> from kerasteps._variables import ScalarReader
    >>> total, count = keras.Variable(6.0), keras.Variable(3.0)
    >>> read = ScalarReader([total, count])
    >>> read()
    [6.0, 3.0]
    """

    def __init__(self, variables: list[Any]):
        self.variables = list(variables)
        self._raw = None
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            handles = [_tf_handle(v) for v in self.variables]
            if all(h is not None for h in handles):
                dtypes = [getattr(v, "_value", v).dtype for v in self.variables]
                self._raw = (
                    tf.raw_ops.ReadVariableOp,
                    list(zip(handles, dtypes, strict=True)),
                )

    def __call__(self) -> list[float]:
        if self._raw is None:
            return read_floats(self.variables)
        read, pairs = self._raw
        return [float(read(resource=h, dtype=d)) for h, d in pairs]


def read_floats(variables: list[Any]) -> list[float]:
    """Returns the current values of scalar variables as Python floats.

    Example:

    >>> import keras
    >>> from kerasteps._variables import read_floats
    >>> read_floats([keras.Variable(2.0), keras.Variable(3, dtype="int64")])
    [2.0, 3.0]
    """
    return [float(_read(v)) for v in variables]


def read_int(variable: Any) -> int:
    """Returns the current value of an integer scalar variable (or tensor).

    Example:

    >>> import keras
    >>> from kerasteps._variables import read_int
    >>> read_int(keras.Variable(7, dtype="int64"))
    7
    """
    return int(_read(variable))
