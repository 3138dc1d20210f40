"""Kill -9 at seeded random instants, resume, and compare with an uninterrupted run.

The script of docs/choosing-the-model.md (a run that keeps the 2 best checkpoints,
cuts the learning rate on a plateau and stops early) runs once uninterrupted, then
`--kills` times in a fresh folder: killed with SIGKILL a seeded random time after its
training began (its checkpoint folder appeared), then run again until it ends. Each
resumed run must print the same lines (stop step and reason, cuts, checkpoints kept,
the restored best `val_loss`) and leave the same checkpoints, the same best table and
the same best weights, bitwise (a run killed after its final checkpoint, stopped
already, prints the line that says so, as the uninterrupted run does when run
again). The CI tests kill at three chosen instants
(tests/callbacks/test_choosing_the_model.py); this sweep, run by hand, at many.

Usage:

    python benchmarks/kill_sweep.py [--kills 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = re.search(
    r"```python\n(.*?)```", (ROOT / "docs" / "choosing-the-model.md").read_text(), re.S
).group(1)
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def start(folder: Path) -> subprocess.Popen:
    (folder / "choose.py").write_text(SCRIPT)
    return subprocess.Popen(
        [sys.executable, "choose.py"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=ENV,
    )


def state(folder: Path) -> tuple[list[str], dict, dict]:
    """The checkpoints' names, the best table and the best checkpoint's arrays."""
    from kerasteps.callbacks import StepCheckpoint
    from kerasteps.checkpoint._model_state import read_arrays

    directory = folder / "runs" / "choose" / "checkpoints"
    names = [info.name for info in StepCheckpoint.list_checkpoints(directory)]
    best = json.loads((directory / "checkpoint.json").read_text())["best"]
    arrays = read_arrays(str(directory / best["checkpoints"][0]["name"] / "state.h5"))
    return names, best, arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="kerasteps-kill-sweep-"))
    whole = base / "whole"
    whole.mkdir()
    began = time.monotonic()
    process = start(whole)
    while not (whole / "runs").exists():
        time.sleep(0.01)
    training = time.monotonic()
    expected, _ = process.communicate()
    length = time.monotonic() - training
    print(f"uninterrupted: {time.monotonic() - began:.1f} s, training {length:.1f} s")
    print(expected, end="")
    # Killed after its final checkpoint, a run resumes as stopped: it says so.
    stopped, _ = start(whole).communicate()
    names, best, arrays = state(whole)
    same_runs = 0
    for kill in range(args.kills):
        folder = base / f"kill-{kill}"
        folder.mkdir()
        delay = rng.uniform(0, length)
        process = start(folder)
        while not (folder / "runs").exists() and process.poll() is None:
            time.sleep(0.01)
        time.sleep(delay)
        killed = process.poll() is None
        if killed:
            os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        from kerasteps.callbacks import StepCheckpoint

        latest = StepCheckpoint.latest(folder / "runs" / "choose" / "checkpoints")
        at = latest.step if latest else 0
        resumed = start(folder)
        out, _ = resumed.communicate()
        got = state(folder)
        same = (
            out in (expected, stopped)
            and got[:2] == (names, best)
            and all(np.array_equal(got[2][k], arrays[k]) for k in arrays)
            and got[2].keys() == arrays.keys()
        )
        same_runs += same
        print(
            f"kill {kill:2d}: {'killed' if killed else 'ended first'} {delay:5.2f} s "
            f"into training, resumed from step {at:3d}: "
            f"{'same' if same else 'DIFFERENT'}"
        )
    print(f"{same_runs} of {args.kills} resumed runs equal the uninterrupted one")
    sys.exit(0 if same_runs == args.kills else 1)


if __name__ == "__main__":
    main()
