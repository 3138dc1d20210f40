"""The recipe authoring kit: what every recipe shares.

A **recipe** is one Python file that trains something with kerasteps and can be run
three ways, with the same options:

```
kerasteps run global_step --steps 500                # a bundled recipe, by name
python recipes/global_step.py --steps 500            # the same file, from a clone
python -m kerasteps.recipes.global_step --steps 500  # the installed copy
kerasteps run path/to/my_recipe.py --steps 500       # a user's own file, by path
```

The recipe-file contract
------------------------

A recipe file

1. has a module docstring whose **first line is its one-line description** (shown by
   `kerasteps list`, which reads it with `ast` without importing the file);
2. defines a click command named **`main`**, decorated with `@click.command()`;
3. takes the common options through `@common_options(...)` (below `@click.command()`),
   so that its function receives `steps`, `log_every`, `log_dir`, `seed` and `resume`
   keyword arguments (less those it leaves out: `common_options(steps=None)`), plus
   any options of its own;
4. ends with `if __name__ == "__main__": main()`;
5. imports only kerasteps's public API (and keras, tensorflow, numpy, click, ...);
   heavy imports may go inside `main` so that `--help` stays fast.

Minimal example (`hello.py`):

```python
\"\"\"Fit a line and log the loss every N global steps.

Longer help text, shown by `--help` after the first line.
\"\"\"

import click

from kerasteps.recipe import common_options, print_log_hint


@click.command()
@common_options(steps=200, log_every=50, log_dir="logs/hello")
@click.option("--lr", type=float, default=0.1, show_default=True, help="SGD rate.")
def main(steps, log_every, log_dir, seed, resume, lr):
    \"\"\"Fit a line and log the loss every N global steps.\"\"\"
    import keras
    keras.utils.set_random_seed(seed)
    ...  # build, compile, fit until the global step reaches `steps`
    print_log_hint(log_dir)


if __name__ == "__main__":
    main()
```

Meaning of the common options: `--steps` is the global step to train to (a resumed
run continues up to it, it does not add `steps` more); `--log-every` the period of
the `kerasteps.Every` schedule the recipe's callbacks share; `--log-dir` the folder of
the recipe's runs: each run writes its event files, JSON lines, checkpoints and model
to its own `LOG_DIR/run-N` (`start_run`); `--seed` the seed for
`keras.utils.set_random_seed`; `--resume` continue the latest run from its newest
checkpoint (without it a new run starts at step 0); `--mlflow URI` also log the run
to an MLflow tracking server; `--max-time SECONDS` stop before this process has run
that long (a scheduler's slot), `--time-budget SECONDS` before that much training
time across `--resume` (both leave time for the final checkpoint: `StopAtTime`);
these three through the callbacks `option_callbacks(run.folder, every)` returns (a
recipe adds them to its own); `--verbose` show TensorFlow's start-up lines, which
are held back otherwise. `--keep-best K` and `--early-stopping PATIENCE` belong to
the recipes that validate (image_classifier); the others refuse them with one line
and status 2.

A recipe's `main` body typically reads:

```python
model = ...  # built and compiled
run = start_run(log_dir, resume, model=model, steps=steps)  # prints "New run: ..."
if run.stop is None:
    return  # already at --steps
callbacks = [StepTensorBoard(run.folder, ...), ..., run.stop]
model.fit(..., callbacks=callbacks + option_callbacks(run.folder, log_every))
model.save(os.path.join(run.folder, "model.keras"))
print_log_hint(run.folder)
```

`start_run` is the one way to a run's folder: `settings=` makes it refuse a
`--resume` with other settings (`LOG_DIR/run-N/run.json`). The rest of the kit
serves recipes that train several models in one run, or time their training
(`batch_vs_sgd`): `start_run` without a model gives the folder, and
`resume_from_checkpoint` restores each model and says from where; `ProvideEvery`
hands a recipe's own measurement to the sinks; `TrainingClock` sums the time inside
`fit`'s training calls, after `warm_up` compiled them; `exit_if_interrupted` ends a
run that SIGTERM or Ctrl-C stopped with the status a signalled process has.
`steps_per_call` picks `steps_per_execution` so that every log step and the last
step end a compiled call; `load_arrays` reads a user's `--data` file of numbers, or
refuses it with a usage error.

Where recipes are found
-----------------------

The bundled recipes are the files of the top-level `recipes/` folder of a clone,
installed as the package `kerasteps.recipes`; `kerasteps list` shows them and
`kerasteps run NAME` runs one (a `-` in `NAME` is read as `_`). Finding and loading
recipe files is the launcher's concern (`kerasteps list`, `kerasteps run`).
"""

from typing import Any

from kerasteps.recipe._options import (
    common_options,
    load_arrays,
    log_to_console,
    option_callbacks,
)
from kerasteps.recipe._run import (
    Run,
    exit_if_interrupted,
    print_log_hint,
    resume_from_checkpoint,
    start_run,
    steps_per_call,
    warm_up,
)

__all__ = [
    "ProvideEvery",
    "Run",
    "TrainingClock",
    "common_options",
    "exit_if_interrupted",
    "load_arrays",
    "log_to_console",
    "print_log_hint",
    "resume_from_checkpoint",
    "start_run",
    "steps_per_call",
    "option_callbacks",
    "warm_up",
]


def __getattr__(name: str) -> Any:
    # The kit's two callbacks import Keras, which must come after `common_options`
    # has quieted TensorFlow's start-up (`kerasteps.quiet_startup`): on first use.
    if name == "ProvideEvery":
        from kerasteps.recipe._provide_every import ProvideEvery

        return ProvideEvery
    if name == "TrainingClock":
        from kerasteps.recipe._clock import TrainingClock

        return TrainingClock
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
