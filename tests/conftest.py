"""The tests' pytest configuration: the backend markers and the shared fixtures.

The shared helpers (tiny models and data, readers of what was written) are in
`tests/helpers.py`.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One compute thread per process (TensorFlow's two pools, XLA's Eigen on JAX),
# inherited by every subprocess: the README's test command runs two pytest workers
# on two cores, and a worker (or a script it runs) whose pools spread over both cores
# competes with the other one. Measured on 2 cores: the README's WGAN block alone
# took 104 s either way, with 181 CPU-s in TensorFlow's default pools and 106 with one
# thread; tests/recipes with test_choosing_the_model.py, 149 s and 126 s
# (`-n 2`); the JAX run of tests/callbacks (`-m neutral`), 82 s and 65 s, and 88 s
# and 76 s in a second pair; the whole JAX run, 161.5 s and 159.5 s (no gain).
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
# MLflow's client sends usage telemetry to the internet unless told not to.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
if os.environ.get("KERAS_BACKEND") == "jax" and (
    "JAX_COMPILATION_CACHE_DIR" not in os.environ
):
    # JAX's persistent compilation cache, for this run only: a new empty folder,
    # shared through the environment by the pytest-xdist workers (started after
    # this runs) and every subprocess, removed when the run ends. The tests compile
    # the same tiny programs many times; every compile is cached (no minimum time
    # or size). The JAX run of the README's test command (`-m neutral`, 2 cores):
    # 275 CPU-s without, 226 with. The TensorFlow run's few JAX subprocesses gain
    # nothing from it.
    _jax_cache = tempfile.mkdtemp(prefix="kerasteps-tests-jax-cache-")
    atexit.register(shutil.rmtree, _jax_cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _jax_cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"

import pytest  # noqa: E402

# Keras (and TensorFlow with it) is imported where a hook or fixture needs it, not
# here: with `-n 2` this file is also loaded by pytest-xdist's controller, which runs
# no test and starts the workers only after loading it (importing Keras there cost
# 8 CPU-s and delayed both workers by 7 s, in each of the two runs of the README's
# test command).

#: The test files that take longest on 2 cores (`--durations` of the README's test
#: command), longest first. They are collected first and, with `--dist loadfile
#: --no-loadscope-reorder` (pyproject.toml), handed to the pytest-xdist workers
#: first: the longest jobs first, so that the two workers end together instead of
#: one running the longest file alone at the end.
LONGEST_FIRST = (
    "tests/test_readme_wgan.py",
    "tests/test_readme.py",
    "tests/test_distribute.py",
    "tests/recipes/test_common.py",
    "tests/test_distribute_jax.py",
    "tests/callbacks/test_choosing_the_model.py",
    "tests/callbacks/test_step_checkpoint.py",
    "tests/test_checkpoint_store.py",
    "tests/callbacks/test_mlflow_logger.py",
    "tests/recipes/test_image_classifier.py",
    "tests/recipes/test_wgan.py",
    "tests/test_reliability.py",
    "tests/models/test_wgan_quality.py",
)


def pytest_collection_modifyitems(config, items):
    """Puts the longest files first (`LONGEST_FIRST`); skips `tensorflow_only`
    tests on the other backends, saying why."""
    import keras

    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return
    for item in items:
        mark = item.get_closest_marker("tensorflow_only")
        if mark is not None:
            why = mark.args[0] if mark.args else "TensorFlow's own API"
            item.add_marker(
                pytest.mark.skip(reason=f"TensorFlow only ({why}); backend {backend}")
            )


def pytest_collection_finish(session):
    """Moves every object alive after collection (TensorFlow, Keras, JAX and the
    test modules, ~420,000 objects) out of the garbage collector's sight.

    `keras.backend.clear_session()` collects garbage after each test, and a full
    collection traversed all of them: 0.4 s per test (the median teardown, 40 % of
    the suite's time). With them frozen it takes 3-8 ms.
    """
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _clear_keras_session():
    """Clears Keras's state after each test, then freezes what is still alive.

    Modules and caches that tests create after collection (TensorBoard, MLflow,
    Matplotlib, traced functions) stay alive to the end; unfrozen, every later
    `clear_session()` traversed them all again, and teardowns grew to 1.7 s by the
    end of the suite (218 s of teardown over 685 tests on TensorFlow). Freezing
    again after each test's `clear_session()` (which has just collected that
    test's garbage) keeps the next one to what the next test leaves.
    """
    import keras

    yield
    keras.backend.clear_session()
    gc.freeze()


@pytest.fixture
def bundled_recipes():
    """Undo the bundled recipes' logging setup after a test that runs them."""
    logger = logging.getLogger("kerasteps")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    """Two runs at different depths ("a/train", "b"), two tags each, plus one
    simple_value tag and a histogram (not a scalar) in run "b"."""
    import tensorflow as tf

    from tests.helpers import (
        B_ACCURACY,
        B_LEARNING_RATE,
        B_LOSS,
        TRAIN_ACCURACY,
        TRAIN_LOSS,
        write_scalars,
        write_simple_values,
    )

    root = tmp_path_factory.mktemp("logs")
    write_scalars(
        root / "a" / "train", {"loss": TRAIN_LOSS, "accuracy": TRAIN_ACCURACY}
    )
    write_scalars(root / "b", {"loss": B_LOSS, "accuracy": B_ACCURACY})
    write_simple_values(root / "b", "learning_rate", B_LEARNING_RATE)
    writer = tf.summary.create_file_writer(str(root / "b"))
    with writer.as_default():
        tf.summary.histogram("weights", [1.0, 2.0, 3.0], step=5)
    writer.close()
    return root
