"""README examples run and print what the README shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def blocks(text: str, language: str) -> list[str]:
    found = re.findall(rf"^( *)```{language}\n(.*?)^ *```", text, re.S | re.M)
    return [textwrap.dedent(body) for _, body in found]


def run_script(folder, name: str, code: str) -> subprocess.CompletedProcess:
    """Writes `code` to `folder/name` and runs it there with this Python."""
    (folder / name).write_text(code)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(
        [sys.executable, name],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_own_gan_example_prints_what_the_readme_shows(tmp_path):
    part = section("Your own GAN or multi-optimizer model")
    code = blocks(part, "python")[0]
    shown = blocks(part, "text")[0]
    result = run_script(tmp_path, "gan.py", code)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [
        line
        for line in (result.stderr + result.stdout).splitlines()
        if line.startswith(("INFO:kerasteps:", "{"))
    ]
    assert printed == shown.strip().splitlines()

    # Without the declaration: the error the README quotes.
    undeclared = code.replace(
        "kerasteps.count_optimizer_steps(", "(lambda *a, **k: None)("
    )
    result = run_script(tmp_path, "undeclared.py", undeclared)
    assert result.returncode == 1
    quoted = blocks(part, "text")[1]
    first, rest = quoted.split("[...]")
    assert "kerasteps.steps.StepNotCountedError: " + first.strip() in result.stderr
    for line in rest.strip().splitlines():
        assert line.strip() in result.stderr
