"""What a kerasteps checkpoint holds, and its file format, on every backend (private).

**The state of a model, keyed by its structure.** `StateLayout.of(model)` walks the
model as Keras's own `saving_lib` does for `.weights.h5` files (the same walk, the
same keys): `layers/dense/vars/0`, `layers/dense_1/vars/1`, `optimizer/vars/3`,
`d_optimizer/vars/0`, `vars/0` (the model's own variables, such as a WGAN's
counters). Keys come from attribute names, layer classes and positions, never from
the auto-generated variable names (`sequential_1/dense_2/kernel`), so a checkpoint
restores into any identically built model: in the same notebook, a sweep, another
process or another backend. On top of Keras's keys:

- every optimizer's variables (`iterations`, the learning rate, every slot), also
  for optimizers that are attributes of a custom model (`g_optimizer/vars/2`);
- the state of every `keras.random.SeedGenerator` held by a layer
  (`layers/dropout/seed_generator/state`), which `.weights.h5` leaves out;
- any other variable of `model.variables` the walk did not reach
  (`other_variables/<index>`).

Metrics and losses are not part of it: Keras resets metrics at every epoch, and the
sinks' open windows travel in the checkpoint's `meta.json` instead.

**The global generators.** On PyTorch a checkpoint also holds torch's global
generator states (an unseeded `Dropout` draws from them), under keys reserved
outside the model's structure (`rng/torch/cpu`; see `kerasteps._rng`): the strict
key check of a restore leaves them out, and `restore_arrays` sets them back on
PyTorch after the model's state, and again right before the model's next training
step, past the draws of `fit()`'s data loader (other backends ignore them).

**The file.** One HDF5 file (`state.h5`, written with `h5py`, which Keras itself
depends on) holds one dataset per key, with its dtype. A dtype that HDF5 has no type
for (`bfloat16`) is stored as same-width unsigned integers with a `dtype` attribute.
HDF5 has no checksums of its own: the checkpoint's `meta.json` holds the file's CRC-32,
which a restore verifies before reading. HDF5 writes through a file object that keeps
I/O errors from it (`_HeldErrors`): a full disk raises its `OSError` after HDF5 closed
the file, and never leaves a half-closed HDF5 file to be collected later.
"""

from __future__ import annotations

import contextlib
import errno
import os
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import keras
import ml_dtypes  # noqa: F401 - names its dtypes (`bfloat16`) to numpy
import numpy as np

from kerasteps import _compat, _rng, _variables
from kerasteps import steps as steps_lib

__all__ = [
    "Snapshot",
    "StateLayout",
    "crc32_of",
    "generator_states",
    "read_arrays",
    "restore_arrays",
    "write_arrays",
]

OTHER = "other_variables"


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def _vars_of(path: str, arrays: dict[str, Any]) -> dict[str, Any]:
    """The entries of `arrays` under `<path>/vars/`, by the rest of their key."""
    prefix = _join(path, "vars") + "/"
    return {k[len(prefix) :]: a for k, a in arrays.items() if k.startswith(prefix)}


