"""`MLflowLogger` against a real MLflow tracking server.

The module starts `mlflow server` once (127.0.0.1, a SQLite backend store in a temp
folder) and reads every result back through MLflow's own `MlflowClient`. The server
starts in the background while the first runs import TensorFlow: a logger whose
server is not up yet retries until it is.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import keras
import numpy as np
import pytest
from click.testing import CliRunner
from kerasteps.recipes import global_step
from mlflow import MlflowClient

import kerasteps
from kerasteps import _tracking
from kerasteps.callbacks import (
    JSONLinesLogger,
    MLflowLogger,
    StepCheckpoint,
    StopAtStep,
)
from kerasteps.callbacks.mlflow_logger import SPOOL_NAME
from kerasteps.checkpoint import ResumeState
from tests.callbacks.test_step_checkpoint import Run, train_here
from tests.helpers import free_port, read_jsonl, tiny_data, tiny_model

SERVER_START_S = 120


class Server:
    """`mlflow server` in a subprocess."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        command = [
            *[sys.executable, "-m", "mlflow", "server"],
            *["--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}"],
            *["--default-artifact-root", str(folder / "artifacts")],
            *["--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
        ]
        # Without the server's job runner: MLflow 3 starts it by default, and its
        # worker processes (each importing MLflow) are nothing these tests use.
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=env)

    def wait_up(self) -> MlflowClient:
        client = MlflowClient(self.uri)
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                client.search_experiments()
                return client
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.2)
        pytest.fail(f"mlflow server did not start:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlflow")
    server = Server(folder)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server) -> MlflowClient:
    return server.wait_up()


