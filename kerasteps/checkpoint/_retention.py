"""`Retention`: which checkpoints of a directory a save keeps, as one rule (private).

The kept checkpoints are the union of the newest `keep`, the `keep_best` best by
the monitored value that each checkpoint's `meta.json` records, and optionally the
first checkpoint of every `keep_every_steps` steps and of every `keep_every_hours`
hours (TF1's `keep_checkpoint_every_n_hours`). Everything is decided from what the
checkpoints on disk record, so a restarted run keeps the same ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kerasteps._validate import (
    check_choice,
    check_int,
    check_name,
    check_positive_number,
)
from kerasteps.checkpoint._format import CheckpointInfo

#: How a monitored value's name tells its direction, as Keras's callbacks infer it.
_MAX_HINTS = ("acc", "accuracy", "auc", "precision", "recall", "f1", "iou")


def infer_mode(monitor: str, mode: str) -> str:
    """`"min"` or `"max"` for `monitor`: `mode` when given, else inferred from the
    name as Keras does (an accuracy, AUC, precision, recall, F1 or IoU: `"max"`;
    anything else: `"min"`).

    Raises:
        ValueError: if `mode` is not `"auto"`, `"min"` or `"max"`, or contradicts
            the direction the name tells (`mode="max"` for `"val_loss"`).

    Example:

    >>> from kerasteps.checkpoint._retention import infer_mode
    >>> infer_mode("val_loss", "auto"), infer_mode("val_accuracy", "auto")
    ('min', 'max')
    """
    check_choice("mode", mode, ("auto", "min", "max"))
    name = monitor.lower()
    known = None
    if name.endswith("loss") or name.endswith("error"):
        known = "min"
    elif any(name.endswith(hint) for hint in _MAX_HINTS):
        known = "max"
    if mode == "auto":
        return known or "min"
    if known is not None and mode != known:
        raise ValueError(
            f"`mode` {mode!r} contradicts `monitor` {monitor!r}, whose name tells "
            f"that {'lower' if known == 'min' else 'higher'} is better: pass "
            f"mode={known!r} or mode='auto'."
        )
    return mode


def is_better(value: float, than: float | None, mode: str, min_delta: float) -> bool:
    """Whether `value` improves on `than` (None: nothing yet) by more than
    `min_delta`, in `mode`'s direction. A value that is not finite never does.

    Example:

    >>> from kerasteps.checkpoint._retention import is_better
    >>> is_better(0.5, 0.6, "min", 0.0), is_better(0.59, 0.6, "min", 0.05)
    (True, False)
    """
    if not math.isfinite(value):
        return False
    if than is None:
        return True
    return value < than - min_delta if mode == "min" else value > than + min_delta


def ranked(values: dict[int, float], mode: str, keep: int) -> dict[int, float]:
    """The `keep` best of finite `{step: value}`, best first (ties: the earlier
    step).

    Example:

    >>> from kerasteps.checkpoint._retention import ranked
    >>> ranked({10: 0.3, 20: 0.2, 30: 0.2}, "min", 2)
    {20: 0.2, 30: 0.2}
    """
    sign = 1.0 if mode == "min" else -1.0
    best = sorted(values.items(), key=lambda item: (sign * item[1], item[0]))
    return dict(best[:keep])


@dataclass(frozen=True)
class Retention:
    """Which checkpoints a save keeps: the union of the newest `keep`, the
    `keep_best` best and, optionally, one every `keep_every_steps` steps and one
    every `keep_every_hours` hours.

    Attributes:
        keep: Positive int: the newest checkpoints to keep (the newest is always
            kept: a resume needs it).
        monitor: The monitored value's name (`"val_loss"`), or None.
        mode: `"min"` or `"max"`: which values are better.
        keep_best: Int >= 0: the best checkpoints to keep, by the value of
            `monitor` that their `meta.json` records. A value that is not finite is
            never best; of equal values, the earlier step ranks first.
        keep_every_steps: Positive int or None: also keep the first checkpoint of
            each span of that many steps (steps 0 to N-1, N to 2N-1...).
        keep_every_hours: Positive number or None: also keep the first checkpoint
            of each span of that many hours of wall-clock time.

    Example:

    >>> from kerasteps.checkpoint import CheckpointInfo
    >>> from kerasteps.checkpoint._retention import Retention
    >>> infos = [CheckpointInfo(f"ckpt-{s}", s, "", 0.0, "val_loss", v)
    ...          for s, v in [(10, 0.3), (20, 0.5), (30, 0.4), (40, 0.6)]]
    >>> sorted(Retention(1, "val_loss", "min", 2).kept(infos))
    ['ckpt-10', 'ckpt-30', 'ckpt-40']
    """

    keep: int = 3
    monitor: str | None = None
    mode: str = "min"
    keep_best: int = 0
    keep_every_steps: int | None = None
    keep_every_hours: float | None = None

    def __post_init__(self) -> None:
        check_int("keep", self.keep)
        check_choice("mode", self.mode, ("min", "max"))
        check_int("keep_best", self.keep_best, 0)
        check_name(self.monitor, "monitor", optional=True, hint=" such as 'val_loss'")
        if self.keep_best and self.monitor is None:
            raise ValueError(
                f"`keep_best` ({self.keep_best}) needs `monitor`, the value that "
                "ranks the checkpoints (such as 'val_loss'); received monitor=None."
            )
        if self.keep_every_steps is not None:
            check_int("keep_every_steps", self.keep_every_steps)
        if self.keep_every_hours is not None:
            check_positive_number("keep_every_hours", self.keep_every_hours)

    def best(self, entries: list[CheckpointInfo]) -> list[CheckpointInfo]:
        """The `keep_best` best of `entries`, best first (those that record a
        finite value of `monitor`)."""
        judged = {  # a CheckpointInfo's value is finite or None
            e.step: e
            for e in entries
            if e.monitor == self.monitor and e.value is not None
        }
        values = {step: e.value for step, e in judged.items()}
        return [judged[step] for step in ranked(values, self.mode, self.keep_best)]

    def kept(self, entries: list[CheckpointInfo]) -> set[str]:
        """The names of `entries` (oldest save first) that the rule keeps."""
        kept = {e.name for e in entries[-self.keep :]}
        kept.update(e.name for e in self.best(entries))
        spans: list[tuple[Any, ...]] = []
        if self.keep_every_steps is not None:
            spans += [("steps", e.step // self.keep_every_steps, e) for e in entries]
        if self.keep_every_hours is not None:
            hours = 3600.0 * self.keep_every_hours
            spans += [("hours", math.floor(e.time / hours), e) for e in entries]
        first: dict[tuple[str, int], CheckpointInfo] = {}
        for kind, span, entry in spans:
            held = first.get((kind, span))
            if held is None or entry.step < held.step:
                first[(kind, span)] = entry
        kept.update(e.name for e in first.values())
        return kept

    def table(self, entries: list[CheckpointInfo]) -> dict[str, Any] | None:
        """The best table for the index (`{"monitor", "mode", "keep_best",
        "checkpoints": [{"name", "step", "value"}, ...]}`, best first), or None
        without `keep_best`."""
        if not self.keep_best:
            return None
        return {
            "monitor": self.monitor,
            "mode": self.mode,
            "keep_best": self.keep_best,
            "checkpoints": [
                {"name": e.name, "step": e.step, "value": e.value}
                for e in self.best(entries)
            ],
        }
