"""A wheel built from the repository runs the launcher and a bundled recipe.

Builds the wheel without build isolation (setuptools and wheel come with the test
environment), installs it into a fresh virtual environment that reuses this
environment's TensorFlow and Keras (`--system-site-packages`, `--no-deps`), and runs
`kerasteps list` and `kerasteps run global_step --steps 20` from a folder outside the
clone. Slower than the rest (about 40 s): it is the only test of what users install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(args, cwd, timeout=300):
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


def test_wheel_runs_list_and_a_recipe(tmp_path):
    wheels = tmp_path / "wheels"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            wheels,
            ROOT,
        ],
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("kerasteps-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = env_dir / "bin" / "python"
    run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", wheel], cwd=tmp_path
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    located = run(
        [python, "-c", "import kerasteps; print(kerasteps.__file__)"], cwd=work
    )
    assert located.stdout.strip().startswith(str(env_dir)), located.stdout
    listed = run([env_dir / "bin" / "kerasteps", "list"], cwd=work)
    names = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    assert {"global_step", "image_classifier", "batch_vs_sgd"} <= set(names)
    trained = run(
        [
            env_dir / "bin" / "kerasteps",
            "run",
            "global_step",
            "--steps",
            "20",
            "--log-every",
            "10",
            "--logdir",
            "logs",
        ],
        cwd=work,
    )
    output = trained.stdout + trained.stderr
    assert "loss=" in output and "at step 1\n" in output and "at step 11\n" in output
    assert "Global step after training: 20" in trained.stdout
    assert (work / "logs" / "log.jsonl").exists()
    assert os.listdir(work / "logs" / "train")
