"""Nothing lost (issue 27): the NaN guard beside async checkpoints, a full disk, a
damaged `meta.json`, and a kill during the keep-N clean-up.

Each test reads back what is on disk and what a restore gives.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys

import keras
import numpy as np
import pytest

from kerasteps.callbacks import LogEvery, StepCheckpoint, StopOnNonFinite
from kerasteps.checkpoint.store import CheckpointStore
from tests import zygote
from tests.helpers import (
    SCRIPTS,
    NanAtStep,
    fit_steps,
    script_environment,
    tiny_data,
    tiny_model,
)


def _messages(caplog, level=logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def _ours(caplog) -> list[str]:
    """The WARNING lines of the store and its callbacks."""
    return [m for m in _messages(caplog) if m.startswith("StepCheckpoint")]


# -- 1. the NaN guard beside an async StepCheckpoint ----------------------------------
@pytest.mark.neutral
def test_the_guard_saves_the_last_finite_state_beside_async_saves(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="kerasteps")
    model = NanAtStep(nan_step=12)
    model.compile(keras.optimizers.SGD(0.01))
    x, y = tiny_data(40)
    checkpoint = StepCheckpoint(tmp_path, every=1, keep=5)  # async saves
    stop = StopOnNonFinite(every=5, checkpoint=checkpoint)
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[stop, checkpoint])
    assert model.stop_training
    assert (stop.stopped_step, stop.stopped_key) == (15, "d_loss")
    assert stop.checkpoint_saved.step == 10  # the check before the NaN
    steps = [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)]
    assert steps == [7, 8, 9, 11, 10]  # 12-14 refused; the guard's is the newest
    errors = _messages(caplog, logging.ERROR)
    assert any("not saving step 14" in m for m in errors)  # logged, not raised
    assert "StopOnNonFinite: d_loss is nan at step 15; stopping training." in errors
    assert any("saved the last finite state (step 10)" in m for m in errors)
    restored = NanAtStep(nan_step=10**9)
    restored.compile(keras.optimizers.SGD(0.01))
    restored(x[:1])
    assert StepCheckpoint.restore_latest(restored, tmp_path) == 10
    assert all(np.isfinite(w.numpy()).all() for w in restored.weights)


# -- 2. a full disk -----------------------------------------------------------------
@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_full_disk_ends_the_run_with_its_error_and_loses_nothing(tmp_path):
    """A real `EFBIG` from the kernel (`RLIMIT_FSIZE`, in a child process) while
    `state.h5` of step 15 is written: the run ends with that error, the process
    exits as the script says (3, never 139), and steps 5 and 10 restore."""
    script = SCRIPTS / "full_disk_train.py"
    done = zygote.run(
        [sys.executable, str(script), "--directory", str(tmp_path / "ckpt")],
        env=script_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 3, out[-3000:]
    assert "DISK ERROR OSError 27 [Errno 27] File too large" in done.stdout, out[-3000:]
    assert "COMMITTED 5 10" in done.stdout
    assert "RESTORED 5" in done.stdout and "RESTORED 10" in done.stdout
    left = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert left == ["checkpoint.json", "ckpt-10", "ckpt-5"]  # no temporary folder


# -- 3. a damaged meta.json ---------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A directory with the checkpoints of steps 2, 4 and 6 (copied by each test)."""
    directory = tmp_path_factory.mktemp("saved") / "ckpt"
    fit_steps(tiny_model(), 6, [StepCheckpoint(directory, every=2, keep=10)])
    keras.backend.clear_session()
    return directory


def _copy(saved, tmp_path):
    directory = tmp_path / "ckpt"
    shutil.copytree(saved, directory)
    return directory


def _edit(meta_json, change) -> None:
    meta = json.loads(meta_json.read_text())
    if callable(change):
        meta = change(meta)
    else:
        meta.update(change)
    meta_json.write_text(meta if isinstance(meta, str) else json.dumps(meta))


def _record(meta):
    return meta["files"]["state.h5"]


