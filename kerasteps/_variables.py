"""Reading scalar variables from the device, quickly (private helper).

kerasteps reads a few scalars at the steps where a callback acts: the global step,
the `total`/`count` of each `Mean` metric, a learning rate. On TensorFlow,
`variable.numpy()` runs a read and a copy op (about 80 us per variable on a 2-core
machine); one `ReadVariableOp` per variable costs a quarter of that. Distributed
variables (a `SyncOnRead` metric under `tf.distribute`) are read the normal way,
which aggregates their replicas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import keras
import numpy as np


def _reader(variable: Any, view: bool = False) -> Callable[[], Any]:
    """A function returning the variable's value on the host, its handle found once.

    A plain TensorFlow variable is read with one `ReadVariableOp`; anything else
    (another backend, a distributed variable, a tensor) through Keras. With `view`,
    a TensorFlow variable on the CPU gives a view of the read's buffer (`numpy()`
    would copy it once more): valid until the next read, so copy it at once.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # A Keras variable's `value` is its `tf.Variable` (outside an autocast
        # scope); a distributed one's, its `DistributedValues`.
        value = variable.value if isinstance(variable, keras.Variable) else variable
        # A distributed variable's `handle` raises in a cross-replica context.
        plain = isinstance(value, tf.Variable) and not isinstance(
            value, tf.distribute.DistributedValues
        )
        handle = getattr(value, "handle", None) if plain else None
        if handle is not None:
            read, dtype = tf.raw_ops.ReadVariableOp, value.dtype
            if view and "CPU" in value.device.upper():
                # NumPy's view of an eager tensor's buffer (`numpy()` copies it).
                return lambda: np.asarray(read(resource=handle, dtype=dtype))
            return lambda: read(resource=handle, dtype=dtype).numpy()
    return lambda: np.asarray(keras.ops.convert_to_numpy(variable))


def array_reader(variable: Any) -> Callable[[], np.ndarray]:
    """A reader of a variable's whole value for a copy into a host buffer.

    Example:

    >>> import keras, numpy as np
    >>> from kerasteps._variables import array_reader
    >>> buffer = np.empty(2, "float32")
    >>> np.copyto(buffer, array_reader(keras.Variable([1.0, 2.0]))())
    >>> buffer
    array([1., 2.], dtype=float32)
    """
    return _reader(variable, view=True)


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
        self._readers = [_reader(v) for v in self.variables]

    def __call__(self) -> list[float]:
        return [float(read()) for read in self._readers]


def read_floats(variables: list[Any]) -> list[float]:
    """Returns the current values of scalar variables as Python floats.

    Example:

    >>> import keras
    >>> from kerasteps._variables import read_floats
    >>> read_floats([keras.Variable(2.0), keras.Variable(3, dtype="int64")])
    [2.0, 3.0]
    """
    return ScalarReader(variables)()


def read_int(variable: Any) -> int:
    """Returns the current value of an integer scalar variable (or tensor).

    Example:

    >>> import keras
    >>> from kerasteps._variables import read_int
    >>> read_int(keras.Variable(7, dtype="int64"))
    7
    """
    return int(_reader(variable)())


def unique(variables: Iterable[Any]) -> list[Any]:
    """The variables in order, each once (a variable shared by two owners: once).

    Example:

    >>> import keras
    >>> from kerasteps._variables import unique
    >>> v = keras.Variable(1.0)
    >>> len(unique([v, v]))
    1
    """
    return list({id(variable): variable for variable in variables}.values())


class Saved:
    """The values of some variables now, on the host, to assign back later.

    What `ValidateEvery` does around `evaluate()` (which resets the metrics that
    training shares) and a checkpoint restore does when an assignment fails.

    Args:
        variables: The variables (each kept once).

    Example:

    >>> import keras
    >>> from kerasteps._variables import Saved
    >>> v = keras.Variable(1.0)
    >>> saved = Saved([v, v])
    >>> _ = v.assign(5.0)
    >>> saved.assign_back()
    >>> float(v.numpy())
    1.0
    """

    def __init__(self, variables: Iterable[Any]):
        self.variables = unique(variables)
        self.values = [
            np.array(keras.ops.convert_to_numpy(v), copy=True) for v in self.variables
        ]

    def assign_back(self) -> None:
        """Assigns every variable the value it had when saved."""
        for variable, value in zip(self.variables, self.values, strict=True):
            variable.assign(value)
