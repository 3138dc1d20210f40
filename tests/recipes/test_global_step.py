"""Tests for the bundled `global_step` recipe, run through the launcher."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

import kerasteps
from tests.helpers import read_jsonl, read_scalar_steps
from tests.helpers import run_recipe as run

pytestmark = pytest.mark.usefixtures("bundled_recipes")


@pytest.mark.keras_range
def test_global_step_recipe_logs_at_1_101_201(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    log_dir = tmp_path / "gs"
    result = run(
        "global_step", "--steps", "201", "--log-every", "100", "--log-dir", str(log_dir)
    )
    lines = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("loss=")
    ]
    assert [int(line.rsplit(" ", 1)[1]) for line in lines] == [1, 101, 201]
    assert all(re.fullmatch(r"loss=\d+\.\d{6} at step \d+", line) for line in lines)
    assert "Global step before training: 0" in result.output
    assert "Global step after training: 201" in result.output
    assert "kerasteps board" in result.output
    # The TensorBoard curve: every 10 steps from step 1, and the last step.
    folder = log_dir / "run-1"  # each run gets its own folder; --resume continues it
    assert "New run: " + str(folder) in result.output
    assert read_scalar_steps(str(folder), "train", "loss") == [*range(1, 201, 10), 201]
    assert kerasteps.load_model(folder / "model.keras").optimizer.iterations == 201
    # Resume continues the same curve; no step is written twice.
    resumed = run(
        "global_step",
        "--steps",
        "351",
        "--log-every",
        "100",
        "--log-dir",
        str(log_dir),
        "--resume",
    )
    checkpoint = folder / "checkpoints" / "ckpt-201"
    assert f"Resumed from step 201 (checkpoint {checkpoint})" in resumed.output
    assert (
        "Global step before training: 201 (the updates of the run it resumes, "
        "restored with its checkpoint)." in resumed.output
    )
    steps = read_scalar_steps(str(folder), "train", "loss")
    assert steps == [*range(1, 351, 10), 351]
    assert [r["step"] for r in read_jsonl(folder / "log.jsonl")] == [1, 101, 201, 301]


def _layout(log_dir: Path) -> list[str]:
    """The files under `log_dir`, event files named without their time and host."""
    return sorted(
        re.sub(r"tfevents\..*", "tfevents", path.relative_to(log_dir).as_posix())
        for path in log_dir.rglob("*")
    )


def test_the_old_logdir_option_still_works_and_warns(tmp_path):
    """`--logdir` (until the next release) is `--log-dir`: the same run folder, the
    same curves, and a warning naming the new spelling."""
    tiny = ("global_step", "--steps", "21", "--log-every", "10")
    new = run(*tiny, "--log-dir", str(tmp_path / "new"))
    old = run(*tiny, "--logdir", str(tmp_path / "old"))
    warning = (
        "Warning: --logdir is deprecated and will be removed in the next release; "
        "use --log-dir."
    )
    assert old.output.splitlines()[0] == warning
    assert warning not in new.output
    assert "New run: " + str(tmp_path / "old" / "run-1") in old.output
    assert _layout(tmp_path / "old") == _layout(tmp_path / "new")
    assert "run-1/model.keras" in _layout(tmp_path / "old")
    assert read_scalar_steps(str(tmp_path / "old" / "run-1"), "train", "loss") == (
        read_scalar_steps(str(tmp_path / "new" / "run-1"), "train", "loss")
    )
