"""kerasteps: step-centred training for Keras 3.

A true global step saved with the model, one `Every` schedule, callbacks that act every
N steps, a WGAN `train_step` subclass, reusable models, recipes and a launcher.

Example:

>>> import kerasteps
>>> kerasteps.Every(100, start=1)
Every(100, start=1)
"""

from kerasteps.schedule import Every
from kerasteps.steps import global_step, step_counters

__version__ = "0.1.0"

__all__ = ["Every", "global_step", "step_counters", "__version__"]
