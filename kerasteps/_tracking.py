"""What a sink that logs to a tracking server needs (private): the optional
dependency's message, credentials kept out of messages, and `Sender`, the
background thread that talks to the server so that training never waits on it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import logging
import queue
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from kerasteps._startup import installed

logger = logging.getLogger("kerasteps")

#: MLflow's limits per `log_batch` request.
METRICS_PER_BATCH = 1000
PARAMS_PER_BATCH = 100
#: Longest param value MLflow stores.
PARAM_LENGTH = 6000
#: Seconds between tries of a failed request: doubles from the first to the last.
RETRY_FIRST_S, RETRY_LAST_S = 0.5, 8.0
#: Failed tries of one request before the WARNING.
TRIES_BEFORE_WARNING = 3
#: Seconds the sender gathers points into one request before it sends them (the
#: run's end sends at once): one request per 2 s, not one per point.
GATHER_S = 2.0


def require_mlflow(user: str) -> None:
    """Raises `ImportError` naming the extra when MLflow's client is missing.

    Args:
        user: The class that needs it, for the message.
    """
    if not installed("mlflow"):  # also False for a module without a spec (None)
        raise ImportError(
            f"{user} needs MLflow's client, which is not installed: "
            "`pip install kerasteps[mlflow]` (mlflow-skinny), or `pip install mlflow`."
        )


#: The schemes MLflow's client serves itself (its tracking store registry); a
#: database's (`sqlite:///mlflow.db`, `postgresql+psycopg2://...`) only with
#: SQLAlchemy installed; a plugin's through the `mlflow.tracking_store` entry points.
SCHEMES = ("", "file", "databricks", "databricks-uc", "uc", "http", "https")
DATABASE_SCHEMES = ("postgresql", "mysql", "sqlite", "mssql")


def uri_problem(uri: str) -> str | None:
    """Why MLflow's client cannot track to `uri`, or None: the URI does not parse,
    or its scheme is one MLflow does not serve. Its credentials are masked.

    Args:
        uri: A tracking URI (`http://host:5000`, a local path, `databricks`).

    Example:

    >>> from kerasteps._tracking import uri_problem
    >>> uri_problem("http://127.0.0.1:5000") is None, uri_problem("mlruns") is None
    (True, True)
    >>> uri_problem("ftp://me:pw@nowhere")  # doctest: +ELLIPSIS
    "'ftp://***@nowhere' has the scheme 'ftp', which MLflow does not serve..."
    """
    try:
        parts = urllib.parse.urlsplit(uri)
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as error:
        return f"{_masked(uri)!r} does not parse as a URI: {error}."
    scheme = parts.scheme  # lower case; a Windows drive (`C:`) is a local path
    scheme = "" if len(scheme) == 1 and scheme.isalpha() else scheme
    if scheme in ("http", "https") and not parts.hostname:
        return f"{_masked(uri)!r} names no host."
    if scheme in SCHEMES or scheme in _plugin_schemes():
        return None
    database = next((db for db in DATABASE_SCHEMES if scheme.startswith(db)), None)
    if database is None:
        return (
            f"{_masked(uri)!r} has the scheme {scheme!r}, which MLflow does not "
            "serve: use http://, https://, databricks, a local path, or a database "
            f"({', '.join(DATABASE_SCHEMES)})."
        )
    if not installed("sqlalchemy"):
        return (
            f"{_masked(uri)!r} is a {database} database, which MLflow serves only "
            "with SQLAlchemy installed (`pip install mlflow`)."
        )
    return None


def _plugin_schemes() -> set[str]:
    """The schemes that installed MLflow plugins serve."""
    points = importlib.metadata.entry_points(group="mlflow.tracking_store")
    return {point.name for point in points}


def _masked(uri: str) -> str:
    """`safe_uri(uri)`, also for a URI that does not parse."""
    try:
        return safe_uri(uri)
    except ValueError:
        return re.sub(r"(?<=//)[^/?#]*@", "***@", uri)


def safe_uri(uri: str) -> str:
    """`uri` without the user name and password it may hold.

    Args:
        uri: A tracking URI.

    Example:

    >>> from kerasteps._tracking import safe_uri
    >>> safe_uri("https://me:secret@mlflow.example.com/x"), safe_uri("databricks")
    ('https://***@mlflow.example.com/x', 'databricks')
    """
    parts = urllib.parse.urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + host))


def redact(text: str, uri: str | None) -> str:
    """`text` with the credentials of `uri` (user info, password) masked.

    Args:
        text: A message, e.g. an exception's.
        uri: The tracking URI the message may quote, or None.

    Example:

    >>> from kerasteps._tracking import redact
    >>> redact("to http://me:pw1@h:5/api failed", "http://me:pw1@h:5")
    'to http://***@h:5/api failed'
    """
    if not isinstance(uri, str) or not uri:
        return text  # a bad `tracking_uri` (not a string) holds nothing to mask
    netloc = urllib.parse.urlsplit(uri).netloc
    if "@" not in netloc:
        return text
    userinfo = netloc.rsplit("@", 1)[0]
    text = text.replace(userinfo + "@", "***@")
    secrets = [userinfo, urllib.parse.unquote(userinfo)]
    secrets += [part for part in userinfo.split(":")[1:] if part]
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def string_map(values: Mapping[str, Any] | None, name: str) -> dict[str, str]:
    """`{str: str}` of a mapping of params or tags, or raises `ValueError`.

    Args:
        values: None or a mapping with string keys.
        name: The argument's name, for the message.

    Example:

    >>> from kerasteps._tracking import string_map
    >>> string_map({"lr": 0.1, "data": "ring"}, "params")
    {'lr': '0.1', 'data': 'ring'}
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping) or not all(
        isinstance(key, str) and key for key in values
    ):
        raise ValueError(
            f"`{name}` must be a mapping of non-empty string keys to values, or "
            f"None, received {type(values).__name__}."
        )
    out = {key: str(value) for key, value in values.items()}
    long = sorted(key for key, value in out.items() if len(value) > PARAM_LENGTH)
    if long:
        raise ValueError(
            f"`{name}` values must be at most {PARAM_LENGTH} characters as strings; "
            f"{', '.join(long)} are longer."
        )
    return out


