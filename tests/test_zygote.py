"""tests/zygote.py: a forked child behaves as a new Python started with the same
command line, environment, folder, streams and signals would, and is this process's
child; what it cannot reproduce starts a new Python instead."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests import zygote
from tests.helpers import script_environment

SHOW = (
    "import json, os, signal, sys\n"
    "print(json.dumps({'argv': sys.argv, 'cwd': os.getcwd(), 'path0': sys.path[0],"
    " 'main': __name__, 'env': os.environ.get('EXTRA'),"
    " 'sigint': str(signal.getsignal(signal.SIGINT)),"
    " 'keras': 'keras' in sys.modules}))\n"
)


def shown(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_a_script_runs_as_main_with_its_argv_folder_and_environment(tmp_path):
    script = tmp_path / "show.py"
    script.write_text(SHOW)
    (tmp_path / "here").mkdir()
    process = zygote.Popen(
        [sys.executable, str(script), "a", "b"],
        cwd=tmp_path / "here",
        env=script_environment(EXTRA="x"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = process.communicate(timeout=120)
    assert process.forked and process.returncode == 0, err
    got = json.loads(out)
    assert got["argv"] == [str(script), "a", "b"]
    assert got["cwd"] == str(tmp_path / "here")
    assert got["path0"] == str(tmp_path)
    assert got["main"] == "__main__"
    assert got["env"] == "x"
    assert got["keras"] is True  # imported before the fork: what it saves


def test_code_and_modules_run_with_their_argv(tmp_path):
    code = zygote.run(
        [sys.executable, "-c", SHOW, "x"],
        cwd=tmp_path,
        env=script_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown(code)["argv"] == ["-c", "x"] and shown(code)["path0"] == ""
    module = zygote.run(
        [sys.executable, "-m", "kerasteps.cli", "list"],
        env=script_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert module.returncode == 0, module.stderr
    assert module.stdout.split()[0] == "batch_vs_sgd"
    assert "RuntimeWarning" not in module.stderr


def test_exit_codes_tracebacks_and_sigkill_are_a_new_pythons():
    env = script_environment()
    ended = zygote.run(
        [sys.executable, "-c", "raise SystemExit(3)"], env=env, timeout=120
    )
    assert ended.returncode == 3
    failed = zygote.run(
        [sys.executable, "-c", "raise ValueError('no')"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == "ValueError: no"
    process = zygote.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.forked
    assert process.stdout.readline() == "up\n"
    process.kill()
    # Its status reaches this process: it is its child, not the zygote's.
    assert process.wait(timeout=30) == -signal.SIGKILL
    process.stdout.close()


def test_atexit_handlers_and_threads_run_to_the_end_as_in_a_new_python():
    code = (
        "import atexit, threading, time\n"
        "atexit.register(print, 'atexit')\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread'))).start()\n"
    )
    result = zygote.run(
        [sys.executable, "-c", code],
        env=script_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.splitlines() == ["thread", "atexit"]


def test_sigint_is_what_a_new_python_would_have():
    env = script_environment()
    command = [sys.executable, "-c", SHOW]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a suite run with `&`
    try:
        ignored = zygote.run(command, env=env, capture_output=True, text=True)
        given = zygote.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            preexec_fn=zygote.as_in_a_terminal,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert shown(ignored)["sigint"] == str(signal.SIG_IGN)
    assert shown(given)["sigint"] == str(signal.default_int_handler)


STREAMS = (
    "import json, sys\n"
    "json.dump({name: [s.isatty(), s.line_buffering, s.write_through, s.encoding,"
    " s.errors, type(s.buffer).__name__] for name, s in"
    " [('stdin', sys.stdin), ('stdout', sys.stdout), ('stderr', sys.stderr)]},"
    " open(sys.argv[1], 'w'))\n"
)


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_streams_on_a_terminal_are_a_new_pythons(tmp_path, unbuffered):
    """stdin and stdout on a terminal: line-buffered as a new Python makes them
    (unless unbuffered), which the zygote's, started on /dev/null, were not."""
    env = script_environment()
    if not unbuffered:
        del env["PYTHONUNBUFFERED"]
    found = {}
    for name, popen in (("new", subprocess.Popen), ("forked", zygote.Popen)):
        master, slave = os.openpty()
        try:
            process = popen(
                [sys.executable, "-c", STREAMS, str(tmp_path / name)],
                stdin=slave,
                stdout=slave,
                stderr=subprocess.PIPE,
                env=env,
            )
            assert process.wait(timeout=120) == 0, process.stderr.read()
        finally:
            os.close(slave)
            os.close(master)
        assert getattr(process, "forked", False) is (name == "forked")
        found[name] = json.loads((tmp_path / name).read_text())
    assert found["forked"] == found["new"]
    assert found["new"]["stdout"][:3] == [True, not unbuffered, unbuffered]
    assert found["new"]["stderr"][:3] == [False, not unbuffered, unbuffered]


@pytest.mark.parametrize(
    "change",
    [
        {"args": ["-u", "-c", "print(1)"]},
        {"preexec_fn": os.getpid},
    ],
    ids=["interpreter-option", "preexec_fn"],
)
def test_what_a_fork_cannot_reproduce_starts_a_new_python(change):
    args = change.get("args", ["-c", "print(1)"])
    env = script_environment(**change.get("env", {}))
    process = zygote.Popen(
        [sys.executable, *args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=change.get("preexec_fn"),
    )
    assert process.communicate(timeout=120)[0] == "1\n"
    assert process.forked is False


def test_the_variables_read_at_start_up_choose_the_zygote():
    """A child runs in a zygote started with the same values of what Python,
    TensorFlow, JAX, Keras and kerasteps read as they start; what a program reads
    later (a cluster's TF_CONFIG, a crash point) does not need a zygote of its own."""
    env = script_environment()
    same = {**env, "TF_CONFIG": "{}", "KERASTEPS_CRASH_AT": "save@5", "MLFLOW_X": "1"}
    assert zygote._key(same) == zygote._key(env)
    for name, value in [
        ("PYTHONHASHSEED", "7"),
        ("KERAS_BACKEND", "jax"),
        ("TF_CPP_MIN_LOG_LEVEL", "0"),
        ("XLA_FLAGS", "--xla_force_host_platform_device_count=4"),
        ("KERASTEPS_VERBOSE", "1"),
    ]:
        assert zygote._key({**env, name: value}) != zygote._key(env), name
