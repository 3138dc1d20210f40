"""kerasteps: step-centred training for Keras 3.

A true global step saved with the model, one `Every` schedule, callbacks that act every
N steps, a WGAN `train_step` subclass, reusable models, recipes and a launcher.
`global_step`, `step_counters`, `count_optimizer_steps` and `load_model` import
Keras on first use, so `import kerasteps` (and the `kerasteps` launcher's `--help`,
`list`, `summary`, `plot`) stays fast. `quiet_startup()`, called before the first
`import keras`, starts TensorFlow without its start-up log lines. A Keras newer than
the tested range gets one WARNING naming the range: here when Keras is imported
already, else when kerasteps first imports it.

Example:

>>> import kerasteps
>>> kerasteps.Every(100, start=1)
Every(100, start=1)
"""

import sys
from typing import Any

from kerasteps import _compat
from kerasteps._startup import quiet_startup
from kerasteps.schedule import Every

if "keras" in sys.modules:  # else `kerasteps.steps` checks, as it imports Keras
    _compat.check_keras_version()

__version__ = "0.1.0"

_FROM_STEPS = ("count_optimizer_steps", "global_step", "step_counters")

__all__ = ["Every", *_FROM_STEPS, "__version__", "load_model", "quiet_startup"]


def __getattr__(name: str) -> Any:
    if name in _FROM_STEPS:
        from kerasteps import steps

        return getattr(steps, name)
    if name == "load_model":
        from kerasteps.models._saving import load_model

        return load_model
    raise AttributeError(f"module 'kerasteps' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + [*_FROM_STEPS, "load_model"])