@dataclass
class StateLayout:
    """Every state variable of a model by its structure key, in a stable order.

    Attributes:
        variables: key -> `keras.Variable`.
        custom: path -> a layer whose `save_own_variables` stores computed values
            (not variables): it is saved and restored through those methods.
        optimizers: path -> every optimizer found (for deferred restores).
    """

    variables: dict[str, Any] = field(default_factory=dict)
    custom: dict[str, Any] = field(default_factory=dict)
    optimizers: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, model: keras.Model) -> StateLayout:
        """The layout of a model's state now (its built variables)."""
        layout = cls()
        seen_variables: set[int] = set()
        layout._walk(model, "", set(), seen_variables)
        others = [v for v in model.variables if id(v) not in seen_variables]
        for index, variable in enumerate(others):
            layout._add(_join(OTHER, str(index)), variable, seen_variables)
        return layout

    def _add(self, key: str, variable: Any, seen: set[int]) -> None:
        if id(variable) not in seen:
            seen.add(id(variable))
            self.variables[key] = variable

    def _walk(self, obj: Any, path: str, seen: set[int], seen_vars: set[int]) -> None:
        if id(obj) in seen or isinstance(obj, (keras.metrics.Metric, keras.Loss)):
            return
        seen.add(id(obj))
        if isinstance(obj, keras.optimizers.Optimizer):
            self.optimizers[path] = obj
            for index, variable in enumerate(obj.variables):
                self._add(_join(path, "vars", str(index)), variable, seen_vars)
        elif hasattr(obj, "save_own_variables"):
            store = _stored(obj)
            if all(isinstance(v, keras.Variable) for v in store.values()):
                for key, variable in store.items():
                    self._add(_join(path, "vars", key), variable, seen_vars)
            else:
                self.custom[path] = obj
                if isinstance(obj, keras.Layer):
                    # The variables it created itself (not its sublayers'), which
                    # Keras's own method stores: saved by its override, not as keys.
                    seen_vars.update(map(id, _stored(obj, keras.Layer).values()))
        for attr, child in _compat.saveable_children(obj):
            if _compat.is_saveable(child):
                self._walk(child, _join(path, attr), seen, seen_vars)
            elif isinstance(child, keras.random.SeedGenerator):
                self._add(_join(path, attr, "state"), child.state, seen_vars)
            elif isinstance(child, (list, tuple, dict)):
                items = child.values() if isinstance(child, dict) else child
                used: dict[str, int] = {}
                for item in filter(_compat.is_saveable, items):
                    name = _compat.snake_case(type(item).__name__)
                    count = used[name] = used.get(name, -1) + 1
                    name = f"{name}_{count}" if count else name
                    self._walk(item, _join(path, attr, name), seen, seen_vars)

    def keys(self) -> list[str]:
        """Every key the layout writes: variables, then the custom layers' values."""
        return list(self.variables) + list(self.custom_values())

    def custom_values(self) -> dict[str, np.ndarray]:
        """The custom layers' values now, by key, as numpy arrays."""
        return {
            _join(path, "vars", key): keras.ops.convert_to_numpy(value)
            for path, obj in self.custom.items()
            for key, value in _stored(obj).items()
        }


def _stored(obj: Any, cls: type | None = None) -> dict[str, Any]:
    """What `obj.save_own_variables` stores, by key (`cls`'s method where given)."""
    store: dict[str, Any] = {}
    (cls or type(obj)).save_own_variables(obj, store)
    return store


class Snapshot:
    """A copy of a model's state in host memory, in buffers that are kept.

    `take(model)` copies every variable into numpy buffers allocated at the first
    take and reused after (allocating 240 MiB afresh costs ~20 times a warm copy).
    The arrays stay valid until the next `take`.

    Example:

    >>> import keras
    >>> from kerasteps.checkpoint._model_state import Snapshot
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> sorted(Snapshot().take(model))
    ['layers/dense/vars/0', 'layers/dense/vars/1']
    """

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}
        self._readers: dict[str, Callable[[], np.ndarray]] = {}
        self._layout_key: tuple[int, ...] | None = None
        self._layout: StateLayout | None = None

    def layout(self, model: keras.Model) -> StateLayout:
        """The model's layout, walked again only when its variables changed."""
        if self._signature(model) != self._layout_key:
            self._layout = StateLayout.of(model)
            self._layout_key = self._signature(model)
            self._readers = {
                key: _variables.array_reader(variable)
                for key, variable in self._layout.variables.items()
            }
        return self._layout

    def _signature(self, model: keras.Model) -> tuple[int, ...]:
        optimizers = self._layout.optimizers.values() if self._layout else ()
        return (*map(id, model.variables), *(len(o.variables) for o in optimizers))

    def prepare(self, model: keras.Model) -> None:
        """Allocates (and touches) the buffers now, so no save pays for it later.

        A fresh buffer costs a page fault per 4 KiB at its first write: for 240 MiB
        about half a second, which would otherwise fall in the first saving step.
        """
        steps_lib.sync_trained_state(model)
        for key, variable in self.layout(model).variables.items():
            self._buffer(key, tuple(variable.shape), _numpy_dtype(variable), fill=True)

    def take(self, model: keras.Model) -> dict[str, np.ndarray]:
        """Copies the model's state (its trained state, on JAX too) to the host."""
        steps_lib.sync_trained_state(model)
        layout = self.layout(model)
        arrays = {key: self._copy(key, read()) for key, read in self._readers.items()}
        for key, value in layout.custom_values().items():
            arrays[key] = self._copy(key, value)
        return arrays

    def _buffer(
        self, key: str, shape: tuple, dtype: np.dtype, fill: bool = False
    ) -> np.ndarray:
        """The kept buffer of a key, (re)allocated when its shape or dtype changed."""
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape != shape or buffer.dtype != dtype:
            buffer = self._buffers[key] = (np.ones if fill else np.empty)(shape, dtype)
        return buffer

    def _copy(self, key: str, value: np.ndarray) -> np.ndarray:
        buffer = self._buffer(key, value.shape, value.dtype)
        np.copyto(buffer, value)
        return buffer


