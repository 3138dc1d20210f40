"""README examples run and print what the README shows, and so do the examples of the
docs pages that the README's sections moved to (`docs/*.md`)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import keras
import pytest

from kerasteps._startup import is_noise
from kerasteps.steps import StepNotCountedError
from tests import zygote
from tests.helpers import ROOT, script_environment, user_environment


def section(title: str, page: str = "README.md") -> str:
    """The section of `page` (a path from the repository's root) headed `title`, at
    any heading level, up to the next heading of the same or a higher level outside
    code blocks (a `# comment` in a code block is no heading)."""
    lines = (ROOT / page).read_text().splitlines(keepends=True)
    start = level = None
    fenced = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"(#+) (.*)$", line.rstrip("\n"))
        if heading is None:
            continue
        if start is None:
            if heading.group(2) == title:
                start, level = index, len(heading.group(1))
        elif len(heading.group(1)) <= level:
            return "".join(lines[start:index])
    if start is None:
        raise ValueError(f"{page} has no heading {title!r}")
    return "".join(lines[start:])


def blocks(text: str, language: str) -> list[str]:
    found = re.findall(rf"^( *)```{language}\n(.*?)^ *```", text, re.S | re.M)
    return [textwrap.dedent(body) for _, body in found]


def run_script(
    folder, name: str, code: str, fresh: bool = False
) -> subprocess.CompletedProcess:
    """Writes `code` to `folder/name` and runs it there with this Python: forked
    from a zygote (tests/zygote.py), or `fresh` where what Python prints as it
    starts is part of what the test checks."""
    (folder / name).write_text(code)
    return (subprocess.run if fresh else zygote.run)(
        [sys.executable, name],
        cwd=folder,
        capture_output=True,
        text=True,
        env=script_environment(),
        timeout=300,
    )


def exec_here(code: str, name: str) -> None:
    """Runs `code` as the script `name` (`__main__`) in this process, in the current
    folder: where a process of its own is not what a test checks."""
    exec(compile(code, name, "exec"), {"__name__": "__main__"})


def test_own_gan_example_prints_what_the_readme_shows(tmp_path, monkeypatch):
    part = section("Your own GAN or multi-optimizer model", "docs/own-gan.md")
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

    # Without the declaration: the error the README quotes, raised before training
    # (in this process: the script's own run above already showed it runs alone).
    undeclared = code.replace(
        "kerasteps.count_optimizer_steps(", "(lambda *a, **k: None)("
    )
    quoted = blocks(part, "text")[1]
    first, rest = quoted.split("[...]")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StepNotCountedError) as raised:
        exec_here(undeclared, "undeclared.py")
    message = str(raised.value)
    assert message.startswith(first.strip())
    for line in rest.strip().splitlines():
        assert line.strip() in message


def test_quickstart_prints_what_the_readme_shows(tmp_path):
    """The quickstart's first command, as a user types it (about 10 s): in a new
    process, with a user's environment, so its stderr (the README's INFO lines,
    line for line) also shows that no TensorFlow start-up line gets through."""
    shown = blocks(section("Quickstart"), "text")[0].strip().splitlines()
    # Getting started shows the same first run.
    started = blocks(section("The first run", "docs/getting-started.md"), "text")[0]
    assert started.strip().splitlines() == shown
    result = subprocess.run(
        [sys.executable, "-m", "kerasteps.cli", "run", "global_step"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=user_environment(),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # stdout and stderr are two pipes here; on a terminal they interleave as shown.
    logged = [line for line in shown if line.startswith("INFO:")]
    assert result.stderr.splitlines() == logged
    assert result.stdout.splitlines() == [line for line in shown if line not in logged]
    assert (tmp_path / "logs/global_step/run-1/model.keras").is_file()


def test_why_kerasteps_quotes_what_keras_does_as_measured():
    """The "why" section's figures about Keras are what its command measures now
    (Keras's own callbacks, 2 tiny models: about 12 s)."""
    why = section("Why kerasteps, not Keras's built-ins")
    assert "python benchmarks/keras_builtins.py" in why
    readme = (ROOT / "README.md").read_text().splitlines()
    assert readme.index("## Why kerasteps, not Keras's built-ins") < 20
    result = zygote.run(
        [sys.executable, str(ROOT / "benchmarks" / "keras_builtins.py")],
        capture_output=True,
        text=True,
        env=script_environment(),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    measured = result.stdout
    # Each figure quoted in the section, and the line of the output that has it.
    quoted = {
        "[50, 100, 150, 200, 50,\n  100, 150, 200]": "'batch_loss' at steps [50, 100, "
        "150, 200, 50, 100, 150, 200]",
        "50 to 400": "'loss' at steps [50, 100, 150, 200, 250, 300, 350, 400]",
        "8 times in 40\n  batches": "2 epochs x 20 batches: 'best' file written 8 "
        "times, 0 of them with val_loss known",
        "at `wait=2`": "before the interruption: wait=2,",
        "`wait=0, best=None`": "after the resume (at epoch 4): wait=0, best=None",
        "after 7 epochs\n  instead of 4": "uninterrupted, stopped after 4 epochs; "
        "interrupted before epoch 4, stopped after 7 epochs",
    }
    minor = ".".join(keras.__version__.split(".")[:2])  # the Keras installed
    assert f"What Keras {minor} does" in why
    for in_readme, in_output in quoted.items():
        assert in_readme in why, in_readme
        assert in_output in measured, (in_output, measured)


def test_paste_snippet_runs_without_warnings(tmp_path):
    part = section("The step contract", "docs/step-contract.md")
    code = blocks(part, "python")[0]
    # The README's logging example is this snippet.
    logging_example = section("Logging: log lines, TensorBoard, JSON lines")
    assert blocks(logging_example, "python")[0] == code
    result = run_script(tmp_path, "paste.py", code, fresh=True)
    assert result.returncode == 0, result.stderr[-3000:]
    # No warning from Keras (shuffle, ...); TensorFlow's own start-up lines aside
    # (the snippet does not call kerasteps.quiet_startup()).
    stderr = [line for line in result.stderr.splitlines() if not is_noise(line)]
    assert stderr == [
        f"INFO:kerasteps:loss={value} at step {step}"
        for value, step in re.findall(
            r"INFO:kerasteps:loss=(\d+\.\d{6}) at step (\d+)", result.stderr
        )
    ]
    assert [int(s) for s in re.findall(r"at step (\d+)", result.stderr)] == [
        1,
        101,
        201,
    ]
    assert result.stdout == "300\n"


def test_long_runs_script_says_where_it_resumed(tmp_path, monkeypatch, capsys):
    """The "Long runs" script, shortened to 300 then 400 steps: the first run in
    this process, the resumed one as a user runs it, in a process of its own."""
    code = blocks(section("Long runs", "docs/long-runs.md"), "python")[0]
    assert "MAX_STEPS = 3000" in code
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        exec_here(code.replace("3000", "300"), "train.py")
    assert ended.value.code == 0
    first = capsys.readouterr().out
    assert "Resumed" not in first
    assert first.splitlines()[-1] == "Stopped at step 300."
    second = run_script(tmp_path, "train.py", code.replace("3000", "400"))
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.splitlines()[0] == (
        "Resumed from step 300 (checkpoint runs/long/checkpoints/ckpt-300)"
    )
    assert second.stdout.splitlines()[-1] == "Stopped at step 400."


#: The README's Python blocks that its tests run, by section: the three callback
#: sections continue one script; the others run alone (or as a doctest). Any other
#: block must say it is an excerpt.
RUN_BLOCKS = {
    "Logging: log lines, TensorBoard, JSON lines": "callbacks",
    "Validation and throughput every N steps": "callbacks",
    "Stopping: at a step, on a non-finite loss, with one progress bar": "callbacks",
    "WGAN: separate critic and generator steps": "wgan",
    "Write your own callback": "doctest",
}


def readme_python_blocks() -> list[tuple[str, str, str]]:
    """(section title, the prose before the block, the block) of each README block."""
    found, title, prose = [], None, ""
    text = (ROOT / "README.md").read_text()
    for part in re.split(r"(^```python\n.*?^```\n)", text, flags=re.S | re.M):
        if part.startswith("```python"):
            found.append((title, prose, part.split("\n", 1)[1].rsplit("```", 1)[0]))
            continue
        headings = re.findall(r"^#+ (.*)$", part, re.M)
        title = headings[-1] if headings else title
        prose = part
    return found


def test_every_readme_python_block_runs_or_says_it_is_an_excerpt():
    found = readme_python_blocks()
    assert len(found) == 6
    unrun = [t for t, prose, _ in found if t not in RUN_BLOCKS]
    assert [t for t, prose, _ in found if t in unrun and "excerpt" not in prose] == []


def test_readme_callback_blocks_run_as_one_script(tmp_path):
    """The logging, validation and stopping blocks, one after the other, as a user
    pasting them would run them (about 10 s)."""
    found = readme_python_blocks()
    code = "\n".join(b for t, _, b in found if RUN_BLOCKS.get(t) == "callbacks")
    result = run_script(tmp_path, "callbacks.py", code)
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [int(s) for s in re.findall(r"at step (\d+)", result.stderr)]
    assert steps[:3] == [1, 101, 201]  # the logging block
    assert re.search(r"val_loss=\d+\.\d{6} .*at step 350", result.stderr)
    assert "StopAtStep: reached global step 1000" in result.stderr


@pytest.mark.neutral
def test_own_callback_example_runs_as_a_doctest():
    """The README's own provider, action and sink, written with public names only,
    print what the README shows (in this process: no subprocess)."""
    import doctest

    text = blocks(section("Write your own callback"), "python")[0]
    test = doctest.DocTestParser().get_doctest(text, {}, "README", "README.md", 0)
    assert len(test.examples) >= 10
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failures = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)
