"""Every use of a private Keras, TensorFlow, TensorBoard or JAX name (private).

The one module of kerasteps that imports from `keras.src`, reaches an attribute
whose name starts with `_` on a Keras, TensorFlow, TensorBoard or JAX object, or
overrides such a method; and the one place that knows how a behaviour differs
between Keras versions. Each function or class below says in one line (`Why:`)
why no public way serves. `tests/test_compat.py` checks each one against the
installed versions: an upgrade that removes or changes what it relies on fails a
test that names it.

The module imports nothing but the standard library at its top: the launcher
imports it without Keras or TensorFlow (`use_tensorboard_stub`). The classes are
mixins, placed before the Keras class they change (`class P(Mixin, Progbar)`).

Example:

>>> from kerasteps import _compat
>>> _compat.keras_version() >= (3, 0)
True
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "AsyncTrainSwitch",
    "JaxStateReader",
    "JaxTrainerWithOptimizers",
    "ProgbarFromStep",
    "all_layers",
    "batch_end_shift",
    "check_keras_version",
    "is_saveable",
    "keras_version",
    "learning_rate_schedule",
    "learning_rate_source",
    "load_events",
    "masked_crc32c",
    "once_after_build",
    "once_before_train_step",
    "patch_tf_multi_worker",
    "progbar_redraws_in_place",
    "raw_iterations",
    "restore_jax_sharding_spec",
    "saveable_children",
    "snake_case",
    "sync_jax_state",
    "use_tensorboard_stub",
]

logger = logging.getLogger("kerasteps")


@functools.cache
def keras_version() -> tuple[int, int]:
    """The installed Keras's `(major, minor)`, from the public `keras.version()`.

    Example:

    >>> from kerasteps._compat import keras_version
    >>> len(keras_version())
    2
    """
    import keras

    major, minor = re.match(r"(\d+)\.(\d+)", keras.version()).groups()
    return int(major), int(minor)


#: The tested range of Keras, `(major, minor)`: the lowest kerasteps supports (CI:
#: .ci/keras-lowest) and the newest CI tests. pyproject.toml's `keras>=3.10,<3.16`
#: says the same (tests/test_compat.py checks that they agree). A new Keras joins
#: the range when tests/test_compat.py and the suite pass on it.
LOWEST_KERAS = (3, 10)
NEWEST_TESTED_KERAS = (3, 15)


def check_keras_version() -> None:
    """Raises `ImportError` naming the version needed when Keras is older than
    `LOWEST_KERAS` (pip refuses such an install; `--no-deps` does not), and logs
    one WARNING (once a process) naming the tested range when it is newer than
    `NEWEST_TESTED_KERAS` (a `keras-nightly`, or an install with `--no-deps`).

    Example:

    >>> from kerasteps._compat import check_keras_version
    >>> check_keras_version()  # Keras 3.10 to 3.15: nothing happens
    """
    import keras

    if keras_version() < LOWEST_KERAS:
        needed = _dotted(LOWEST_KERAS)
        raise ImportError(
            f"kerasteps needs Keras {needed} or newer; this Python has Keras "
            f"{keras.version()}. Upgrade it: pip install 'keras>={needed}'"
        )
    if keras_version() > NEWEST_TESTED_KERAS:
        _warn_untested_keras(keras.version())


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


@functools.cache
def _warn_untested_keras(version: str) -> None:
    """Logs, once a process, that Keras `version` is newer than the tested range."""
    major, minor = NEWEST_TESTED_KERAS
    logger.warning(
        "kerasteps is tested with Keras %s to %s; this Python has Keras %s, newer "
        "than that range, and kerasteps may fail with it in ways its tests have not "
        "seen. A tested one: pip install 'keras>=%s,<%s'",
        _dotted(LOWEST_KERAS),
        _dotted(NEWEST_TESTED_KERAS),
        version,
        _dotted(LOWEST_KERAS),
        _dotted((major, minor + 1)),
    )


# -- the training loop ----------------------------------------------------------------
def batch_end_shift(steps_per_execution: int) -> int:
    """What to add to the batch index of `on_train_batch_end` to get the last batch
    that the execution trained.

    Why: Keras < 3.11 passes the index of the *first* batch of a
    `steps_per_execution` run (later versions the last); no public way to ask which.

    Args:
        steps_per_execution: The model's `steps_per_execution`.

    Example:

    >>> from kerasteps._compat import batch_end_shift
    >>> batch_end_shift(1)
    0
    """
    return max(0, int(steps_per_execution) - 1) if keras_version() < (3, 11) else 0


def once_before_train_step(model: Any, action: Callable[[], None]) -> None:
    """Calls `action()` right before `model`'s next `train_step` call, once.

    The method is an instance attribute until that call, the class's (or what the
    instance had before) after it. Called again while an action waits, the new
    action replaces it.

    Why: Keras has no hook between `fit()`'s data loader drawing its seeds and the
    first step that works without a callback (a restore happens before `fit()`).

    Args:
        model: A `keras.Model`.
        action: What to run, with no argument.

    Example:

    >>> import keras
    >>> from kerasteps._compat import once_before_train_step
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> once_before_train_step(model, lambda: print("first step"))
    >>> "train_step" in vars(model)
    True
    """
    before = vars(model).get("train_step")
    if getattr(before, _PENDING_ACTION, None) is not None:
        setattr(before, _PENDING_ACTION, action)  # still waiting: the new action
        return
    original = model.train_step

    def train_step(*args: Any, **kwargs: Any) -> Any:
        pending = getattr(train_step, _PENDING_ACTION)
        if pending is not None:  # the first call (a compiled step may call it again)
            setattr(train_step, _PENDING_ACTION, None)
            if vars(model).get("train_step") is train_step:
                if before is None:
                    object.__delattr__(model, "train_step")  # the class's method
                else:
                    object.__setattr__(model, "train_step", before)
            pending()
        return original(*args, **kwargs)

    setattr(train_step, _PENDING_ACTION, action)
    # Past Keras's attribute tracking: a function, not a layer or a variable.
    object.__setattr__(model, "train_step", train_step)


#: The attribute of a waiting `train_step` wrapper that holds its action.
_PENDING_ACTION = "kerasteps_pending_action"


def restore_jax_sharding_spec(model: Any) -> None:
    """Records again the sharding spec of a JAX model's training state, if an
    `evaluate()` in the middle of `fit()` cleared it.

    Why: on Keras 3.10 and 3.11 (JAX), an `evaluate()` that is not `fit()`'s own
    validation clears the spec `fit()` recorded (the next trace of the train step
    then fails with `'NoneType' object is not subscriptable`); only the trainer's
    private method records it. Keras >= 3.12 keeps no such record: nothing to do.

    Args:
        model: A `keras.Model` (any backend; only a JAX one may have cleared it).

    Example:

    >>> import keras
    >>> from kerasteps._compat import restore_jax_sharding_spec
    >>> restore_jax_sharding_spec(keras.Sequential([keras.Input((1,))]))
    """
    cleared = getattr(model, "_trainable_variable_shardings", ()) is None
    if cleared and hasattr(model, "_record_training_state_sharding_spec"):
        model._record_training_state_sharding_spec()


#: The groups of a JAX trainer's state, in its order, by the names of its flags.
_JAX_STATE = (
    "trainable_variables",
    "non_trainable_variables",
    "optimizer_variables",
    "metrics_variables",
)


class JaxTrainerWithOptimizers:
    """A mixin of a JAX `keras.Model` whose training state carries the variables of
    optimizers other than `model.optimizer` (a GAN's two).

    Keras's JAX trainer carries `model.optimizer.variables` from step to step, in
    four methods (three private). These are the same methods with
    `self._all_optimizer_variables()` (which the subclass defines) where Keras has
    `self.optimizer.variables`, and otherwise Keras's own; they take Keras's flags
    (`trainable_variables=True`, ...) by name only, as Keras passes them. The
    state sync is defined under both its names, `state_sync` (Keras >= 3.16, which
    calls it by that name) and `jax_state_sync` (Keras < 3.16).

    Why: the trainer's state is built and put back in private methods only; Keras
    has no public way to say which optimizers a custom `train_step` updates.
    """

    def _all_optimizer_variables(self) -> list:
        raise NotImplementedError  # the subclass says which

    def _state_group(self, name: str) -> list:
        """The variables of the group `name` of `_JAX_STATE`."""
        if name == "optimizer_variables":
            return self._all_optimizer_variables()
        return getattr(self, name)

    def _get_jax_state(self, *, purge_model_variables=False, **wanted):
        groups = [self._state_group(name) for name in _JAX_STATE if wanted.get(name)]
        state = tuple([v.value for v in group] for group in groups)
        if purge_model_variables:
            for v in itertools.chain(*groups):
                v._value = None
        return state

    def _purge_model_variables(self, **wanted):
        self._get_jax_state(purge_model_variables=True, **wanted)

    def state_sync(self):
        state = getattr(self, "_jax_state", None)
        if not state or self._jax_state_synced:
            return
        for name in _JAX_STATE:
            if state.get(name):
                for ref_v, v in zip(self._state_group(name), state[name], strict=True):
                    ref_v.assign(v)
        self._jax_state_synced = True

    def jax_state_sync(self):
        self.state_sync()  # Keras < 3.16's name (later Keras: an alias of it)

    def _get_state_sharding_spec(self):
        trainable, non_trainable, _, metrics = super()._get_state_sharding_spec()
        optimizer = [v.value.sharding for v in self._all_optimizer_variables()]
        return trainable, non_trainable, optimizer, metrics


class JaxStateReader:
    """Reads variables of a JAX `fit()` in progress from the state Keras keeps
    apart, in one transfer, without putting that state back into the model.

    Between two steps of a JAX `fit()`, Keras holds the trained values outside the
    model's variables (`model._jax_state`, the variables themselves emptied), and
    `jax_state_sync()` assigns every variable of the model back (the next step
    then takes them all apart again). A point where sinks write needs a few
    scalars: the metrics' totals and counts, a learning rate. `read` gives the
    values a sync would put into the variables asked for, from the state's arrays
    (one `jax.device_get`), and remembers them until the next step; None where
    there is no state apart (another backend, a state already synced) or a
    variable is not in it.

    Why: `_jax_state`, `_jax_state_synced` and the order of its groups (the
    model's `trainable_variables`, `non_trainable_variables`, its optimizer's
    `variables`, `metrics_variables`, as `jax_state_sync` assigns them; a
    `JaxTrainerWithOptimizers` names its groups with `_state_group`) are
    private: Keras has no public read of one variable mid-epoch.

    Args:
        model: The `keras.Model` being trained.

    Example:

    >>> import keras
    >>> from kerasteps._compat import JaxStateReader
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> JaxStateReader(model).read(model.weights) is None  # no fit in progress
    True
    """

    def __init__(self, model: Any):
        self.model = model
        self._where: dict[int, tuple[str, int]] = {}
        self._state: Any = None  # the state the cache holds values of
        self._cache: dict[int, Any] = {}

    def _group(self, name: str) -> list:
        group = getattr(self.model, "_state_group", None)
        if group is not None:
            return group(name)
        if name == "optimizer_variables":
            optimizer = getattr(self.model, "optimizer", None)
            return [] if optimizer is None else optimizer.variables
        return getattr(self.model, name)

    def apart(self) -> bool:
        """Whether a JAX `fit()` holds the trained state apart from the model now."""
        state = getattr(self.model, "_jax_state", None)
        return bool(state) and getattr(self.model, "_jax_state_synced", True) is False

    def read(self, variables: list[Any]) -> list[Any] | None:
        """The values of `variables` in the state apart (NumPy), or None."""
        if not self.apart():
            return None
        state = self.model._jax_state
        if state is not self._state:
            self._state, self._cache = state, {}
        wanted = [v for v in variables if id(v) not in self._cache]
        if wanted:
            if any(id(v) not in self._where for v in wanted):
                self._where = {}
                for name in _JAX_STATE:
                    for index, variable in enumerate(self._group(name)):
                        self._where.setdefault(id(variable), (name, index))
            try:
                arrays = [state[g][i] for g, i in (self._where[id(v)] for v in wanted)]
            except (KeyError, IndexError, TypeError):
                return None
            import jax

            for variable, value in zip(wanted, jax.device_get(arrays), strict=True):
                self._cache[id(variable)] = value
        return [self._cache[id(v)] for v in variables]


def sync_jax_state(model: Any) -> None:
    """Puts the state of a JAX training run in progress into the model's
    variables (Keras keeps it apart until then); nothing on other backends.

    Why: not a private name but a rename: Keras 3.16 calls the JAX trainer's
    `jax_state_sync()` `state_sync()` (the old name an alias of it). Only the new
    name reaches a `JaxTrainerWithOptimizers` through Keras's own calls, so it is
    called first.

    Args:
        model: A `keras.Model` (or any object: one with neither method is left).

    Example:

    >>> import keras
    >>> from kerasteps._compat import sync_jax_state
    >>> sync_jax_state(keras.Sequential([keras.Input((1,))]))
    """
    for name in ("state_sync", "jax_state_sync"):
        sync = getattr(model, name, None)
        if callable(sync):
            sync()
            return


class AsyncTrainSwitch:
    """Runs the train batch ends of one `keras.callbacks.CallbackList` on Keras's
    callback thread or on the training thread, execution by execution.

    Why: Keras decides once per `fit()` whether batch ends run on its thread
    (`CallbackList._async_train`, from every callback's `async_safe`) and checks
    `model.stop_training` right after it hands a batch end over. A stop decided
    at a batch end must be set on the training thread before that check, so
    kerasteps turns the hand-over off for the executions where a callback may
    stop training (`_flush_futures` first, `_clear_futures` in Keras < 3.11: the
    ends handed over earlier run before), and on again for the quiet ones.

    Args:
        callbacks: The `CallbackList` of the running `fit()`.

    Example:

    >>> import keras
    >>> from kerasteps._compat import AsyncTrainSwitch
    >>> callbacks = keras.callbacks.CallbackList([])
    >>> switch = AsyncTrainSwitch(callbacks)
    >>> switch.set(False)  # off for the next execution (if Keras had it on)
    >>> callbacks._async_train
    False
    """

    def __init__(self, callbacks: Any):
        self._callbacks = callbacks
        self._flush = (
            getattr(callbacks, "_flush_futures", None) or callbacks._clear_futures
        )
        #: Whether Keras hands the run's batch ends to its thread (never on
        #: TensorFlow, nor beside a callback that is not async-safe).
        self.available = callbacks._async_train is True

    def set(self, asynchronous: bool) -> None:
        """Hands the next batch ends to Keras's thread (True, when Keras chose to)
        or runs them on the training thread (False)."""
        asynchronous = asynchronous and self.available
        if self._callbacks._async_train == asynchronous:
            return
        if not asynchronous:
            self._flush()
        self._callbacks._async_train = asynchronous

    @classmethod
    def calling(cls, callback: Any) -> AsyncTrainSwitch | None:
        """The switch of the `CallbackList` whose hook is calling `callback`'s (a
        few frames up: Keras's `on_train_begin` calls each callback's), or None
        when no caller is a `CallbackList` holding it."""
        import keras

        frame = sys._getframe(1)
        for _ in range(6):
            if frame is None:
                return None
            owner = frame.f_locals.get("self")
            if isinstance(owner, keras.callbacks.CallbackList) and any(
                each is callback for each in owner.callbacks
            ):
                try:
                    return cls(owner)
                except AttributeError as error:
                    logger.warning(
                        "kerasteps: this Keras's CallbackList lacks what kerasteps "
                        "switches its batch ends with (%s): where Keras runs them "
                        "on its thread, a stop may come an execution late.",
                        error,
                    )
                    return None
            frame = frame.f_back
        return None


def _trainer_class(module: types.ModuleType) -> type:
    """The trainer class that a Keras backend's `trainer` module defines.

    Why: Keras < 3.16 names it after the backend (`TensorFlowTrainer`,
    `JAXTrainer`), later Keras `Trainer` in every backend (in Keras < 3.16 that
    module's `Trainer`, if any, is not its own class).
    """
    for name in ("Trainer", "TensorFlowTrainer", "JAXTrainer"):
        cls = getattr(module, name, None)
        if isinstance(cls, type) and cls.__module__ == module.__name__:
            return cls
    raise AttributeError(f"{module.__name__} defines no trainer class")


def patch_tf_multi_worker() -> None:
    """Makes Keras's TensorFlow trainer work under `MultiWorkerMirroredStrategy`.

    Two functions of Keras's TensorFlow trainer (`TensorFlowTrainer`, `Trainer`
    from Keras 3.16) are replaced: the symbolic build at the start of `fit()`
    builds on the first replica's part of a batch, element by element (Keras
    reduces an `(x, y)` batch as one value: `Attempt to convert a value
    (PerReplica...)`); `reduce_per_replica` averages scalar logs across
    workers with `axis=None` (Keras uses `axis=0`: `Invalid reduction dimension 0
    for input with 0 dimensions`). Outside multi-worker mode both call Keras's own.
    Call it once (`kerasteps.distribute.patch_keras_multi_worker` does).

    Why: both failures are inside the trainer's private functions
    (tensorflow/tensorflow#72388); no public option changes them.
    """
    import keras
    import tensorflow as tf
    from keras.src.backend.tensorflow import trainer as tf_trainer

    trainer = _trainer_class(tf_trainer)
    multi_worker = tf_trainer._collective_all_reduce_multi_worker
    original_reduce = tf_trainer.reduce_per_replica
    original_build = trainer._maybe_symbolic_build

    def reduce_per_replica(values, strategy, reduction):
        if not multi_worker(strategy) or reduction not in ("auto", "mean"):
            return original_reduce(values, strategy, reduction)

        def mean(value):
            rank = getattr(getattr(value, "shape", None), "rank", None)
            axis = None if rank in (0, None) else 0
            return strategy.reduce("MEAN", value, axis=axis)

        return keras.tree.map_structure(mean, values)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if iterator is None or strategy is None or not multi_worker(strategy):
            return original_build(self, iterator=iterator, data_batch=data_batch)

        def first_replica(value):
            if isinstance(value, tf.distribute.DistributedValues):
                return strategy.experimental_local_results(value)[0]
            return value

        for *_, it in iterator:  # Keras < 3.11: (step, it); later (begin, end, it)
            data_batch = keras.tree.map_structure(first_replica, next(it))
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    tf_trainer.reduce_per_replica = reduce_per_replica
    trainer._maybe_symbolic_build = _maybe_symbolic_build


# -- tf.data ---------------------------------------------------------------------------
def shuffles_before_repeat(dataset: Any) -> bool:
    """Whether a shuffle that reshuffles each iteration sits under a `repeat()` in a
    `tf.data` pipeline: each pass then draws a new seed from a generator that every
    iterator of the dataset shares.

    Why: tf.data has no public walk of a dataset's graph (`_inputs()` is private).

    Example:

    >>> import tensorflow as tf
    >>> from kerasteps._compat import shuffles_before_repeat
    >>> data = tf.data.Dataset.range(8)
    >>> shuffles_before_repeat(data.shuffle(8, seed=1).batch(2).repeat())
    True
    >>> shuffles_before_repeat(data.repeat().shuffle(8, seed=1).batch(2))
    False
    """

    def walk(node: Any, under_repeat: bool) -> bool:
        name = type(node).__name__
        if under_repeat and name == "_ShuffleDataset":
            return bool(getattr(node, "_reshuffle_each_iteration", True))
        inputs = getattr(node, "_inputs", None)
        under = under_repeat or name == "_RepeatDataset"
        return callable(inputs) and any(walk(i, under) for i in inputs())

    return walk(dataset, False)


# -- metrics --------------------------------------------------------------------------
def compiled_metric_names(model: Any) -> set[str] | None:
    """The names that a single-output model's `evaluate` gives before its compiled
    metrics are built: `"loss"` and each compiled metric's name; None for a model
    of several outputs or nested metrics (known once it ran).

    Why: Keras builds its `CompileMetrics` at the first step; until then only the
    metrics as given to `compile` (private `_user_metrics`) tell their names, which
    Keras takes from the string given or the object's name.

    Args:
        model: A compiled `keras.Model`.

    Example:

    >>> import keras
    >>> from kerasteps._compat import compiled_metric_names
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse", metrics=["mae"])
    >>> sorted(compiled_metric_names(model))
    ['loss', 'mae']
    """
    if len(getattr(model, "outputs", None) or [None]) != 1:
        return None
    names = {"loss"}
    compiled = getattr(model, "_compile_metrics", None)
    for group in ("_user_metrics", "_user_weighted_metrics"):
        given = getattr(compiled, group, None) or []
        if not isinstance(given, (list, tuple)):
            return None
        for metric in given:
            name = metric if isinstance(metric, str) else getattr(metric, "name", None)
            name = name or getattr(metric, "__name__", None)
            if not isinstance(name, str):
                return None
            names.add(name)
    return names


def compiled_loss_built(model: Any) -> bool:
    """Whether the model's compiled loss is built (its per-output loss trackers,
    `a_loss`, are then among `model.metrics`).

    Why: Keras builds its `CompileLoss` at the first step, and has no public flag
    for it (private `_compile_loss`).

    Args:
        model: A compiled `keras.Model`.

    Example:

    >>> import keras
    >>> from kerasteps._compat import compiled_loss_built
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> compiled_loss_built(model)
    False
    """
    loss = getattr(model, "_compile_loss", None)
    return loss is None or bool(getattr(loss, "built", True))


# -- optimizers -------------------------------------------------------------------
def raw_iterations(optimizer: Any) -> Any:
    """The variable counting every batch an optimizer was applied on.

    Equal to `optimizer.iterations` unless it accumulates gradients over `k`
    batches: then `iterations` is this divided by `k` (whole updates).

    Why: Keras has no public name for the batch count (`iterations` divides it).

    Args:
        optimizer: A `keras.optimizers.Optimizer` (not a `LossScaleOptimizer`: pass
            its `inner_optimizer`).

    Example:

    >>> import keras
    >>> from kerasteps._compat import raw_iterations
    >>> int(raw_iterations(keras.optimizers.SGD()).numpy())
    0
    """
    return optimizer._iterations


def learning_rate_schedule(optimizer: Any) -> Any | None:
    """The `LearningRateSchedule` an optimizer was given, or None.

    Why: `optimizer.learning_rate` evaluates the schedule at the optimizer's count
    now; no public attribute gives the schedule, to evaluate at another step.

    Args:
        optimizer: A `keras.optimizers.Optimizer` (not a `LossScaleOptimizer`).

    Example:

    >>> import keras
    >>> from kerasteps._compat import learning_rate_schedule
    >>> learning_rate_schedule(keras.optimizers.SGD(0.1)) is None
    True
    """
    import keras

    raw = learning_rate_source(optimizer)
    schedule = isinstance(raw, keras.optimizers.schedules.LearningRateSchedule)
    return raw if schedule else None


def learning_rate_source(optimizer: Any) -> Any:
    """What an optimizer's learning rate comes from, unevaluated: its
    `LearningRateSchedule`, the variable holding it, a callable, or None.

    Why: `optimizer.learning_rate` evaluates a schedule or a callable on the
    optimizer's state now (between two steps of a JAX `fit()`, Keras keeps that
    state apart from the variables); no public attribute gives the source.

    Args:
        optimizer: A `keras.optimizers.Optimizer` (not a `LossScaleOptimizer`).

    Example:

    >>> import keras
    >>> from kerasteps._compat import learning_rate_source
    >>> float(learning_rate_source(keras.optimizers.SGD(0.25)))
    0.25
    """
    return getattr(optimizer, "_learning_rate", None)


def once_after_build(optimizer: Any, action: Callable[[], None]) -> None:
    """Calls `action()` right after the optimizer's next `build`, once.

    Why: Keras has no hook for "the optimizer built its slots", and its own
    `load_own_variables` skips an optimizer that is not built yet.

    Args:
        optimizer: A `keras.optimizers.Optimizer` not built yet.
        action: What to run, with no argument, once the variables exist.

    Example:

    >>> import keras
    >>> from kerasteps._compat import once_after_build
    >>> optimizer = keras.optimizers.Adam()
    >>> once_after_build(optimizer, lambda: print(len(optimizer.variables)))
    >>> optimizer.build([keras.Variable(1.0)])
    4
    """
    original = optimizer.build

    def build(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        del optimizer.build  # back to the class's method
        action()
        return result

    optimizer.build = build


# -- the structure of a model ---------------------------------------------------------
def is_saveable(obj: Any) -> bool:
    """Whether `obj` is a Keras object with state of its own, as Keras's saving sees it
    (a layer, a model, an optimizer, a metric, a loss...).

    Why: Keras's base class of those (`KerasSaveable`) is not exported.

    Example:

    >>> import keras
    >>> from kerasteps._compat import is_saveable
    >>> is_saveable(keras.layers.Dense(1)), is_saveable([1])
    (True, False)
    """
    from keras.src.saving.keras_saveable import KerasSaveable

    return isinstance(obj, KerasSaveable)


def saveable_children(saveable: Any) -> Iterator[tuple[str, Any]]:
    """The `(attribute, child)` pairs of a Keras object, as `.weights.h5` files
    walk them.

    Why: kerasteps keys its checkpoints as Keras's `saving_lib` does; its walk is
    private.

    Example:

    >>> import keras
    >>> from kerasteps._compat import saveable_children
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> next(iter(saveable_children(model)))[0]
    'layers'
    """
    from keras.src.saving import saving_lib

    yield from saving_lib._walk_saveable(saveable)


def snake_case(name: str) -> str:
    """A class name in snake case, as Keras's saving names list items.

    Why: the same keys as `.weights.h5`; Keras's function is not exported.

    Example:

    >>> from kerasteps._compat import snake_case
    >>> snake_case("BatchNormalization")
    'batch_normalization'
    """
    from keras.src.utils import naming

    return naming.to_snake_case(name)


def all_layers(layer: Any) -> list[Any]:
    """The layer and every layer inside it, at any depth.

    Why: `Model.layers` lists one level only, and a plain `Layer` has no public
    list of its sublayers.

    Example:

    >>> import keras
    >>> from kerasteps._compat import all_layers
    >>> inner = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> outer = keras.Sequential([keras.Input((1,)), inner])
    >>> all_layers(outer)[0] is outer, inner.layers[-1] in all_layers(outer)
    (True, True)
    """
    flatten = getattr(layer, "_flatten_layers", None)
    return list(flatten(include_self=True)) if callable(flatten) else [layer]


# -- keras.utils.Progbar ---------------------------------------------------------------
class ProgbarFromStep:
    """A mixin of `keras.utils.Progbar` whose count starts at `initial`, not 0.

    Keras's time-per-step estimate assumes the count starts at 0; a resumed run
    starts at its checkpoint's step, so the estimate (and the ETA) here use only
    the steps since `initial`. The first update that counts a step (it includes
    tracing) only starts the clock and draws nothing: Keras's line always shows
    an ETA before the last update, and one from that update alone is far off
    (hours for a 3000-step run). From the next update on the ETA and the time per
    step come from the rate since the first update. A final update
    (`finalize=True`) is always drawn. Every value is shown as it is, never
    averaged over time (the caller reduced it), as `LogEvery`'s lines print it
    (`kerasteps.formatting.format_value`: `265.618600`, not `265.6186`).

    Why: the estimate is the private `_estimate_step_duration`, the count the
    private `_seen_so_far`; Keras's line (`verbose=1`) shows a value it holds as
    text in its private `_values` as that text, where it formats a number itself
    (`%.4f`); and it has no way to leave the ETA out but a final line, so the
    first update is made with `verbose=0` (it counts and draws nothing).

    Args:
        target: The bar's target.
        initial: The count the bar starts at.
        **kwargs: `Progbar`'s other arguments; `verbose` 0 or 1 (Keras's
            `verbose=2` line reads each value as a number).
    """

    def __init__(self, target: int, initial: int, **kwargs: Any):
        super().__init__(target, **kwargs)
        if self.verbose not in (0, 1):
            raise ValueError(f"`verbose` must be 0 or 1, received {self.verbose!r}.")
        self._initial = initial
        self._seen_so_far = initial
        self._first_update: tuple[int, float] | None = None

    @property
    def started(self) -> bool:
        """True once an update counted a step: the next one is drawn, with an ETA
        from the rate since."""
        return self._first_update is not None

    def update(self, current, values=None, finalize=None):
        from kerasteps.formatting import format_value

        for name, value in values or ():
            if name not in self._values_order:
                self._values_order.append(name)
            self._values[name] = format_value(value, name)
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        verbose = self.verbose
        if not (self.started or finalize):
            self.verbose = 0  # the first update starts the clock: no line yet
        try:
            super().update(current, finalize=finalize)
        finally:
            self.verbose = verbose

    def _estimate_step_duration(self, current, now):
        done = current - self._initial
        if done <= 0:
            return 0
        if self._first_update is None:  # its estimate is drawn on a final line only
            self._first_update = (current, now)
        first_step, first_time = self._first_update
        if current > first_step:
            return (now - first_time) / (current - first_step)
        return (now - self._start) / done


def progbar_redraws_in_place(progbar: Any) -> bool:
    """Whether a `keras.utils.Progbar` redraws its line in place (`"\\r"`), as Keras
    decides: stdout a tty, or any POSIX system, a notebook, PyCharm.

    Why: Keras decides it in `Progbar.__init__` and keeps it in the private
    `_dynamic_display`.

    Example:

    >>> import keras
    >>> from kerasteps._compat import progbar_redraws_in_place
    >>> progbar_redraws_in_place(keras.utils.Progbar(10)) in (True, False)
    True
    """
    return bool(getattr(progbar, "_dynamic_display", False))


# -- TensorBoard -------------------------------------------------------------------
def use_tensorboard_stub() -> None:
    """Makes TensorBoard use its own TensorFlow stub in this process.

    Call it before TensorBoard first imports TensorFlow (its event reader would).

    Why: TensorBoard's only switch for it is the presence of the module
    `tensorboard.compat.notf`.
    """
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("notf"))


def load_events(path: str) -> Iterator[Any]:
    """Yields the `Event` protos of one event file, with TensorBoard's own reader.

    It reads as far as a record is whole: the caller limits how many it asks for
    (a damaged length makes it allocate what the record claims).

    Why: TensorBoard exports no event-file reader; this loader is the one its own
    backend uses.

    Args:
        path: The event file.
    """
    from tensorboard.backend.event_processing.event_file_loader import (
        LegacyEventFileLoader,
    )

    yield from LegacyEventFileLoader(path).Load()


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C of `data`, as TFRecord files store it.

    Why: TensorBoard's TensorFlow stub has the function; it exports none.

    Example:

    >>> from kerasteps._compat import masked_crc32c
    >>> masked_crc32c(b"123456789")
    3347755237
    """
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import (
        masked_crc32c as crc,
    )

    return int(crc(data))
