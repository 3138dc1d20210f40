"""The package's shape: imports go one way, down the floors, with no circle; no
module writes another's private attribute; no private Keras / TensorFlow /
TensorBoard name outside `_compat.py`; recipes import only the public API.

Static checks of the source (`ast`), no Keras imported: they fail naming the module
and line to change.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "kerasteps"


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name: the top-level `recipes/` folder
    is the package `kerasteps.recipes` (pyproject.toml's `package-dir`)."""
    found = {}
    for root, package in (
        (PACKAGE, "kerasteps"),
        (ROOT / "recipes", "kerasteps.recipes"),
    ):
        for path in sorted(root.rglob("*.py")):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules `name` imports anywhere (TYPE_CHECKING and function
    bodies included), resolved to modules (`from a import b` is `a.b` when that
    is a module, else `a`)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            targets = [t for t in targets if t in known][:1] or [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    edges = {name: imports(name, path, known) for name, path in found.items()}
    # A package's __init__ re-exports its modules: an arrow into the package is an
    # arrow to what it re-exports, not a circle through every sibling.
    return {
        name: {t for t in targets if not name.startswith(t + ".")}
        for name, targets in edges.items()
    }


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_circles_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    edges = graph()
    assert "kerasteps.callbacks._dispatch" in edges["kerasteps.callbacks.base"]
    assert circles(edges) == []


#: The floors, lowest first: a module imports only from its own floor or lower
#: ones (docs/development.md, "Layout"). A name ending in "." is a package: every
#: module in it. The package's `__init__` (`kerasteps`) is the top floor's.
FLOORS = [
    [
        "kerasteps._files.",
        "kerasteps._compat",
        "kerasteps._variables",
        "kerasteps._validate",
        "kerasteps._rng",
        "kerasteps._startup",
        "kerasteps.formatting",
    ],
    [
        "kerasteps.steps",
        "kerasteps.schedule",
        "kerasteps.distribute",
        "kerasteps._resume_state",
    ],
    [
        "kerasteps.event_files",
        "kerasteps._tracking",
        "kerasteps.data",
        "kerasteps.mixtures",
    ],
    ["kerasteps.checkpoint."],
    ["kerasteps.callbacks.", "kerasteps.models."],
    ["kerasteps.recipe."],
    ["kerasteps.recipes.", "kerasteps.cli.", "kerasteps"],
]


def floor(name: str) -> int:
    """The floor of module `name` (`FLOORS`); a module on none is an error."""
    matches = [
        (len(prefix), number)
        for number, prefixes in enumerate(FLOORS)
        for prefix in prefixes
        if name == prefix.rstrip(".")
        or (prefix.endswith(".") and name.startswith(prefix))
    ]
    assert matches, f"{name} is on no floor: add it to FLOORS (and the docs)"
    return max(matches)[1]  # the longest prefix: `kerasteps` is the top's alone


def climbs(edges: dict[str, set[str]]) -> list[str]:
    """Every import from a lower floor to a higher one, as `module -> target`."""
    return sorted(
        f"{name} -> {target}"
        for name, targets in edges.items()
        for target in targets
        if floor(target) > floor(name)
    )


def test_climbs_finds_a_climb():
    edges = {"kerasteps.steps": {"kerasteps.callbacks.base", "kerasteps._compat"}}
    assert climbs(edges) == ["kerasteps.steps -> kerasteps.callbacks.base"]
    assert climbs({"kerasteps.cli._plot": {"kerasteps.steps", "kerasteps"}}) == []
    assert floor("kerasteps.checkpoint") == floor("kerasteps.checkpoint.store") == 3
    assert floor("kerasteps") == len(FLOORS) - 1


def test_imports_go_down_the_floors():
    """No module imports from a floor above its own: the test names each import
    that climbs (function-level and `TYPE_CHECKING` imports included)."""
    assert climbs(graph()) == []


def test_recipes_import_only_the_public_api():
    """A recipe is an example: it imports no `_private` kerasteps module or name."""
    found = []
    for name, path in modules().items():
        if not name.startswith("kerasteps.recipes"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "kerasteps"
            ):
                names = [node.module, *(alias.name for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("kerasteps")]
            else:
                continue
            if any(part.startswith("_") for n in names for part in n.split(".")):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def _private_assignments(path: Path) -> list[str]:
    """`x._name = ...` (or `+=`, `setattr(x, "_name", ...)`) where x is not
    `self` or `cls`."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
        ):
            found.append(f"{path.name}:{node.lineno} setattr {node.args[1].value}")
        for target in targets:
            for sub in ast.walk(target):
                if (
                    isinstance(sub, ast.Attribute)
                    and sub.attr.startswith("_")
                    and not sub.attr.startswith("__")
                    and not (
                        isinstance(sub.value, ast.Name)
                        and sub.value.id in ("self", "cls")
                    )
                    and isinstance(sub.ctx, ast.Store)
                ):
                    found.append(f"{path.name}:{sub.lineno} {ast.unparse(sub)}")
    return found


def test_no_module_assigns_another_objects_private_attribute():
    found = {
        name: problems
        for name, path in modules().items()
        if name != "kerasteps._compat"
        for problems in [_private_assignments(path)]
        if problems
    }
    assert found == {}


def test_private_assignment_check_sees_one(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f(cb):\n    cb._last = 1\n    self._own = 2\n")
    assert _private_assignments(path) == ["m.py:2 cb._last"]


#: TensorBoard's protos (`tensorboard.compat.proto`) are how its own writers make
#: records: public. Its `compat.notf` stub is not (in `_compat.py`).
PRIVATE_PREFIXES = ("keras.src", "tensorflow.python", "tensorboard.compat.tensorflow")


def test_private_keras_names_only_in_compat():
    """No import from `keras.src`, `tensorflow.python` or TensorBoard's TF stub
    outside `_compat.py` (its functions say why no public way serves)."""
    found = []
    for name, path in modules().items():
        if name == "kerasteps._compat":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            module = None
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            if module and module.startswith(PRIVATE_PREFIXES):
                found.append(f"{path.name}:{node.lineno} {module}")
    assert found == []


def shape(root: Path) -> dict[str, object]:
    """The figures of a checkout's shape: modules at the package's top, import
    arrows, circles, the longest function (without its docstring), README lines."""
    global ROOT, PACKAGE
    saved = ROOT, PACKAGE
    ROOT, PACKAGE = root, root / "kerasteps"
    try:
        found = modules()
        edges = graph()
    finally:
        ROOT, PACKAGE = saved
    top = [
        name
        for name, path in found.items()
        if name.count(".") == 1 and path.name != "__init__.py"
    ]
    longest = (0, "")
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                lines -= first.end_lineno - first.lineno + 1
            longest = max(longest, (lines, f"{name}.{node.name}"))
    return {
        "modules at the top": len(top),
        "of them private": sum(name.split(".")[1].startswith("_") for name in top),
        "modules": len(found),
        "import arrows": sum(len(targets) for targets in edges.values()),
        "circles": circles(edges),
        "longest function": longest,
        "README lines": len((root / "README.md").read_text().splitlines()),
    }


if __name__ == "__main__":
    # python -m tests.test_architecture [CHECKOUT]: the figures of its shape.
    import sys

    for key, value in shape(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT)).items():
        print(f"{key}: {value}")
