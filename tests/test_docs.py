"""The README and the docs pages: short enough, and no link to a file that is not there.

Cheap (no Keras, no subprocess); `.ci/docs` builds the site with `mkdocs build
--strict`, which also checks the anchors and the API reference.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: `[text](target)` and `![alt](target)`, with an optional "title".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str) -> str:
    """`text` without its code blocks and code spans, where a `[x](y)` is no link."""
    text = re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)
    return re.sub(r"`+[^`\n]*`+", "", text)


def relative_links(page: Path) -> list[str]:
    targets = LINK.findall(prose(page.read_text()))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def test_readme_is_a_five_minute_read():
    """Under 350 lines, and its first screen (80 lines) holds why kerasteps (the
    three measurements of Keras) and the quickstart: the two commands and what the
    first one prints."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 350
    first = "\n".join(lines[:80])
    assert "## Quickstart" in first
    assert "python -m pip install -e . && kerasteps run global_step" in first
    assert 'python -m pip install -e ".[test,jax]" && python -m pytest -n 2' in first
    assert "Global step after training: " in first
    assert "## Why kerasteps, not Keras's built-ins" in first
    command = "python benchmarks/keras_builtins.py tensorboard|checkpoint|earlystopping"
    assert command in first
    for case in ("tensorboard", "checkpoint", "earlystopping"):
        assert f"(`{case}`)" in first  # each bullet names its case


def test_every_relative_link_points_to_a_file():
    assert len(PAGES) > 10
    missing = []
    for page in PAGES:
        for target in relative_links(page):
            path = target.split("#")[0].split("?")[0]
            if not (page.parent / path).resolve().exists():
                missing.append(f"{page.relative_to(ROOT)}: {target}")
    assert missing == []


def test_the_link_reader_finds_links_and_skips_code():
    text = "[a](docs/a.md#x) ![b](b.png) `[c](c.md)` [d](https://x.org) [e](#f)\n"
    text += "```python\n[g](g.md)\n```\n"
    page = ROOT / "README.md"
    assert LINK.findall(prose(text)) == ["docs/a.md#x", "b.png", "https://x.org", "#f"]
    assert [t for t in relative_links(page) if t.startswith("docs/")]
