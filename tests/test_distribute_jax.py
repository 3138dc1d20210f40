"""kerasteps under JAX's own data parallelism (`keras.distribution.DataParallel`).

Runs `tests/scripts/jax_data_parallel.py` under `KERAS_BACKEND=jax` in subprocesses:
one process with two CPU devices, and two processes joined by
`jax.distributed.initialize` (gloo collectives on CPU). Every process counts the
same steps; only process 0 writes logs and checkpoints.
"""

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kerasteps.callbacks import StepCheckpoint
from tests.helpers import SCRIPTS, read_jsonl, read_scalar_steps

SCRIPT = SCRIPTS / "jax_data_parallel.py"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="needs jax: pip install -e '.[test,jax]'",
)


def start(out: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("XLA_FLAGS", None)
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(out), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def assert_wrote(folder: Path) -> None:
    assert [r["step"] for r in read_jsonl(folder / "log.jsonl")] == [5, 10, 15, 20]
    assert read_scalar_steps(str(folder / "tb"), "train", "loss") == [5, 10, 15, 20]
    assert [i.step for i in StepCheckpoint.list_checkpoints(folder / "ckpt")] == [
        10,
        20,
    ]
    assert StepCheckpoint.latest(folder / "gan").step == 10


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> tuple[Path, dict, Path, list[dict]]:
    """Both setups at once (three processes): one process with two devices, and
    two processes joined into one."""
    alone, joined = tmp_path_factory.mktemp("alone"), tmp_path_factory.mktemp("two")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    processes = [start(alone)]
    processes += [start(joined, "--process", str(i), "--port", port) for i in (0, 1)]
    try:
        done = [finish(p) for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return alone, done[0], joined, done[1:]


def test_one_process_two_devices(results):
    folder, result, _, _ = results
    assert result == {
        "process": 0,
        "devices": 2,
        "chief": True,
        "step": 20,
        "gan": {"d_step": 20, "g_step": 10},
    }
    assert_wrote(folder / "p0")


def test_two_processes_only_process_0_writes(results):
    _, _, folder, joined = results
    for i, result in enumerate(joined):
        assert result["process"] == i and result["devices"] == 2
        assert result["step"] == 20 and result["gan"] == {"d_step": 20, "g_step": 10}
    assert [r["chief"] for r in joined] == [True, False]
    assert_wrote(folder / "p0")
    # Process 1 counted every step and wrote no file (its sinks checked, when
    # built, that their folders are writable, as on every process).
    assert [p for p in (folder / "p1").rglob("*") if p.is_file()] == []
