"""The README's WGAN block, run as written: apart from tests/test_readme.py, the
longest test of the suite, so that the two workers of `pytest -n 2` run it beside
the other README tests."""

from __future__ import annotations

from tests.test_readme import RUN_BLOCKS, readme_python_blocks, run_script


def test_readme_wgan_block_covers_every_ring_mode_as_written(tmp_path):
    """Slow (104 s alone on 2 cores, TensorFlow): the README says this block, run as
    written (6000 generator steps), covers all 8 modes of PacGAN's ring; that claim
    is what this test checks, so it cannot run shorter."""
    (code,) = [b for t, _, b in readme_python_blocks() if RUN_BLOCKS.get(t) == "wgan"]
    result = run_script(tmp_path, "wgan.py", code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ModeCoverage(modes_captured=8, n_modes=8, " in result.stdout
    assert "d_step=30000 at step 6000" in result.stderr
