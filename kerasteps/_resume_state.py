"""`ResumeState`: what a restored checkpoint hands to the model's next run.

Part of the step contract (a run continues across `fit()` calls and restarts), below
the checkpoints that write it and the data pipeline that reads it
(`kerasteps.data.skip_consumed`); exported as `kerasteps.checkpoint.ResumeState`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kerasteps._validate import check_int, check_name, check_that, is_mapping_of

__all__ = ["ResumeState"]

#: The model attribute that holds the state until the next run takes it. The model
#: is the one object both ends see: `StepCheckpoint.restore_latest(model, dir)` is a
#: static method called before the callbacks of the run exist, and
#: `kerasteps.data.skip_consumed(dataset, model)` runs before `fit()`.
_ATTRIBUTE = "_kerasteps_resume_state"


_WINDOWS = "a mapping {schedule: {metric: [total, count]}}"


@dataclass(frozen=True)
class ResumeState:
    """What a run of a model continues from: a restored checkpoint, or the end of
    the model's previous `fit()`.

    `StepCheckpoint.restore_latest` (and `restore`, `restore_checkpoint`) attach
    one to the model they restore, and the next `fit()` of that model takes it:
    its sinks' first points are the same means an uninterrupted run writes, they
    know the run they continue (and drop their own points after `step`), and a
    resume with another batch size is refused. A `fit()` that ends attaches the
    state at its final step, so that the model's next `fit()` continues the run.

    Each field is checked when the state is made (`TypeError` or `ValueError`
    naming it).

    Attributes:
        step: The global step the state belongs to (an int >= 0). A run that
            starts at another step (the model trained or was restored again in
            between) ignores it.
        windows: Per schedule (`repr(every)`), the `[total, count]` of each mean
            metric since that schedule's previous point: the open windows.
        run_id: The id of the run that saved the state (32 hex digits), or None
            when unknown (a checkpoint of an older kerasteps).
        examples_per_step: The examples per batch the state was trained with, or
            None when unknown.
        source: Where the state came from (a checkpoint's path), for messages.
        links: `{name: id}`: what the run is known as elsewhere, e.g. the id of its
            MLflow run (`MLflowLogger`), carried the same way as `run_id`.
        forked_from: None, or for a fork (a checkpoint restored from a copy of
            its folder while the original still exists, or into a run that saves
            its checkpoints in another directory) the run it branches off:
            `{"run_id": ..., "step": ..., "links": {...}}`. A fork is a run of its
            own (a new run id, no links): it never writes its parent's MLflow run.
        decisions: `{state_key: state}`: what the deciding callbacks of the run
            (`StepEarlyStopping`...) had decided at `step` (their `state_dict()`),
            for the same callbacks of the next run (`StepRun.saved_state`).

    Example:

    >>> import keras
    >>> from kerasteps.checkpoint import ResumeState
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> ResumeState.of(model) is None
    True
    >>> ResumeState(step=0, examples_per_step=8).attach(model)
    >>> ResumeState.of(model).examples_per_step
    8
    >>> ResumeState.take(model, step=0).step, ResumeState.of(model)
    (0, None)
    """

    step: int
    windows: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    run_id: str | None = None
    examples_per_step: int | None = None
    source: str | None = None
    links: Mapping[str, str] = field(default_factory=dict)
    forked_from: Mapping[str, Any] | None = None
    decisions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int("step", self.step, 0)
        ok = is_mapping_of(self.windows, Mapping)
        check_that("windows", self.windows, ok, _WINDOWS)
        check_name(self.run_id, "run_id", optional=True)
        if self.examples_per_step is not None:
            check_int("examples_per_step", self.examples_per_step)
        check_name(self.source, "source", optional=True)
        ok = is_mapping_of(self.links, str)
        check_that("links", self.links, ok, "a mapping {name: id} of strings")
        ok = self.forked_from is None or is_mapping_of(self.forked_from)
        check_that("forked_from", self.forked_from, ok, "None or a mapping")
        ok = is_mapping_of(self.decisions, Mapping)
        check_that("decisions", self.decisions, ok, "a mapping {key: state mapping}")

    def attach(self, model: Any) -> None:
        """Hands this state to the model's next run (replacing any held before).

        Args:
            model: The Keras model the state belongs to.
        """
        object.__setattr__(model, _ATTRIBUTE, self)

    @staticmethod
    def of(model: Any) -> ResumeState | None:
        """The state the model's next run will take, or None; leaves it there.

        Args:
            model: A Keras model.
        """
        state = getattr(model, _ATTRIBUTE, None)
        return state if isinstance(state, ResumeState) else None

    @staticmethod
    def take(model: Any, step: int) -> ResumeState | None:
        """Takes the model's state for a run that starts at `step`.

        The state is removed from the model either way; None when there is none,
        or when it belongs to another step.

        Args:
            model: A Keras model.
            step: The global step the run starts at.
        """
        state = ResumeState.of(model)
        if state is not None:
            object.__delattr__(model, _ATTRIBUTE)
        return state if state is not None and state.step == step else None
