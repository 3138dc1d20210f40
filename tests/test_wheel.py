"""A wheel built from the repository runs the launcher and a bundled recipe.

Builds the wheel from a copy of the clone (setuptools writes `build/` where it
builds) without build isolation (setuptools and wheel come with the test
environment), installs it into a fresh virtual environment and runs `kerasteps list`
and `kerasteps run global_step --steps 20` from a folder outside the clone. The new
environment reuses the test environment's TensorFlow and Keras through a `.pth` file
that lists this interpreter's site-packages folders (`--system-site-packages` would
give the *base* interpreter's, which on a fresh machine has no Keras). Slower than the
rest (about 20 s): it is the only test of what users install.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from tests.helpers import ROOT


def run(args, cwd, timeout=300):
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


def test_wheel_runs_list_and_a_recipe(tmp_path):
    # Built from a copy: setuptools writes `build/` and `*.egg-info` where it builds.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*cache"
        ),
    )
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
            source,
        ],
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("kerasteps-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)  # this pip installs into it: --python
    python = env_dir / "bin" / "python"
    # This environment's packages (TensorFlow, Keras, click...) after the venv's own:
    # the wheel's kerasteps, installed in the venv, comes first. Editable installs
    # here are `.pth` files of their own, which a folder listed this way does not run.
    purelib = run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        cwd=tmp_path,
    ).stdout.strip()
    ours = dict.fromkeys([*site.getsitepackages(), sysconfig.get_path("purelib")])
    (Path(purelib) / "_test_env.pth").write_text("\n".join(ours) + "\n")
    run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps"]
        + ["--no-index", wheel],
        cwd=tmp_path,
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
    # The top-level `recipes/` folder is installed as `kerasteps.recipes`: the
    # launcher runs the installed copy, not the clone's.
    paths = run([env_dir / "bin" / "kerasteps", "list", "--paths"], cwd=work).stdout
    global_step = [line for line in paths.splitlines() if "global_step" in line]
    assert len(global_step) == 1 and str(env_dir) in global_step[0], paths
    assert str(ROOT) not in paths
    trained = run(
        [
            env_dir / "bin" / "kerasteps",
            "run",
            "global_step",
            "--steps",
            "20",
            "--log-every",
            "10",
            "--log-dir",
            "logs",
        ],
        cwd=work,
    )
    output = trained.stdout + trained.stderr
    assert "loss=" in output and "at step 1\n" in output and "at step 11\n" in output
    assert "Global step after training: 20" in trained.stdout
    assert (work / "logs" / "run-1" / "log.jsonl").exists()
    assert os.listdir(work / "logs" / "run-1" / "train")
    assert (work / "logs" / "run-1" / "model.keras").exists()
