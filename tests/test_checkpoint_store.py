"""The checkpoint format and async saves, on every backend.

Backend-neutral: CI runs this module under TensorFlow, and again under JAX with the
rest of the neutral suite. Cross-backend restores and
the kill/signal tests run `tests/scripts/async_checkpoint_train.py` in subprocesses.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kerasteps  # noqa: E402
from kerasteps.callbacks import StepCheckpoint  # noqa: E402
from kerasteps.checkpoint import _model_state  # noqa: E402
from kerasteps.checkpoint._format import read_state  # noqa: E402
from kerasteps.checkpoint.store import CheckpointStore  # noqa: E402
from tests import zygote  # noqa: E402
from tests.helpers import SCRIPTS, load_script, script_environment  # noqa: E402

pytestmark = pytest.mark.neutral

SCRIPT = SCRIPTS / "async_checkpoint_train.py"
BACKEND = keras.backend.backend()
HAS_JAX = importlib.util.find_spec("jax") is not None


def model_with_dropout(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(4, activation="relu"),
            # Seeded: on PyTorch an unseeded Dropout draws from torch's global
            # generator, which no Keras variable (and so no checkpoint) holds.
            keras.layers.Dropout(0.5, seed=seed + 1),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def fit(model: keras.Model, steps: int, callbacks=(), seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4 * steps, 3)).astype("float32")
    model.fit(
        x, x[:, :1] * 2, batch_size=4, shuffle=False, verbose=0, callbacks=callbacks
    )


def values(model: keras.Model) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in _model_state.Snapshot().take(model).items()}


def assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


# -- the format ---------------------------------------------------------------------
def test_keys_follow_the_structure_as_keras_weights_files_do(tmp_path):
    model = model_with_dropout()
    fit(model, 3)
    info = CheckpointStore(tmp_path / "ckpts").save(model)
    keys = set(read_state(info.path))
    assert {
        "layers/dense/vars/0",
        "layers/dense/vars/1",
        "layers/batch_normalization/vars/3",
        "layers/dense_1/vars/1",
        "layers/dropout/seed_generator/state",
        "optimizer/vars/0",
        "optimizer/vars/1",
    } <= keys
    # Every weight and optimizer key of Keras's own .weights.h5 is there too.
    import h5py

    model.save_weights(tmp_path / "m.weights.h5")
    theirs = set()
    with h5py.File(tmp_path / "m.weights.h5") as handle:
        handle.visititems(
            lambda name, item: (
                theirs.add(name) if isinstance(item, h5py.Dataset) else None
            )
        )
    assert theirs and theirs <= keys
    # Beside the model's keys, on PyTorch, torch's global generator (`rng/torch/...`).
    model_keys = {k for k in keys if not k.startswith("rng/")}
    assert len(model_keys) == len(model.variables) + len(model.optimizer.variables)
    assert {k for k in keys if k.startswith("rng/")} == (
        {"rng/torch/cpu"} if BACKEND == "torch" else set()
    )
    meta = json.loads((Path(info.path) / "meta.json").read_text())
    assert meta["format"] == "kerasteps.StepCheckpoint/2"
    assert meta["backend"] == BACKEND
    record = meta["files"]["state.h5"]
    assert record["bytes"] == os.path.getsize(info.state_file)
    assert record["crc32"].startswith("crc32:") and len(record["crc32"]) == 14


def test_a_save_is_handed_the_step_and_counters_the_run_knows(tmp_path, monkeypatch):
    """StepCheckpoint hands the store its event's counters: the save writes them
    and does not work them out from the model again."""
    model = model_with_dropout()
    fit(model, 3)

    def no_reading(*args):
        raise AssertionError("the save read the step counters from the model")

    from kerasteps import steps

    monkeypatch.setattr(steps, "step_counters", no_reading)
    monkeypatch.setattr(steps, "global_step", no_reading)
    store = CheckpointStore(tmp_path)
    info = store.save(model, counters=("step", {"step": 3}))
    meta = json.loads((Path(info.path) / "meta.json").read_text())
    assert (info.name, info.step) == ("ckpt-3", 3)
    assert (meta["step"], meta["counters"], meta["global_counter"]) == (
        3,
        {"step": 3},
        "step",
    )
    assert store.save_async(model, counters=("step", {"step": 3})) == 3
    store.writer.wait()
    assert [entry.step for entry in store.entries()] == [3]


def test_a_checkpoint_restores_into_a_second_identical_model(tmp_path):
    """Auto-generated names differ (`dense_2`, `adam_1`); the keys do not."""
    model = model_with_dropout()
    fit(model, 5)
    store = CheckpointStore(tmp_path)
    info = store.save(model)
    saved = values(model)
    other = model_with_dropout(seed=7)
    assert other.layers[0].kernel.path != model.layers[0].kernel.path
    assert store.restore(other, info) == 5
    assert_same(values(other), saved)
    # And both go on identically (Dropout's seed state included).
    fit(model, 3, seed=4)
    fit(other, 3, seed=4)
    assert_same(values(other), values(model))


def fitted(*layers: keras.Layer) -> keras.Model:
    """A model of these layers on 3 inputs, compiled with Adam, trained 1 step."""
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), *layers])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    fit(model, 1)
    return model


def test_a_missing_or_extra_variable_is_named_and_nothing_changes(tmp_path):
    model = model_with_dropout()
    fit(model, 2)
    info = CheckpointStore(tmp_path).save(model)
    wider = fitted(
        keras.layers.Dense(4, activation="relu"),
        keras.layers.Dropout(0.5),
        keras.layers.BatchNormalization(),
        keras.layers.Dense(1),
        keras.layers.Dense(1),
    )
    before = values(wider)
    with pytest.raises(ValueError, match=r"no value for the model's.*layers/dense_2"):
        StepCheckpoint.restore_checkpoint(wider, info.path)
    assert_same(values(wider), before)

    smaller = fitted(keras.layers.Dense(4), keras.layers.Dense(1))
    before = values(smaller)
    with pytest.raises(ValueError, match=r"holds.*batch_normalization.*not have"):
        StepCheckpoint.restore_checkpoint(smaller, info.path)
    assert_same(values(smaller), before)


def test_a_seed_state_of_another_dtype_is_converted(tmp_path):
    model = model_with_dropout()
    fit(model, 2)
    arrays = values(model)
    key = "layers/dropout/seed_generator/state"
    variable = _model_state.StateLayout.of(model).variables[key]
    other = "int32" if str(arrays[key].dtype) != "int32" else "uint32"
    arrays[key] = arrays[key].astype(other)
    fresh = model_with_dropout(seed=3)
    _model_state.restore_arrays(fresh, arrays)
    restored = values(fresh)[key]
    assert str(restored.dtype) == keras.backend.standardize_dtype(variable.dtype)
    np.testing.assert_array_equal(restored, arrays[key].astype(restored.dtype))


def test_partial_restore_by_hand_with_read_state(tmp_path):
    model = model_with_dropout()
    fit(model, 2)
    info = CheckpointStore(tmp_path).save(model)
    arrays = read_state(info.path)
    fresh = model_with_dropout(seed=5)
    layout = _model_state.StateLayout.of(fresh)
    for key, variable in layout.variables.items():
        if key.startswith("layers/dense/"):
            variable.assign(arrays[key])
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(fresh.layers[0].kernel),
        arrays["layers/dense/vars/0"],
    )
    assert int(keras.ops.convert_to_numpy(fresh.optimizer.iterations)) == 0


# -- async saves ----------------------------------------------------------------------
def test_async_and_blocking_saves_write_the_same_checkpoints(tmp_path):
    runs = {}
    for mode in (True, False):
        model = model_with_dropout()
        checkpoint = StepCheckpoint(tmp_path / str(mode), every=3, async_save=mode)
        fit(model, 10, [checkpoint])
        assert not checkpoint.store.writer.in_flight  # the run's end waited for it
        assert checkpoint.last_saved.step == 9
        infos = StepCheckpoint.list_checkpoints(tmp_path / str(mode))
        runs[mode] = [(i.step, read_state(i.path)) for i in infos]
    assert [s for s, _ in runs[True]] == [s for s, _ in runs[False]] == [3, 6, 9]
    for (_, a), (_, b) in zip(runs[True], runs[False], strict=True):
        assert_same(a, b)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_an_error_in_the_writer_thread_is_raised_on_the_training_thread(
    tmp_path, monkeypatch
):
    model = model_with_dropout()
    fit(model, 4, [StepCheckpoint(tmp_path, every=4)])
    original = _model_state.write_arrays

    def disk_full(target, arrays):
        if "ckpt-8-" in str(target):
            raise OSError(28, "No space left on device")
        original(target, arrays)

    monkeypatch.setattr(_model_state, "write_arrays", disk_full)
    with pytest.raises(OSError, match="No space left") as raised:
        fit(model, 12, [StepCheckpoint(tmp_path, every=4)])
    assert any("step 8" in note for note in raised.value.__notes__)
    # Raised at a batch end soon after: training stopped well before step 16.
    assert kerasteps.global_step(model) < 16
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [4]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    assert not (tmp_path / ".kerasteps.lock").exists()  # released
    # The last save of a run fails: raised when the run ends.
    model = model_with_dropout()
    with pytest.raises(OSError, match="No space left"):
        fit(model, 8, [StepCheckpoint(tmp_path / "end", every=4)])
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path / "end")] == [4]


def test_a_non_finite_state_is_refused_in_the_background(tmp_path, caplog):
    model = model_with_dropout()
    checkpoint = StepCheckpoint(tmp_path, every=2)

    x = np.ones((16, 3), "float32")
    x[8:12] = np.nan  # the batch of step 3: the weights are NaN from then on
    caplog.set_level(logging.ERROR, logger="kerasteps")
    model.fit(
        x,
        np.ones((16, 1), "float32"),
        batch_size=4,
        shuffle=False,
        verbose=0,
        callbacks=[checkpoint],
    )
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [2]
    assert any("not saving step 4" in r.getMessage() for r in caplog.records)


# -- kill -9, SIGTERM and cross-backend, in subprocesses -----------------------------
def run_script(directory, dump, backend=BACKEND, **options):
    command = [sys.executable, str(SCRIPT), "--directory", str(directory)]
    command += ["--dump", str(dump)]
    for name, value in options.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    return zygote.Popen(
        command,
        env=script_environment(KERAS_BACKEND=backend),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(process, line: str) -> None:
    for got in process.stdout:
        if got.strip() == line:
            return
    raise AssertionError(f"no {line!r}: {process.stderr.read()[-2000:]}")


def finish(process) -> tuple[int, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out + err


def dumped(path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_killed_during_an_async_save_resumes_exactly(tmp_path):
    """kill -9 while the checkpoint of step 20 is being written, then resume; the
    uninterrupted run and the resumed one train in this process."""
    script = load_script("async_checkpoint_train")
    straight, _, _ = script.train(tmp_path / "a", 8)
    killed = run_script(tmp_path / "ckpts", tmp_path / "x.npz", slow_write_at=20)
    wait_for(killed, "WRITING 20")
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    left = sorted(p.name for p in (tmp_path / "ckpts").iterdir())
    assert [n for n in left if n.startswith("ckpt-")] == [
        "ckpt-10",
        "ckpt-15",
        "ckpt-5",
    ]
    assert any(n.startswith(".tmp-ckpt-20-") for n in left)  # the half-written one

    resumed, start, _ = script.train(tmp_path / "ckpts", 8)
    assert start == 15
    assert int(keras.ops.convert_to_numpy(resumed.optimizer.iterations)) == 40
    assert_same(values(resumed), values(straight))
    left = sorted(p.name for p in (tmp_path / "ckpts").iterdir())
    assert left == ["checkpoint.json", "ckpt-30", "ckpt-35", "ckpt-40"]


def test_sigterm_during_an_async_save_completes_it_and_saves_again(tmp_path):
    run = run_script(tmp_path, tmp_path / "x.npz", slow_write_at=20, slow_seconds=3)
    wait_for(run, "WRITING 20")
    run.send_signal(signal.SIGTERM)
    code, out = finish(run)
    assert code == 128 + signal.SIGTERM, out
    final = int(out.split("FINAL ")[1].split()[0])
    assert 20 < final < 40  # stopped at the batch end after the signal
    steps = [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)]
    assert 20 in steps and steps[-1] == final, (steps, final)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    for info in StepCheckpoint.list_checkpoints(tmp_path):
        read_state(info.path)  # complete and verified


@pytest.mark.skipif(not HAS_JAX, reason="needs jax: pip install -e '.[test,jax]'")
@pytest.mark.tensorflow_only("it crosses to JAX and back itself")
def test_a_checkpoint_restores_across_backends(tmp_path):
    """Written under TensorFlow, restored and trained on under JAX (in a
    subprocess), whose checkpoint TensorFlow restores: both directions, exact."""
    other = "jax"
    script = load_script("async_checkpoint_train")
    here, _, _ = script.train(tmp_path, epochs=2)
    code, out = finish(
        run_script(
            tmp_path,
            tmp_path / "b.npz",
            backend=other,
            epochs=3,
            dump_restored=tmp_path / "a.npz",
        )
    )
    assert code == 0 and "START 10" in out and "FINAL 15" in out, out
    assert_same(dumped_keys(tmp_path / "a.npz"), values(here))
    info = StepCheckpoint.latest(tmp_path)
    assert info.step == 15
    assert json.loads((Path(info.path) / "meta.json").read_text())["backend"] == other
    model = script.build_model()
    assert StepCheckpoint.restore_latest(model, tmp_path) == 15
    assert_same(values(model), dumped_keys(tmp_path / "b.npz"))


def dumped_keys(path) -> dict[str, np.ndarray]:
    return {k.replace(".", "/"): v for k, v in dumped(path).items()}


def test_a_save_due_while_the_one_before_is_in_flight_is_said_once(
    tmp_path, caplog, monkeypatch
):
    """Writes slowed to 0.8 s, a save every step: each save waits for the one
    before, and one WARNING says so, with how long it had been in flight and how
    long training waited (said from a wait of 0.5 s on)."""
    import time

    from tests.helpers import fit_steps, tiny_model

    write = CheckpointStore.write

    def slow_write(self, capture):
        time.sleep(0.8)
        return write(self, capture)

    monkeypatch.setattr(CheckpointStore, "write", slow_write)
    caplog.set_level(logging.WARNING, logger="kerasteps")
    fit_steps(tiny_model(), 3, [StepCheckpoint(tmp_path, every=1, keep=10)])
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [1, 2, 3]
    (line,) = [r.getMessage() for r in caplog.records if "in flight" in r.getMessage()]
    began = float(line.split("in flight ")[1].split(" s after")[0])
    waited = float(line.split("training waited ")[1].split(" s for")[0])
    prefix = "StepCheckpoint: a save was due, but the one before it was still in "
    assert line.startswith(prefix + "flight ")
    assert f"(while writing the checkpoint of step 1 to {tmp_path})" in line
    assert 0 <= began < 0.3 and waited >= 0.5 and began + waited >= 0.79
