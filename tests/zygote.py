"""Python subprocesses forked from one that has imported Keras already.

A test that trains in a subprocess (to kill it, to resume it, to run a script as a
user would) spent most of its CPU time starting Python: importing TensorFlow, Keras
and kerasteps costs 6 to 9 CPU-seconds a process here, and the suite starts about a
hundred. `Popen` here is `subprocess.Popen` whose child, when it can be, is forked
from a *zygote*: a Python started once per pytest worker (and per environment) that
has imported Keras, its backend and kerasteps (through `kerasteps.quiet_startup()`,
as the recipes start) and then waits. The child is a process of its own (its own pid,
memory, file descriptors, signals; it can be killed with SIGKILL mid-write) and is
this process's child, so `wait`, `poll`, `kill`, `communicate` and the return code
behave as with a fresh Python.

What a forked child cannot reproduce, and where `Popen` therefore starts a fresh
Python instead: an interpreter option (`-u`, `-X`, ...), a `preexec_fn` (but
`as_in_a_terminal`), `pass_fds`, `user`, `group`, `umask`. A terminal for a standard
stream is reproduced: a new Python line-buffers its stdin and stdout when they are
terminals (stderr always), unless unbuffered, and a child whose streams are
terminals does the same to the zygote's. An environment
that differs from the zygote's in a variable read while Python and those modules
start (`IMPORT_TIME`, except `LATE`) gets a zygote started with it. The zygote frees
its garbage and freezes what is left (`gc.freeze()`) before it forks: a child's exit
then takes 0.4 CPU-s instead of 1.5. What a test checks about a Python's start
itself (the lines TensorFlow prints, which modules `import kerasteps` loads,
warnings at import) runs with `subprocess` instead.

Example:

>>> import sys
>>> from tests import zygote
>>> zygote.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
...            text=True).stdout
'42\\n'
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

#: Environment variables read while Python, TensorFlow, JAX, Keras or kerasteps
#: start (by prefix): a child runs in a zygote started with the same values.
IMPORT_TIME = (
    "PYTHON",
    "KERAS",
    "TF_",
    "JAX_",
    "XLA_",
    "CUDA",
    "TORCH",
    "OMP_",
    "MKL",
    "OPENBLAS",
    "LD_",
    "HOME",
)
#: Of those, the ones read only later, when a program uses them.
LATE = frozenset({"TF_CONFIG", "KERASTEPS_CRASH_AT"})
#: What the zygote imports before it waits.
PRELOAD = (
    "import kerasteps; kerasteps.quiet_startup(); import kerasteps.callbacks; "
    "import gc; gc.collect(); gc.freeze()"
)
#: Signals whose disposition a new Python inherits when it is ignored.
_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
_PR_SET_CHILD_SUBREAPER = 36


def as_in_a_terminal() -> None:
    """A `preexec_fn` that gives the child SIGINT as a terminal gives it: a suite
    started in the background (`cmd &`) has it ignored, and a Python started with it
    ignored installs no `KeyboardInterrupt` handler. A forked child gets the same."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _key(env: dict[str, str]) -> tuple:
    read = [(k, v) for k, v in env.items() if k.startswith(IMPORT_TIME)]
    return tuple(sorted((k, v) for k, v in read if k not in LATE))


def _program(args: list) -> list[str] | None:
    """The program part of a Python command line (`script ...`, `-m mod ...` or
    `-c code ...`), or None when the command is not one a zygote can run."""
    if not args or os.fspath(args[0]) != sys.executable or len(args) < 2:
        return None
    rest = [os.fspath(a) for a in args[1:]]
    if rest[0] in ("-m", "-c"):
        return rest if len(rest) >= 2 else None
    return None if rest[0].startswith("-") else rest


class _Zygote:
    """One zygote process and the socket to it."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket = ours
        self.stderr = tempfile.TemporaryFile()  # what it prints, for an error
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())],
            env=env,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            cwd="/",
        )
        theirs.close()

    def fork(self, request: dict, fds: list[int]) -> int:
        """Sends one request with its three standard streams; returns the pid of the
        child, which is already this process's child when this returns."""
        payload = json.dumps(request).encode()
        reply = b""
        try:
            message = [len(payload).to_bytes(8, "big") + payload]
            socket.send_fds(self.socket, message, fds)
            while not reply.endswith(b"\n"):
                chunk = self.socket.recv(64)
                reply += chunk
                if not chunk:
                    raise ConnectionError("it closed its socket")
        except OSError as error:
            self.stderr.seek(0)
            said = self.stderr.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"the zygote ended ({error}):\n{said}") from None
        return int(reply)


_zygotes: dict[tuple, _Zygote] = {}
_lock = threading.Lock()
#: Linux only: a child is handed to this process by `PR_SET_CHILD_SUBREAPER`.
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


@atexit.register
def _end() -> None:
    """Closes the zygotes' sockets (each zygote exits at that) and reaps them."""
    for zygote in _zygotes.values():
        zygote.socket.close()
        zygote.process.wait(timeout=60)


