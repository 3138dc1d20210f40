"""kerasteps: step-centred training for Keras 3.

A true global step saved with the model, one `Every` schedule, callbacks that act every
N steps, a WGAN `train_step` subclass, reusable models, recipes and a launcher.
`global_step` and `step_counters` import Keras on first use, so `import kerasteps`
(and the `kerasteps` launcher's `--help`, `list`) stays fast.

Example:

>>> import kerasteps
>>> kerasteps.Every(100, start=1)
Every(100, start=1)
"""

from typing import Any

from kerasteps.schedule import Every

__version__ = "0.1.0"

__all__ = ["Every", "global_step", "step_counters", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("global_step", "step_counters"):
        from kerasteps import steps

        return getattr(steps, name)
    raise AttributeError(f"module 'kerasteps' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + ["global_step", "step_counters"])