#: The prefix of the sender threads' names.
THREAD_PREFIX = "kerasteps-"


def _not_from_senders(record: logging.LogRecord) -> bool:
    """Drops the HTTP library's own retry warnings of the sender threads, which
    give one WARNING of their own for a server that does not answer."""
    return not record.threadName.startswith(THREAD_PREFIX)


def _quiet_http_retries() -> None:
    http = logging.getLogger("urllib3.connectionpool")
    if _not_from_senders not in http.filters:
        http.addFilter(_not_from_senders)


class Sender:
    """A daemon thread that sets up a tracking run, then sends queued points.

    `begin()` runs first on the thread (retried until it succeeds) and returns the
    client, per key the last step the server holds (points at or below it are
    skipped), and the tracking URI it resolved. Points are then gathered for
    `GATHER_S` seconds into one request (at once when the run ends), which
    `send(client, points)` sends; a failure is retried with backoff, the same
    points, until `close`. After `TRIES_BEFORE_WARNING` failed tries in a row the
    sender logs one WARNING for the whole run. `finish(client, uri)` runs once
    every point went out, at `close`.

    Points are `(key, value, timestamp_ms, step)` tuples.
    """

    def __init__(
        self,
        name: str,
        uri: str | None,
        begin: Callable[[], tuple[Any, dict[str, int], str]],
        send: Callable[[Any, list[tuple]], None],
        finish: Callable[[Any, str], None] | None,
    ):
        self.name = name
        self.uri = uri
        self._begin = begin
        self._send = send
        self._finish = finish
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._abandoned = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"{THREAD_PREFIX}{name}", daemon=True
        )
        self.warned = False
        self._unsent: list[tuple] = []

    def start(self) -> None:
        _quiet_http_retries()
        self._thread.start()

    def put(self, points: list[tuple]) -> None:
        """Queues points; never blocks."""
        self._queue.put(points)

    def close(self, timeout: float) -> None:
        """Sends what is queued, waiting at most `timeout` seconds, then stops."""
        self._queue.put(None)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            return
        self._abandoned.set()
        unsent = self._unsent + self._drain()
        steps = sorted({point[3] for point in unsent})
        where = f" (steps {steps[0]}-{steps[-1]})" if steps else ""
        (logger.info if self.warned else logger.warning)(
            "%s: %s did not take the run's last points within %.0f s; %d point(s)%s "
            "are not logged.",
            self.name,
            safe_uri(self.uri or "MLflow's tracking URI"),
            timeout,
            len(unsent),
            where,
        )

    def _drain(self) -> list[tuple]:
        points: list[tuple] = []
        with contextlib.suppress(queue.Empty):
            while True:
                points.extend(self._queue.get_nowait() or ())  # None: the run's end
        return points

    def _run(self) -> None:
        setup = self._retry(self._begin, "could not start the run")
        if setup is None:
            return
        client, last, self.uri = setup
        item: list[tuple] | None = []
        while item is not None:
            points: list[tuple] = []
            item = self._queue.get()
            # What comes in the next GATHER_S goes in the same request.
            deadline = time.monotonic() + GATHER_S
            while item is not None:
                points.extend(item)
                left = max(0.0, deadline - time.monotonic())
                try:
                    item = self._queue.get(timeout=left)
                except queue.Empty:
                    break
            fresh = [p for p in points if p[3] > last.get(p[0], -1)]
            if fresh:
                self._unsent = fresh
                send = functools.partial(self._send, client, fresh)
                if self._retry(send, "refused the points") is None:
                    return  # abandoned
                self._unsent = []
        if self._finish is not None:
            self._retry(lambda: self._finish(client, self.uri), "could not end the run")

    def _retry(self, call: Callable[[], Any], what: str) -> Any:
        """`call()` until it succeeds (its result, or True), or None when the sender
        is abandoned."""
        wait, tries = RETRY_FIRST_S, 0
        while not self._abandoned.is_set():
            try:
                result = call()
            except Exception as error:  # noqa: BLE001 - any failure is retried
                tries += 1
                if tries == TRIES_BEFORE_WARNING and not self.warned:
                    self.warned = True
                    logger.warning(
                        "%s: the tracking server %s %s (%s: %s); kerasteps keeps "
                        "the points and retries until the run ends, then waits at "
                        "most its timeout for them.",
                        self.name,
                        safe_uri(self.uri or "MLflow's tracking URI"),
                        what,
                        type(error).__name__,
                        redact(str(error), self.uri)[:300],
                    )
            else:
                if tries >= TRIES_BEFORE_WARNING:
                    logger.info(
                        "%s: the tracking server %s answers again, after %d failed "
                        "tries.",
                        self.name,
                        safe_uri(self.uri or "MLflow's tracking URI"),
                        tries,
                    )
                return True if result is None else result
            self._abandoned.wait(wait)
            wait = min(2 * wait, RETRY_LAST_S)
        return None