class Popen(subprocess.Popen):
    """`subprocess.Popen` whose Python child is forked from a zygote when it can be
    (see the module's docstring), else started as `subprocess.Popen` does."""

    forked = False

    def _execute_child(  # noqa: PLR0913 (subprocess's own signature)
        self,
        args,
        executable,
        preexec_fn,
        close_fds,
        pass_fds,
        cwd,
        env,
        startupinfo,
        creationflags,
        shell,
        p2cread,
        p2cwrite,
        c2pread,
        c2pwrite,
        errread,
        errwrite,
        restore_signals,
        *rest,
    ):
        gid, gids, uid, umask, start_new_session, process_group = rest
        program = None if shell or isinstance(args, (str, bytes)) else _program(args)
        fds = [p2cread, c2pwrite, errwrite]
        fds = [fd if fd != -1 else i for i, fd in enumerate(fds)]
        if (
            program is None
            or _libc is None
            or executable is not None
            or preexec_fn not in (None, as_in_a_terminal)
            or pass_fds
            or (gid, gids, uid) != (None, None, None)
            or umask != -1
        ):
            return super()._execute_child(
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                c2pwrite, errread, errwrite, restore_signals, *rest,
            )  # fmt: skip
        env = dict(os.environ if env is None else env)
        request = {
            "program": program,
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "env": env,
            "session": bool(start_new_session),
            "group": process_group if process_group is not None else -1,
            "ignored": [
                name
                for name in _SIGNALS
                if signal.getsignal(getattr(signal, name)) == signal.SIG_IGN
                and not (name == "SIGINT" and preexec_fn is as_in_a_terminal)
            ],
        }
        with _lock:
            key = _key(env)
            if key not in _zygotes or _zygotes[key].process.poll() is not None:
                _zygotes[key] = _Zygote(env)
            # The child's parent (forked by the zygote) exits once it has forked the
            # child; a subreaper gets the orphan, so it is this process's child.
            if _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
            try:
                self.pid = _zygotes[key].fork(request, fds)
            finally:
                _libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        try:  # a child of another process would read as exit status 0 to `wait`
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            raise RuntimeError(f"the forked child {self.pid} is not ours") from None
        self._child_created = True
        self.forked = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)


def run(args: list, *, timeout: float | None = None, check: bool = False, **kwargs):
    """`subprocess.run` with this module's `Popen`."""
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    input_ = kwargs.pop("input", None)
    if input_ is not None:
        kwargs["stdin"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input_, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
    done = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


# -- the zygote's side -----------------------------------------------------------------
def _serve(channel: socket.socket) -> dict:
    """Forks a child per request until the socket closes; returns the request in
    the child (which then runs it), exits in the zygote."""
    while True:
        head, fds, _, _ = socket.recv_fds(channel, 8, 3)
        if not head:
            os._exit(0)
        size = int.from_bytes(head, "big")
        payload = b""
        while len(payload) < size:
            payload += channel.recv(size - len(payload))
        request = json.loads(payload)
        read, write = os.pipe()
        middle = os.fork()
        if middle == 0:  # the child's parent: forks it, says its pid, exits
            os.close(read)
            child = os.fork()
            if child == 0:
                os.close(write)
                channel.close()
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                for fd in set(fds):
                    if fd > 2:
                        os.close(fd)
                return request
            os.write(write, f"{child}\n".encode())
            os._exit(0)
        os.close(write)
        for fd in fds:
            os.close(fd)
        with os.fdopen(read, "rb") as pipe:
            child = pipe.read()
        os.waitpid(middle, 0)  # its child is reparented before it is reaped
        channel.sendall(child)


def _become(request: dict) -> None:
    """Makes this forked process the program of `request`, as a new Python would
    start it, and runs it; the interpreter's exit follows as it would there."""
    import runpy
    import types

    if request["session"]:
        os.setsid()
    elif request["group"] != -1:
        os.setpgid(0, request["group"])
    for name in _SIGNALS:
        number = getattr(signal, name)
        if name in request["ignored"]:
            signal.signal(number, signal.SIG_IGN)
        elif name == "SIGINT":
            signal.signal(number, signal.default_int_handler)
        else:
            signal.signal(number, signal.SIG_DFL)
    # A new Python line-buffers a buffered stdin or stdout on a terminal (its
    # stderr always is); the zygote started with both on /dev/null.
    if not sys.stderr.write_through:  # buffered: `PYTHONUNBUFFERED` was not set
        for stream in (sys.stdin, sys.stdout):
            if stream is not None and os.isatty(stream.fileno()):
                stream.reconfigure(line_buffering=True)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "numpy" in sys.modules:  # a new Python seeds it afresh
        sys.modules["numpy"].random.seed()
    program = request["program"]
    if program[0] == "-m":
        sys.argv = program[1:]
        sys.path[0] = os.getcwd()
        name = program[1]
        if hasattr(sys.modules.get(name), "__path__"):  # a package runs its __main__
            name += ".__main__"
        sys.modules.pop(name, None)  # imported by the zygote, not by this program
        runpy._run_module_as_main(program[1], alter_argv=True)
        return
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    if program[0] == "-c":
        sys.argv = ["-c", *program[2:]]
        sys.path[0] = ""
        code = compile(program[1], "<string>", "exec")
    else:
        sys.argv = program
        path = Path(program[0])
        sys.path[0] = str(path.resolve().parent)
        main.__file__ = str(path)
        code = compile(path.read_bytes(), str(path), "exec")
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


if __name__ == "__main__":
    _channel = socket.socket(fileno=int(sys.argv[1]))
    exec(PRELOAD)
    _become(_serve(_channel))