@pytest.fixture(autouse=True)
def _fast_failing_requests(monkeypatch):
    """MLflow's client retries a refused request for minutes by default."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")


class Link:
    """A TCP link from a port of its own to the server that can be cut and mended:
    the network between a training job and its tracking server."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.mend()

    def mend(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuses new connections and breaks the open ones."""
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                near, _ = listener.accept()
            except OSError:
                return  # cut
            far = socket.create_connection(self.target)
            self._sockets += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def run_named(client: MlflowClient, experiment: str, name: str):
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment!r}"
    runs = client.search_runs(
        [found.experiment_id], filter_string=f"attributes.run_name = '{name}'"
    )
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def histories(client: MlflowClient, run_id: str) -> dict[str, list[tuple]]:
    """`{key: [(step, value), ...]}` in step order, every point the server holds."""
    run = client.get_run(run_id)
    return {
        key: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
        for key in run.data.metrics
    }


# -- kill -9 and resume --------------------------------------------------------------
def _wait_for_server_step(client, name: str, step: int, run: Run, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.process.poll() is None, run.log()
        experiment = client.get_experiment_by_name("resumable")
        if experiment is not None:
            found = client.search_runs(
                [experiment.experiment_id],
                filter_string=f"attributes.run_name = '{name}'",
            )
            if found:
                history = client.get_metric_history(found[0].info.run_id, "loss")
                if history and max(m.step for m in history) >= step:
                    return max(m.step for m in history)
        time.sleep(0.05)
    pytest.fail(f"step {step} did not reach the server in {timeout} s:\n{run.log()}")


def test_a_killed_run_resumes_its_mlflow_run_and_logs_each_step_once(
    server, tmp_path, capsys
):
    """kill -9 after points past the newest checkpoint reached the server; the
    resume continues the same MLflow run: each step once, with the values of an
    uninterrupted run."""
    mlflow = ["--mlflow", server.uri, "--mlflow-run-name"]
    # Checkpoints at 10, 20, ...; points at 15, 30, ...: hung at 17, the server
    # holds step 15 and the newest checkpoint is of step 10.
    killed = Run(tmp_path, "killed", *mlflow, "killed", "--hang-at", "17")
    runs = [killed]
    try:
        client = server.wait_up()  # the server starts while the run imports
        # The same run uninterrupted, in this process (the first test of the module:
        # the server starts while the killed run's process imports TensorFlow).
        train_here(tmp_path / "straight", *mlflow, "straight")
        at_kill = _wait_for_server_step(client, "killed", 15, killed, timeout=120)
        killed.process.send_signal(signal.SIGKILL)
        killed.wait(30)
        newest = StepCheckpoint.latest(tmp_path / "checkpoints").step
        run = run_named(client, "resumable", "killed")
        held = max(m.step for m in client.get_metric_history(run.info.run_id, "loss"))
        assert held > newest, (at_kill, held, newest)  # points past the checkpoint
        assert run.info.status == "RUNNING"
        capsys.readouterr()
        train_here(tmp_path, *mlflow, "resumed")  # the resume, in this process
    finally:
        for each in runs:
            each.kill()
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["start"] == newest
    reference = run_named(client, "resumable", "straight")
    run = client.get_run(run.info.run_id)
    assert run.info.status == "FINISHED"
    got = histories(client, run.info.run_id)
    want = histories(client, reference.info.run_id)
    assert [step for step, _ in got["loss"]] == list(range(15, 61, 15))
    # Each step once, the values of the uninterrupted run: the points after the
    # resume to float32 rounding (a window across a resume sums its carried part
    # in float64, as in test_step_checkpoint), the one before it exactly.
    assert sorted(got) == sorted(want)
    for key, points in want.items():
        assert [step for step, _ in got[key]] == [step for step, _ in points], key
        for (step, value), (_, expected) in zip(got[key], points, strict=True):
            assert value == pytest.approx(expected, rel=1e-6, abs=1e-12), (key, step)
    assert got["loss"][0] == want["loss"][0]
    experiment = client.get_experiment_by_name("resumable").experiment_id
    names = sorted(r.info.run_name for r in client.search_runs([experiment]))
    assert names == ["killed", "straight"]  # the resume made no run of its own
    assert run.data.params == {"max_steps": "60", "batch_size": "8"}


def _wait_until(what: str, check, run: Run, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.process.poll() is None, run.log()
        found = check()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"{what} did not happen in {timeout} s:\n{run.log()}")


def _checkpoint_at(folder: Path, step: int):
    def check():
        latest = StepCheckpoint.latest(folder) if folder.is_dir() else None
        return latest is not None and latest.step >= step

    return check


@pytest.mark.parametrize("created", [True, False], ids=["run-created", "no-run-yet"])
def test_points_queued_at_a_kill_reach_the_server_after_the_resume(
    server, tmp_path, created
):
    """kill -9 while the points of steps 15 and 30 are still queued for the server
    (the link to it cut: after the MLflow run was created, or before); the resume
    from the checkpoint of step 30 sends them from the spool, then its own: each
    step once, the values of the JSON lines, one MLflow run."""
    client = server.wait_up()
    link, name = Link(server.port), f"queued-{created}"
    if not created:
        link.cut()  # the killed run never reaches the server
    mlflow = ["--mlflow", link.uri, "--mlflow-run-name", name]
    killed = Run(tmp_path, "killed", *mlflow, "--hang-at", "32")
    try:
        if created:
            _wait_until(
                "the MLflow run's creation", lambda: _runs(client, name), killed
            )
            link.cut()  # before its first point goes out (the sender gathers 2 s)
        folder = tmp_path / "checkpoints"
        _wait_until("the checkpoint of step 30", _checkpoint_at(folder, 30), killed)
        killed.process.send_signal(signal.SIGKILL)
        killed.wait(30)
    finally:
        killed.kill()
    spooled = [json.loads(line) for line in (folder / SPOOL_NAME).open()]
    assert [point[4] for point in spooled if point[1] == "loss"] == [15, 30]
    if created:  # the server has the run and none of its points
        (held,) = _runs(client, name)
        assert client.get_metric_history(held.info.run_id, "loss") == []
    train_here(tmp_path, "--mlflow", server.uri, "--mlflow-run-name", name)
    (run,) = _runs(client, name)  # continued, or created once by the resume
    got = histories(client, run.info.run_id)
    assert [step for step, _ in got["loss"]] == [15, 30, 45, 60]
    for key in ("loss", "val_loss", "mae"):
        rows = read_jsonl(tmp_path / "log.jsonl")
        assert got[key] == [(r["step"], r[key]) for r in rows if key in r], key


def test_a_copied_folder_forks_and_a_moved_one_continues(server, tmp_path):
    """A run trained to 30, its folder copied (`cp -r A B`) and both resumed to
    60: B is a fork, with an MLflow run of its own tagged with its parent's id and
    step; A's run holds A's points only. A folder moved (the original gone)
    continues its run."""
    import shutil

    client = server.wait_up()
    a, b, moved = tmp_path / "a", tmp_path / "b", tmp_path / "moved"
    train_here(a, "--max-steps", "30", "--mlflow", server.uri, "--mlflow-run-name", "a")
    shutil.copytree(a, b)
    train_here(b, "--mlflow", server.uri, "--mlflow-run-name", "b")
    train_here(a, "--mlflow", server.uri, "--mlflow-run-name", "a-again")
    (parent,) = _runs(client, "a")
    (fork,) = _runs(client, "b")
    assert _runs(client, "a-again") == []  # A continued its run
    assert json.loads(fork.data.tags["kerasteps.forked_from"]) == {
        "mlflow_run_id": parent.info.run_id,
        "run_id": parent.data.tags["kerasteps.run_id"],
        "step": 30,
    }
    assert fork.data.tags["kerasteps.run_id"] != parent.data.tags["kerasteps.run_id"]
    for run, folder, steps in ((parent, a, [15, 30, 45, 60]), (fork, b, [45, 60])):
        got = histories(client, run.info.run_id)["loss"]
        rows = read_jsonl(folder / "log.jsonl")
        assert [step for step, _ in got] == steps
        assert got == [(r["step"], r["loss"]) for r in rows if r["step"] in steps]
    # B's JSON lines keep the shared history up to 30, then its own.
    assert [r["step"] for r in read_jsonl(b / "log.jsonl") if "loss" in r] == [
        15,
        30,
        45,
        60,
    ]
    # A checkpoint of A restored into a run that saves into C: a fork too.
    c = tmp_path / "c"
    restore = ["--restore-from", str(a / "checkpoints"), "--max-steps", "90"]
    train_here(c, *restore, "--mlflow", server.uri, "--mlflow-run-name", "c")
    (other,) = _runs(client, "c")
    assert json.loads(other.data.tags["kerasteps.forked_from"])["step"] == 60
    assert [s for s, _ in histories(client, other.info.run_id)["loss"]] == [75, 90]
    assert [s for s, _ in histories(client, parent.info.run_id)["loss"]] == [
        15,
        30,
        45,
        60,
    ]
    # A moved folder is no fork: its resume continues its MLflow run.
    train_here(b, "--max-steps", "90", "--mlflow", server.uri, "--mlflow-run-name", "x")
    shutil.move(b, moved)
    train_here(
        moved, "--max-steps", "120", "--mlflow", server.uri, "--mlflow-run-name", "y"
    )
    assert _runs(client, "x") == [] and _runs(client, "y") == []
    steps = [step for step, _ in histories(client, fork.info.run_id)["loss"]]
    assert steps == [45, 60, 75, 90, 105, 120]


def _runs(client: MlflowClient, name: str) -> list:
    """The runs named `name` in the experiment `resumable`."""
    experiment = client.get_experiment_by_name("resumable")
    if experiment is None:
        return []
    return client.search_runs(
        [experiment.experiment_id], filter_string=f"attributes.run_name = '{name}'"
    )


# -- in process -------------------------------------------------------------------
def test_logs_the_values_of_the_other_sinks_at_the_global_step(
    client, server, tmp_path
):
    model = tiny_model()
    x, y = tiny_data(48)
    jsonl = tmp_path / "log.jsonl"
    sink = MLflowLogger(
        every=4,
        tracking_uri=server.uri,
        experiment="values",
        run_name="first",
        params={"lr": 0.05, "data": "tiny"},
    )
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=2,
        verbose=0,
        validation_data=(x[:8], y[:8]),
        callbacks=[sink, JSONLinesLogger(jsonl, every=4)],
    )
    run = run_named(client, "values", "first")
    assert run.info.run_id == sink.mlflow_run_id
    assert run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.05", "data": "tiny"}
    lines = read_jsonl(jsonl)
    got = histories(client, sink.mlflow_run_id)
    # Every value of every JSON line, at its step: the same numbers.
    expected = {}
    for line in lines:
        for key, value in line.items():
            if key not in ("step", "time"):
                name = "counters/step" if key == "step" else key
                expected.setdefault(name, []).append((line["step"], value))
    expected["counters/step"] = [(line["step"], line["step"]) for line in lines]
    assert got == expected
    assert [step for step, _ in got["loss"]] == [4, 8, 12, 16, 20, 24]
    assert [step for step, _ in got["val_loss"]] == [12, 24]
    assert set(got) == {"loss", "val_loss", "learning_rate", "counters/step"}
    # The run knows the kerasteps run it is, and the checkpoints will too.
    hub_run_id = ResumeState.of(model).run_id
    assert run.data.tags["kerasteps.run_id"] == hub_run_id
    assert ResumeState.of(model).links == {"mlflow_run_id": sink.mlflow_run_id}


def test_validation_after_its_step_was_logged_joins_it_once(client, server, tmp_path):
    """StopAtStep(6) in an epoch of 8: step 6 is logged before Keras's epoch-end
    validation of that step, which then joins it; no key twice at a step."""
    model = tiny_model()
    x, y = tiny_data(32)
    jsonl = tmp_path / "log.jsonl"
    sink = MLflowLogger(every=2, tracking_uri=server.uri, experiment="late")
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=3,
        verbose=0,
        validation_data=(x[:8], y[:8]),
        callbacks=[sink, JSONLinesLogger(jsonl, every=2), StopAtStep(6)],
    )
    got = histories(client, sink.mlflow_run_id)
    lines = read_jsonl(jsonl)
    assert [step for step, _ in got["loss"]] == [2, 4, 6]
    assert got["loss"] == [(line["step"], line["loss"]) for line in lines]
    assert got["val_loss"] == [(6, lines[-1]["val_loss"])]


def test_a_second_fit_continues_the_run_and_keeps_its_params(
    client, server, caplog, tmp_path
):
    model = tiny_model()
    x, y = tiny_data(32)
    spool = tmp_path / "spool.jsonl"  # a spool of its own: no WARNING for none

    def fit(params):
        sink = MLflowLogger(
            every=4,
            tracking_uri=server.uri,
            experiment="again",
            params=params,
            spool=spool,
        )
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[sink])
        return sink.mlflow_run_id

    first = fit({"lr": 0.1, "seed": 0})
    with caplog.at_level(logging.WARNING, logger="kerasteps"):
        second = fit({"lr": 0.2, "seed": 0, "note": "longer"})
    assert second == first
    run = client.get_run(first)
    assert run.data.params == {"lr": "0.1", "seed": "0", "note": "longer"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "lr: 0.1 -> 0.2" in warnings[0], warnings
    assert json.loads(run.data.tags["kerasteps.params_changed"]) == {
        "8": {"lr": ["0.1", "0.2"]}
    }
    steps = [m.step for m in client.get_metric_history(first, "loss")]
    assert steps == [4, 8, 12, 16]
    experiment = client.get_experiment_by_name("again").experiment_id
    assert len(client.search_runs([experiment])) == 1


def test_finds_the_server_and_the_active_run_as_mlflow_does(
    client, server, monkeypatch
):
    """`MLFLOW_TRACKING_URI` and `mlflow.start_run()`: the points go to the user's
    run, which the logger leaves open."""
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    model = tiny_model()
    x, y = tiny_data(16)
    with mlflow.start_run(run_name="mine") as mine:
        sink = MLflowLogger(every=2)
        model.fit(x, y, batch_size=4, verbose=0, callbacks=[sink])
        assert sink.mlflow_run_id == mine.info.run_id
        assert client.get_run(mine.info.run_id).info.status == "RUNNING"
    history = client.get_metric_history(mine.info.run_id, "loss")
    assert sorted(m.step for m in history) == [2, 4]
    assert client.get_run(mine.info.run_id).info.status == "FINISHED"  # by mlflow


class CutAt(keras.callbacks.Callback):
    """Cuts the link at one step, once the logger's run exists, and mends it at a
    later one."""

    def __init__(self, link: Link, sink: MLflowLogger, cut: int, mend: int):
        super().__init__()
        self.link, self.sink, self.cut, self.mend = link, sink, cut, mend

    def on_train_batch_end(self, batch, logs=None):
        step = kerasteps.global_step(self.model)
        if step == self.cut:
            deadline = time.monotonic() + 60
            while self.sink.mlflow_run_id is None and time.monotonic() < deadline:
                time.sleep(0.05)
            self.link.cut()
        elif step == self.mend:
            time.sleep(2.0)  # a few failed tries first
            self.link.mend()


def test_points_that_fail_are_retried_until_the_server_takes_them(
    client, server, caplog, monkeypatch, tmp_path
):
    """The link is down for 2 s from step 4: the points of steps 6-12 fail, are
    retried every 0.1-0.4 s, and all reach the server; one WARNING says so."""
    monkeypatch.setattr(_tracking, "GATHER_S", 0.05)  # each point goes at once
    monkeypatch.setattr(_tracking, "RETRY_FIRST_S", 0.1)
    monkeypatch.setattr(_tracking, "RETRY_LAST_S", 0.4)
    link = Link(server.port)
    model = tiny_model()
    x, y = tiny_data(64)
    spool = tmp_path / "spool.jsonl"  # a spool of its own: no WARNING for none
    sink = MLflowLogger(every=2, tracking_uri=link.uri, experiment="cut", spool=spool)
    with caplog.at_level(logging.INFO, logger="kerasteps"):
        model.fit(
            x,
            y,
            batch_size=4,
            verbose=0,
            callbacks=[sink, CutAt(link, sink, cut=4, mend=12)],
        )
    link.cut()
    history = client.get_metric_history(sink.mlflow_run_id, "loss")
    assert sorted(m.step for m in history) == list(range(2, 17, 2))
    assert client.get_run(sink.mlflow_run_id).info.status == "FINISHED"
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(failures) == 1, failures
    assert f"tracking server {link.uri} refused the points" in failures[0]
    assert f"{link.uri} answers again, after" in caplog.text


def test_a_server_that_stays_down_gives_one_warning_and_no_secret(
    tmp_path, caplog, capfd, monkeypatch
):
    """One WARNING: MLflow's HTTP library's own retry warnings (here 2 per request)
    of the logger's thread are not shown."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    uri = f"http://me:s3cret-pw@127.0.0.1:{free_port()}"
    model = tiny_model()
    x, y = tiny_data(32)
    sink = MLflowLogger(
        every=2, tracking_uri=uri, timeout=1.0, spool=tmp_path / "spool.jsonl"
    )
    with caplog.at_level(logging.INFO):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[sink])
    assert kerasteps.global_step(model) == 8
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "http://***@127.0.0.1" in warnings[0]
    captured = capfd.readouterr()
    everything = caplog.text + captured.out + captured.err
    assert "s3cret" not in everything and "me:" not in everything
    assert "are not logged" in caplog.text and "(steps 2-8)" in caplog.text