def generator_states() -> dict[str, np.ndarray]:
    """The global generators' states a checkpoint holds besides the model's state.

    Torch's generators on PyTorch, by their reserved keys (`rng/torch/cpu`, and
    `rng/torch/cuda/<i>` once CUDA is in use); `{}` on TensorFlow and JAX. Take
    them on the training thread, with the `Snapshot`: see `kerasteps._rng`.

    Example:

    >>> import keras
    >>> from kerasteps.checkpoint._model_state import generator_states
    >>> keys = sorted(generator_states())
    >>> keys[:1] == (["rng/torch/cpu"] if keras.backend.backend() == "torch" else [])
    True
    """
    return _rng.states()


# -- the file ---------------------------------------------------------------------
class _HeldErrors:
    """A binary file through which HDF5 never sees an I/O error (private).

    HDF5 that meets a write error (a full disk: `ENOSPC`, `EFBIG`) cannot close
    the file either; h5py then leaves it open, and collecting it later, on another
    thread, crashed the process (SIGSEGV) in some runs. Through this file every
    operation succeeds for HDF5: the first error is kept, the later writes are
    skipped (reads past it give zeros), and `write_arrays` raises the error once
    HDF5 has closed the file. Writes go to the file as HDF5 hands them over (no
    copy in memory), each at the position HDF5 sought to.
    """

    def __init__(self, file: BinaryIO):
        self._file = file
        self._position = 0
        self._end = 0
        #: The first I/O error, else None.
        self.error: OSError | None = None

    def _held(self, method: Callable[..., Any], *args: Any) -> Any:
        """`method(*args)` at HDF5's position, else None: once an I/O error came
        (the first one is kept, not raised), nothing more reaches the file."""
        if self.error is None:
            try:
                self._file.seek(self._position)
                return method(*args)
            except OSError as error:
                self.error = error
        return None

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position}.get(whence, self._end)
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def _write_all(self, view: memoryview) -> None:
        while view:  # a raw file may write part of it
            count = self._file.write(view)
            if not count:
                raise OSError(errno.EIO, "the write made no progress")
            view = view[count:]

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._held(self._write_all, view)
        self._position += len(view)
        self._end = max(self._end, self._position)
        return len(view)

    def read(self, size: int) -> bytes:
        data = self._held(self._file.read, size) or b""
        self._position += size
        return data + bytes(size - len(data))  # as past the end of a file: zeros

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        view[:] = self.read(len(view))
        return len(view)

    def truncate(self, size: int) -> int:
        self._held(self._file.truncate, size)
        self._end = size
        return size

    def flush(self) -> None:
        self._held(self._file.flush)


def write_arrays(target: str | BinaryIO, arrays: dict[str, np.ndarray]) -> None:
    """Writes `arrays` to an HDF5 file (a local path or a seekable binary file).

    An I/O error (a full disk) is raised as the `OSError` the system gave, after
    HDF5 closed the file: HDF5 itself never sees it (see `_HeldErrors`). HDF5
    gathers the file's small pieces in a page buffer of 1 MiB (paged file space)
    and hands them over in pages, and each dataset is made by h5py's low-level
    calls: a state of 53 small arrays is written in a quarter of the time of one
    `create_dataset` each on a plain file (8 ms against 25-32 ms), and a large one
    as fast as before (see `benchmarks/checkpoint_overhead.py --lag`).

    Example:

    >>> import numpy as np, os, tempfile
    >>> from kerasteps.checkpoint._model_state import read_arrays, write_arrays
    >>> path = os.path.join(tempfile.mkdtemp(), "state.h5")
    >>> write_arrays(path, {"layers/dense/vars/0": np.ones(2, "float32")})
    >>> read_arrays(path)
    {'layers/dense/vars/0': array([1., 1.], dtype=float32)}
    """
    import h5py

    paged = {"fs_strategy": "page", "fs_page_size": 1 << 16, "page_buf_size": 1 << 20}
    links = h5py.h5p.create(h5py.h5p.LINK_CREATE)
    links.set_create_intermediate_group(True)  # `layers/dense/vars/0` in one call
    with contextlib.ExitStack() as stack:
        if isinstance(target, (str, os.PathLike)):
            target = stack.enter_context(open(target, "w+b", buffering=0))
        sink = _HeldErrors(target)
        with h5py.File(sink, "w", **paged) as handle:
            for key, array in arrays.items():
                array = np.require(array, requirements="C")  # 0-d stays 0-d
                named = array.dtype.kind not in "biuf"  # no HDF5 type (`bfloat16`)
                data = array.view(f"uint{array.dtype.itemsize * 8}") if named else array
                space = (
                    h5py.h5s.create_simple(data.shape)
                    if data.shape
                    else h5py.h5s.create(h5py.h5s.SCALAR)
                )
                kind = h5py.h5t.py_create(data.dtype)
                made = h5py.h5d.create(handle.id, key.encode(), kind, space, lcpl=links)
                made.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
                if named:  # stored as same-width unsigned ints, with their dtype
                    h5py.Dataset(made).attrs["dtype"] = str(array.dtype)
        if sink.error is not None:  # without the frames that held HDF5's buffers
            raise sink.error.with_traceback(None)


