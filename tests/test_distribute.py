"""kerasteps under tf.distribute: one set of logs, exact steps, same results.

Logical devices must be configured before TensorFlow starts, and a
MultiWorkerMirroredStrategy's workers are processes, so the runs happen in
subprocesses (`tests/scripts/distributed_train.py --decide`), started together once.
The plain model also decides in every run: it validates every 3 steps, keeps its best
checkpoint, cuts its learning rate at 6 and 9 and stops early at 9 (the WGAN trains
its 12 steps).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kerasteps.distribute import is_chief, task_of
from tests import zygote
from tests.helpers import (
    SCRIPTS,
    read_jsonl,
    read_scalar_steps,
    script_environment,
    wait_until,
)

SCRIPT = SCRIPTS / "distributed_train.py"
TIMEOUT_S = 240
MODELS = ("plain", "wgan")
#: The global step where each model's runs end: the plain model's early stop.
LAST = {"plain": 9, "wgan": 12}


def start(
    mode: str, out: Path, env: dict | None = None, *extra: str
) -> subprocess.Popen:
    """Trains both models (plain, WGAN) in `mode` in one subprocess."""
    return zygote.Popen(
        [
            sys.executable,
            str(SCRIPT),
            "--mode",
            mode,
            "--out",
            str(out),
            "--model",
            ",".join(MODELS),
            "--decide",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=script_environment(**(env or {})),
    )


def finish(process: subprocess.Popen) -> str:
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"timed out after {TIMEOUT_S} s:\n{output[-3000:]}")
    assert process.returncode == 0, output[-3000:]
    return output


def result(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())


def largest_weight_difference(a: Path, b: Path) -> float:
    """The largest element-wise difference between two runs' final weights."""
    first, second = np.load(a / "weights.npz"), np.load(b / "weights.npz")
    assert first.files == second.files
    return max(float(np.max(np.abs(first[k] - second[k]))) for k in first.files)


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Every run of this file: one process trains both models on one device and
    mirrored on two logical CPU devices, two are the workers of a
    MultiWorkerMirroredStrategy cluster, and two more are a cluster that is killed
    -9 at step 8 (its checkpoint of step 6 committed, its cut at 6 in it), then
    restarted to resume.
    Results in `<root>/<model>/<mode>`, and `<root>/killed/plain/multiworker`."""
    root = tmp_path_factory.mktemp("distribute")
    processes = [start("single,mirrored", root)]
    try:
        mlflow = ("--mlflow", mlflow_uri(root))
        processes += start_cluster(root, *mlflow)
        killed = root / "killed"
        shared = ("--model", "plain", "--checkpoints", str(killed / "ck"))
        hanging = start_cluster(killed, *shared, "--hang-at", "8")
        processes += hanging
        marker = killed / "plain" / "multiworker" / "worker0" / "hanging"

        def hanging_after_the_save_of_6() -> bool:
            return marker.exists() and latest_step(killed / "ck") == 6

        wait_until(hanging_after_the_save_of_6, hanging, TIMEOUT_S)
        for process in hanging:
            process.send_signal(signal.SIGKILL)  # the cluster is lost at step 8
            process.wait(30)
        resumed = start_cluster(killed, *shared)
        processes += resumed
        for process in processes:
            if process not in hanging:
                finish(process)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return root


def start_cluster(root: Path, *extra: str) -> list[subprocess.Popen]:
    """The two workers of a MultiWorkerMirroredStrategy cluster on 127.0.0.1."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    processes = []
    for index in range(2):
        config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = {"TF_CONFIG": json.dumps(config)}
        processes.append(start("multiworker", root, env, *extra))
    return processes


def latest_step(directory: Path) -> int | None:
    from kerasteps.callbacks import StepCheckpoint

    latest = StepCheckpoint.latest(directory) if directory.is_dir() else None
    return None if latest is None else latest.step


