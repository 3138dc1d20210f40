"""`MLflowLogger`: the values of every N global steps, in an MLflow run."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any

from kerasteps import _tracking
from kerasteps._files import _atomic
from kerasteps._files._paths import writable_file
from kerasteps._validate import check_name, check_number
from kerasteps.callbacks.step_sink import StepSink
from kerasteps.schedule import Every

__all__ = ["MLflowLogger"]

logger = logging.getLogger("kerasteps")

#: The `StepRun.links` name of the MLflow run's id.
LINK = "mlflow_run_id"
#: The MLflow tag that holds the kerasteps run id.
RUN_ID_TAG = "kerasteps.run_id"
#: The MLflow tag that records settings a resume changed (params cannot change).
CHANGED_TAG = "kerasteps.params_changed"
#: The MLflow tag of a fork's run: the parent's MLflow and kerasteps run ids, the step.
FORK_TAG = "kerasteps.forked_from"
#: The spool's file name in a `StepCheckpoint`'s directory.
SPOOL_NAME = "mlflow-spool.jsonl"


class MLflowLogger(StepSink):
    """Logs the values of every N global steps to an MLflow run.

    A `StepSink`: at each of its steps it logs the same values as
    `JSONLinesLogger` and `StepTensorBoard` (the window means of the training
    values, the validation values of that step, every optimizer's learning rate,
    the step counters as `counters/<name>`), each at the global step, as MLflow
    metrics of one run. Keys are those of `StepSink.key`: `loss`, `val_loss`,
    `learning_rate/d`, `counters/d_step`.

    **Which server and run.** Like MLflow's own clients: `tracking_uri`, else
    `mlflow.get_tracking_uri()` (`MLFLOW_TRACKING_URI`, `mlflow.set_tracking_uri`).
    With an active run (`mlflow.start_run()` when `fit()` begins) the points go to
    that run; otherwise the logger creates one in `experiment` (else MLflow's
    `MLFLOW_EXPERIMENT_NAME` or `MLFLOW_EXPERIMENT_ID`, else its default
    experiment), tags it `kerasteps.run_id`, and marks it finished when `fit()`
    ends. `params` (for example a recipe's options) are logged once, as the run's
    parameters.

    **Exactly once across crashes.** The MLflow run's id is stored with the run's
    checkpoints (`StepRun.links`), so a resumed run continues the same MLflow
    run. When a run begins, the logger asks the server for the last step it
    holds of each key and skips points at or below it: a resumed kerasteps run
    recomputes those steps exactly, so the skipped points are the ones the server
    already holds. MLflow's parameters cannot change: a resume with other
    `params` keeps the run's, logs a WARNING naming each difference, and records
    them in the tag `kerasteps.params_changed`.

    **A copy is a fork.** A checkpoint restored from a copy of its folder while the
    original is still there (`cp -r A B`, then a resume of B) starts a new MLflow
    run, tagged `kerasteps.forked_from` with the parent's MLflow run id and step:
    the fork never writes its parent's run. So does a checkpoint restored into a
    run whose `StepCheckpoint` saves into another directory. A folder that was
    moved (the original is gone) continues its run.

    **Nothing queued is lost.** Each point is also appended to a local spool (JSON
    lines, handed to the operating system before the point is queued for the
    server, so a kill -9 cannot lose it): `spool`, else `mlflow-spool.jsonl` in
    the directory of the run's `StepCheckpoint`. A point is written before any
    checkpoint of its step is saved, so when a run killed with points still
    queued resumes from a checkpoint at step s, the logger sends the spooled
    points at or below s that the server lacks, in step order, before its own.
    Without a `StepCheckpoint` (or one on a remote file system) and without
    `spool`, there is no spool, and one WARNING says so.

    **The training thread never waits on the network.** Points go out in batches
    (`log_batch`) from a background thread, which also creates or finds the run.
    A failed batch is retried (with backoff) until the run ends; a server that
    stays down gives one WARNING, not an error, and `fit()` then waits at most
    `timeout` seconds for the last points. Only the chief logs (multi-worker
    `tf.distribute`, JAX multi-process). A tracking URI's user name and password
    never appear in a log line or error message.

    Needs MLflow's client: `pip install kerasteps[mlflow]` (`mlflow-skinny`).

    Args:
        every: Positive int or `kerasteps.Every`, default 100.
        tracking_uri: The tracking server (`http://host:5000`, `databricks`, a
            local path), or None for MLflow's own choice. Its scheme must be one
            MLflow serves (`http`, `https`, `databricks`, `uc`, `file` or none,
            a database such as `sqlite` when SQLAlchemy is installed, a
            plugin's); another one (`ftp://`), or a URI that does not parse, is
            refused here.
        experiment: The experiment's name (created when missing), or None.
        run_name: The name of a new MLflow run, or None for MLflow's.
        params: Optional `{name: value}` to log as the run's parameters (values
            as strings, at most 6000 characters).
        tags: Optional `{name: value}` tags of a new run.
        reduce: `"mean"` (default), `"last"` or `"epoch"` (see `StepSink`).
        write_learning_rate: Bool, default True.
        write_counters: Bool, default True.
        timeout: Seconds `fit()` waits at its end for the points still queued
            (default 30.0): a finite number >= 0, at most
            `threading.TIMEOUT_MAX`.
        spool: Optional local file path for the spool (default: in the
            `StepCheckpoint`'s directory).

    Attributes:
        mlflow_run_id: The MLflow run's id, once the background thread has it.

    Example:

    >>> import numpy as np, keras, tempfile
    >>> from mlflow import MlflowClient
    >>> from kerasteps.callbacks import MLflowLogger
    >>> uri = "sqlite:///" + tempfile.mkdtemp() + "/mlflow.db"
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> logger = MLflowLogger(every=5, tracking_uri=uri, params={"lr": 0.01})
    >>> _ = model.fit(np.ones((40, 2)), np.ones((40, 1)), batch_size=2, verbose=0,
    ...               callbacks=[logger])
    >>> client = MlflowClient(uri)
    >>> [m.step for m in client.get_metric_history(logger.mlflow_run_id, "loss")]
    [5, 10, 15, 20]
    >>> client.get_run(logger.mlflow_run_id).data.params
    {'lr': '0.01'}
    """

    def __init__(
        self,
        every: int | Every = 100,
        tracking_uri: str | None = None,
        experiment: str | None = None,
        run_name: str | None = None,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
        reduce: str = "mean",
        write_learning_rate: bool = True,
        write_counters: bool = True,
        timeout: float = 30.0,
        spool: str | os.PathLike | None = None,
    ):
        _tracking.require_mlflow("MLflowLogger")
        super().__init__(None, every, reduce, write_learning_rate, write_counters)
        shown = functools.partial(_shown, uri=tracking_uri)
        for name, value in (
            ("tracking_uri", tracking_uri),
            ("experiment", experiment),
            ("run_name", run_name),
        ):
            check_name(value, name, optional=True, shown=shown)
        problem = None if tracking_uri is None else _tracking.uri_problem(tracking_uri)
        if problem is not None:
            raise ValueError(f"`tracking_uri` must be a URI MLflow serves: {problem}")
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_name = run_name
        #: The run's parameters to log (`params`; Keras owns `self.params`).
        self.run_params = _tracking.string_map(params, "params")
        self.tags = _tracking.string_map(tags, "tags")
        # A longer wait overflows the platform's clock when `fit()` ends.
        self.timeout = check_number("timeout", timeout, 0, threading.TIMEOUT_MAX)
        self.spool = None if spool is None else writable_file(spool, "spool")
        if self.spool is not None and not _atomic.is_local(self.spool):
            raise ValueError(
                f"`spool` must be a local file path, received {self.spool!r}."
            )
        self.mlflow_run_id: str | None = None
        self._sender: _tracking.Sender | None = None
        self._spool_file: IO[str] | None = None
        self._spool_open = False

    def key(self, name: str, kind: str) -> str | None:
        """The metric's key: `StepSink.key`, counters as `counters/<name>`.

        Example:

        >>> from kerasteps.callbacks import MLflowLogger
        >>> sink = MLflowLogger()
        >>> sink.key("val_loss", "validation"), sink.key("d_step", "counter")
        ('val_loss', 'counters/d_step')
        """
        if kind == "counter":
            return f"counters/{name}"
        return super().key(name, kind)

    # -- the run --------------------------------------------------------------------
    def open(self, start_step: int) -> None:
        # MLflow takes seconds to import: the training thread imports it only if
        # the user's code did (a run they started, a URI they set); otherwise the
        # background thread resolves the URI as MLflow would.
        mlflow = sys.modules.get("mlflow")
        active = mlflow.active_run() if mlflow is not None else None
        uri = self.tracking_uri
        if uri is None and mlflow is not None:
            uri = mlflow.get_tracking_uri()
        target = _Target(
            uri=uri,
            active_run=active.info.run_id if active is not None else None,
            linked_run=self.run.links.get(LINK),
            kerasteps_run=self.run.run_id,
            start_step=start_step,
            forked_from=self.run.forked_from,
        )
        self._sender = _tracking.Sender(
            name="MLflowLogger",
            uri=uri,
            begin=lambda: self._begin(target),
            send=self._send,
            finish=self._finish if target.active_run is None else None,
        )
        self._sender.start()
        self._spool_open = False

    def write(self, step: int, values: dict[str, Any], time_s: float) -> None:
        ms = int(time_s * 1000)
        points = [(k, float(v), ms, step) for k, v in values.items()]
        self._to_spool(points)  # first: a kill -9 after this line loses nothing
        self._sender.put(points)

    def close(self) -> None:
        if self._sender is None:
            return
        if not self._spool_open:  # a run that wrote nothing still sends the spool's
            self._to_spool([])
        if self._spool_file is not None:
            self._spool_file.close()
            self._spool_file = None
        sender, self._sender = self._sender, None
        sender.close(self.timeout)

    # -- the spool --------------------------------------------------------------------
    def _to_spool(self, points: list[tuple]) -> None:
        """Appends points to the spool; at the run's first, opens it and queues the
        earlier points it holds for this run's steps up to its start."""
        if not self._spool_open:
            self._open_spool()
        if self._spool_file is None or not points:
            return
        run_id = self.run.run_id
        lines = "".join(json.dumps([run_id, *point]) + "\n" for point in points)
        try:
            self._spool_file.write(lines)
            self._spool_file.flush()  # to the operating system: a kill keeps it
        except (OSError, ValueError) as error:
            logger.warning(
                "MLflowLogger: cannot write the spool %s (%s); points still queued "
                "at a crash are lost.",
                self._spool_file.name,
                error,
            )
            self._spool_file = None

    def _open_spool(self) -> None:
        # At the first point, not at the run's begin: every callback of `fit()` has
        # joined the run by then, the StepCheckpoint too.
        self._spool_open = True
        path = self.spool
        directory = self.run.checkpoint_directory
        if path is None and directory is not None and _atomic.is_local(directory):
            path = os.path.join(directory, SPOOL_NAME)
        if path is None:
            logger.warning(
                "MLflowLogger: no spool (no local StepCheckpoint directory in this "
                "fit() and no `spool=`): the points still queued for the server at "
                "a crash are lost."
            )
            return
        earlier = read_spool(path, self.run.run_id, self.run.start_step)
        if earlier:
            logger.info(
                "MLflowLogger: %d spooled point(s) of steps %d-%d go to the server "
                "unless it holds them.",
                len(earlier),
                earlier[0][3],
                earlier[-1][3],
            )
            self._sender.put(earlier)
        try:
            self._spool_file = open(path, "a", encoding="utf-8")  # noqa: SIM115
        except OSError as error:
            logger.warning(
                "MLflowLogger: cannot open the spool %s (%s); points still queued at "
                "a crash are lost.",
                path,
                error,
            )

    # -- on the background thread -------------------------------------------------
    def _begin(self, target: _Target) -> tuple[Any, dict[str, int], str]:
        """Creates or finds the MLflow run; returns the client, per key the last
        step the server holds, and the tracking URI."""
        import mlflow

        if target.uri is None:
            target.uri = mlflow.get_tracking_uri()
        client = mlflow.MlflowClient(target.uri)
        run = _find_run(client, target, self.experiment)
        if run is None:
            run = client.create_run(
                _experiment_id(client, self.experiment),
                run_name=self.run_name,
                tags={**self.tags, RUN_ID_TAG: target.kerasteps_run, **_fork(target)},
            )
            _log_params(client, run.info.run_id, self.run_params)
            last: dict[str, int] = {}
        else:
            if target.active_run is None and run.info.status != "RUNNING":
                client.update_run(run.info.run_id, status="RUNNING")
            _keep_params(client, run, self.run_params, target.start_step)
            history = client.get_metric_history
            last = {
                key: max(point.step for point in history(run.info.run_id, key))
                for key in run.data.metrics
            }
        self.mlflow_run_id = run.info.run_id
        self.run.links[LINK] = run.info.run_id
        if last:
            logger.info(
                "MLflowLogger: continuing MLflow run %s; the server holds points up "
                "to step %d, which are not logged again.",
                run.info.run_id,
                max(last.values()),
            )
        return client, last, target.uri

    def _send(self, client: Any, points: list[tuple]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(key, value, ms, step) for key, value, ms, step in points]
        for start in range(0, len(metrics), _tracking.METRICS_PER_BATCH):
            batch = metrics[start : start + _tracking.METRICS_PER_BATCH]
            client.log_batch(self.mlflow_run_id, metrics=batch, synchronous=True)

    def _finish(self, client: Any, uri: str) -> None:
        if _tracking.safe_uri(uri) != uri:
            # set_terminated prints the run's URL with the URI's credentials.
            client.update_run(self.mlflow_run_id, status="FINISHED")
        else:
            client.set_terminated(self.mlflow_run_id, status="FINISHED")


def _shown(value: Any, uri: Any) -> str:
    """`repr(value)` for a message, with the credentials of `uri` masked."""
    return _tracking.redact(repr(value), uri)


@dataclasses.dataclass
class _Target:
    """Where the points go, as the training thread saw it when the run began."""

    uri: str | None  # None: MLflow's own, resolved on the background thread
    active_run: str | None
    linked_run: str | None
    kerasteps_run: str
    start_step: int
    forked_from: Mapping[str, Any] | None = None


def _fork(target: _Target) -> dict[str, str]:
    """The fork tag of a new run that branches off another (`StepRun.forked_from`):
    `{"mlflow_run_id": ..., "run_id": ..., "step": ...}`, as JSON."""
    parent = target.forked_from
    if not parent:
        return {}
    record = {
        "mlflow_run_id": dict(parent.get("links", {})).get(LINK),
        "run_id": parent.get("run_id"),
        "step": parent.get("step"),
    }
    return {FORK_TAG: json.dumps(record)}


def _find_run(client: Any, target: _Target, experiment: str | None) -> Any:
    """The MLflow run to continue: the active one, the one the checkpoint links, or
    the one tagged with the kerasteps run id; None for a new one."""
    from mlflow.exceptions import MlflowException

    for run_id in filter(None, (target.active_run, target.linked_run)):
        try:
            run = client.get_run(run_id)
        except MlflowException:
            continue  # deleted, or on another server: find or create one
        if run.info.lifecycle_stage == "active":
            return run
    # Also at step 0: a create whose answer was lost made the run already.
    found = client.search_runs(
        [_experiment_id(client, experiment)],
        filter_string=f"tags.`{RUN_ID_TAG}` = '{target.kerasteps_run}'",
        max_results=1,
    )
    return found[0] if found else None


def _experiment_id(client: Any, name: str | None) -> str:
    from mlflow import environment_variables as variables

    if name is None:
        name = variables.MLFLOW_EXPERIMENT_NAME.get()
        if name is None:
            return variables.MLFLOW_EXPERIMENT_ID.get() or "0"
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    return client.create_experiment(name)


def _log_params(client: Any, run_id: str, params: Mapping[str, str]) -> None:
    from mlflow.entities import Param

    items = [Param(key, value) for key, value in params.items()]
    for start in range(0, len(items), _tracking.PARAMS_PER_BATCH):
        batch = items[start : start + _tracking.PARAMS_PER_BATCH]
        client.log_batch(run_id, params=batch, synchronous=True)


def _keep_params(
    client: Any, run: Any, params: Mapping[str, str], start_step: int
) -> None:
    """A resumed run at `start_step` keeps its params; new ones are added, changed
    ones are named in a WARNING and in the tag `kerasteps.params_changed`."""
    held = run.data.params
    changed = {k: [held[k], v] for k, v in params.items() if k in held and held[k] != v}
    new = {key: value for key, value in params.items() if key not in held}
    _log_params(client, run.info.run_id, new)
    if not changed:
        return
    logger.warning(
        "MLflowLogger: MLflow run %s keeps the params it was started with; this "
        "resume at step %d has other values for %s (recorded in the tag %s).",
        run.info.run_id,
        start_step,
        ", ".join(f"{key}: {old} -> {value}" for key, (old, value) in changed.items()),
        CHANGED_TAG,
    )
    record = json.loads(run.data.tags.get(CHANGED_TAG, "{}") or "{}")
    record[str(start_step)] = changed
    client.set_tag(run.info.run_id, CHANGED_TAG, json.dumps(record)[:5000])


def read_spool(path: str, run_id: str, upto: int) -> list[tuple]:
    """The points of the kerasteps run `run_id` in a spool, at steps up to `upto`:
    `(key, value, ms, step)`, the last written of each key and step, in step order.
    Lines that do not read (the torn last line of a kill) are skipped.

    Args:
        path: The spool file.
        run_id: The kerasteps run id.
        upto: The step the resumed run starts at.

    Example:

    >>> import os, tempfile
    >>> from kerasteps.callbacks.mlflow_logger import read_spool
    >>> path = os.path.join(tempfile.mkdtemp(), "spool.jsonl")
    >>> with open(path, "w") as spool:
    ...     _ = spool.write('["r1", "loss", 0.5, 1000, 10]\\n["r1", "loss", 0.4, 2000')
    >>> read_spool(path, "r1", 20)
    [('loss', 0.5, 1000, 10)]
    """
    points: dict[tuple[str, int], tuple] = {}
    try:
        with open(path, encoding="utf-8") as spool:
            for line in spool:
                try:
                    run, key, value, ms, step = json.loads(line)
                    point = (str(key), float(value), int(ms), int(step))
                except (ValueError, TypeError):
                    continue
                if run == run_id and point[3] <= upto:
                    points[point[0], point[3]] = point
    except OSError:
        return []
    return sorted(points.values(), key=lambda point: point[3])
