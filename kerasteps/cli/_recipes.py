"""The launcher's side of recipes: finding, describing and loading recipe files.

`kerasteps list` and `kerasteps run NAME` look for `NAME.py` (a `-` in `NAME` is read
as `_`; files whose name starts with `_` are not recipes) in the package
`kerasteps.recipes`, which ships with every install: the top-level `recipes/`
folder of a clone (an editable install maps the package to it). A user's own recipe
is run by path: `kerasteps run path/to/my_recipe.py`.

`kerasteps run` loads the file in the launcher's own process (not as `__main__`, so
its `if __name__ == "__main__"` block does not run), takes its `main` command and
calls it with the remaining arguments and the program name `kerasteps run NAME`:
`--help` shows the recipe's options and a bad option exits with status 2, exactly as
`python -m kerasteps.recipes.NAME` does.

Writing a recipe (the authoring kit and the recipe-file contract) is
`kerasteps.recipe`'s concern; this module is only the launcher's.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from pathlib import Path

import click

#: The folder of the bundled recipes: the package `kerasteps.recipes`, found
#: without importing it.
BUNDLED = Path(
    importlib.util.find_spec("kerasteps.recipes").submodule_search_locations[0]
)


def find_recipes(folder: str | os.PathLike | None = None) -> dict[str, Path]:
    """Finds the recipes in a folder by name, without importing them.

    Args:
        folder: The folder to search; `None` (the default) searches `BUNDLED`.

    Returns:
        A `dict` sorted by name, mapping each recipe name (the file's stem) to its
        file. Files whose name starts with `_` are skipped; a missing folder has
        none.

    Example:

    >>> import pathlib, tempfile
    >>> from kerasteps.cli._recipes import find_recipes
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "hello.py").write_text('\"\"\"Say hello.\"\"\"')
    >>> _ = (folder / "_helper.py").write_text("x = 1")
    >>> list(find_recipes(folder))
    ['hello']
    >>> sorted(find_recipes())
    ['batch_vs_sgd', 'global_step', 'image_classifier', 'wgan', 'wgan_images']
    """
    return {  # a missing folder globs nothing
        path.stem: path
        for path in sorted(Path(BUNDLED if folder is None else folder).glob("*.py"))
        if not path.name.startswith("_") and path.is_file()
    }


def recipe_description(path: str | os.PathLike) -> str:
    """Returns the first line of a recipe file's docstring, read without importing.

    Args:
        path: The recipe file.

    Returns:
        The first non-empty line of the module docstring, `"(no description)"` if
        it has none, or `"(unreadable: ...)"` if the file cannot be parsed.

    Example:

    >>> import pathlib, tempfile
    >>> from kerasteps.cli._recipes import recipe_description
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "hello.py"
    >>> _ = path.write_text('\"\"\"Say hello.\\n\\nMore text.\"\"\"\\nimport click\\n')
    >>> recipe_description(path)
    'Say hello.'
    """
    try:
        source = Path(path).read_text(encoding="utf-8")
        docstring = ast.get_docstring(ast.parse(source, filename=str(path)))
    except (OSError, SyntaxError, ValueError) as error:
        return f"(unreadable: {type(error).__name__}: {error})"
    lines = (docstring or "").strip().splitlines()
    return lines[0].strip() if lines else "(no description)"


def load_recipe(path: str | os.PathLike) -> click.Command:
    """Loads a recipe file and returns its `main` click command.

    The file is executed as a module named `kerasteps_recipe_<stem>` (not as
    `__main__`), so its `if __name__ == "__main__": main()` block does not run.

    Args:
        path: The recipe file.

    Returns:
        The file's `main`, a `click.Command`; call it with
        `main.main(args=[...], prog_name="...")`.

    Raises:
        FileNotFoundError: if `path` is not a file.
        ValueError: if the file defines no click command named `main`.

    Example:

    >>> import pathlib, tempfile
    >>> from kerasteps.cli._recipes import load_recipe
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "hello.py"
    >>> _ = path.write_text(
    ...     '\"\"\"Say hello.\"\"\"\\nimport click\\n'
    ...     '@click.command()\\ndef main():\\n    click.echo("hello")\\n'
    ... )
    >>> load_recipe(path).name
    'main'
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"`path` is not a recipe file, received {str(path)!r}.")
    name = "kerasteps_recipe_" + "".join(c if c.isalnum() else "_" for c in path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"`path` cannot be loaded as Python, received {str(path)!r}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    command = getattr(module, "main", None)
    if not isinstance(command, click.Command):
        raise ValueError(
            f"The recipe file {str(path)!r} defines no click command named `main` "
            f"(found {type(command).__name__}); decorate it with @click.command()."
        )
    return command