def mlflow_uri(root: Path) -> str:
    """Both workers log to one MLflow store (a SQLite file, no server)."""
    return f"sqlite:///{root / 'mlflow.db'}"


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def test_chief_without_a_cluster():
    assert is_chief() is True
    assert task_of() == (None, None)


@pytest.mark.parametrize("model", MODELS)
def test_mirrored_on_two_cpu_devices_matches_one_device(runs, model):
    single, mirrored = runs / model / "single", runs / model / "mirrored"
    one, two = result(single), result(mirrored)
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert one["counters"] == two["counters"]
    global_name = "step" if model == "plain" else "g_step"
    assert two["counters"][global_name] == LAST[model]
    # Same global batch and seed: the same weights up to float summation order
    # (measured: 6.0e-8 plain, 1.5e-8 WGAN, after 12 steps).
    assert largest_weight_difference(single, mirrored) <= 1e-6
    # One set of event files, each step once.
    assert len(list((mirrored / "tb" / "train").iterdir())) == 1
    tag = "loss" if model == "plain" else "d_loss"
    points = list(range(3, LAST[model] + 1, 3))
    assert read_scalar_steps(str(mirrored / "tb"), "train", tag) == points
    steps = [r["step"] for r in read_jsonl(mirrored / "log.jsonl")]
    assert steps == list(range(1, LAST[model] + 1))
    losses_one = [r[tag] for r in read_jsonl(single / "log.jsonl")]
    losses_two = [r[tag] for r in read_jsonl(mirrored / "log.jsonl")]
    assert losses_two == pytest.approx(losses_one, rel=1e-3, abs=1e-5)


@pytest.mark.parametrize("model", MODELS)
def test_restore_latest_inside_and_outside_the_strategy_scope(runs, model):
    """A resume under MirroredStrategy: the latest checkpoint restored into a new
    model inside `strategy.scope()` and outside it, each equal to the trained
    model, each training on."""
    restored = result(runs / model / "mirrored")["restored"]
    then = {"step": 10} if model == "plain" else {"d_step": 26, "g_step": 13}
    expected = {"step": LAST[model], "equal": True, "then": then}
    assert restored == {"inside": expected, "outside": expected}


@pytest.mark.parametrize("model", MODELS)
def test_multi_worker_only_the_chief_writes(runs, model):
    chief = runs / model / "multiworker" / "worker0"
    worker = runs / model / "multiworker" / "worker1"
    expected = {"step": 9} if model == "plain" else {"d_step": 24, "g_step": 12}
    assert result(chief)["counters"] == result(worker)["counters"] == expected
    assert result(chief)["replicas"] == 2
    assert largest_weight_difference(chief, worker) == 0.0
    # Same global batch and seed as one device: the same weights, element by
    # element, up to float summation order (measured: 6.0e-8 plain, 1.5e-8 WGAN).
    # A worker fed its own half of each batch (sharded by hand, on top of
    # tf.distribute's sharding) is 0.097 away after 300 steps: docs/distributed.md.
    assert largest_weight_difference(runs / model / "single", chief) <= 1e-6
    # The worker wrote no logs and no checkpoints: only the script's own results.
    assert files_under(worker) == ["result.json", "weights.npz"]
    tag = "loss" if model == "plain" else "d_loss"
    points = list(range(3, LAST[model] + 1, 3))
    assert read_scalar_steps(str(chief / "tb"), "train", tag) == points
    steps = [r["step"] for r in read_jsonl(chief / "log.jsonl")]
    assert steps == list(range(1, LAST[model] + 1))
    index = json.loads((chief / "ckpt" / "checkpoint.json").read_text())
    saved = [3, 6, 9] if model == "plain" else [6, 12]  # 3: the best val_loss
    assert [c["step"] for c in index["checkpoints"]] == saved
    # One MLflow run, each step once: the worker logged nothing.
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_uri(runs))
    (run,) = client.search_runs([client.get_experiment_by_name(model).experiment_id])
    history = client.get_metric_history(run.info.run_id, tag)
    assert [m.step for m in history] == points
    counter = "counters/step" if model == "plain" else "counters/d_step"
    expected_counter = [3, 6, 9] if model == "plain" else [6, 12, 18, 24]
    points = client.get_metric_history(run.info.run_id, counter)
    assert [m.value for m in sorted(points, key=lambda m: m.step)] == expected_counter