def read_arrays(source: str | BinaryIO) -> dict[str, np.ndarray]:
    """Reads every dataset of a file that `write_arrays` wrote, by key."""
    import h5py

    arrays: dict[str, np.ndarray] = {}

    def visit(name: str, item: Any) -> None:
        if isinstance(item, h5py.Dataset):
            array = np.asarray(item[()])
            dtype = item.attrs.get("dtype")
            arrays[name] = array if dtype is None else array.view(str(dtype))

    with h5py.File(source, "r") as handle:
        handle.visititems(visit)
    return arrays


def crc32_of(read: Callable[[int], bytes]) -> str:
    """The CRC-32 of a stream, as `"crc32:<8 hex digits>"`.

    Args:
        read: `read(n)` of an open binary file.

    Example:

    >>> import io
    >>> from kerasteps.checkpoint._model_state import crc32_of
    >>> crc32_of(io.BytesIO(b"kerasteps").read)
    'crc32:ea6b459a'
    """
    crc = 0
    while chunk := read(16 << 20):
        crc = zlib.crc32(chunk, crc)
    return f"crc32:{crc:08x}"


# -- restoring --------------------------------------------------------------------
_PENDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _numpy_dtype(variable: Any) -> np.dtype:
    return np.dtype(keras.backend.standardize_dtype(variable.dtype))