def test_bad_arguments_are_refused_before_training_without_the_secret():
    with pytest.raises(ValueError, match="`tracking_uri` must be a non-empty.*5"):
        MLflowLogger(tracking_uri=5)
    with pytest.raises(ValueError, match="`experiment` must be a non-empty string"):
        MLflowLogger(tracking_uri="http://me:pw@h", experiment="")
    with pytest.raises(ValueError, match="`params` must be a mapping") as error:
        MLflowLogger(tracking_uri="http://me:s3cret@h", params=[("lr", 1)])
    assert "s3cret" not in str(error.value)
    with pytest.raises(ValueError, match="`timeout` must be a finite number >= 0.*-1"):
        MLflowLogger(timeout=-1)
    with pytest.raises(ValueError, match="at most 6000 characters.*long"):
        MLflowLogger(params={"long": "x" * 6001})
    with pytest.raises(ValueError, match="`spool` must be a local file path"):
        MLflowLogger(spool="gs://bucket/spool.jsonl")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        # Issue 46, finding 7: accepted, then fit() raised OverflowError at its end.
        ({"timeout": float("inf")}, "`timeout` must be a finite number .*inf"),
        ({"timeout": 1e12}, r"`timeout` .*<= 9223372036.*1000000000000\.0"),
        ({"timeout": float("nan")}, "`timeout` .*nan"),
        # Finding 8: a scheme MLflow does not serve trained and logged nothing.
        ({"tracking_uri": "ftp://nowhere"}, "`tracking_uri` .*scheme 'ftp'"),
        ({"tracking_uri": "http://"}, "`tracking_uri` .*names no host"),
        (
            {"tracking_uri": "http://me:s3cret@[::1"},
            r"`tracking_uri` .*'http://\*\*\*@\[::1' does not parse",
        ),
    ],
)
def test_an_argument_that_would_fail_later_is_refused_when_made(kwargs, match):
    with pytest.raises(ValueError, match=match) as error:
        MLflowLogger(**kwargs)
    assert "s3cret" not in str(error.value)


