"""kerasteps: step-centred training for Keras 3.

A true global step saved with the model, one `Every` schedule, callbacks that act every
N steps, a WGAN `train_step` subclass, reusable models, recipes and a launcher.
`global_step`, `step_counters` and `count_optimizer_steps` import Keras on first
use, so `import kerasteps` (and the `kerasteps` launcher's `--help`, `list`) stays
fast.

Example:

>>> import kerasteps
>>> kerasteps.Every(100, start=1)
Every(100, start=1)
"""

from typing import Any

from kerasteps.schedule import Every

__version__ = "0.1.0"

_FROM_STEPS = ("count_optimizer_steps", "global_step", "step_counters")

__all__ = ["Every", *_FROM_STEPS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _FROM_STEPS:
        from kerasteps import steps

        return getattr(steps, name)
    raise AttributeError(f"module 'kerasteps' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_FROM_STEPS))
