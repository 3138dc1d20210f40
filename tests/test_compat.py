"""What `kerasteps._compat` relies on in Keras, TensorFlow, TensorBoard and JAX.

One test (or more) per function or class of `_compat`, each named after it: an
upgrade that removes or changes a private name, a signature, a tuple's shape or a
behaviour that kerasteps relies on fails the test of the function that uses it.
Private modules are read with `ast` where importing them would cost time (the JAX
trainer under TensorFlow). The tests that go through the backend are `neutral`.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import logging
import os
import struct
import subprocess
import sys
import threading
import time
import tomllib
import types
from pathlib import Path

import keras
import numpy as np
import pytest

from kerasteps import _compat
from kerasteps.checkpoint._model_state import StateLayout
from kerasteps.steps import sync_trained_state
from tests.helpers import ROOT

BACKEND = keras.backend.backend()

#: Also on the lowest supported Keras: what kerasteps relies on must hold there too.
pytestmark = pytest.mark.keras_range


#: The names a backend's trainer class has had: Keras < 3.16 names it after the
#: backend, later Keras `Trainer` in every backend.
TRAINER_NAMES = ("Trainer", "JAXTrainer", "TensorFlowTrainer")


def _class_methods(module: str, *names: str) -> dict[str, list[str]]:
    """`{method: [argument names]}` of the first class found of `names` in a Keras
    module, read with `ast` (a file path: `find_spec` would import the parent
    package, JAX's)."""
    import keras.src

    parts = module.split(".")
    assert parts[:2] == ["keras", "src"]
    path = Path(keras.src.__file__).parent.joinpath(*parts[2:]).with_suffix(".py")
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    for name in names:
        if name in classes:
            return {
                item.name: [a.arg for a in item.args.args]
                for item in classes[name].body
                if isinstance(item, ast.FunctionDef)
            }
    raise AssertionError(f"{module} has no class {' or '.join(names)}")


def _tiny_model(**compile_kwargs) -> keras.Model:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1), "mse", **compile_kwargs)
    return model