@pytest.mark.parametrize(
    "uri",
    ["http://127.0.0.1:5000", "https://h/x", "databricks", "mlruns", "file:///tmp/m"]
    + ["sqlite:///mlflow.db", "postgresql+psycopg2://u:p@h/db", "uc:http://h:8080"],
)
def test_the_uris_mlflow_serves_are_taken(uri):
    assert MLflowLogger(tracking_uri=uri).tracking_uri == uri


def test_without_a_checkpoint_or_spool_one_warning_says_so(client, server, caplog):
    """No StepCheckpoint and no `spool=`: the points go to the server as ever, and
    one WARNING says that those still queued at a crash would be lost. (`client`:
    the server is up before the run starts, as when the test runs alone.)"""
    model = tiny_model()
    x, y = tiny_data(32)
    sink = MLflowLogger(every=2, tracking_uri=server.uri, experiment="unspooled")
    with caplog.at_level(logging.WARNING, logger="kerasteps"):
        model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[sink])
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        "MLflowLogger: no spool (no local StepCheckpoint directory in this fit() "
        "and no `spool=`): the points still queued for the server at a crash are "
        "lost."
    ]
    steps = [m.step for m in client.get_metric_history(sink.mlflow_run_id, "loss")]
    assert sorted(steps) == list(range(2, 17, 2))


