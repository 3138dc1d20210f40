"""Deprecated: `kerasteps.checkpoint_store` is `kerasteps.checkpoint.store` now.

The old path keeps working for one release, with a `DeprecationWarning`; import
`CheckpointStore`, `CheckpointInfo` and `NonFiniteStateError` from
`kerasteps.checkpoint`.
"""

import warnings

from kerasteps.checkpoint.store import *  # noqa: F403
from kerasteps.checkpoint.store import __all__  # noqa: F401

warnings.warn(
    "kerasteps.checkpoint_store is deprecated and will be removed in the next "
    "release; import from kerasteps.checkpoint instead.",
    DeprecationWarning,
    stacklevel=2,
)
