"""Tests for the bundled `global_step` recipe, run through the launcher."""

from __future__ import annotations

import logging
import re

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
