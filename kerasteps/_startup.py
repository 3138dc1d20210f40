"""Start Keras and TensorFlow without TensorFlow's start-up log lines (private).

Importing TensorFlow prints, from C++ and before its logging is initialized, lines
such as

```
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796094628.505709   23500 port.cc:153] oneDNN custom operations are on...
E0000 00:00:1796094632.536254   23500 cuda_platform.cc:52] failed call to cuInit: ...
```

twice (two of its libraries each print them), and the last one when the devices are
listed. `TF_CPP_MIN_LOG_LEVEL`, `ABSL_MIN_LOG_LEVEL` and `GLOG_minloglevel` do not
reach these lines. What does: point file descriptor 2 at a temporary file while
TensorFlow is imported and its devices are listed, then write back to the real stderr
every captured line that is not one of these (a Python warning, a real error). After
that, `TF_CPP_MIN_LOG_LEVEL=1` (set unless the environment sets it) keeps TensorFlow's
later INFO lines (XLA's "Compiled cluster using XLA!") away; its warnings and errors
still show.

`KERASTEPS_VERBOSE=1` in the environment (the recipes' `--verbose`) turns all of
this off: TensorFlow prints what it prints.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator

#: Environment variable: `1` keeps TensorFlow's start-up lines.
VERBOSE_ENV = "KERASTEPS_VERBOSE"

_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are "
    r"written to STDERR"
    # glog INFO and WARNING lines: "I0000 00:00:1796094628.505709   23500 port.cc:153]"
    r"|[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] .*"
    # the GPU-less machine's "errors": no CUDA driver, no CUDA library to register
    r"|E\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] .*"
    r"(cuInit|cuda_platform|Unable to register cu(DNN|FFT|BLAS)).*"
    # TensorFlow <= 2.20's own (TSL) format: "2026-12-02 04:21:33.087705: E path:51] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IW] \S+:\d+\] .*"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: E \S+:\d+\] .*"
    r"(cuInit|cuda_platform|Unable to register cu(DNN|FFT|BLAS)).*"
    # the second line of cpu_feature_guard's INFO message
    r"|To enable the following instructions: .*rebuild TensorFlow with the "
    r"appropriate compiler flags\."
)


def verbose() -> bool:
    """Whether TensorFlow's start-up lines are kept (`KERASTEPS_VERBOSE=1`)."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes")


def is_noise(line: str) -> bool:
    """Whether one line of stderr is one of TensorFlow's start-up lines.

    Example:

    >>> from kerasteps._startup import is_noise
    >>> is_noise("I0000 00:00:1796094628.505709   23500 port.cc:153] oneDNN on.")
    True
    >>> is_noise("UserWarning: something the user should read")
    False
    """
    return _NOISE.fullmatch(line.rstrip("\r\n")) is not None


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """Holds back TensorFlow's start-up lines written to stderr inside the block.

    Everything written to file descriptor 2 inside the block (by C++ or Python) is
    written to the real stderr when the block ends, in order, without the lines
    `is_noise` matches; if the block raises, all of it is written back. Inside the
    block nothing reaches the terminal, so keep the block short (imports).
    With `KERASTEPS_VERBOSE=1`, or when fd 2 cannot be redirected, it does nothing.
    """
    if verbose():
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, AttributeError, ValueError):
        yield
        return
    capture = tempfile.TemporaryFile()
    failed = True
    try:
        os.dup2(capture.fileno(), 2)
        yield
        failed = False
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        capture.seek(0)
        text = capture.read().decode("utf-8", errors="replace")
        capture.close()
        lines = text.splitlines(keepends=True)
        kept = lines if failed else [line for line in lines if not is_noise(line)]
        if kept:
            sys.stderr.write("".join(kept))
            sys.stderr.flush()


def installed(name: str) -> bool:
    """Whether the module `name` can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def quiet_startup(keras: bool = True) -> None:
    """Imports TensorFlow (and Keras) without TensorFlow's start-up log lines.

    Call it before the first `import keras` or `import tensorflow` of a program;
    later imports of them are then free and print nothing. It imports Keras and
    its backend, then TensorFlow when it is installed, whatever the Keras backend
    (kerasteps's TensorBoard writer and `tf.data` pipelines use it), and lists its
    devices (which prints the cuInit line on a machine without a GPU); and sets
    `TF_CPP_MIN_LOG_LEVEL=1` unless the environment sets it. Any other line
    written meanwhile (a Python warning, an error) is still shown.
    Called again, or after TensorFlow was imported, it only imports what is
    missing. With `KERASTEPS_VERBOSE=1` it only imports.

    Args:
        keras: Bool, default True. Import Keras too (False: only TensorFlow).

    Example:

    >>> import kerasteps
    >>> kerasteps.quiet_startup()  # before `import keras` in a script
    >>> import keras  # already imported: nothing printed
    """
    if not verbose():
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    with filtered_stderr():
        fresh = installed("tensorflow") and "tensorflow" not in sys.modules
        # Keras first: with PyTorch's CUDA wheel (torch 2.14.1+cu130 beside
        # TensorFlow 2.21, no GPU) the process crashes (SIGSEGV in
        # `torch.cuda.is_available()`, which Keras's torch backend calls at import)
        # once TensorFlow has listed its devices; the other order runs.
        if keras:
            importlib.import_module("keras")
        if fresh:
            tensorflow = importlib.import_module("tensorflow")
            tensorflow.config.list_physical_devices()