DAMAGES = {
    "crc": (
        lambda m: {**m, "files": {"state.h5": {**_record(m), "crc32": "crc32:0"}}},
        "records state.h5 as",
    ),
    "other-crc": (
        lambda m: {
            **m,
            "files": {"state.h5": {**_record(m), "crc32": "crc32:00000000"}},
        },
        "crc32:00000000 was written",
    ),
    "bytes": (
        lambda m: {
            **m,
            "files": {"state.h5": {**_record(m), "bytes": _record(m)["bytes"] + 1}},
        },
        "bytes",
    ),
    "step": ({"step": 5}, "names step 5, not 6"),
    "format": ({"format": "kerasteps.StepCheckpoint/9"}, "has the format"),
    "optimizer": ({"optimizers": {"optimizer": "Adam"}}, "holds the state of a Adam"),
    "json-garbage": (lambda m: '{"step": 6, "files": {', "missing or unreadable"),
    "int-record": (  # a bare size, of the right value
        lambda m: {**m, "files": {"state.h5": _record(m)["bytes"]}},
        "records state.h5 as",
    ),
    "time": ({"time": "yesterday"}, "records the time 'yesterday'"),
    "outside": (
        lambda m: {**m, "files": {**m["files"], "../ckpt-4/state.h5": _record(m)}},
        "not a file of the folder",
    ),
}


@pytest.mark.neutral
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_meta_json_falls_back_to_the_checkpoint_before(
    saved, tmp_path, caplog, damage
):
    directory = _copy(saved, tmp_path)
    change, reason = DAMAGES[damage]
    _edit(directory / "ckpt-6" / "meta.json", change)
    before = sorted(p.name for p in directory.rglob("*"))
    caplog.set_level(logging.WARNING, logger="kerasteps")
    assert StepCheckpoint.restore_latest(tiny_model(seed=1), directory) == 4
    named = [m for m in _ours(caplog) if "ckpt-6" in m]
    assert named and reason in named[0], _ours(caplog)
    assert sorted(p.name for p in directory.rglob("*")) == before  # nothing deleted


@pytest.mark.neutral
def test_a_checkpoint_of_another_backend_restores(saved, tmp_path, caplog):
    directory = _copy(saved, tmp_path)
    other = "jax" if keras.backend.backend() != "jax" else "torch"
    _edit(directory / "ckpt-6" / "meta.json", {"backend": other})
    caplog.set_level(logging.WARNING, logger="kerasteps")
    assert StepCheckpoint.restore_latest(tiny_model(seed=1), directory) == 6
    assert _ours(caplog) == []


@pytest.mark.neutral
@pytest.mark.parametrize(
    "field, value",
    [
        ("windows", {"Every(2)": {"loss": "x"}}),
        ("windows", {"a": 3}),
        ("windows", {"Every(2)": {"loss": [1.0]}}),
        ("windows", {"Every(2)": {"loss": [1.0, 2.0, 3.0]}}),
        ("windows", [1, 2]),
        ("examples_per_step", True),
        ("examples_per_step", "2"),
        ("examples_per_step", -2),
    ],
)
def test_a_malformed_run_field_is_dropped_and_the_run_resumes(
    saved, tmp_path, caplog, field, value
):
    """`windows` and `examples_per_step` only refine the next run: the checkpoint
    restores without them, with a WARNING, and the resumed fit runs."""
    directory = _copy(saved, tmp_path)
    _edit(directory / "ckpt-6" / "meta.json", {field: value})
    caplog.set_level(logging.WARNING, logger="kerasteps")
    model = tiny_model(seed=1)
    assert StepCheckpoint.restore_latest(model, directory) == 6
    fit_steps(model, 4, [LogEvery(2)])
    assert int(model.optimizer.iterations.numpy()) == 10
    warning = [m for m in _ours(caplog) if "ckpt-6" in m]
    assert len(warning) == 1 and f"{field} in meta.json is malformed" in warning[0]
    assert "restored without it" in warning[0]


# -- 4. a kill during the keep-N clean-up ---------------------------------------------
class Killed(BaseException):
    pass


