"""kerasteps recipes: runnable training scripts, one file per scenario.

Each `NAME.py` here (files starting with `_` excepted) is a recipe, and reads top to
bottom as a tutorial of the scenario it answers. This folder is installed as the
package `kerasteps.recipes`. Run one by name, or as a script from a clone:

```
kerasteps run NAME [OPTIONS]               # `kerasteps list` shows the names
python recipes/NAME.py [OPTIONS]           # the same file
```

A recipe has a module docstring whose first line is its description, a click
command `main` taking the common options of `kerasteps.recipe.common_options`, and
`if __name__ == "__main__": main()`. See `kerasteps/recipe/__init__.py` for the full
contract and a minimal example. Recipes import only kerasteps's public API; the
library never imports a recipe.
"""
