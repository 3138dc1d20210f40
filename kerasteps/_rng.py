"""The global random generators a checkpoint holds besides the model's (private).

Keras keeps the state of its seeded random ops in the model: every
`keras.random.SeedGenerator` is a variable, which `kerasteps.checkpoint._model_state`
saves.
On PyTorch two draws escape the model: an unseeded `keras.layers.Dropout` (no
`seed=`) calls `torch.nn.functional.dropout`, which draws from torch's global
generator, and Keras's PyTorch trainer shuffles array data (`shuffle=True`) with a
`torch.utils.data.RandomSampler`, which seeds itself from the same generator at
every epoch. A checkpoint saves that generator as Lightning does:
`torch.get_rng_state()` and, once CUDA is in use, `torch.cuda.get_rng_state_all()`,
as uint8 arrays in `state.h5` under keys reserved outside the model's structure
keys (so the file's CRC-32 covers them)::

    rng/torch/cpu         torch's CPU generator
    rng/torch/cuda/<i>    the generator of CUDA device i

A restore on PyTorch sets them back at once, and again right before the model's
next training step (`restore_for`): Keras's PyTorch trainer also draws from that
generator whenever it opens a `torch.utils.data.DataLoader` iterator (an int64 for
its workers' base seed, even with no workers): twice as `fit()` starts, and at
epoch ends where the iterator is opened anew. A resumed run's next step finds the
generator as the saved run's did when nothing drew between the save and that step
there: a checkpoint within an epoch (every N steps, a kill, SIGTERM), and any
checkpoint with `steps_per_epoch` on a repeated dataset (one iterator for the
run, as an exact resume asks anyway), validations included (`ValidateEvery` puts
the generator back; Keras's epoch-end validation runs before the save). A resume
at the end of an epoch whose data loader is opened anew each epoch (arrays
without `steps_per_epoch`) is not exact: the uninterrupted run drew once more
there, and with `shuffle=True` its next epoch's order came from that state too.
A checkpoint without generator states (written on TensorFlow or JAX) leaves
torch's generators as they are; TensorFlow and JAX ignore them. torch is imported
only when the Keras backend is torch.

Not saved: Python's and NumPy's global generators (no Keras trainer draws from
them for arrays or a `tf.data.Dataset`; a `keras.utils.PyDataset` with
`shuffle=True` shuffles with Python's `random`, on every backend).
"""

from __future__ import annotations

import keras
import numpy as np

from kerasteps import _compat

__all__ = ["PREFIX", "is_reserved", "problems", "restore", "restore_for", "states"]

#: The prefix of the reserved keys: never a structure key of the model's state.
PREFIX = "rng/"
_CPU = "rng/torch/cpu"
_CUDA = "rng/torch/cuda/"


def is_reserved(key: str) -> bool:
    """True for the key of a global generator's state (outside the model's keys).

    Example:

    >>> from kerasteps import _rng
    >>> _rng.is_reserved("rng/torch/cpu"), _rng.is_reserved("layers/dense/vars/0")
    (True, False)
    """
    return key.startswith(PREFIX)


def states() -> dict[str, np.ndarray]:
    """The global generators' states now, by reserved key; `{}` but on PyTorch.

    Call it on the training thread, at the moment the model's state is copied.
    CUDA's generators are read only once CUDA is initialised (reading them
    would initialise it; before, nothing has drawn from them).

    Example:

    >>> import keras
    >>> from kerasteps import _rng
    >>> keys = sorted(_rng.states())
    >>> keys[:1] == (["rng/torch/cpu"] if keras.backend.backend() == "torch" else [])
    True
    """
    if keras.backend.backend() != "torch":
        return {}
    import torch

    found = {_CPU: torch.get_rng_state().numpy()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for index, state in enumerate(torch.cuda.get_rng_state_all()):
            found[f"{_CUDA}{index}"] = state.numpy()
    return found


def _restorable(arrays: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, int]]:
    """The reserved arrays that set a generator of this process (one `states`
    holds), with the size of that generator's live state."""
    live = states()
    return {k: (a, live[k].size) for k, a in arrays.items() if k in live}


def problems(arrays: dict[str, np.ndarray]) -> list[str]:
    """What keeps the generator states in `arrays` from restoring here.

    Args:
        arrays: A checkpoint's arrays (the model's keys are not looked at).

    Returns:
        One line per state that is not a uint8 vector of the live state's size;
        `[]` but on PyTorch.

    Example:

    >>> import numpy as np
    >>> from kerasteps import _rng
    >>> _rng.problems({"layers/dense/vars/0": np.ones(2, "float32")})
    []
    """
    found = []
    for key, (array, size) in _restorable(arrays).items():
        if array.dtype != np.uint8 or array.shape != (size,):
            found.append(
                f"{key!r} is a {array.dtype} array of shape {array.shape}, not the "
                f"state of a torch generator (uint8, shape ({size},))"
            )
    return found


def restore(arrays: dict[str, np.ndarray]) -> list[str]:
    """Sets every global generator whose state `arrays` holds (check `problems`
    first); the others are left as they are.

    Args:
        arrays: A checkpoint's arrays; the keys that are not reserved are ignored.

    Returns:
        The keys restored, sorted: `[]` but on PyTorch, and without the CUDA
        devices that this process does not have (or has not initialised).

    Example:

    >>> from kerasteps import _rng
    >>> saved = _rng.states()
    >>> _rng.restore(saved) == sorted(saved)
    True
    """
    chosen = _restorable(arrays)
    if not chosen:
        return []
    import torch

    for key, (array, _) in chosen.items():
        state = torch.from_numpy(np.array(array, dtype=np.uint8))
        if key == _CPU:
            torch.set_rng_state(state)
        else:
            torch.cuda.set_rng_state(state, int(key[len(_CUDA) :]))
    return sorted(chosen)


def restore_for(model: keras.Model, arrays: dict[str, np.ndarray]) -> list[str]:
    """Sets the global generators now, and again right before `model`'s next
    training step (check `problems` first).

    The second time undoes the draws that `fit()` makes on its way to that step
    (its data loader's seeds): the step finds the generator as the saved run's
    next step would have. It runs once, through `model.train_step` (an instance
    attribute until then, the class's method after; a later restore replaces the
    states it sets), as a restored optimizer's slots wait for its `build`.

    Args:
        model: The model whose next training step gets the states.
        arrays: A checkpoint's arrays; the keys that are not reserved are ignored.

    Returns:
        The keys restored, as `restore` returns them.

    Example:

    >>> import keras
    >>> from kerasteps import _rng
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> _rng.restore_for(model, _rng.states()) == sorted(_rng.states())
    True
    """
    keys = restore(arrays)
    if not keys:
        return keys
    chosen = {key: np.array(arrays[key], dtype=np.uint8) for key in keys}
    _compat.once_before_train_step(model, lambda: restore(chosen))
    return keys
