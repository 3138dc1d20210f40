"""Which process writes under `tf.distribute`: the chief, and only the chief.

Every worker of a `MultiWorkerMirroredStrategy` runs the same `fit()` and counts the
same steps; kerasteps sinks (`LogEvery`, `StepTensorBoard`, `JSONLinesLogger`) act on
the chief only, and `StepCheckpoint` writes the real checkpoint on the chief while the
other workers write theirs to a temporary folder that is removed at once (a
checkpoint of distributed variables may need every worker to take part).

The chief is the task of type `"chief"`, or worker 0 when the cluster has no
`"chief"` task; a process without a cluster (one device, `MirroredStrategy`) is the
chief.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_chief", "task_of"]


def _strategy(model_or_strategy: Any = None) -> Any:
    import tensorflow as tf

    if model_or_strategy is None:
        return tf.distribute.get_strategy()
    strategy = getattr(model_or_strategy, "distribute_strategy", None)
    return strategy if strategy is not None else model_or_strategy


def task_of(model_or_strategy: Any = None) -> tuple[str | None, int | None]:
    """Returns `(task_type, task_id)` of this process, `(None, None)` without a cluster.

    Args:
        model_or_strategy: A `keras.Model` (its `distribute_strategy`), a
            `tf.distribute.Strategy`, or None for the current strategy.

    Example:

    >>> from kerasteps.distribute import task_of
    >>> task_of()
    (None, None)
    """
    resolver = getattr(_strategy(model_or_strategy), "cluster_resolver", None)
    if resolver is None:
        return None, None
    return getattr(resolver, "task_type", None), getattr(resolver, "task_id", None)


def is_chief(model_or_strategy: Any = None) -> bool:
    """Returns True if this process writes logs and checkpoints.

    Args:
        model_or_strategy: A `keras.Model` (its `distribute_strategy`), a
            `tf.distribute.Strategy`, or None for the current strategy.

    Example:

    >>> from kerasteps.distribute import is_chief
    >>> is_chief()
    True
    """
    strategy = _strategy(model_or_strategy)
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return True
    task_type = getattr(resolver, "task_type", None)
    task_id = getattr(resolver, "task_id", None)
    if task_type is None or task_type == "chief":
        return True
    if task_type != "worker" or task_id not in (0, None):
        return False
    try:
        cluster = resolver.cluster_spec().as_dict()
    except Exception:  # noqa: BLE001 - no cluster spec: a single worker
        return True
    return "chief" not in cluster
