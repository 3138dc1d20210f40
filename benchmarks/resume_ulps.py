"""How far a resumed run's logged means are from an uninterrupted run's, in float32 ulp.

Runs `tests/scripts/resumable_train.py` (epochs of 20 steps, a point every 15 steps, a
checkpoint every 10) to step 60 once straight, then once per kill point: hung at
that step, killed with SIGKILL once its checkpoint committed, and resumed to 60. It
prints, per resume, the steps whose `loss` or `mae` differ from the straight run's,
with the difference in float32 ulp, and the largest. A checkpoint at an epoch end
(20, 40) resumes to the bit; one in the middle of an epoch (10, 30) differs by a few
ulp, because Keras's metrics restart their float32 sums at the resume
(docs/step-contract.md).

Usage:

    python benchmarks/resume_ulps.py [--kill-at 17 25 33 47]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "resumable_train.py")
ARGS = ["--max-steps", "60", "--log-every", "15", "--checkpoint-every", "10"]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}


def train(work: str, *extra: str) -> subprocess.Popen:
    command = [sys.executable, SCRIPT, "--workdir", work, *ARGS, *extra]
    out = subprocess.DEVNULL
    return subprocess.Popen(command, env=ENV, stdout=out, stderr=out)


def committed(work: str) -> int:
    """The step of the newest committed checkpoint, -1 if none."""
    try:
        with open(os.path.join(work, "checkpoints", "checkpoint.json")) as index:
            return json.load(index)["latest_step"] or -1
    except (OSError, ValueError, KeyError):
        return -1


def ulps(a: float, b: float) -> int:
    x, y = np.float32(a).view(np.int32), np.float32(b).view(np.int32)
    return abs(int(x) - int(y))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill-at", type=int, nargs="+", default=[17, 25, 33, 47])
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="kerasteps-ulps-")
    straight = os.path.join(root, "straight")
    train(straight).wait()
    want = [json.loads(line) for line in open(os.path.join(straight, "log.jsonl"))]
    worst = 0
    for kill_at in args.kill_at:
        work = os.path.join(root, f"killed-{kill_at}")
        killed = train(work, "--hang-at", str(kill_at))
        while committed(work) < kill_at // 10 * 10:
            time.sleep(0.1)
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        train(work).wait()
        got = [json.loads(line) for line in open(os.path.join(work, "log.jsonl"))]
        differ = []
        for a, b in zip(want, got, strict=True):
            for key in ("loss", "mae"):
                if key in a and a[key] != b[key]:
                    differ.append(f"{key}@{a['step']}: {ulps(a[key], b[key])} ulp")
                    worst = max(worst, ulps(a[key], b[key]))
        start = kill_at // 10 * 10
        print(f"resumed from step {start}: " + (", ".join(differ) or "bit-identical"))
    print(f"largest difference: {worst} float32 ulp")


if __name__ == "__main__":
    main()
