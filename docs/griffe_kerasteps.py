"""A griffe extension for the API reference: kerasteps's docstrings as written.

Two conventions of kerasteps's sources that griffe does not read by itself:

- Docstrings end with an `Example:` line, a blank line and doctest lines (`>>> ...`
  and their output) at the docstring's own indentation. Google-style parsing reads
  that as plain text, which Markdown would run together into one paragraph; each run
  of doctest lines (from a `>>>` line to the next blank line) is fenced as a `pycon`
  code block before the docstring is parsed.
- Attributes are documented by `#:` comment lines just above their assignment (as
  Sphinx reads them): `StepCheckpoint.interrupted`, `StepCallback.role`,
  `kerasteps.mixtures.PACGAN_STD`. Those lines become the attribute's docstring.

mkdocs.yml loads it; nothing in kerasteps/ changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_PROMPT = re.compile(r"^(\s*)>>>")


def fence_doctests(text: str) -> str:
    """Returns `text` with each run of doctest lines inside a ```pycon fence."""
    out: list[str] = []
    lines = text.splitlines()
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else _PROMPT.match(line)
        if match is None:
            out.append(line)
            i += 1
            continue
        indent = match.group(1)
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


def comment_above(lines: list[str], lineno: int) -> str | None:
    """The `#:` lines just above line `lineno` (1-based), without the marks."""
    found: list[str] = []
    index = lineno - 2
    while index >= 0 and lines[index].lstrip().startswith("#:"):
        found.append(lines[index].lstrip()[2:].strip())
        index -= 1
    return "\n".join(reversed(found)) if found else None


class KerastepsDocstrings(griffe.Extension):
    """Reads `#:` attribute comments, and fences the doctests of every docstring."""

    def on_attribute_instance(
        self, *, node: Any, attr: griffe.Attribute, **kwargs: Any
    ) -> None:
        lineno = getattr(node, "lineno", None)
        if attr.docstring is not None or lineno is None:
            return
        try:
            lines = attr.lines_collection[attr.filepath]
        except (KeyError, TypeError):
            return
        text = comment_above(lines, lineno)
        if text is not None:
            attr.docstring = griffe.Docstring(text, lineno=lineno, parent=attr)

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
