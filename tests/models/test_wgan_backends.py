"""`WGAN` on every Keras backend: the same step, and `.keras` files across backends.

Each backend runs `tests/scripts/wgan_first_steps.py` in its own process (a Keras
backend is chosen once per process). With the same initial weights, data and noise
(the script draws the noise from fixed tables), the logged losses of the first
steps agree with TensorFlow's within `RTOL`: float32 arithmetic in a different
order (XLA on JAX, eager kernels on torch) changes the last bits, not more.

PyTorch runs where it is installed (`pip install torch`), which CI does not do: see
docs/backends.md for the command that runs these tests under it.
"""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.helpers import SCRIPTS, load_script

SCRIPT = SCRIPTS / "wgan_first_steps.py"

#: Relative tolerance of the losses, weights and counters between backends.
RTOL = 1e-4

BACKENDS = [
    pytest.param(
        "jax",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("jax") is None, reason="jax not installed"
        ),
    ),
    pytest.param(
        "torch",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("torch") is None, reason="torch not installed"
        ),
    ),
]


def run(backend: str, *args: str) -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_same_run(got: dict, want: dict) -> None:
    assert got["counters"] == want["counters"]
    assert got["iterations"] == want["iterations"]
    assert len(got["steps"]) == len(want["steps"])
    for mine, theirs in zip(got["steps"], want["steps"], strict=True):
        assert mine.keys() == theirs.keys()
        for key in theirs:
            np.testing.assert_allclose(mine[key], theirs[key], rtol=RTOL, atol=1e-6)
    for mine, theirs in zip(got["weights"], want["weights"], strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=RTOL, atol=1e-6)


@pytest.fixture(scope="module")
def tensorflow_run(tmp_path_factory):
    assert keras.backend.backend() == "tensorflow"
    path = tmp_path_factory.mktemp("tf") / "gp.keras"
    return {**load_script("wgan_first_steps").run(save=str(path)), "file": path}


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_steps_match_tensorflow(backend, tensorflow_run, tmp_path):
    """Gradient penalty (with the default optimizers' decaying rate) and weight
    clipping: the same losses, counters, weights; a `.keras` file of either backend
    trains on in the other as if never saved: counters and both optimizers
    restored. TensorFlow trains in this process, the other backend in one
    subprocess."""
    saved = tmp_path / "gp.keras"
    here = run(backend, "--save", str(saved), "--load", str(tensorflow_run["file"]))
    assert here["backend"] == backend
    gp = here["gp"]
    assert gp["counters"] == {"d_step": 6, "g_step": 3}
    assert [s["g_step"] for s in gp["steps"]] == [1.0, 2.0, 3.0]
    assert_same_run(gp, tensorflow_run["gp"])
    # The loss moved: the comparison is not between two untrained models.
    assert gp["steps"][0]["d_loss"] != gp["steps"][-1]["d_loss"]
    assert_same_run(here["gp4"], tensorflow_run["gp4"])

    clip = here["clip"]
    assert "gradient_penalty" not in clip["steps"][0]
    assert clip["counters"] == {"d_step": 9, "g_step": 3}
    assert_same_run(clip, tensorflow_run["clip"])
    bound = max(abs(w) for layer in clip["weights"][4:] for w in np.ravel(layer))
    assert bound <= 0.05 + 1e-7  # the critic's weights (the last four) are clipped

    # TensorFlow's file trained on there, the other backend's file here.
    loaded_here = load_script("wgan_first_steps").train(
        keras.saving.load_model(saved), 1
    )
    for resumed in (here["resumed"], loaded_here):
        assert resumed["start"] == {"d_step": 6, "g_step": 3}
        assert resumed["iterations"] == {"d": 8, "g": 4}
        assert_same_run(resumed, tensorflow_run["gp4"])