def _listing(keys: list[str], limit: int = 6) -> str:
    shown = ", ".join(repr(k) for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _deferred_parts(
    layout: StateLayout, arrays: dict[str, np.ndarray]
) -> dict[str, tuple[Any, dict[int, np.ndarray]]]:
    """The saved slots of optimizers that are not built yet, by optimizer path."""
    deferred = {}
    for path, optimizer in layout.optimizers.items():
        have = len(optimizer.variables)
        later = {
            int(index): array
            for index, array in _vars_of(path, arrays).items()
            if index.isdigit() and int(index) >= have
        }
        if later and not getattr(optimizer, "built", True):
            deferred[path] = (optimizer, later)
    return deferred


def restore_arrays(model: keras.Model, arrays: dict[str, np.ndarray]) -> list[str]:
    """Assigns a checkpoint's arrays to the model's state, all or nothing.

    Every key of the model's layout must be in `arrays` and every key of `arrays`
    in the layout (or be a slot of an optimizer that is not built yet: those are
    assigned the moment the optimizer builds them, before its first update; or be
    a global generator's state under the reserved `rng/` keys: on PyTorch those set
    torch's generators once the model's state is assigned, and again right before
    the model's next training step; elsewhere they are ignored). Shapes must
    match; dtypes are converted (a seed state saved as `int32` by one backend
    restores into another's `uint32`).

    Returns:
        The paths of the optimizers whose slots wait for their build.

    Raises:
        ValueError: naming the missing, extra or mis-shaped keys (or a torch
            generator state of the wrong size); the model is then as it was.
    """
    steps_lib.sync_trained_state(model)
    layout = StateLayout.of(model)
    deferred = _deferred_parts(layout, arrays)
    later = {f"{p}/vars/{i}" for p, (_, part) in deferred.items() for i in part}
    problems = _problems(layout, arrays, later) + _rng.problems(arrays)
    if problems:
        raise ValueError("; ".join(problems) + ".")
    _assign_all_or_nothing(layout, arrays)
    _rng.restore_for(model, arrays)
    for optimizer, part in deferred.values():
        _defer(optimizer, part)
    return sorted(deferred)


def _problems(
    layout: StateLayout, arrays: dict[str, np.ndarray], later: set[str]
) -> list[str]:
    """What keeps `arrays` from restoring into `layout`: missing, extra and
    mis-shaped keys (`later`: the keys of slots that wait for their optimizer)."""
    keys = layout.keys()
    missing = [k for k in keys if k not in arrays]
    unknown = arrays.keys() - set(keys) - later
    extra = sorted(k for k in unknown if not _rng.is_reserved(k))
    problems = []
    if missing:
        problems.append(
            f"the checkpoint has no value for the model's {_listing(missing)}"
        )
    if extra:
        problems.append(
            f"the checkpoint holds {_listing(extra)}, which the model does not have "
            "(a layer not built yet? build the model, e.g. by calling it on a batch, "
            "before restoring)"
        )
    for key, variable in layout.variables.items():
        if key in arrays and tuple(arrays[key].shape) != tuple(variable.shape):
            problems.append(
                f"{key!r} has shape {tuple(arrays[key].shape)} in the checkpoint and "
                f"{tuple(variable.shape)} in the model"
            )
    return problems


def restore_weights(model: keras.Model, arrays: dict[str, np.ndarray]) -> int:
    """Assigns a checkpoint's arrays to the model's weights only, all or nothing:
    not its optimizers, its step counters or its layers' computed values (Keras's
    `restore_best_weights` sets the weights alone). Returns how many it set.

    Raises:
        ValueError: naming the weights the checkpoint lacks or holds in another
            shape; the model is then as it was.
    """
    steps_lib.sync_trained_state(model)
    counters = set(map(id, steps_lib.step_counter_variables(model).values()))
    weights = {id(w) for w in model.weights} - counters
    layout = StateLayout.of(model)
    layout.variables = {k: v for k, v in layout.variables.items() if id(v) in weights}
    layout.custom = {}
    problems = [f"no weight {k!r}" for k in layout.variables if k not in arrays]
    problems += [
        f"{k!r} has the shape {arrays[k].shape}, the model's {tuple(v.shape)}"
        for k, v in layout.variables.items()
        if k in arrays and tuple(arrays[k].shape) != tuple(v.shape)
    ]
    if problems:
        raise ValueError("; ".join(problems) + ".")
    _assign_all_or_nothing(layout, arrays)
    return len(layout.variables)


def _assign_all_or_nothing(layout: StateLayout, arrays: dict[str, np.ndarray]) -> None:
    """Assigns every variable and custom layer its array; if any assignment
    fails, puts back what they held and re-raises."""
    before = _variables.Saved(layout.variables.values())
    custom_before = layout.custom_values()
    try:
        for key, variable in layout.variables.items():
            variable.assign(arrays[key].astype(_numpy_dtype(variable), copy=False))
        for path, obj in layout.custom.items():
            obj.load_own_variables(_vars_of(path, arrays))
    except BaseException:
        before.assign_back()
        for path, obj in layout.custom.items():
            obj.load_own_variables(_vars_of(path, custom_before))
        raise


def _defer(optimizer: Any, part: dict[int, np.ndarray]) -> None:
    """Assigns an optimizer's saved slots right after it builds them."""
    if optimizer not in _PENDING:  # else its build assigns the newer `part`
        _compat.once_after_build(
            optimizer, lambda: _assign_built(optimizer, _PENDING.pop(optimizer, {}))
        )
    _PENDING[optimizer] = part


def _assign_built(optimizer: Any, values: dict[int, np.ndarray]) -> None:
    variables = optimizer.variables
    if len(variables) <= max(values, default=-1):
        raise ValueError(
            f"The optimizer {optimizer.name!r} built {len(variables)} variables but "
            f"its checkpoint holds {max(values) + 1}: it does not match the one saved."
        )
    with _eager_scope():
        for index, array in values.items():
            variable = variables[index]
            if tuple(array.shape) != tuple(variable.shape):
                raise ValueError(
                    f"The optimizer variable {variable.path!r} has shape "
                    f"{tuple(variable.shape)}; its checkpoint value has "
                    f"{tuple(array.shape)}."
                )
            variable.assign(array.astype(_numpy_dtype(variable), copy=False))


def _eager_scope() -> Any:
    """Runs assignments at once even inside a `tf.function` being traced."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.init_scope()
    return contextlib.nullcontext()
