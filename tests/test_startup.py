"""Tests for `kerasteps._startup`: TensorFlow's start-up lines held back, not others."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kerasteps import _startup
from tests.helpers import user_environment

pytestmark = pytest.mark.neutral

# Lines TensorFlow 2.21 printed here at import (one of each kind).
NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written "
    "to STDERR",
    "I0000 00:00:1796094628.505709   23500 port.cc:153] oneDNN custom operations "
    "are on. You may see slightly different numerical results.",
    "I0000 00:00:1796094628.506044   23500 cudart_stub.cc:31] Could not find cuda "
    "drivers on your machine, GPU will not be used.",
    "E0000 00:00:1796094632.536254   23500 cuda_platform.cc:52] failed call to "
    "cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "W0000 00:00:1796094632.536254   23500 gpu_device.cc:2342] Cannot dlopen some "
    "GPU libraries.",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, "
    "rebuild TensorFlow with the appropriate compiler flags.",
]
KEPT = [
    "UserWarning: a warning the user should read",
    "E0000 00:00:1796094632.536254   23500 some_op.cc:12] a real error",
    "Traceback (most recent call last):",
]


@pytest.mark.parametrize("line", NOISE)
def test_start_up_lines_are_noise(line):
    assert _startup.is_noise(line + "\n")


@pytest.mark.parametrize("line", KEPT)
def test_other_lines_are_not(line):
    assert not _startup.is_noise(line)


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env=user_environment(**env),
    )


WRITES_TO_FD_2 = f"""
    import os, sys
    from kerasteps import _startup
    with _startup.filtered_stderr():
        for line in {NOISE[:2] + KEPT[:1] + NOISE[3:4] + KEPT[1:2]!r}:
            os.write(2, (line + "\\n").encode())  # as C++ writes: fd 2
        print("from Python", file=sys.stderr)
    print("after", file=sys.stderr)
"""


def test_filtered_stderr_keeps_other_lines_in_order():
    process = run_python(WRITES_TO_FD_2)
    assert process.returncode == 0, process.stderr
    assert process.stderr.splitlines() == [KEPT[0], KEPT[1], "from Python", "after"]


def test_verbose_keeps_everything():
    process = run_python(WRITES_TO_FD_2, KERASTEPS_VERBOSE="1")
    lines = process.stderr.splitlines()
    assert lines == [NOISE[0], NOISE[1], KEPT[0], NOISE[3], KEPT[1]] + [
        "from Python",
        "after",
    ]


def test_a_failing_block_shows_all_it_wrote():
    process = run_python(
        f"""
        import os
        from kerasteps import _startup
        with _startup.filtered_stderr():
            os.write(2, b"{NOISE[1]}\\n")
            raise ImportError("broken install")
        """
    )
    assert process.returncode == 1
    assert process.stderr.splitlines()[0] == NOISE[1]
    assert "ImportError: broken install" in process.stderr


def test_quiet_startup_imports_keras_without_tensorflow_lines():
    """A real TensorFlow import (about 5 s): nothing on stderr but what we print."""
    process = run_python(
        """
        import os, sys
        import kerasteps
        kerasteps.quiet_startup()
        import keras, tensorflow as tf
        tf.config.list_physical_devices()
        print("level", os.environ["TF_CPP_MIN_LOG_LEVEL"], file=sys.stderr)
        """
    )
    assert process.returncode == 0, process.stderr
    assert process.stderr.splitlines() == ["level 1"]
