"""A griffe extension for the API reference: kerasteps's docstrings as written.

Three conventions of kerasteps's sources that griffe does not read by itself:

- Docstrings end with an `Example:` line, a blank line and doctest lines (`>>> ...`
  and their output) at the docstring's own indentation. Google-style parsing reads
  that as plain text, which Markdown would run together into one paragraph; each run
  of doctest lines (from a `>>>` line to the next blank line) is fenced as a `pycon`
  code block before the docstring is parsed.
- Attributes are documented by `#:` comment lines just above their assignment (as
  Sphinx reads them): `StepCheckpoint.interrupted`, `StepCallback.role`,
  `kerasteps.mixtures.PACGAN_STD`. Those lines become the attribute's docstring.
- Some names of `__all__` are imported on first use, by the module's `__getattr__`
  (`kerasteps.load_model`, `kerasteps.recipe.ProvideEvery`). Each becomes an alias
  of the object that `__getattr__` imports, as if it were imported at the top, so
  that the reference documents it under its public name.

The reference shows public names only, so the rest hides the private ones (a name
starting with `_`) that would otherwise show through public objects:

- a base class reached through a private name (`WGAN`'s backend base) is left out
  of the class's bases;
- an attribute's value that uses a private name (`_tracking.string_map(...)`) is
  left out of its signature;
- a name in a signature's annotation whose object has no public name (a `TypeVar`
  of a private module) is shown as plain text, not as a reference that names its
  private path;
- a docstring's aside that only points at a private name or file ("(see
  `kerasteps.callbacks._sinks`)", "(`_dispatch.ROLES`)") is left out of the text.

mkdocs.yml loads it; nothing in kerasteps/ changes.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap
from collections.abc import Iterator
from typing import Any

import griffe

_PROMPT = re.compile(r"^(\s*)>>>")
# A private name: a leading underscore, not a dunder (`_sinks`, not `__init__`).
_PRIVATE_PART = re.compile(r"^_(?!_)")
# An aside in parentheses that only names a dotted name or a file in backticks, with
# an optional "see": " (see `kerasteps.callbacks._sinks`)", " (`_dispatch.ROLES`)".
_ASIDE = re.compile(r"\s*\((?:see\s+)?`([\w./]+)`\)")


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


def is_private(path: str) -> bool:
    """Whether a dotted name or a file has a private part:
    `kerasteps._startup.quiet_startup`, `kerasteps/cli/_recipes.py`."""
    return any(_PRIVATE_PART.match(part) for part in re.split(r"[./]", path))


def drop_private_asides(text: str) -> str:
    """Returns `text` without the asides that only point at a private name."""
    return _ASIDE.sub(
        lambda match: "" if is_private(match.group(1)) else match.group(0), text
    )


def uses_private_name(expression: Any) -> bool:
    """Whether a griffe expression (a base class, a value) names a private object."""
    if isinstance(expression, str) or expression is None:
        return False
    names = [expression, *expression.iterate(flat=True)]
    for name in names:
        if isinstance(name, griffe.ExprName) and is_private(name.name):
            return True
    return False


def export_names(module: griffe.Module) -> list[str]:
    """The names of a module's `__all__`, a `*NAME` entry read from the tuple of
    strings that NAME holds."""
    names: list[str] = []
    for entry in module.exports or ():
        if isinstance(entry, str):
            names.append(entry)
            continue
        held = module.members.get(getattr(entry, "name", ""))
        for element in getattr(getattr(held, "value", None), "elements", ()):
            try:
                value = ast.literal_eval(str(element))
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str):
                names.append(value)
    return names


def lazy_imports(module: griffe.Module) -> list[tuple[str, str]]:
    """`(name, path)` of what the module's `__getattr__` imports: `from a.b import
    c as d` gives `("d", "a.b.c")`."""
    function = module.members.get("__getattr__")
    if function is None or function.is_alias or not function.is_function:
        return []
    tree = ast.parse(textwrap.dedent(function.source))
    return [
        (alias.asname or alias.name, f"{node.module}.{alias.name}")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        for alias in node.names
    ]


def add_lazy_aliases(module: griffe.Module, modules: Any) -> None:
    """Adds an alias for each name of `__all__` that `__getattr__` imports: the
    imported object itself, or the name in a module that `__getattr__` imports."""
    missing = [name for name in export_names(module) if name not in module.members]
    for name, path in lazy_imports(module):
        if name in missing:
            module.set_member(name, griffe.Alias(name, path, parent=module))
            missing.remove(name)
            continue
        try:
            imported = modules[path]
        except KeyError:
            continue
        if not getattr(imported, "is_module", False):
            continue
        for found in [name for name in missing if name in imported.members]:
            target = f"{path}.{found}"
            module.set_member(found, griffe.Alias(found, target, parent=module))
            missing.remove(found)


def public_targets(pkg: griffe.Module) -> set[str]:
    """The paths of the objects that a public module exports: a private module's
    object (`kerasteps.checkpoint._format.CheckpointInfo`) has a public name too."""
    found: set[str] = set()
    for module in walk(pkg):
        if not module.is_module or is_private(module.path):
            continue
        for name in export_names(module):
            member = module.members.get(name)
            if member is None:
                continue
            try:
                found.add(member.final_target.path if member.is_alias else member.path)
            except griffe.AliasResolutionError:
                continue
    return found


def plain_private_names(expression: Any, public: set[str]) -> Any:
    """Returns `expression` with each name of an object that has no public name
    (private, and not in `public`) replaced by its last part as plain text."""
    if not isinstance(expression, griffe.Expr):
        return expression
    if isinstance(expression, (griffe.ExprName, griffe.ExprAttribute)):
        try:
            path = expression.canonical_path
        except Exception:  # a name griffe cannot resolve: left as written
            return expression
        if is_private(path) and path not in public:
            return path.rsplit(".", 1)[-1]
        return expression
    for field in dataclasses.fields(expression):
        value = getattr(expression, field.name)
        if isinstance(value, griffe.Expr):
            setattr(expression, field.name, plain_private_names(value, public))
        elif isinstance(value, list):
            value[:] = [plain_private_names(item, public) for item in value]
    return expression


def walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    """`obj` and every object defined in it, aliases left out."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from walk(member)


class KerastepsDocstrings(griffe.Extension):
    """Reads `#:` attribute comments, fences the doctests of every docstring, adds
    the names that `__getattr__` imports, and hides private names."""

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

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        # Once the whole package is loaded: an alias needs its target's module. Here
        # rather than in `on_object`, which griffe does not call for the package
        # itself (its docstring's doctests were left unfenced).
        for obj in list(walk(pkg)):
            if obj.is_module:
                add_lazy_aliases(obj, pkg.modules_collection)
        public = public_targets(pkg)
        for obj in walk(pkg):
            if obj.is_function:
                for parameter in obj.parameters:
                    parameter.annotation = plain_private_names(
                        parameter.annotation, public
                    )
                obj.returns = plain_private_names(obj.returns, public)
            if obj.is_attribute:
                obj.annotation = plain_private_names(obj.annotation, public)
            if obj.docstring is not None:
                text = drop_private_asides(obj.docstring.value)
                obj.docstring.value = fence_doctests(text) if ">>>" in text else text
            if obj.is_class:
                obj.bases = [
                    base
                    for base in obj.bases
                    if not uses_private_name(base)
                    and not is_private(getattr(base, "canonical_path", str(base)))
                ]
            if obj.is_attribute and uses_private_name(obj.value):
                obj.value = None
