"""kerasteps recipes: runnable training scripts, one file per scenario.

This folder is the repository's top-level `recipes/` and, once installed, the package
`kerasteps._recipes`: `pyproject.toml` maps it with
`[tool.setuptools.package-dir] "kerasteps._recipes" = "recipes"`, so the wheel ships
these files and an editable install points at this folder. `kerasteps list` and
`kerasteps run NAME` find them there (`kerasteps.recipe.find_recipes`).

Each `NAME.py` here (files starting with `_` excepted) is a recipe: a module docstring
whose first line is its description, a click command `main` taking the common options
of `kerasteps.recipe.common_options`, and `if __name__ == "__main__": main()`. See
`kerasteps/recipe.py` for the full contract and a minimal example. Recipes import only
kerasteps's public API; the library never imports a recipe.
"""
