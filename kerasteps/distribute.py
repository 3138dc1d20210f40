"""Which process writes under `tf.distribute`: the chief, and only the chief.

Every worker of a `MultiWorkerMirroredStrategy` runs the same `fit()` and counts the
same steps; kerasteps sinks (`LogEvery`, `StepTensorBoard`, `JSONLinesLogger`) act on
the chief only, and `StepCheckpoint` writes the real checkpoint on the chief while the
other workers write theirs to a temporary folder that is removed at once (a
checkpoint of distributed variables may need every worker to take part).

The chief is the task of type `"chief"`, or worker 0 when the cluster has no
`"chief"` task; a process without a cluster (one device, `MirroredStrategy`) is the
chief.

Under JAX, several processes train one model with `keras.distribution` (e.g.
`DataParallel`) after `jax.distributed.initialize`; the chief is process 0
(`jax.process_index() == 0`), and every process counts the same steps.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kerasteps import _compat

__all__ = ["is_chief", "patch_keras_multi_worker", "strategy_scope", "task_of"]


def _jax_process() -> tuple[int, int] | None:
    """`(process_index, process_count)` under the JAX backend, else None."""
    import keras

    if keras.backend.backend() != "jax":
        return None
    import jax

    return jax.process_index(), jax.process_count()


def _resolver(model_or_strategy: Any = None) -> Any:
    """The cluster resolver of the strategy, or None."""
    import tensorflow as tf

    if model_or_strategy is None:
        strategy = tf.distribute.get_strategy()
    else:
        strategy = getattr(model_or_strategy, "distribute_strategy", None)
    return getattr(strategy or model_or_strategy, "cluster_resolver", None)


def task_of(model_or_strategy: Any = None) -> tuple[str | None, int | None]:
    """Returns `(task_type, task_id)` of this process, `(None, None)` without a cluster.

    Under JAX with several processes: `("process", jax.process_index())`.

    Args:
        model_or_strategy: A `keras.Model` (its `distribute_strategy`), a
            `tf.distribute.Strategy`, or None for the current strategy.

    Example:

    >>> from kerasteps.distribute import task_of
    >>> task_of()
    (None, None)
    """
    process = _jax_process()
    if process is not None:
        index, count = process
        return ("process", index) if count > 1 else (None, None)
    resolver = _resolver(model_or_strategy)
    return getattr(resolver, "task_type", None), getattr(resolver, "task_id", None)


def is_chief(model_or_strategy: Any = None) -> bool:
    """Returns True if this process writes logs and checkpoints.

    Under JAX: True on process 0 only (`jax.process_index() == 0`).

    Args:
        model_or_strategy: A `keras.Model` (its `distribute_strategy`), a
            `tf.distribute.Strategy`, or None for the current strategy.

    Example:

    >>> from kerasteps.distribute import is_chief
    >>> is_chief()
    True
    """
    task_type, task_id = task_of(model_or_strategy)
    if task_type == "process":
        return task_id == 0
    if task_type is None or task_type == "chief":
        return True
    if task_type != "worker" or task_id not in (0, None):
        return False
    try:
        cluster = _resolver(model_or_strategy).cluster_spec().as_dict()
    except Exception:  # noqa: BLE001 - no cluster spec: a single worker
        return True
    return "chief" not in cluster


def strategy_scope(model: Any) -> contextlib.AbstractContextManager:
    """The scope of the `tf.distribute` strategy a model was built under, for a
    caller outside any strategy's scope (a restore builds optimizer slots, which
    TensorFlow creates only there); else, and off TensorFlow, a scope that does
    nothing.

    Args:
        model: A Keras model.

    Example:

    >>> import keras
    >>> from kerasteps.distribute import strategy_scope
    >>> with strategy_scope(keras.Sequential()):
    ...     pass
    """
    # Keras's TensorFlow trainer keeps the strategy of `strategy.scope()` here.
    strategy = getattr(model, "_distribute_strategy", None)
    if strategy is None:
        return contextlib.nullcontext()
    import tensorflow as tf

    return (
        contextlib.nullcontext() if tf.distribute.has_strategy() else strategy.scope()
    )


_PATCHED = False


def patch_keras_multi_worker() -> bool:
    """Makes Keras 3's `fit()` work under `MultiWorkerMirroredStrategy` (opt-in).

    Keras 3 (seen with 3.15 on TensorFlow 2.21, reported upstream as
    tensorflow/tensorflow#72388) fails in multi-worker mode in two places: the
    symbolic build at the start of `fit()` reduces an `(x, y)` batch as one value
    (`Attempt to convert a value (PerReplica...)`), and the per-step logs are reduced
    with `axis=0` although they are scalars (`Invalid reduction dimension 0 for
    input with 0 dimensions`). This function patches those two Keras internals:
    nested batches are reduced element by element, scalar logs are averaged across
    workers with `axis=None`. Call it once, before `fit()`, in every worker; it
    changes nothing outside multi-worker mode. Returns True when it patched (False
    when already patched).

    Example:

    >>> from kerasteps.distribute import patch_keras_multi_worker
    >>> patch_keras_multi_worker() in (True, False)
    True
    """
    global _PATCHED
    if _PATCHED:
        return False
    _compat.patch_tf_multi_worker()
    _PATCHED = True
    return True
