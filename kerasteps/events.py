"""Deprecated: `kerasteps.events` is `kerasteps.event_files` now.

"Event" is what a callback gets at a step (`kerasteps.callbacks.StepEvent`);
TensorBoard's records are read by `kerasteps.event_files`. The old path keeps
working for one release, with a `DeprecationWarning`; import `read_scalars`,
`find_runs` and `is_event_file` from `kerasteps.event_files`.
"""

import warnings

from kerasteps.event_files import *  # noqa: F403
from kerasteps.event_files import __all__  # noqa: F401

warnings.warn(
    "kerasteps.events is deprecated and will be removed in the next release; "
    "import from kerasteps.event_files instead.",
    DeprecationWarning,
    stacklevel=2,
)