@pytest.mark.neutral
def test_a_kill_during_the_clean_up_leaves_only_trash(tmp_path, caplog, monkeypatch):
    model = tiny_model()
    store = CheckpointStore(tmp_path, keep=1)
    fit_steps(model, 2)
    store.save(model)
    fit_steps(model, 2)
    remove = CheckpointStore._remove

    def killed_midway(self, name):
        # As a kill -9 inside shutil.rmtree: one file gone, then the process is.
        os.remove(tmp_path / name / "meta.json")
        raise Killed

    monkeypatch.setattr(CheckpointStore, "_remove", killed_midway)
    with pytest.raises(Killed):
        store.save(model)  # step 4 commits, then ckpt-2 is dropped
    monkeypatch.setattr(CheckpointStore, "_remove", remove)
    left = sorted(p.name for p in tmp_path.iterdir())
    trash = [n for n in left if n.startswith(".trash-ckpt-2-")]
    assert len(trash) == 1  # and no ckpt-2 without its meta.json
    assert sorted(set(left) - set(trash)) == ["checkpoint.json", "ckpt-4"]
    caplog.set_level(logging.INFO, logger="kerasteps")
    fit_steps(model, 2, [StepCheckpoint(tmp_path, every=100)])
    assert _ours(caplog) == []  # removed without a word
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "ckpt-4"]


@pytest.mark.neutral
def test_an_incomplete_folder_is_kept_and_warned_about_once(tmp_path, caplog):
    """An empty folder (an older kerasteps's killed clean-up) is removed; one that
    holds a `state.h5` without `meta.json` may be a user's: it stays, named once."""
    model = tiny_model()
    fit_steps(model, 2, [StepCheckpoint(tmp_path, every=2)])
    (tmp_path / "ckpt-37").mkdir()
    (tmp_path / "ckpt-41").mkdir()
    shutil.copy(tmp_path / "ckpt-2" / "state.h5", tmp_path / "ckpt-41" / "state.h5")
    caplog.set_level(logging.INFO, logger="kerasteps")
    for run in range(3):
        caplog.clear()
        fit_steps(model, 1, [StepCheckpoint(tmp_path, every=100)])
        warnings = _ours(caplog)
        if run == 0:
            assert len(warnings) == 1, warnings
            named = "ckpt-41 is incomplete or damaged (meta.json is missing"
            assert named in warnings[0]
            removed = [m for m in _messages(caplog, logging.INFO) if "ckpt-37" in m]
            assert removed and "removed the empty folder" in removed[0]
        else:
            assert warnings == [], (run, warnings)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.json",
        "ckpt-2",
        "ckpt-41",
    ]
    assert (tmp_path / "ckpt-41" / "state.h5").stat().st_size > 0
    assert StepCheckpoint.restore_latest(tiny_model(seed=1), tmp_path) == 2
    assert _ours(caplog) == []


