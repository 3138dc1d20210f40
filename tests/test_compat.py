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
import os
import struct
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from kerasteps import _compat
from kerasteps.checkpoint._model_state import StateLayout
from tests.helpers import ROOT

BACKEND = keras.backend.backend()

#: Also on the lowest supported Keras: what kerasteps relies on must hold there too.
pytestmark = pytest.mark.keras_range


def _class_methods(module: str, cls: str) -> dict[str, list[str]]:
    """`{method: [argument names]}` of a class in a Keras module, read with `ast`
    (a file path: `find_spec` would import the parent package, JAX's)."""
    import keras.src

    parts = module.split(".")
    assert parts[:2] == ["keras", "src"]
    path = Path(keras.src.__file__).parent.joinpath(*parts[2:]).with_suffix(".py")
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {
                item.name: [a.arg for a in item.args.args]
                for item in node.body
                if isinstance(item, ast.FunctionDef)
            }
    raise AssertionError(f"{module} has no class {cls}")


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
    methods = _class_methods("keras.src.backend.jax.trainer", "JAXTrainer")
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
    methods = _class_methods("keras.src.backend.jax.trainer", "JAXTrainer")
    state = ["trainable_variables", "non_trainable_variables"]
    state += ["optimizer_variables", "metrics_variables"]
    expected = {
        "_get_jax_state": ["self", *state, "purge_model_variables"],
        "_purge_model_variables": ["self", *state],
        "jax_state_sync": ["self"],
    }
    if _compat.keras_version() >= (3, 12):
        expected["_get_state_sharding_spec"] = ["self"]
    for name, args in expected.items():
        assert methods.get(name) == args, (
            f"JaxTrainerWithOptimizers: JAXTrainer.{name} is now "
            f"{methods.get(name)}, expected {args}"
        )
    source = inspect.getsource(_compat.JaxTrainerWithOptimizers)
    for name in expected:
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
def test_patch_tf_multi_worker():
    import tensorflow as tf
    from keras.src.backend.tensorflow import trainer as tf_trainer
    from keras.src.trainers import trainer as base_trainer

    name = "patch_tf_multi_worker"
    params = inspect.signature(tf_trainer.reduce_per_replica).parameters
    assert list(params) == ["values", "strategy", "reduction"], name
    build = inspect.signature(tf_trainer.TensorFlowTrainer._maybe_symbolic_build)
    assert list(build.parameters) == ["self", "iterator", "data_batch"], name
    symbolic = inspect.signature(base_trainer.Trainer._symbolic_build)
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


# -- TensorBoard -------------------------------------------------------------------
def test_use_tensorboard_stub():
    code = (
        "import sys\n"
        "from kerasteps._compat import use_tensorboard_stub\n"
        "use_tensorboard_stub()\n"
        "from tensorboard.compat import tf\n"
        "print(tf.__version__, 'tensorflow' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout.split()
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
