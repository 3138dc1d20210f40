"""The "Choosing the model" page's script runs as written and prints what the page
shows; a run of it killed -9 at three seeded instants, then resumed, ends as the
uninterrupted run: the same stop step, the same learning-rate cuts, the same
checkpoints on disk, the same best table and the same best weights, bitwise.

Slow (7 runs of the page's 10-s script, about 35 s on 2 workers): a kill -9 needs a
process of its own, and the decisions to check come at steps 100 to 190.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from kerasteps.callbacks import StepCheckpoint
from kerasteps.checkpoint._crash import ENV
from kerasteps.checkpoint._format import STATE_FILE
from kerasteps.checkpoint._model_state import read_arrays
from tests import zygote
from tests.helpers import ROOT, script_environment

PAGE = (ROOT / "docs" / "choosing-the-model.md").read_text()
SCRIPT = re.search(r"```python\n(.*?)```", PAGE, re.S).group(1)
#: The lines the page shows each run print, in order.
SHOWN = re.search(r"```console\n(.*?)```", PAGE, re.S).group(1).split("$ python ")


def run(folder, crash=None) -> subprocess.CompletedProcess:
    """Runs the page's script in `folder` (killed at `crash`, POINT@STEP)."""
    (folder / "choose.py").write_text(SCRIPT)
    env = script_environment()
    env.pop(ENV, None)
    if crash:
        env[ENV] = crash
    return zygote.run(
        [sys.executable, "choose.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def checkpoints(folder):
    """The checkpoints' names, the index's best table and the best one's arrays."""
    directory = folder / "runs" / "choose" / "checkpoints"
    names = [info.name for info in StepCheckpoint.list_checkpoints(directory)]
    best = json.loads((directory / "checkpoint.json").read_text())["best"]
    arrays = read_arrays(str(directory / best["checkpoints"][0]["name"] / STATE_FILE))
    return names, best, arrays


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole")
    result = run(folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder, result.stdout


def test_the_script_prints_what_the_page_shows(whole):
    folder, out = whole
    assert SHOWN[1] == "choose.py\n" + out
    again = run(folder)
    assert again.returncode == 0, again.stderr[-3000:]
    assert SHOWN[2] == "choose.py\n" + again.stdout


@pytest.mark.parametrize("crash", ["save@190", "write@190", "commit@150"])
def test_killed_and_resumed_it_ends_as_the_uninterrupted_run(whole, tmp_path, crash):
    """`save@190`: after step 190's validation was judged and decided (the stop,
    a cut), before its save; `write@190`: while the background writer writes that
    state; `commit@150`: step 150's folder in place, the index not yet listing it.
    Each resumes from step 150, where both deciders count 2 validations since the
    best (130): ignoring their saved state, the run would stop later."""
    killed = run(tmp_path, crash)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert killed.stdout == ""
    resumed = run(tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout == whole[1]
    names, best, arrays = checkpoints(tmp_path)
    whole_names, whole_best, whole_arrays = checkpoints(whole[0])
    assert (names, best) == (whole_names, whole_best)
    assert arrays.keys() == whole_arrays.keys()
    for key, value in arrays.items():
        np.testing.assert_array_equal(value, whole_arrays[key], err_msg=key)