def test_without_mlflow_the_message_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ImportError, match=r"pip install kerasteps\[mlflow\]"):
        MLflowLogger()
    result = CliRunner().invoke(global_step.main, ["--mlflow", "http://h:5000"])
    assert result.exit_code == 2
    assert "kerasteps[mlflow]" in result.output and "--mlflow" in result.output


def test_credentials_are_masked_in_uris_and_messages():
    uri = "https://me:p%40ss@mlflow.example.com:443/x"
    assert _tracking.safe_uri(uri) == "https://***@mlflow.example.com:443/x"
    message = f"request to {uri}/api failed for me:p@ss and p%40ss"
    assert _tracking.redact(message, uri) == (
        "request to https://***@mlflow.example.com:443/x/api failed for *** and ***"
    )


# -- the launcher ------------------------------------------------------------------
def test_the_launcher_logs_a_recipe_and_its_resume_to_one_run(
    client, server, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    base = ["--steps", "20", "--log-every", "5", "--mlflow", server.uri]
    first = CliRunner().invoke(global_step.main, base, prog_name="kerasteps run x")
    assert first.exit_code == 0, first.output
    resumed = CliRunner().invoke(
        global_step.main,
        ["--steps", "30", "--log-every", "5", "--resume", "--mlflow", server.uri],
        prog_name="kerasteps run x",
    )
    assert resumed.exit_code == 0, resumed.output
    run = run_named(client, "kerasteps-x", "run-1")
    assert run.data.params["steps"] == "20" and run.data.params["log_every"] == "5"
    assert "mlflow" not in run.data.params and "resume" not in run.data.params
    experiment = client.get_experiment_by_name("kerasteps-x").experiment_id
    assert len(client.search_runs([experiment])) == 1  # the resume continued it
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert steps == sorted(set(steps)) and steps[0] == 1 and steps[-1] == 30
    assert json.loads(run.data.tags["kerasteps.params_changed"]) == {
        "20": {"steps": ["20", "30"]}
    }


def test_bad_links_in_a_checkpoint_are_dropped_with_a_warning(tmp_path, caplog):
    model = tiny_model()
    x, y = tiny_data(16)
    checkpoint = StepCheckpoint(tmp_path, every=4)
    model.fit(x, y, batch_size=4, verbose=0, callbacks=[checkpoint])
    meta_path = Path(StepCheckpoint.latest(tmp_path).path) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["links"] = {"mlflow_run_id": 5}
    meta_path.write_text(json.dumps(meta))
    restored = tiny_model()
    with caplog.at_level(logging.WARNING, logger="kerasteps"):
        StepCheckpoint.restore_latest(restored, tmp_path)
    assert "links in meta.json is malformed" in caplog.text
    state = ResumeState.of(restored)
    assert state.step == 4 and state.links == {}
    for trained, back in zip(model.weights, restored.weights, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(trained), keras.ops.convert_to_numpy(back)
        )
