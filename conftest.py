"""pytest's root configuration: what is collected, and the doctests' clean-up.

`python -m pytest` collects `tests/` and, with `--doctest-modules` (pyproject.toml),
the `Example:` sections of every module under `kerasteps/`. Under `tests/` only test
files and `conftest.py` are collected: the scripts and fixtures there are run by the
tests in subprocesses, and `tests/scripts/jax_data_parallel.py` trains when imported.
The modules of one backend's WGAN step import that backend: they are left out where
it is not installed (the PyTorch run of the README installs no JAX).
"""

from __future__ import annotations

import fnmatch
import importlib.util
import logging
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).parent
PACKAGE = ROOT / "kerasteps"
TESTS = ROOT / "tests"

collect_ignore = [
    f"kerasteps/models/_wgan_{backend}.py"
    for backend in ("jax", "torch")
    if importlib.util.find_spec(backend) is None
]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `tests/`, skips every `.py` file that is not a test file or conftest."""
    if collection_path.suffix != ".py" or not collection_path.is_relative_to(TESTS):
        return None
    patterns = [*config.getini("python_files"), "conftest.py"]
    if any(fnmatch.fnmatch(collection_path.name, p) for p in patterns):
        return None
    return True


def _logger_states() -> dict[str, tuple]:
    loggers = [logging.root] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    return {
        logger.name: (logger, logger.level, list(logger.handlers), logger.propagate)
        for logger in loggers
    }


def _is_pytests(handler: logging.Handler) -> bool:
    return type(handler).__module__.startswith("_pytest")


@pytest.fixture(autouse=True)
def _doctest_leaves_no_global_state(request: pytest.FixtureRequest):
    """Restores what a doctest of `kerasteps/` may change for the tests after it.

    The logging setup (`logging.basicConfig`, logger levels and handlers), the
    environment, the working directory and Keras's global config (float type,
    epsilon, image data format, dtype policy): an example may set them as a user
    would, and the next test in the same worker sees them as they were.
    """
    if not request.node.path.is_relative_to(PACKAGE):
        yield
        return
    import keras

    loggers = _logger_states()
    disabled = logging.root.manager.disable
    environ = dict(os.environ)
    cwd = os.getcwd()
    config = (
        keras.config.floatx(),
        keras.config.epsilon(),
        keras.config.image_data_format(),
        keras.config.dtype_policy(),
    )
    yield
    for logger, level, handlers, propagate in loggers.values():
        logger.setLevel(level)
        logger.propagate = propagate
        # pytest's own capture handlers come and go with each phase of a test.
        for handler in [h for h in logger.handlers if h not in handlers]:
            if not _is_pytests(handler):
                logger.removeHandler(handler)
        for handler in [h for h in handlers if h not in logger.handlers]:
            if not _is_pytests(handler):
                logger.addHandler(handler)
    logging.disable(disabled)
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)
    os.chdir(cwd)
    floatx, epsilon, image_data_format, dtype_policy = config
    if keras.config.floatx() != floatx:
        keras.config.set_floatx(floatx)
    if keras.config.epsilon() != epsilon:
        keras.config.set_epsilon(epsilon)
    if keras.config.image_data_format() != image_data_format:
        keras.config.set_image_data_format(image_data_format)
    if keras.config.dtype_policy().name != dtype_policy.name:
        keras.config.set_dtype_policy(dtype_policy)