def test_the_workers_decide_together_as_one_device_does(runs):
    """Under MultiWorkerMirroredStrategy every worker judges the same validation
    values (reduced across the workers) with the same rules: the chief and the other
    worker cut the learning rate at the same steps and stop at the same step, as
    one device does with the same global batch. What a worker's own clock would
    decide alone is refused before training."""
    single = result(runs / "plain" / "single")
    chief, worker = (
        result(runs / "plain" / "multiworker" / f"worker{i}") for i in (0, 1)
    )
    assert chief["decisions"] == worker["decisions"]
    half, quarter = (float(np.float32(rate)) for rate in (0.025, 0.0125))
    assert chief["learning_rate"] == worker["learning_rate"] == quarter
    cuts = chief["decisions"]["StepReduceLROnPlateau"]["cuts"]
    assert cuts == [[6, {"": half}], [9, {"": quarter}]]
    stop = chief["decisions"]["StepEarlyStopping"]
    assert (stop["stopped_step"], stop["best_step"]) == (9, 3)
    assert "patience 2" in stop["reason"]
    # One device sums the validation loss in another order (measured: 2.4e-7).
    for name, state in single["decisions"].items():
        assert state == {
            **chief["decisions"][name],
            "best": pytest.approx(stop["best"]),
        }
    assert [m.split(":")[0] for m in chief["refused"]] == [
        "StopAtTime",
        "StepCheckpoint",
    ]
    assert "each worker's clock" in chief["refused"][0]
    assert chief["refused"] == worker["refused"]
    # Refused before the checkpoint's lock: the refused fits left no file in the
    # folder that the constructor made (checked writable).
    assert list((runs / "plain" / "multiworker" / "worker0" / "timed").iterdir()) == []


def test_a_killed_cluster_resumes_as_if_never_killed(runs):
    """Both workers killed -9 at step 8 (steps 7-8 unsaved), both restarted: they
    resume from the chief's checkpoint of step 6, cut the learning rate and stop at
    step 9 as the uninterrupted 2-worker run did, and end bitwise equal to it, with
    each step once in the chief's sinks."""
    uninterrupted = runs / "plain" / "multiworker"
    resumed = runs / "killed" / "plain" / "multiworker"
    for worker in ("worker0", "worker1"):
        assert result(resumed / worker)["counters"] == {"step": 9}
        assert largest_weight_difference(uninterrupted / worker, resumed / worker) == 0
        straight = result(uninterrupted / worker)["decisions"]
        assert result(resumed / worker)["decisions"] == straight
    chief = resumed / "worker0"
    assert [r["step"] for r in read_jsonl(chief / "log.jsonl")] == list(range(1, 10))
    assert read_scalar_steps(str(chief / "tb"), "train", "loss") == [3, 6, 9]
    losses = [r["loss"] for r in read_jsonl(chief / "log.jsonl")]
    straight = [r["loss"] for r in read_jsonl(uninterrupted / "worker0" / "log.jsonl")]
    assert losses[:6] == straight[:6]  # written before the kill, kept
    # After it, within the bound of docs/step-contract.md (Keras's float32 sums
    # restart at the resume; measured: 1.9e-7 at step 7, a loss of 0.1165).
    assert losses[6:] == pytest.approx(straight[6:], rel=1e-5, abs=0)
    index = json.loads((runs / "killed" / "ck" / "checkpoint.json").read_text())
    assert [c["step"] for c in index["checkpoints"]] == [3, 6, 9]
    assert [c["step"] for c in index["best"]["checkpoints"]] == [3]