class _BatchEnds(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches: list[int] = []

    def on_train_batch_end(self, batch, logs=None):
        self.batches.append(batch)


@pytest.fixture(scope="module")
def one_fit():
    """One `fit()` of 4 batches, 2 per execution, with the once-hooks set."""
    keras.utils.set_random_seed(0)
    model = _tiny_model(steps_per_execution=2)
    seen = {"train_step": 0, "build": []}

    def before_step():
        seen["train_step"] += 1

    def after_build():
        seen["build"].append(len(model.optimizer.variables))

    _compat.once_before_train_step(model, before_step)
    _compat.once_after_build(model.optimizer, after_build)
    ends = _BatchEnds()
    x = np.ones((8, 2), "float32")
    model.fit(x, x[:, :1], batch_size=2, epochs=1, verbose=0, callbacks=[ends])
    return model, ends.batches, seen


# -- the training loop ----------------------------------------------------------------
def test_keras_version():
    assert _compat.keras_version() == tuple(
        int(p) for p in keras.__version__.split(".")[:2]
    ), "keras_version: keras.version() no longer matches keras.__version__"


@pytest.mark.neutral
def test_batch_end_shift(one_fit):
    _, batches, _ = one_fit
    shifted = [b + _compat.batch_end_shift(2) for b in batches]
    assert shifted == [1, 3], (
        "batch_end_shift: on_train_batch_end with steps_per_execution=2 got "
        f"{batches}, which the shift does not map to the executions' last batches"
    )


@pytest.mark.neutral
def test_once_before_train_step(one_fit):
    model, _, seen = one_fit
    assert seen["train_step"] == 1, (
        "once_before_train_step: fit() no longer calls `model.train_step` through "
        f"the instance (the action ran {seen['train_step']} times)"
    )
    assert "train_step" not in vars(model), "once_before_train_step: not undone"


def test_once_before_train_step_runs_the_latest_action_once():
    class Model:
        def train_step(self, data):
            return data * 2

    model, calls = Model(), []
    _compat.once_before_train_step(model, lambda: calls.append("first"))
    _compat.once_before_train_step(model, lambda: calls.append("second"))
    wrapper = model.train_step
    assert model.train_step(1) == 2 and model.train_step(2) == 4
    assert wrapper(3) == 6  # a compiled step holding the wrapper: no second run
    assert calls == ["second"], f"once_before_train_step: {calls}"
    assert "train_step" not in vars(model)


def test_restore_jax_sharding_spec():
    methods = _class_methods("keras.src.backend.jax.trainer", *TRAINER_NAMES)
    if _compat.keras_version() < (3, 12):
        assert "_record_training_state_sharding_spec" in methods, (
            "restore_jax_sharding_spec: JAXTrainer has no "
            "_record_training_state_sharding_spec"
        )
        assert "_clear_jax_state_sharding" in methods, (
            "restore_jax_sharding_spec: JAXTrainer no longer clears the spec "
            "(evaluate() may not need it recorded again)"
        )
    else:
        assert "_record_training_state_sharding_spec" not in methods, (
            "restore_jax_sharding_spec: JAXTrainer records a sharding spec again: "
            "check whether evaluate() clears it"
        )


def test_jax_trainer_with_optimizers_signatures():
    methods = _class_methods("keras.src.backend.jax.trainer", *TRAINER_NAMES)
    state = ["trainable_variables", "non_trainable_variables"]
    state += ["optimizer_variables", "metrics_variables"]
    expected = {
        "_get_jax_state": ["self", *state, "purge_model_variables"],
        "_purge_model_variables": ["self", *state],
    }
    if _compat.keras_version() >= (3, 12):
        expected["_get_state_sharding_spec"] = ["self"]
    # The state sync: `jax_state_sync` before Keras 3.16, `state_sync` after (the
    # old name an alias of it); the mixin defines both.
    syncs = [name for name in ("state_sync", "jax_state_sync") if name in methods]
    assert syncs, "JaxTrainerWithOptimizers: the JAX trainer has no state sync"
    expected.update({name: ["self"] for name in syncs})
    for name, args in expected.items():
        assert methods.get(name) == args, (
            f"JaxTrainerWithOptimizers: the JAX trainer's {name} is now "
            f"{methods.get(name)}, expected {args}"
        )
    source = inspect.getsource(_compat.JaxTrainerWithOptimizers)
    for name in [*expected, "state_sync", "jax_state_sync"]:
        assert f"def {name}(" in source


@pytest.mark.neutral
def test_jax_trainer_with_optimizers_trains_as_keras():
    if BACKEND != "jax":
        pytest.skip("JAX's trainer")
    calls = []

    class Carried(_compat.JaxTrainerWithOptimizers, keras.Sequential):
        def _all_optimizer_variables(self):
            calls.append(1)
            return list(self.optimizer.variables)

    x = np.linspace(0, 1, 16, dtype="float32").reshape(8, 2)
    trained = []
    for cls in (keras.Sequential, Carried):
        keras.utils.set_random_seed(0)
        model = cls([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.Adam(0.1), "mse")
        model.fit(x, x[:, :1], batch_size=2, epochs=2, verbose=0)
        trained.append([np.asarray(v) for v in model.trainable_variables])
        trained.append([np.asarray(v) for v in model.optimizer.variables])
    assert calls, "JaxTrainerWithOptimizers: the JAX trainer no longer calls it"
    for ours, keras_own in zip(trained[2:], trained[:2], strict=True):
        for a, b in zip(ours, keras_own, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, err_msg="JaxTrainer...")


@pytest.mark.tensorflow_only("TensorFlow's trainer")
class _FindsItsSwitch(keras.callbacks.Callback):
    async_safe = True

    def on_train_begin(self, logs=None):
        self.switch = _compat.AsyncTrainSwitch.calling(self)


class _RecordsBatchEnds(keras.callbacks.Callback):
    """Async-safe: the batch and thread of each end; the first one slow."""

    async_safe = True

    def __init__(self):
        super().__init__()
        self.ends: list[tuple[int, int]] = []

    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            time.sleep(0.2)
        self.ends.append((batch, threading.get_ident()))


@pytest.mark.neutral
def test_async_train_switch():
    """Found from a callback's `on_train_begin` in `fit()`, available where Keras
    hands batch ends to its thread (JAX, PyTorch); off, the ends handed over run
    first and the next one runs on this thread; on, they are handed over again."""
    finder = _FindsItsSwitch()
    x = np.ones((2, 2), "float32")
    _tiny_model().fit(x, x[:, :1], epochs=1, verbose=0, callbacks=[finder])
    assert finder.switch is not None
    assert finder.switch.available is (BACKEND != "tensorflow")

    recorder = _RecordsBatchEnds()
    callbacks = keras.callbacks.CallbackList([recorder])
    switch = _compat.AsyncTrainSwitch(callbacks)
    here = threading.get_ident()
    callbacks.on_train_begin()
    try:
        callbacks.on_train_batch_end(0)
        switch.set(False)
        assert [batch for batch, _ in recorder.ends] == [0]  # waited for it
        callbacks.on_train_batch_end(1)
        assert recorder.ends[-1] == (1, here)
        switch.set(True)
        callbacks.on_train_batch_end(2)
    finally:
        callbacks.on_train_end()
    assert [batch for batch, _ in recorder.ends] == [0, 1, 2]
    assert (recorder.ends[2][1] != here) is switch.available
    assert (recorder.ends[0][1] != here) is switch.available


def test_patch_tf_multi_worker():
    import tensorflow as tf
    from keras.src.backend.tensorflow import trainer as tf_trainer

    name = "patch_tf_multi_worker"
    params = inspect.signature(tf_trainer.reduce_per_replica).parameters
    assert list(params) == ["values", "strategy", "reduction"], name
    trainer = _compat._trainer_class(tf_trainer)
    assert issubclass(type(_tiny_model()), trainer), f"{name}: not Keras's trainer"
    build = inspect.signature(trainer._maybe_symbolic_build)
    assert list(build.parameters) == ["self", "iterator", "data_batch"], name
    symbolic = inspect.signature(trainer._symbolic_build)
    assert "data_batch" in symbolic.parameters, name
    assert (
        tf_trainer._collective_all_reduce_multi_worker(tf.distribute.get_strategy())
        is False
    ), name
    assert _tiny_model()._distribute_strategy is None, name
    # The epoch iterator that `_maybe_symbolic_build` walks: (step, it) before
    # Keras 3.11, (begin, end, it) after; `it` gives the batches.
    x = np.zeros((4, 2), "float32")
    epochs = tf_trainer.TFEpochIterator(
        distribute_strategy=tf.distribute.get_strategy(), x=x, y=x, batch_size=2
    )
    for item in epochs:
        assert len(item) in (2, 3), f"{name}: the epoch iterator yields {item!r}"
        batch = next(item[-1])
        assert tuple(batch[0].shape) == (2, 2), name
        break


@pytest.mark.tensorflow_only("TensorFlow's trainer")
def test_patch_tf_multi_worker_on_the_trainer_renamed(monkeypatch):
    """Keras 3.16 calls `TensorFlowTrainer` `Trainer`: the patch finds it by
    either name (here the installed class, under the new name only)."""
    from keras.src.backend.tensorflow import trainer as tf_trainer

    trainer = getattr(tf_trainer, "TensorFlowTrainer", None) or tf_trainer.Trainer
    # What the patch replaces, put back after the test.
    monkeypatch.setattr(tf_trainer, "reduce_per_replica", tf_trainer.reduce_per_replica)
    monkeypatch.setattr(trainer, "_maybe_symbolic_build", trainer._maybe_symbolic_build)
    monkeypatch.delattr(tf_trainer, "TensorFlowTrainer", raising=False)
    monkeypatch.setattr(tf_trainer, "Trainer", trainer, raising=False)
    before = trainer._maybe_symbolic_build
    _compat.patch_tf_multi_worker()
    assert trainer._maybe_symbolic_build is not before, "patch_tf_multi_worker"


def test_trainer_class_finds_the_module_s_own_class():
    class Trainer:  # a base class the module imported: not its own
        pass

    old = types.ModuleType("old_backend_trainer")
    old.Trainer = Trainer
    old.JAXTrainer = type("JAXTrainer", (Trainer,), {"__module__": old.__name__})
    new = types.ModuleType("new_backend_trainer")
    new.Trainer = type("Trainer", (), {"__module__": new.__name__})
    assert _compat._trainer_class(old) is old.JAXTrainer
    assert _compat._trainer_class(new) is new.Trainer
    with pytest.raises(AttributeError, match="defines no trainer class"):
        _compat._trainer_class(types.ModuleType("empty"))


class _Variable:
    def __init__(self):
        self.value = None

    def assign(self, value):
        self.value = value


class _RenamedJaxTrainer:
    """A test double of Keras >= 3.16's JAX trainer: its state sync is called
    `state_sync` only, it puts back `self.optimizer`'s variables (Keras's own code,
    trimmed), and `fit()` calls it by that name as it ends."""

    def __init__(self):
        self.trainable_variables = [_Variable()]
        self.non_trainable_variables = []
        self.metrics_variables = []
        self.optimizer = types.SimpleNamespace(variables=[_Variable()])
        self.second_optimizer = types.SimpleNamespace(variables=[_Variable()])
        self._jax_state_synced = True

    def state_sync(self):
        if not getattr(self, "_jax_state", None) or self._jax_state_synced:
            return
        state = self._jax_state
        pairs = [  # as Keras zips them: to the shorter
            *zip(self.trainable_variables, state["trainable_variables"], strict=False),
            *zip(self.optimizer.variables, state["optimizer_variables"], strict=False),
        ]
        for ref_v, v in pairs:
            ref_v.assign(v)
        self._jax_state_synced = True

    def fit(self):
        self._jax_state = {"trainable_variables": [1.0], "optimizer_variables": [2, 3]}
        self._jax_state_synced = False
        self.state_sync()


def test_jax_trainer_with_optimizers_syncs_under_the_new_name():
    class Carried(_compat.JaxTrainerWithOptimizers, _RenamedJaxTrainer):
        def _all_optimizer_variables(self):
            return [*self.optimizer.variables, *self.second_optimizer.variables]

    for sync in ("fit", "state_sync", "jax_state_sync"):
        model = Carried()
        model.fit()
        model._jax_state_synced = False
        getattr(model, sync)()
        variables = [*model.trainable_variables, *model._all_optimizer_variables()]
        values = [v.value for v in variables]
        assert values == [1.0, 2, 3], (
            f"JaxTrainerWithOptimizers: after {sync}() the model holds {values}: "
            "Keras 3.16's `state_sync` no longer puts back every optimizer's state"
        )


def test_sync_jax_state_calls_the_name_keras_has():
    class Sync:
        def __init__(self, *names):
            self.calls = []
            for name in names:
                setattr(self, name, lambda name=name: self.calls.append(name))

    for names, called in [
        (("state_sync",), ["state_sync"]),  # Keras >= 3.16
        (("jax_state_sync",), ["jax_state_sync"]),  # Keras < 3.16
        (("state_sync", "jax_state_sync"), ["state_sync"]),  # the mixin
        ((), []),  # another backend
    ]:
        model = Sync(*names)
        sync_trained_state(model)  # through `_compat.sync_jax_state`
        assert model.calls == called, (
            f"sync_jax_state: a model with {names} got {model.calls}"
        )


class _ReadsTheStateApart(keras.callbacks.Callback):
    """Not async-safe (its ends on the training thread): at each batch end, what
    `JaxStateReader` reads of `variables(model)`, then their values once synced."""

    def __init__(self, variables):
        super().__init__()
        self.variables = variables
        self.found: list[tuple] = []

    def on_train_batch_end(self, batch, logs=None):
        model = self._model  # `self.model` would sync the state first
        variables = self.variables(model)
        apart = _compat.JaxStateReader(model).read(variables)
        sync_trained_state(model)
        synced = [np.asarray(v) for v in variables]
        self.found.append((apart, synced))


@pytest.mark.neutral
@pytest.mark.parametrize("kind", ["plain", "wgan"])
def test_jax_state_reader(kind):
    """Mid-epoch under JAX, the reader gives what a sync puts into the variables
    (metrics, optimizers' iterations and rates, a weight), for a plain model and
    a model with its own optimizers (a WGAN: `_state_group`); on other backends,
    nothing (None)."""
    from tests.helpers import tiny_wgan

    if kind == "plain":
        model = _tiny_model(metrics=["mae"])
        x = np.ones((8, 2), "float32")
        data, targets = x, x[:, :1]

        def variables(model):
            optimizer = model.optimizer
            rate = _compat.learning_rate_source(optimizer)
            extra = [optimizer.iterations, rate, model.trainable_variables[0]]
            return model.metrics_variables + extra
    else:
        model = tiny_wgan()
        data = np.random.default_rng(0).normal(size=(16, 2)).astype("float32")
        targets = None

        def variables(model):
            optimizers = [model.d_optimizer, model.g_optimizer]
            return model.metrics_variables + [o.iterations for o in optimizers]

    reader = _ReadsTheStateApart(variables)
    model.fit(data, targets, batch_size=4, epochs=1, verbose=0, callbacks=[reader])
    assert len(reader.found) >= 2
    for apart, synced in reader.found:
        if BACKEND != "jax":
            assert apart is None
            continue
        assert apart is not None, "JaxStateReader: no state apart mid-epoch"
        for a, b in zip(apart, synced, strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)
    if BACKEND == "jax":  # the (generator's) iterations read: 1, 2, ...
        at = len(reader.found[0][0]) - 3 if kind == "plain" else -1
        steps = [int(np.asarray(apart[at])) for apart, _ in reader.found]
        assert steps == list(range(1, len(steps) + 1))


# -- optimizers -------------------------------------------------------------------
@pytest.mark.neutral
def test_raw_iterations():
    optimizer = keras.optimizers.SGD(0.1, gradient_accumulation_steps=2)
    raw = _compat.raw_iterations(optimizer)
    assert isinstance(raw, keras.Variable), "raw_iterations: no `_iterations`"
    raw.assign(5)
    assert int(keras.ops.convert_to_numpy(optimizer.iterations)) == 2, (
        "raw_iterations: `iterations` is no longer the batch count divided by "
        "gradient_accumulation_steps"
    )
    assert _compat.raw_iterations(keras.optimizers.SGD()) is not raw


def test_learning_rate_schedule():
    schedule = keras.optimizers.schedules.ExponentialDecay(1.0, 10, 0.5)
    assert _compat.learning_rate_schedule(keras.optimizers.SGD(schedule)) is schedule, (
        "learning_rate_schedule: the optimizer no longer keeps its schedule in "
        "`_learning_rate`"
    )
    assert _compat.learning_rate_schedule(keras.optimizers.SGD(0.1)) is None


@pytest.mark.neutral
def test_once_after_build(one_fit):
    model, _, seen = one_fit
    assert seen["build"] == [len(model.optimizer.variables)], (
        "once_after_build: fit() no longer builds the optimizer through "
        f"`optimizer.build` on the instance (the action saw {seen['build']})"
    )
    assert "build" not in vars(model.optimizer), "once_after_build: not undone"


def test_once_after_build_runs_after_the_variables_exist():
    optimizer = keras.optimizers.Adam()
    counts = []
    _compat.once_after_build(optimizer, lambda: counts.append(len(optimizer.variables)))
    optimizer.build([keras.Variable(np.ones(3, "float32"))])
    assert counts == [4], f"once_after_build: the action saw {counts} variables"


# -- the structure of a model ---------------------------------------------------------
def test_is_saveable():
    yes = [
        keras.layers.Dense(1),
        keras.Sequential([keras.layers.Dense(1)]),
        keras.optimizers.SGD(),
        keras.metrics.Mean(),
        keras.losses.MeanSquaredError(),
    ]
    no = [[1], 1, "layer", keras.random.SeedGenerator(0)]
    assert all(_compat.is_saveable(obj) for obj in yes), "is_saveable"
    assert not any(_compat.is_saveable(obj) for obj in no), "is_saveable"


def test_saveable_children(tmp_path):
    import h5py

    model = _tiny_model()
    model.optimizer.build(model.trainable_variables)
    children = list(_compat.saveable_children(model))
    assert children[0][0] == "layers", "saveable_children: layers no longer first"
    assert ("optimizer", model.optimizer) in [(a, c) for a, c in children]
    # The same walk as Keras's own `.weights.h5`: the same keys.
    path = tmp_path / "model.weights.h5"
    model.save_weights(path)
    keras_keys = set()
    with h5py.File(path, "r") as file:
        file.visititems(
            lambda name, item: (
                keras_keys.add(name) if isinstance(item, h5py.Dataset) else None
            )
        )
    ours = set(StateLayout.of(model).keys())
    assert keras_keys == ours, (
        f"saveable_children: .weights.h5 holds {sorted(keras_keys)}, kerasteps's "
        f"walk finds {sorted(ours)}"
    )


def test_snake_case():
    assert _compat.snake_case("BatchNormalization") == "batch_normalization"
    assert _compat.snake_case("Dense") == "dense", "snake_case"
    assert _compat.snake_case("LSTMCell") == "lstm_cell", "snake_case"


def test_all_layers():
    class Block(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = keras.layers.Dense(1, dtype="float16")

        def call(self, x):
            return self.inner(x)

    block = Block()
    nested = keras.Sequential([keras.Input((2,)), keras.Sequential([block])])
    found = _compat.all_layers(nested)
    assert found[0] is nested, "all_layers: the layer itself first"
    assert block in found and block.inner in found, (
        "all_layers: `_flatten_layers` no longer finds a layer's sublayers"
    )


def test_public_layer_save_own_variables_stores_the_variables():
    """A layer's own variables, as `_model_state` reads them, are what Keras's base
    `save_own_variables` stores."""
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    store: dict = {}
    keras.Layer.save_own_variables(layer, store)
    assert list(store.values()) == [layer.kernel, layer.bias]


# -- keras.utils.Progbar ---------------------------------------------------------------
class _Bar(_compat.ProgbarFromStep, keras.utils.Progbar):
    pass


def test_progbar_from_step_relies_on():
    name = "ProgbarFromStep"
    params = inspect.signature(keras.utils.Progbar._estimate_step_duration).parameters
    assert list(params) == ["self", "current", "now"], name
    update = inspect.signature(keras.utils.Progbar.update).parameters
    assert list(update) == ["self", "current", "values", "finalize"], name
    plain = keras.utils.Progbar(10)
    assert plain._seen_so_far == 0, name
    assert isinstance(plain._start, float), name
    assert isinstance(plain.stateful_metrics, set), name


def test_progbar_from_step_shows_values_as_they_are_and_counts_from_initial():
    bar = _Bar(10, initial=5, interval=0, unit_name="step")
    screen = io.StringIO()
    with contextlib.redirect_stdout(screen):
        bar.update(6, [("loss", 1.0)], finalize=False)
        bar.update(7, [("loss", 3.0)], finalize=False)
    last = screen.getvalue().rsplit("\r", 1)[-1]
    assert " 7/10" in last, f"ProgbarFromStep: {last!r}"
    assert "loss: 3.0000" in last, f"ProgbarFromStep: a value was averaged: {last!r}"
    assert bar._first_update is not None, (
        "ProgbarFromStep: Progbar no longer calls `_estimate_step_duration`"
    )


def test_progbar_redraws_in_place():
    progbar = keras.utils.Progbar(10)
    assert isinstance(getattr(progbar, "_dynamic_display", None), bool), (
        "progbar_redraws_in_place: Progbar has no `_dynamic_display`"
    )
    assert _compat.progbar_redraws_in_place(progbar) is progbar._dynamic_display


def run_python(code: str, timeout: float, **env: str) -> subprocess.CompletedProcess:
    """Runs `code` in a new Python of this checkout (`env` added to this one's);
    raises if it fails."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        timeout=timeout,
        check=True,
    )


# -- TensorBoard -------------------------------------------------------------------
def test_use_tensorboard_stub():
    code = (
        "import sys\n"
        "from kerasteps._compat import use_tensorboard_stub\n"
        "use_tensorboard_stub()\n"
        "from tensorboard.compat import tf\n"
        "print(tf.__version__, 'tensorflow' in sys.modules)\n"
    )
    out = run_python(code, timeout=60).stdout.split()
    assert out == ["stub", "False"], f"use_tensorboard_stub: {out}"


def test_load_events(tmp_path):
    import tensorflow as tf

    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        for step in (1, 2):
            tf.summary.scalar("loss", 1.0 / step, step=step)
    (path,) = [p for p in tmp_path.iterdir() if "tfevents" in p.name]
    events = list(_compat.load_events(str(path)))
    steps = [e.step for e in events if e.WhichOneof("what") == "summary"]
    assert steps == [1, 2], f"load_events: {events}"


def test_masked_crc32c(tmp_path):
    assert _compat.masked_crc32c(b"123456789") == 3347755237, "masked_crc32c"
    import tensorflow as tf

    path = str(tmp_path / "records")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"payload")
    with open(path, "rb") as handle:
        header = handle.read(12)
    length, checksum = struct.unpack("<QI", header)
    assert length == len(b"payload")
    assert _compat.masked_crc32c(header[:8]) == checksum, (
        "masked_crc32c: no longer the checksum of a TFRecord length"
    )


def test_check_keras_version_names_the_version_needed(monkeypatch):
    monkeypatch.setattr(keras, "version", lambda: "3.9.2")
    _compat.keras_version.cache_clear()
    try:
        with pytest.raises(ImportError) as raised:
            _compat.check_keras_version()
    finally:
        monkeypatch.undo()
        _compat.keras_version.cache_clear()
    assert str(raised.value) == (
        "kerasteps needs Keras 3.10 or newer; this Python has Keras 3.9.2. "
        "Upgrade it: pip install 'keras>=3.10'"
    )
    _compat.check_keras_version()  # the installed Keras passes


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _untested() -> tuple[str, str, str]:
    """A Keras version above the tested range, the range as the WARNING names it
    ("3.10 to 3.15") and the pip requirement it gives ("keras>=3.10,<3.16")."""
    lowest, (major, minor) = _compat.LOWEST_KERAS, _compat.NEWEST_TESTED_KERAS
    return (
        f"{major}.{minor + 1}.0.dev2026102704",
        f"{_dotted(lowest)} to {major}.{minor}",
        f"keras>={_dotted(lowest)},<{major}.{minor + 1}",
    )


def test_check_keras_version_warns_once_above_the_tested_range(monkeypatch, caplog):
    version, tested, requirement = _untested()
    monkeypatch.setattr(keras, "version", lambda: version)
    _compat.keras_version.cache_clear()
    _compat._warn_untested_keras.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="kerasteps"):
            _compat.check_keras_version()
            _compat.check_keras_version()
    finally:
        monkeypatch.undo()
        _compat.keras_version.cache_clear()
        _compat._warn_untested_keras.cache_clear()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["kerasteps"], caplog.text
    message = warnings[0].getMessage()
    assert message.startswith(
        f"kerasteps is tested with Keras {tested}; this Python has Keras {version}, "
        "newer than that range"
    ), message
    assert message.endswith(f"A tested one: pip install '{requirement}'"), message
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="kerasteps"):
        _compat.check_keras_version()  # the installed Keras
    if _compat.keras_version() <= _compat.NEWEST_TESTED_KERAS:
        assert caplog.records == [], "check_keras_version: a Keras in the range"


@pytest.mark.parametrize("keras_first", [True, False], ids=["keras-first", "after"])
def test_import_under_a_newer_keras_warns_once(keras_first):
    """`import kerasteps` after `import keras` warns; before it, the first part of
    kerasteps that imports Keras does; either way once."""
    version, tested, _ = _untested()
    code = (
        "import logging\n"
        "logging.basicConfig(format='%(levelname)s:%(name)s: %(message)s')\n"
        f"if {not keras_first}: import kerasteps\n"
        "import keras\n"
        f"keras.version = lambda: {version!r}\n"
        "import kerasteps, kerasteps.steps\n"
        "kerasteps.global_step\n"
    )
    err = run_python(code, timeout=120, TF_CPP_MIN_LOG_LEVEL="3").stderr
    ours = [line for line in err.splitlines() if line.startswith("WARNING:kerasteps")]
    assert len(ours) == 1, err
    assert f"tested with Keras {tested}; this Python has Keras {version}," in ours[0]


def test_tested_range_is_the_one_pyproject_and_ci_declare():
    """`LOWEST_KERAS` and `NEWEST_TESTED_KERAS` are pyproject.toml's Keras bounds
    (`keras>=3.10,<3.16`) and the Keras that .ci/keras-lowest installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = [d for d in project["dependencies"] if d.startswith("keras")]
    requirement = _untested()[2]
    assert spec == requirement, f"pyproject.toml: {spec!r}, _compat: {requirement!r}"
    pins = (ROOT / ".ci" / "keras-lowest.txt").read_text().split()
    assert f"keras=={_dotted(_compat.LOWEST_KERAS)}.0" in pins, pins