@pytest.mark.neutral
def test_another_runs_checkpoints_are_kept_aside_not_rotated_away(tmp_path, caplog):
    """A new run in a checkpoint directory of another run (started without
    restoring) neither replaces nor rotates away that run's checkpoints: they
    move whole into `earlier-1`, which resumes that run."""
    first = tiny_model()
    fit_steps(first, 6, [StepCheckpoint(tmp_path, every=2, keep=2)])
    caplog.set_level(logging.WARNING, logger="kerasteps")
    fit_steps(tiny_model(seed=1), 4, [StepCheckpoint(tmp_path, every=2, keep=2)])
    kept = tmp_path / "earlier-1"
    assert _ours(caplog) == [
        f"StepCheckpoint: {tmp_path} held the checkpoints of another run (steps "
        f"[4, 6]): they are kept whole in {kept} "
        f"(StepCheckpoint.restore_latest(model, {str(kept)!r}) resumes that run), "
        "and this run saves its own in the directory."
    ]
    assert [i.step for i in StepCheckpoint.list_checkpoints(kept)] == [4, 6]
    assert [i.step for i in StepCheckpoint.list_checkpoints(tmp_path)] == [2, 4]
    resumed = tiny_model(seed=2)
    assert StepCheckpoint.restore_latest(resumed, kept) == 6
    for mine, theirs in zip(resumed.weights, first.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    # The run resumed from there continues it: nothing of it is moved again.
    fit_steps(resumed, 2, [StepCheckpoint(kept, every=2, keep=2)])
    assert [i.step for i in StepCheckpoint.list_checkpoints(kept)] == [6, 8]
    assert not (kept / "earlier-1").exists()


@pytest.mark.neutral
def test_a_fresh_run_stopped_before_its_first_save_hides_nothing(tmp_path, caplog):
    """Train to 6; a run that begins in the directory without restoring and stops
    before it saves anything leaves the directory as it was: the usual resume
    restores step 6. Once a fresh run has saved, the checkpoints it set aside are
    named at each restore, with the line that resumes from them."""
    fit_steps(tiny_model(), 6, [StepCheckpoint(tmp_path, every=2)])
    fit_steps(tiny_model(seed=1), 1, [StepCheckpoint(tmp_path, every=100)])
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "ckpt-2",
        "ckpt-4",
        "ckpt-6",
    ]
    assert StepCheckpoint.restore_latest(tiny_model(seed=2), tmp_path) == 6
    # A fresh run that saves sets them aside; a restore then says where they are.
    fit_steps(tiny_model(seed=1), 2, [StepCheckpoint(tmp_path, every=2)])
    kept = tmp_path / "earlier-1"
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="kerasteps")
    assert StepCheckpoint.restore_latest(tiny_model(seed=2), tmp_path) == 2
    (line,) = _ours(caplog)
    assert line.startswith(
        f"StepCheckpoint: {tmp_path} was restored from step 2, but {kept} holds the "
        "checkpoints of steps [4, 6], set aside at "
    )
    assert line.endswith(
        f"To resume from them: StepCheckpoint.restore_latest(model, {str(kept)!r})."
    )
    store = CheckpointStore(tmp_path)
    store.keep_aside([entry.name for entry in store.entries()])  # none of its own
    caplog.clear()
    assert StepCheckpoint.restore_latest(tiny_model(seed=2), tmp_path) is None
    lines = _ours(caplog)
    assert [line.split(", but ")[0] for line in lines] == [
        f"StepCheckpoint: {tmp_path} holds no checkpoint of its own"
    ] * 2
    assert StepCheckpoint.restore_latest(tiny_model(seed=2), kept) == 6


@pytest.mark.neutral
@pytest.mark.parametrize("gone", [False, True], ids=["original-kept", "moved"])
def test_a_checkpoint_restored_into_another_folder_is_a_fork(tmp_path, caplog, gone):
    """Restored from A's checkpoints, trained with a `StepCheckpoint` of B (listed
    after a sink, which claims its file first): the run is a fork with a run id of
    its own, never A's. With A's folder gone (moved to B), the run continues A's."""
    from kerasteps.callbacks import JSONLinesLogger
    from kerasteps.checkpoint._format import read_meta

    a, b = tmp_path / "a", tmp_path / "b"
    fit_steps(tiny_model(), 4, [StepCheckpoint(a, every=2)])
    (parent,) = {
        read_meta(i.path)["run_id"] for i in StepCheckpoint.list_checkpoints(a)
    }
    model = tiny_model(seed=1)
    if gone:
        shutil.move(a, b)
    assert StepCheckpoint.restore_latest(model, b if gone else a) == 4
    caplog.set_level(logging.INFO, logger="kerasteps")
    sink = JSONLinesLogger(b / "log.jsonl", every=2)
    fit_steps(model, 2, [sink, StepCheckpoint(b, every=2)])
    (latest,) = [i for i in StepCheckpoint.list_checkpoints(b) if i.step == 6]
    run_id = read_meta(latest.path)["run_id"]
    forks = [m for m in _messages(caplog, logging.INFO) if "is a fork of run" in m]
    if gone:
        assert run_id == parent and forks == []
        return
    assert run_id != parent
    assert sink.run.forked_from == {"run_id": parent, "step": 4, "links": {}}
    assert (b / ".log.jsonl.kerasteps-run").read_text().strip() == run_id
    assert forks == [
        f"kerasteps: the checkpoint {a / 'ckpt-4'} was restored into a run that saves "
        f"into {b}: this run is a fork of run {parent} at step 4, with a run id, "
        "sinks' claims and MLflow run of its own."
    ]
    # A's own resume continues A's run.
    again = tiny_model(seed=2)
    StepCheckpoint.restore_latest(again, a)
    fit_steps(again, 2, [StepCheckpoint(a, every=2)])
    (latest,) = [i for i in StepCheckpoint.list_checkpoints(a) if i.step == 6]
    assert read_meta(latest.path)["run_id"] == parent
