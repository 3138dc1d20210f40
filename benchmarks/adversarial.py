"""Issue 27's adversarial scenarios, run again against the real library.

    python benchmarks/adversarial.py [--only NAME ...] [--kills 20]

Every scenario runs in a fresh temporary directory, with real processes, real files
and real signals (no mocks); at most two child processes run at a time. The
scenarios (`--only` takes these names):

- `kill-9`: a training child that saves asynchronously every step is killed with
  SIGKILL at a random moment of its training, `--kills` times, resuming in the same
  directory; after each kill every listed checkpoint must verify and hold arrays
  bit-identical to an uninterrupted run's at its step, and the next run must start
  at the newest one;
- `damaged-checkpoint`: `state.h5` truncated, with a flipped byte, deleted; the index
  garbage, empty, deleted: `restore_latest` falls back (or rebuilds the index) with
  a WARNING naming it, and no file is deleted;
- `outside-paths`: index entries `../victim`, an absolute path, `""`, `../ckpt-1`,
  `ckpt-N` folders that are symlinks to folders outside, a checkpoint directory that
  is a symlink: training with `keep=1` changes nothing outside the directory;
- `other-model`: the `state.h5` of a model with another layer size or an extra
  layer, with a `meta.json` that matches it: `restore_checkpoint` raises a
  `ValueError` naming the keys and the model is unchanged;
- `meta-json`: `meta.json` edited nine ways: fall back with a WARNING naming why,
  restore (another backend), or restore with the windows dropped (then `fit` runs);
  no file is deleted;
- `two-processes`: two training processes call `fit()` on the same directories at
  the same instant (both told `go` at once), 10 times with a stale lock and 10
  without (one pair of processes, fresh directories each time): exactly one
  trains, the other fails before training with a `LockedError` naming the winner;
- `signals`: SIGTERM and SIGINT at a run's begin, middle and end: exit 128+signal
  (or 0), a checkpoint, no lock and no temporary folder left, every checkpoint
  restores and the next run starts at the newest;
- `full-disk`: 20 runs of `tests/scripts/full_disk_train.py` (`--how rlimit` and,
  on a small tmpfs where this process may mount one, `--how fill`): exit 3 with
  the disk error, never a signal, and every committed checkpoint restores;
- `launcher`: `kerasteps run global_step --log-dir /proc/x` and `--log-dir /`,
  `kerasteps summary /`, `kerasteps summary DIR` with an event file whose record
  claims 2**40 bytes: exit 2 with one `Error:` line, or exit 0 with one WARNING.

Prints one line per scenario, `PASS name: what was observed` or `FAIL name: what was
observed (expected ...)`, then `N/M scenarios held`; exits 0 only if all held.
Takes about 5 to 10 minutes on 2 cores (most of it is TensorFlow's import in the
children).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import queue
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this tree's kerasteps

SCRIPT = Path(__file__).resolve()
FULL_DISK = ROOT / "tests" / "scripts" / "full_disk_train.py"
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "CUDA_VISIBLE_DEVICES": "",
    "TF_DETERMINISTIC_OPS": "1",  # the kill loop compares arrays bit for bit
    "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    ),
}
KILL_STEPS = 120  # steps of one uninterrupted run of the kill loop
PARALLEL = 2  # child processes at a time


class Failed(Exception):
    """A scenario did not hold: the message says what was observed and expected."""


def fail_if(problems: list[str], expected: str) -> None:
    """Raises `Failed` with the problems observed (their first 700 characters) and
    what was `expected`; nothing if there are none."""
    if problems:
        raise Failed("; ".join(problems)[:700] + f" (expected {expected})")


# -- models and data shared by the children and the checks --------------------------
def kill_model():
    """The kill loop's model: Adam, and a seeded Dropout (its RNG state is saved)."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dropout(0.3, seed=1),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def kill_dataset():
    """One repeatable stream of batches (`skip_consumed` makes a resume exact)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) ** 2).astype("float32")
    tf.random.set_seed(0)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    return data.shuffle(64, seed=3).batch(4, drop_remainder=True)


def small_model(seed=0, units=4, extra=False, optimizer="sgd"):
    import keras

    keras.utils.set_random_seed(seed)
    layers = [keras.Input((2,)), keras.layers.Dense(units, activation="relu")]
    if extra:
        layers.append(keras.layers.Dense(4, activation="relu"))
    model = keras.Sequential([*layers, keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.05) if optimizer == "sgd" else keras.optimizers.Adam()
    model.compile(opt, "mse")
    return model


def tiny_data(n, seed=0):
    import numpy as np

    x = np.random.default_rng(seed).normal(size=(n, 2)).astype("float32")
    return x, (x[:, :1] * 2 - x[:, 1:]).astype("float32")


def fit_steps(model, steps, callbacks=(), batch_size=2):
    x, y = tiny_data(steps * batch_size)
    model.fit(
        x, y, batch_size=batch_size, shuffle=False, verbose=0, callbacks=list(callbacks)
    )


def global_step(model) -> int:
    import keras

    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


# -- the children -------------------------------------------------------------------
def _marker(print_at: Callable[[str, int], str | None], sleep: float = 0.0):
    """A callback that prints `print_at(hook, batch)`'s line (flushed), then sleeps a
    second after a printed line, else `sleep`, at each batch end."""
    import keras

    class Marker(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self._say("begin", -1)

        def on_train_batch_end(self, batch, logs=None):
            if not self._say("batch", batch):
                time.sleep(sleep)

        def _say(self, hook, batch):
            line = print_at(hook, batch)
            if line:
                print(line, flush=True)
                time.sleep(1.0)
            return bool(line)

    return Marker


def child_kill(directory: str, total: int, reference: str | None) -> int:
    """Resumes from the newest checkpoint, trains to `total` with an async save
    every step (keep 3); `reference`: also records every step's state (npz)."""
    import keras
    import numpy as np

    from kerasteps import steps as steps_lib
    from kerasteps.callbacks import StepCheckpoint
    from kerasteps.checkpoint import _model_state
    from kerasteps.data import skip_consumed

    model = kill_model()
    start = StepCheckpoint.restore_latest(model, directory) or 0
    began = {}

    class Begin(keras.callbacks.Callback):  # overrides no batch hook
        def on_train_begin(self, logs=None):
            began["t"] = time.monotonic()
            print(f"TRAINING {start}", flush=True)

    states: dict[str, np.ndarray] = {}
    times: list[float] = []

    class Recorder(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            steps_lib.sync_trained_state(self.model)
            step = steps_lib.global_step(self.model)
            arrays = _model_state.Snapshot().take(self.model)
            arrays.update(_model_state.generator_states())
            for key, value in arrays.items():
                states[f"{step}:{key.replace('/', '|')}"] = np.array(value, copy=True)
            times.append(time.monotonic())

    callbacks = [StepCheckpoint(directory, every=1, keep=3), Begin()]
    if reference:
        callbacks.append(Recorder())
    model.fit(
        skip_consumed(kill_dataset(), start),
        steps_per_epoch=total - start,
        epochs=1,
        verbose=0,
        callbacks=callbacks,
    )
    if reference:
        np.savez(reference, **states)
        first = times[0] - began["t"]
        per_step = (times[-1] - times[0]) / max(1, len(times) - 1)
        print(f"TIMING {first:.4f} {per_step:.5f}", flush=True)
    print(f"DONE {global_step(model)}", flush=True)
    return 0


def child_race() -> int:
    """Races for run directories, one trial per `prepare DIR` line on stdin: builds
    a model and its callbacks on DIR, says `ARMED`, waits for `go`, fits 40 steps
    (`STEP n` each), then says `DONE n`, or `LOCKED <message>` if DIR is taken."""
    from kerasteps._files._lock import LockedError
    from kerasteps.callbacks import JSONLinesLogger, StepCheckpoint, StepTensorBoard

    marker = _marker(lambda hook, batch: None, sleep=0.03)

    class Steps(marker):
        def on_train_batch_end(self, batch, logs=None):
            print(f"STEP {batch + 1}", flush=True)
            super().on_train_batch_end(batch, logs)

    for line in sys.stdin:
        if not line.startswith("prepare "):
            break
        workdir = line.split(" ", 1)[1].strip()
        model = small_model()
        x, y = tiny_data(80)
        callbacks = [
            StepCheckpoint(os.path.join(workdir, "ckpt"), every=10),
            JSONLinesLogger(os.path.join(workdir, "log.jsonl"), every=1),
            StepTensorBoard(os.path.join(workdir, "tb"), every=5),
            Steps(),
        ]
        print("ARMED", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 4
        try:
            model.fit(x, y, batch_size=2, shuffle=False, verbose=0, callbacks=callbacks)
        except LockedError as error:
            print("LOCKED", str(error).replace("\n", " "), flush=True)
        else:
            print("DONE", global_step(model), flush=True)
    return 0


def child_signal(workdir: str, where: str, total: int, resume: bool) -> int:
    """Trains `total` steps (a checkpoint every 10) and prints `SIGNAL-NOW` at
    `where` (begin, mid, end); with `resume`, restores first and trains 5 more."""
    from kerasteps.callbacks import JSONLinesLogger, StepCheckpoint

    model = small_model(optimizer="adam")
    directory = os.path.join(workdir, "ckpt")
    start = (StepCheckpoint.restore_latest(model, directory) or 0) if resume else 0
    print(f"START {start}", flush=True)
    steps = 5 if resume else total

    def print_at(hook, batch):
        if hook == "begin":
            return "SIGNAL-NOW" if where == "begin" else None
        due = {"mid": steps // 2, "end": steps}.get(where)
        return "SIGNAL-NOW" if batch + 1 == due else None

    checkpoint = StepCheckpoint(directory, every=10, keep=3)
    callbacks = [
        checkpoint,
        JSONLinesLogger(os.path.join(workdir, "log.jsonl"), every=5),
        _marker(print_at, sleep=0.02)(),
    ]
    x, y = tiny_data(steps * 2, seed=start)
    model.fit(x, y, batch_size=2, shuffle=False, verbose=0, callbacks=callbacks)
    result = {"final": global_step(model), "interrupted": checkpoint.interrupted}
    print("RESULT", json.dumps(result), flush=True)
    return 128 + checkpoint.signal_received if checkpoint.interrupted else 0


def child_main(argv: list[str]) -> int:
    # Ctrl-C as in a terminal, also when this parent runs in the background (its
    # children then inherit SIGINT ignored, and Python would keep it so).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    kind, args = argv[0], argv[1:]
    if kind == "kill":
        return child_kill(args[0], int(args[1]), args[2] if len(args) > 2 else None)
    if kind == "race":
        return child_race()
    if kind == "signal":
        return child_signal(args[0], args[1], int(args[2]), args[3:] == ["resume"])
    raise SystemExit(f"unknown child {kind!r}")


# -- running children ---------------------------------------------------------------
class Child:
    """A child process whose stdout lines are read as they come (stderr: a file)."""

    def __init__(self, command: list[str], workdir: str, stdin: bool = False):
        handle, self.err_path = tempfile.mkstemp(prefix="stderr-", dir=workdir)
        self._err = os.fdopen(handle, "w")  # closed by `finish`
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._err,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            text=True,
            env=ENV,
        )
        self.pid = self.proc.pid
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def of(cls, kind: str, *args: str, workdir: str, stdin: bool = False) -> Child:
        return cls([sys.executable, str(SCRIPT), "_child", kind, *args], workdir, stdin)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def expect(self, prefix: str, timeout: float = 240) -> str | None:
        """The first line that starts with `prefix`; None at the end or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line is None:
                self._queue.put(None)
                return None
            if line.startswith(prefix):
                return line

    def expect_lines(self, ends: tuple[str, ...], timeout: float = 240) -> list[str]:
        """The lines up to the first that starts with one of `ends` (included)."""
        lines = []
        while (line := self.expect("", timeout)) is not None:
            lines.append(line)
            if line.startswith(ends):
                break
        return lines

    def send(self, text: str) -> None:
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def finish(self, timeout: float = 240) -> int:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)
        self._err.close()
        return self.proc.returncode

    def stderr(self) -> str:
        with open(self.err_path) as handle:
            return handle.read()

    def line(self, prefix: str) -> str | None:
        return next((ln for ln in self.lines if ln.startswith(prefix)), None)


def tail(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-400:]


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()  # reaped: the pid names no process now
    return process.pid


# -- reading directories ------------------------------------------------------------
def files_of(top: str | Path) -> dict[str, str]:
    """Every entry under `top` (not following links): relative path -> content hash
    (files), `dir`, or `-> target` (links)."""
    found = {}
    for base, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(base, name)
            rel = os.path.relpath(path, top)
            if os.path.islink(path):
                found[rel] = "-> " + os.readlink(path)
            elif os.path.isdir(path):
                found[rel] = "dir"
            else:
                with open(path, "rb") as handle:
                    found[rel] = hashlib.sha256(handle.read()).hexdigest()
    return found


def lost(before: dict[str, str], after: dict[str, str], may_change=()) -> list[str]:
    """Entries of `before` that are gone or changed in `after`."""
    return [
        rel
        for rel, digest in before.items()
        if rel not in after or (after[rel] != digest and rel not in may_change)
    ]


class Warnings(logging.Handler):
    """Collects the `kerasteps` logger's WARNING and ERROR messages."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    @contextlib.contextmanager
    def collect(self) -> Iterator[list[str]]:
        self.messages = []
        yield self.messages


WARNINGS = Warnings()


def keras_ready() -> None:
    """Imports Keras in this process (the checks restore in it) and collects the
    library's warnings instead of printing them."""
    import keras  # noqa: F401

    log = logging.getLogger("kerasteps")
    if WARNINGS not in log.handlers:
        log.addHandler(WARNINGS)
        log.propagate = False


# -- 1. kill -9 during async saves ---------------------------------------------------
def scenario_kill(tmp: str, kills: int) -> str:
    import numpy as np

    from kerasteps.callbacks import StepCheckpoint
    from kerasteps.checkpoint._format import read_state
    from kerasteps.checkpoint.store import CheckpointStore

    keras_ready()
    ref_npz = os.path.join(tmp, "reference.npz")
    ref = Child.of(
        "kill", os.path.join(tmp, "ref"), str(KILL_STEPS), ref_npz, workdir=tmp
    )
    if ref.finish(timeout=400) != 0 or ref.line("TIMING") is None:
        raise Failed(f"the reference run failed: {tail(ref.stderr())}")
    first, per_step = map(float, ref.line("TIMING").split()[1:])
    reference: dict[int, dict[str, np.ndarray]] = {}
    with np.load(ref_npz) as saved:
        for name in saved.files:
            step, key = name.split(":", 1)
            reference.setdefault(int(step), {})[key.replace("|", "/")] = saved[name]
    lock = threading.Lock()  # Keras models, one thread at a time
    problems: list[str] = []
    rates = [per_step]  # seconds per step, as measured (the reference's is slower)

    def verify(directory: str, totals: dict[str, int]) -> int | None:
        """Checks every listed checkpoint; returns the newest step."""
        infos = StepCheckpoint.list_checkpoints(directory)
        for info in infos:
            try:
                arrays = read_state(info.path)
            except ValueError as error:
                problems.append(f"{info.name} does not verify: {error}")
                continue
            expected = reference.get(info.step, {})
            if sorted(arrays) != sorted(expected):
                problems.append(f"{info.name}: keys {sorted(arrays)} differ")
            for key, array in arrays.items():
                other = expected.get(key)
                same = other is not None and (
                    array.dtype == other.dtype
                    and array.shape == other.shape
                    and array.tobytes() == other.tobytes()
                )
                if not same:
                    problems.append(f"{info.name}: {key} differs from the reference")
            totals["verified"] += 1
        if not infos:
            return None
        with lock:
            try:
                CheckpointStore(directory).restore(kill_model(), infos[-1])
            except ValueError as error:
                problems.append(f"{infos[-1].name} does not restore: {error}")
        return infos[-1].step

    def chain(index: int, quota: int) -> dict[str, int]:
        names = ("kills", "aimed", "in flight", "verified", "resumes", "ran out")
        totals = dict.fromkeys(names, 0)
        directory, fresh, newest, attempts = None, 0, None, 0
        while totals["kills"] < quota and attempts < 3 * quota:
            attempts += 1
            if directory is None:
                fresh += 1
                directory = os.path.join(tmp, f"chain{index}-{fresh}")
                newest = None
            child = Child.of("kill", directory, str(KILL_STEPS), workdir=tmp)
            line = child.expect("TRAINING", timeout=300)
            if line is None:
                child.finish(timeout=60)
                problems.append(f"a run did not start: {tail(child.stderr())}")
                continue
            start = int(line.split()[1])
            if start != (newest or 0):
                problems.append(f"a run resumed at {start}, the newest was {newest}")
            elif newest:
                totals["resumes"] += 1
            # Uniform over the run's training time, at the pace the killed runs
            # were seen to train (a run that ended also spent time on its exit);
            # every other kill then waits on for a save in flight.
            delay = random.uniform(0, first + (KILL_STEPS - start) * median(rates))
            aimed = totals["kills"] % 2 == 1
            began = time.monotonic()
            try:
                child.proc.wait(timeout=delay)
                killed = False
            except subprocess.TimeoutExpired:
                if aimed:
                    _wait_for_a_save(directory, child.proc)
                killed = child.proc.poll() is None
                child.proc.send_signal(signal.SIGKILL)
            elapsed = time.monotonic() - began
            rc = child.finish(timeout=120)
            if not killed:
                totals["ran out"] += 1
                if rc != 0:
                    problems.append(f"a run ended {rc}: {tail(child.stderr())}")
                verify(directory, totals)
                directory = None  # trained to the end: start afresh
                continue
            totals["kills"] += 1
            totals["aimed"] += aimed
            names = os.listdir(directory) if os.path.isdir(directory) else []
            if any(n.startswith((".tmp-", ".trash-")) for n in names):
                totals["in flight"] += 1
            newest = verify(directory, totals)
            if newest is not None and newest - start > 5:
                rates.append(max(0.001, (elapsed - first) / (newest - start)))
            if newest is not None and newest >= 0.75 * KILL_STEPS:
                directory = None
        return totals

    quotas = [kills // PARALLEL + (i < kills % PARALLEL) for i in range(PARALLEL)]
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(chain, range(PARALLEL), quotas))
    totals = {key: sum(r[key] for r in results) for key in results[0]}
    seen = (
        f"{totals['kills']} kills ({totals['aimed']} aimed at a save in flight; "
        f"{totals['in flight']} left a save's .tmp-/.trash- folder), "
        f"{totals['verified']} checkpoints verified bit-identical to an uninterrupted "
        f"run, {totals['resumes']} resumes at the newest, "
        f"{totals['ran out']} runs ended before their kill, {len(problems)} "
        "mismatches"
    )
    if problems or totals["kills"] < kills:
        raise Failed(
            f"{seen}: {'; '.join(problems[:3])[:600]} (expected {kills} kills, "
            "no mismatch)"
        )
    return seen


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _wait_for_a_save(directory: str, process: subprocess.Popen) -> None:
    """Returns when a save's temporary folder is in `directory` (at most 2 s)."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError):
            if any(n.startswith((".tmp-", ".trash-")) for n in os.listdir(directory)):
                return
        time.sleep(0.001)


# -- pristine checkpoint directories (in this process) -------------------------------
def saved_directory(tmp: str, name: str, optimizer="sgd") -> Path:
    """`tmp/name` with the checkpoints of steps 2, 4, 6 of `small_model`."""
    from kerasteps.callbacks import StepCheckpoint

    directory = Path(tmp) / name
    model = small_model(optimizer=optimizer)
    fit_steps(model, 6, [StepCheckpoint(directory, every=2, keep=10)])
    return directory


def copy_of(saved: Path, tmp: str, case: str) -> Path:
    target = Path(tmp) / case / "ckpt"
    shutil.copytree(saved, target, symlinks=True)
    return target


def run_begins(directory: Path, model, steps: int = 1) -> None:
    """A run on `directory` (its start repairs the directory), saving nothing."""
    from kerasteps.callbacks import StepCheckpoint

    fit_steps(model, steps, [StepCheckpoint(directory, every=1000)])


def fallback_case(
    directory: Path, expected_step: int, named: str, words: tuple[str, ...]
) -> str | None:
    """Restores the newest, then begins a run: the problem, or None."""
    from kerasteps.callbacks import StepCheckpoint

    before = files_of(directory)
    with WARNINGS.collect() as messages:
        model = small_model(seed=1)
        step = StepCheckpoint.restore_latest(model, directory)
    hits = [m for m in messages if named in m and all(w in m for w in words)]
    problem = None
    if step != expected_step:
        problem = f"restored {step}, not {expected_step}"
    elif not hits:
        problem = f"no WARNING naming {named} with {words}: {messages}"
    run_begins(directory, model)
    gone = lost(before, files_of(directory), may_change=("checkpoint.json",))
    if gone:
        problem = f"{problem or ''} lost {gone}".strip()
    return problem


# -- 2. damaged state.h5 and index ----------------------------------------------------
def scenario_damaged(tmp: str) -> str:
    keras_ready()
    saved = saved_directory(tmp, "saved")

    def state(directory, how):
        path = directory / "ckpt-6" / "state.h5"
        data = bytearray(path.read_bytes())
        if how == "half":
            path.write_bytes(bytes(data[: len(data) // 2]))
        elif how == "flip":
            data[len(data) // 2] ^= 0xFF
            path.write_bytes(bytes(data))
        else:
            path.unlink()

    def index(directory, how):
        path = directory / "checkpoint.json"
        if how == "deleted":
            path.unlink()
        else:
            path.write_text({"garbage": "not json {[", "empty": ""}[how])

    cases = {
        "state.h5 half": (lambda d: state(d, "half"), 4, "ckpt-6", ("bytes",)),
        "state.h5 flipped": (lambda d: state(d, "flip"), 4, "ckpt-6", ("damaged",)),
        "state.h5 deleted": (lambda d: state(d, "del"), 4, "ckpt-6", ("missing",)),
        "index garbage": (lambda d: index(d, "garbage"), 6, "checkpoint.json", ()),
        "index empty": (lambda d: index(d, "empty"), 6, "checkpoint.json", ()),
        "index deleted": (lambda d: index(d, "deleted"), 6, "rebuilt", ()),
    }
    problems = []
    for case, (damage, step, named, words) in cases.items():
        directory = copy_of(saved, tmp, case.replace(" ", "-"))
        damage(directory)
        problem = fallback_case(directory, step, named, words)
        if problem:
            problems.append(f"{case}: {problem}")
    fail_if(
        problems,
        expected="the fallback or the rebuilt index, a WARNING naming it, "
        "nothing deleted",
    )
    return (
        "6/6 damages: state.h5 half/flipped/deleted restore step 4 with a WARNING "
        "naming ckpt-6; index garbage/empty/deleted restore step 6 with a WARNING; "
        "after a run began, every file is still there"
    )


# -- 3. paths outside the directory ---------------------------------------------------
def scenario_outside(tmp: str) -> str:
    from kerasteps.callbacks import StepCheckpoint
    from kerasteps.checkpoint.store import CheckpointStore

    keras_ready()
    observed, problems = [], []
    for entry in ("../victim", "ABSOLUTE", "", "../ckpt-1"):
        case = Path(tmp) / f"entry-{len(observed)}"
        (case / "victim").mkdir(parents=True)
        (case / "victim" / "precious.txt").write_text("keep me")
        (case / "beside.txt").write_text("keep me too")
        (case / "ckpt-1").mkdir()  # looks like a checkpoint, outside
        (case / "ckpt-1" / "state.h5").write_text("not yours")
        name = str(case / "victim") if entry == "ABSOLUTE" else entry
        directory = case / "ckpt"
        model = small_model()
        fit_steps(model, 2, [StepCheckpoint(directory, every=2, keep=1)])
        index = directory / "checkpoint.json"
        data = json.loads(index.read_text())
        data["checkpoints"].insert(0, {"name": name, "step": 1, "time": 0})
        index.write_text(json.dumps(data))
        outside = {k: v for k, v in files_of(case).items() if not k.startswith("ckpt/")}
        with WARNINGS.collect() as messages:
            fit_steps(model, 4, [StepCheckpoint(directory, every=2, keep=1)])
        after = files_of(case)
        steps = [i.step for i in StepCheckpoint.list_checkpoints(directory)]
        warned = any(
            "ignoring the index entry" in m and repr(name) in m for m in messages
        )
        if lost(outside, after) or steps != [6] or not warned:
            problems.append(
                f"entry {name!r}: lost {lost(outside, after)}, checkpoints {steps}, "
                f"warned {warned}"
            )
        observed.append({"ABSOLUTE": "an absolute path", "": '""'}.get(entry, entry))
    # Checkpoint folders that are symlinks to folders outside.
    case = Path(tmp) / "links"
    directory, outside_dir = case / "ckpt", case / "outside"
    model = small_model()
    fit_steps(model, 2, [StepCheckpoint(directory, every=2, keep=1)])
    other = small_model()
    fit_steps(other, 1)
    CheckpointStore(outside_dir / "store").save(other)  # complete, step 1
    (outside_dir / "empty").mkdir()
    (outside_dir / "junk").mkdir()
    (outside_dir / "junk" / "precious.txt").write_text("keep me")
    (outside_dir / "replaced").mkdir()
    (outside_dir / "replaced" / "precious.txt").write_text("keep me")
    links = {
        "ckpt-1": outside_dir / "store" / "ckpt-1",  # complete: adopted, rotated
        "ckpt-0": outside_dir / "empty",  # an empty folder: a run removes those
        "ckpt-3": outside_dir / "junk",  # incomplete: left alone
        "ckpt-4": outside_dir / "replaced",  # the run saves step 4 over it
    }
    for name, target in links.items():
        (directory / name).symlink_to(target, target_is_directory=True)
    before = files_of(outside_dir)
    error = None
    try:
        fit_steps(model, 4, [StepCheckpoint(directory, every=2, keep=1)])
    except Exception as caught:  # noqa: BLE001 - reported
        error = f"{type(caught).__name__}: {caught}"
    gone = lost(before, files_of(outside_dir))
    left = sorted(p.name for p in directory.iterdir())
    if gone or error:
        problems.append(f"symlinked ckpt-N: lost {gone}, error {error}")
    # A checkpoint directory that is itself a symlink.
    case = Path(tmp) / "linked-dir"
    (case / "real").mkdir(parents=True)
    (case / "real" / "notes.txt").write_text("keep me")
    (case / "beside.txt").write_text("keep me")
    (case / "link").symlink_to(case / "real", target_is_directory=True)
    sentinels = {k: v for k, v in files_of(case).items() if "ckpt" not in k}
    model = small_model()
    fit_steps(model, 4, [StepCheckpoint(case / "link", every=2, keep=1)])
    fit_steps(model, 4, [StepCheckpoint(case / "link", every=2, keep=1)])
    gone = lost(sentinels, files_of(case), may_change=("real/checkpoint.json",))
    listed = [i.step for i in StepCheckpoint.list_checkpoints(case / "link")]
    if gone or not (case / "link").is_symlink() or listed != [8]:
        problems.append(f"symlinked directory: lost {gone}, checkpoints {listed}")
    fail_if(problems, expected="nothing outside the directory removed or changed")
    return (
        f"entries {', '.join(observed)} ignored with a WARNING, rotation kept only "
        "ckpt-6, victim and files beside intact; ckpt-0/1/3/4 symlinked outside: "
        f"targets intact, directory now {left}; a symlinked checkpoint directory: "
        "rotated inside, nothing beside it touched"
    )


# -- 4. state.h5 of another model ----------------------------------------------------
def scenario_other_model(tmp: str) -> str:
    import numpy as np

    from kerasteps.callbacks import StepCheckpoint
    from kerasteps.checkpoint.store import CheckpointStore

    keras_ready()
    saved = saved_directory(tmp, "saved", optimizer="adam")
    observed, problems = [], []
    for label, kwargs in {
        "wider": {"units": 8},
        "extra layer": {"extra": True},
    }.items():
        other = small_model(optimizer="adam", **kwargs)
        fit_steps(other, 6)
        info = CheckpointStore(Path(tmp) / f"other-{len(observed)}").save(other)
        directory = copy_of(saved, tmp, f"case-{len(observed)}")
        target = directory / "ckpt-6"
        shutil.copy(info.state_file, target / "state.h5")
        meta = json.loads((target / "meta.json").read_text())
        other_meta = json.loads((Path(info.path) / "meta.json").read_text())
        meta["files"] = other_meta["files"]  # its size and CRC: it verifies
        (target / "meta.json").write_text(json.dumps(meta))
        model = small_model(seed=1, optimizer="adam")
        fit_steps(model, 3)
        variables = list(model.weights) + list(model.optimizer.variables)
        before = [np.array(v.numpy(), copy=True) for v in variables]
        try:
            StepCheckpoint.restore_checkpoint(model, target)
        except ValueError as error:
            message = str(error)
        else:
            problems.append(f"{label}: restored")
            continue
        keys = sorted(set(re.findall(r"(?:layers|optimizer)/[\w/]+", message)))
        after = [v.numpy() for v in list(model.weights) + model.optimizer.variables]
        same = len(after) == len(before) and all(
            a.tobytes() == b.tobytes() for a, b in zip(before, after, strict=True)
        )
        if not keys or not same:
            problems.append(f"{label}: keys {keys}, unchanged {same}: {message[:200]}")
        observed.append(f"{label}: ValueError naming {', '.join(keys[:3])}")
    fail_if(problems, expected="a ValueError naming the keys, the model unchanged")
    return "; ".join(observed) + "; the model's variables unchanged"


# -- 5. meta.json edited -------------------------------------------------------------
def scenario_meta(tmp: str) -> str:
    import keras

    from kerasteps.callbacks import LogEvery, StepCheckpoint

    keras_ready()
    saved = saved_directory(tmp, "saved")

    def record(meta, **change):
        return {**meta, "files": {"state.h5": {**meta["files"]["state.h5"], **change}}}

    other = "jax" if keras.backend.backend() != "jax" else "tensorflow"
    cases = {
        "crc": (lambda m: record(m, crc32="crc32:00000000"), 4, "crc32"),
        "bytes": (
            lambda m: record(m, bytes=m["files"]["state.h5"]["bytes"] + 1),
            4,
            "bytes",
        ),
        "step": (lambda m: {**m, "step": 5}, 4, "step 5"),
        "format": (
            lambda m: {**m, "format": "kerasteps.StepCheckpoint/9"},
            4,
            "format",
        ),
        "optimizer": (lambda m: {**m, "optimizers": {"optimizer": "Adam"}}, 4, "Adam"),
        "backend": (lambda m: {**m, "backend": other}, 6, None),
        "json-garbage": (lambda m: '{"step": 6, "files": {', 4, "meta.json"),
        "files-5": (lambda m: {**m, "files": {"state.h5": 5}}, 4, "state.h5"),
        "windows": (
            lambda m: {**m, "windows": {"Every(2)": {"loss": "x"}}},
            6,
            "windows in meta.json is malformed",
        ),
    }
    problems = []
    for case, (edit, expected, words) in cases.items():
        directory = copy_of(saved, tmp, case)
        meta_json = directory / "ckpt-6" / "meta.json"
        meta = edit(json.loads(meta_json.read_text()))
        meta_json.write_text(meta if isinstance(meta, str) else json.dumps(meta))
        before = files_of(directory)
        with WARNINGS.collect() as messages:
            model = small_model(seed=1)
            step = StepCheckpoint.restore_latest(model, directory)
        named = [m for m in messages if "ckpt-6" in m]
        if step != expected:
            problems.append(f"{case}: restored {step}, not {expected}: {messages}")
        elif words is None and named:
            problems.append(f"{case}: warned {named}")
        elif words is not None and not any(words in m for m in named):
            problems.append(
                f"{case}: no WARNING naming ckpt-6 with {words!r}: {messages}"
            )
        with WARNINGS.collect():
            x, y = tiny_data(8)
            model.fit(
                x,
                y,
                batch_size=2,
                verbose=0,
                shuffle=False,
                callbacks=[LogEvery(2), StepCheckpoint(directory, every=1000)],
            )
        if global_step(model) != expected + 4:
            problems.append(
                f"{case}: fit after the restore ended at {global_step(model)}"
            )
        gone = lost(before, files_of(directory), may_change=("checkpoint.json",))
        if gone:
            problems.append(f"{case}: lost {gone}")
    fail_if(
        problems, expected="the fallback with a WARNING naming why, nothing deleted"
    )
    return (
        "crc, bytes, step, format, optimizer, JSON garbage, files={state.h5: 5}: "
        "step 4 with a WARNING naming ckpt-6 and why; other backend: step 6, no "
        "WARNING; malformed windows: step 6, WARNING, fit ran on; nothing deleted"
    )


# -- 6. two processes at the same instant ---------------------------------------------
def scenario_two_processes(tmp: str, trials_each: int = 10) -> str:
    """Two processes, each a whole training script with TensorFlow imported, race
    for fresh directories `2 * trials_each` times: both build their run, then both
    are told `go` at once and call `fit()` (one process pair for all trials: a
    start of TensorFlow costs 10 s here)."""
    import socket

    counts = {"stale": 0, "none": 0, "owner unknown": 0}
    problems = []
    children = [Child.of("race", workdir=tmp, stdin=True) for _ in range(2)]
    try:
        for trial in range(2 * trials_each):
            mode = "stale" if trial % 2 == 0 else "none"
            problem = _race(tmp, trial, mode, children, counts, socket.gethostname())
            if problem:
                problems.append(problem)
            if any(c.proc.poll() is not None for c in children):
                problems.append(f"trial {trial}: a process ended")
                break
    finally:
        for child in children:
            with contextlib.suppress(OSError):
                child.send("exit\n")
            child.finish(timeout=60)
    seen = (
        f"{counts['stale']}/{trials_each} with a stale lock, {counts['none']}/"
        f"{trials_each} without: one trained, the other failed before training with "
        f"LockedError naming the winner's pid ({counts['owner unknown']} times "
        "owner unknown), each step logged once, no lock left"
    )
    if problems:
        raise Failed(f"{seen}; {'; '.join(problems[:3])[:600]} (expected all)")
    return seen


def _race(tmp, trial, mode, children, counts, host) -> str | None:
    """One trial of `scenario_two_processes`: the problem, or None."""
    workdir = Path(tmp) / f"trial-{trial}"
    workdir.mkdir()
    dead = dead_pid()
    if mode == "stale":
        owner = json.dumps({"host": host, "pid": dead, "time": 0})
        for sub in ("ckpt", "tb"):
            (workdir / sub).mkdir()
            (workdir / sub / ".kerasteps.lock").write_text(owner)
        (workdir / "log.jsonl.lock").write_text(owner)
    for child in children:
        child.send(f"prepare {workdir}\n")
    if not all(c.expect("ARMED", timeout=300) for c in children):
        return f"trial {trial}: a process did not arm"
    order = children if trial % 4 < 2 else children[::-1]
    for child in order:
        child.send("go\n")
    said = [c.expect_lines(("DONE", "LOCKED"), timeout=300) for c in children]
    ends = [lines[-1] if lines else "" for lines in said]
    why = f"trial {trial} ({mode}): {[e[:60] for e in ends]}"
    winners = [i for i, end in enumerate(ends) if end.startswith("DONE")]
    losers = [i for i, end in enumerate(ends) if end.startswith("LOCKED")]
    if len(winners) != 1 or len(losers) != 1:
        return why
    winner, loser = children[winners[0]], said[losers[0]]
    message = ends[losers[0]]
    trained = [ln for ln in loser if ln.startswith("STEP")]
    log = workdir / "log.jsonl"
    steps = [json.loads(ln)["step"] for ln in log.read_text().splitlines() if ln]
    left = [
        p
        for p in ("ckpt/.kerasteps.lock", "tb/.kerasteps.lock", "log.jsonl.lock")
        if (workdir / p).exists()
    ]
    unknown = "owner unknown" in message
    if not (f"pid {winner.pid}" in message or unknown) or f"pid {dead}" in message:
        return f"{why}: the error names {message[:200]!r}"
    if trained:
        return f"{why}: the loser trained {len(trained)} steps"
    if steps != list(range(1, 41)):
        return f"{why}: the JSON lines hold steps {steps}"
    if left:
        return f"{why}: locks left {left}"
    counts[mode] += 1
    counts["owner unknown"] += unknown
    return None


# -- 7. signals ---------------------------------------------------------------------
def scenario_signals(tmp: str) -> str:
    from kerasteps.callbacks import StepCheckpoint
    from kerasteps.checkpoint._format import read_state
    from kerasteps.checkpoint.store import CheckpointStore

    keras_ready()
    lock = threading.Lock()
    total = 40

    def case(sig: signal.Signals, where: str) -> tuple[str | None, str]:
        """The problem (or None) and what was seen."""
        name = f"{sig.name} at {where}"
        workdir = Path(tmp) / f"{sig.name}-{where}"
        workdir.mkdir()
        child = Child.of("signal", str(workdir), where, str(total), workdir=tmp)
        if child.expect("SIGNAL-NOW", timeout=300) is None:
            child.finish(timeout=60)
            return f"{name}: no SIGNAL-NOW: {tail(child.stderr())}", name
        child.proc.send_signal(sig)
        rc = child.finish(timeout=120)
        result = json.loads((child.line("RESULT") or "RESULT {}").split(" ", 1)[1])
        directory = workdir / "ckpt"
        names = [p.name for p in directory.iterdir()] if directory.is_dir() else []
        leftovers = [n for n in names if n.startswith((".tmp-", ".kerasteps.lock"))]
        if (workdir / "log.jsonl.lock").exists():
            leftovers.append("log.jsonl.lock")
        infos = StepCheckpoint.list_checkpoints(directory)
        problems = []
        if rc not in (128 + sig, 0) or (rc == 0 and where != "end"):
            problems.append(f"exit {rc}: {tail(child.stderr())}")
        if leftovers:
            problems.append(f"left {leftovers}")
        if not infos or infos[-1].step != result.get("final"):
            problems.append(f"checkpoints {[i.step for i in infos]}, final {result}")
        for info in infos:
            try:
                read_state(info.path)
                with lock:
                    CheckpointStore(directory).restore(
                        small_model(seed=1, optimizer="adam"), info
                    )
            except ValueError as error:
                problems.append(f"{info.name} does not restore: {error}")
        newest = infos[-1].step if infos else None
        resumed = Child.of(
            "signal", str(workdir), "none", str(total), "resume", workdir=tmp
        )
        rc2 = resumed.finish(timeout=300)
        start = resumed.line("START")
        if rc2 != 0 or start != f"START {newest}":
            problems.append(f"the next run: exit {rc2}, {start} (newest {newest})")
        log = workdir / "log.jsonl"
        steps = [json.loads(ln)["step"] for ln in log.read_text().splitlines() if ln]
        if steps != sorted(set(steps)):
            problems.append(f"the JSON lines hold steps {steps}")
        seen = f"{name}: exit {rc}, saved {newest}, next run {start}"
        return (f"{name}: {'; '.join(problems)}" if problems else None), seen

    cases = [
        (s, w) for s in (signal.SIGTERM, signal.SIGINT) for w in ("begin", "mid", "end")
    ]
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda c: case(*c), cases))
    problems = [problem for problem, _ in results if problem]
    seen = "; ".join(seen for _, seen in results)
    fail_if(
        problems,
        expected="exit 128+signal, a checkpoint of the last step, nothing left, "
        "a resume at it",
    )
    return (
        f"{seen}; no lock or .tmp- left, every checkpoint restores, JSON lines "
        "without a repeated step"
    )


# -- 8. a full disk -----------------------------------------------------------------
def scenario_full_disk(tmp: str, runs: int = 20) -> str:
    from kerasteps.callbacks import StepCheckpoint
    from kerasteps.checkpoint._format import read_state

    keras_ready()
    probe = Path(tmp) / "probe"
    probe.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(probe)],
        capture_output=True,
        text=True,
    )
    can_fill = mounted.returncode == 0
    if can_fill:
        subprocess.run(["umount", str(probe)], check=True)
    rng = random.Random(27)
    plans = [
        ("fill" if can_fill and i % 2 else "rlimit", rng.randint(6, 19))
        for i in range(runs)
    ]
    errors: dict[str, int] = {}  # the disk errors named, by message
    counting = threading.Lock()

    def run(i: int) -> str | None:
        how, full_at = plans[i]
        base = Path(tmp) / f"run-{i}"
        base.mkdir()
        if how == "fill":
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(base)],
                check=True,
            )
        try:
            directory = base / "ckpt"
            done = subprocess.run(
                [
                    sys.executable,
                    str(FULL_DISK),
                    "--directory",
                    str(directory),
                    "--full-at",
                    str(full_at),
                    "--how",
                    how,
                ],
                capture_output=True,
                text=True,
                env=ENV,
                timeout=300,
            )
            out = done.stdout
            line = next(
                (ln for ln in out.splitlines() if ln.startswith("DISK ERROR")), ""
            )
            committed = next(
                (
                    ln.split()[1:]
                    for ln in out.splitlines()
                    if ln.startswith("COMMITTED")
                ),
                [],
            )
            restored = [
                ln.split()[1] for ln in out.splitlines() if ln.startswith("RESTORED")
            ]
            label = f"{how} at {full_at}"
            if done.returncode != 3:
                return f"{label}: exit {done.returncode}: {tail(done.stderr)}"
            if not re.search(r"Errno (27|28)\] (File too large|No space left)", line):
                return f"{label}: {line!r}"
            with counting:
                message = line.split("] ", 1)[-1]
                errors[message] = errors.get(message, 0) + 1
            if not committed or restored != committed:
                return f"{label}: committed {committed}, restored {restored}"
            for info in StepCheckpoint.list_checkpoints(directory):
                read_state(info.path)
            leftovers = [
                p.name for p in directory.iterdir() if p.name.startswith(".tmp-")
            ]
            if leftovers:
                return f"{label}: left {leftovers}"
            return None
        except (ValueError, OSError, subprocess.TimeoutExpired) as error:
            return f"{how} at {full_at}: {type(error).__name__}: {error}"
        finally:
            if how == "fill":
                subprocess.run(["umount", str(base)], check=False)

    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        problems = [p for p in pool.map(run, range(runs)) if p]
    fills = sum(how == "fill" for how, _ in plans)
    seen = (
        f"{runs - len(problems)}/{runs} runs ({runs - fills} rlimit, {fills} fill on "
        f"a 4 MiB tmpfs{'' if can_fill else ': mount refused'}) exited 3 naming "
        f"{', '.join(f'{k!r} x{v}' for k, v in sorted(errors.items()))}; every "
        "committed checkpoint restored, no .tmp- left"
    )
    if problems:
        raise Failed(
            f"{seen}; {'; '.join(problems[:3])[:600]} (expected exit 3, never a signal)"
        )
    return seen


# -- 9. the launcher's hostile arguments ---------------------------------------------
def _event_record(data: bytes) -> bytes:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _event_file(path: Path, step: int, damaged: bool) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    value = summary_pb2.Summary.Value(tag="loss", simple_value=0.5)
    event = event_pb2.Event(
        step=step, wall_time=1.0, summary=summary_pb2.Summary(value=[value])
    )
    first = event_pb2.Event(file_version="brain.Event:2", wall_time=1.0)
    body = _event_record(first.SerializeToString())
    body += _event_record(event.SerializeToString())
    if damaged:
        header = struct.pack("<Q", 2**40)
        body += header + struct.pack("<I", masked_crc32c(header)) + b"x" * 64
    path.parent.mkdir(parents=True)
    path.write_bytes(body)


def scenario_launcher(tmp: str) -> str:
    logs = Path(tmp) / "logs"
    bad = logs / "bad" / "events.out.tfevents.1.host"
    _event_file(bad, 1, damaged=True)
    _event_file(logs / "good" / "events.out.tfevents.1.host", 10, damaged=False)
    commands = {
        "run --log-dir /proc/x": ["run", "global_step", "--log-dir", "/proc/x"],
        "run --log-dir /": ["run", "global_step", "--log-dir", "/"],
        "summary /": ["summary", "/"],
        "summary DIR": ["summary", str(logs)],
    }

    def launch(args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kerasteps.cli", *args],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=300,
            cwd=tmp,
        )

    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        results = dict(zip(commands, pool.map(launch, commands.values()), strict=True))
    observed, problems = [], []
    for name, done in results.items():
        both = done.stdout + done.stderr
        errors = [ln for ln in both.splitlines() if ln.startswith("Error:")]
        if "Traceback" in both:
            problems.append(f"{name}: a traceback: {tail(both)}")
        elif name != "summary DIR":
            if done.returncode != 2 or len(errors) != 1:
                problems.append(
                    f"{name}: exit {done.returncode}, {errors or tail(both)}"
                )
            else:
                observed.append(f"{name}: exit 2, {errors[0][:70]!r}...")
        else:
            named = [ln for ln in done.stderr.splitlines() if str(bad) in ln]
            rows = [ln.split()[:4] for ln in done.stdout.splitlines()[1:]]
            if done.returncode != 0 or len(named) != 1 or "damaged" not in named[0]:
                problems.append(
                    f"{name}: exit {done.returncode}, lines naming the "
                    f"file {named}, stderr {tail(done.stderr)}"
                )
            elif rows != [["bad", "loss", "1", "1"], ["good", "loss", "1", "10"]]:
                problems.append(f"{name}: rows {rows}")
            else:
                observed.append(
                    f"{name}: exit 0, one WARNING {named[0][:90]!r}..., "
                    "both runs listed"
                )
    fail_if(
        problems,
        expected="exit 2 with one Error: line, or exit 0 with one WARNING "
        "naming the file",
    )
    return "; ".join(observed)


# -- main -----------------------------------------------------------------------------
SCENARIOS: dict[str, Callable[..., str]] = {
    "kill-9": scenario_kill,
    "damaged-checkpoint": scenario_damaged,
    "outside-paths": scenario_outside,
    "other-model": scenario_other_model,
    "meta-json": scenario_meta,
    "two-processes": scenario_two_processes,
    "signals": scenario_signals,
    "full-disk": scenario_full_disk,
    "launcher": scenario_launcher,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        return child_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(SCENARIOS),
        metavar="NAME",
        help=f"run only these: {', '.join(SCENARIOS)}",
    )
    parser.add_argument("--kills", type=int, default=20, help="kills of kill-9")
    args = parser.parse_args(argv)
    os.environ.update(
        {k: ENV[k] for k in ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES")}
    )
    names = args.only or list(SCENARIOS)
    held = 0
    began = time.monotonic()
    for name in names:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(
            prefix=f"adversarial-{name}-", ignore_cleanup_errors=True
        ) as tmp:
            try:
                kwargs = {"kills": args.kills} if name == "kill-9" else {}
                seen = SCENARIOS[name](tmp, **kwargs)
            except Failed as failure:
                line = f"FAIL {name}: {failure}"
            except Exception as error:  # noqa: BLE001 - a scenario that broke
                line = f"FAIL {name}: {type(error).__name__}: {error} (expected none)"
            else:
                held += 1
                line = f"PASS {name}: {seen}"
        print(f"{line} [{time.monotonic() - started:.0f} s]", flush=True)
    print(
        f"{held}/{len(names)} scenarios held ({time.monotonic() - began:.0f} s)",
        flush=True,
    )
    return 0 if held == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
