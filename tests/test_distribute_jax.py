"""kerasteps under JAX's own data parallelism (`keras.distribution.DataParallel`).

Runs `tests/scripts/jax_data_parallel.py` under `KERAS_BACKEND=jax` in subprocesses:
one process with two CPU devices, and two processes joined by
`jax.distributed.initialize` (gloo collectives on CPU). Every process counts the
same steps; only process 0 writes logs and checkpoints. And
`tests/scripts/jax_four_devices.py`: one process with 4 devices, beside a per-batch
witness, killed -9 and resumed bitwise.
"""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kerasteps.callbacks import StepCheckpoint
from tests import zygote
from tests.helpers import SCRIPTS, read_jsonl, read_scalar_steps, wait_until

SCRIPT = SCRIPTS / "jax_data_parallel.py"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="needs jax: pip install -e '.[test,jax]'",
)


def start(out: Path, *args: str, script: Path = SCRIPT) -> subprocess.Popen:
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("XLA_FLAGS", None)  # each script sets its devices
    return zygote.Popen(
        [sys.executable, str(script), str(out), *args],
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


FOUR = SCRIPTS / "jax_four_devices.py"


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory) -> tuple[Path, dict, Path, dict]:
    """One process with 4 devices trains to step 30 (then a `ModelParallel` model,
    saved and restored); beside it, the same run is killed -9 at step 17 (its
    checkpoint of step 10 committed) and run again."""
    straight = tmp_path_factory.mktemp("straight")
    killed = tmp_path_factory.mktemp("killed")
    first = start(straight, "--model-parallel", script=FOUR)
    hanging = start(killed, "--hang-at", "17", script=FOUR)
    try:
        wait_until((killed / "hanging").exists, [hanging])
        assert StepCheckpoint.latest(killed / "ck").step == 10
        hanging.send_signal(signal.SIGKILL)
        hanging.wait(30)
        resumed = finish(start(killed, script=FOUR))
        return straight, finish(first), killed, resumed
    finally:
        for process in (first, hanging):
            if process.poll() is None:
                process.kill()


def test_four_devices_log_what_a_per_batch_witness_sees(four_devices):
    straight, result, _, _ = four_devices
    assert (result["devices"], result["start"], result["step"]) == (4, 0, 30)
    running = dict(result["witness"])  # Keras's running mean since the fit began
    rows = read_jsonl(straight / "log.jsonl")
    assert [r["step"] for r in rows] == [5, 10, 15, 20, 25, 30]
    for row in rows:
        step = row["step"]
        before = running.get(step - 5, 0.0) * (step - 5)
        window = (running[step] * step - before) / 5
        # The witness rebuilds sums from float32 running means: it is as exact as
        # a few float32 ulp of the running sum, over the window's 5 steps.
        ulp = float(np.spacing(np.float32(running[step] * step)))
        assert row["loss"] == pytest.approx(window, rel=0, abs=4 * ulp / 5), step


def test_four_devices_killed_and_resumed_end_bitwise_as_uninterrupted(four_devices):
    straight, _, killed, resumed = four_devices
    assert (resumed["devices"], resumed["start"], resumed["step"]) == (4, 10, 30)
    ours, theirs = np.load(killed / "state.npz"), np.load(straight / "state.npz")
    assert ours.files == theirs.files
    for key in ours.files:  # weights and Adam's slots, bit for bit
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    rows, straight_rows = (
        read_jsonl(killed / "log.jsonl"),
        read_jsonl(straight / "log.jsonl"),
    )
    assert [r["step"] for r in rows] == [5, 10, 15, 20, 25, 30]  # each once
    losses, expected = [r["loss"] for r in rows], [r["loss"] for r in straight_rows]
    assert losses[:2] == expected[:2]  # written before the kill
    assert losses[2:] == pytest.approx(expected[2:], rel=1e-5)  # the stated bound


def test_model_parallel_keeps_its_sharding_through_a_restore(four_devices):
    """A `LayoutMap` over a 2 x 2 mesh shards the kernels, biases and Adam's slots
    along `model`; the restored model's are sharded the same, with equal values."""
    _, result, _, _ = four_devices
    assert result["model_parallel"] == {
        "step": 40,
        "sharded": 9,
        "variables": 14,
        "same_sharding": True,
        "same_values": True,
    }
