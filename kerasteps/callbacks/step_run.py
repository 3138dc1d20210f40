"""`StepRun`: what a kerasteps callback knows of the run it is part of."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kerasteps import distribute
from kerasteps._resume_state import ResumeState
from kerasteps._validate import check_that

__all__ = ["StepRun"]


class StepRun:
    """One `fit()` call of one model, as its kerasteps callbacks see it.

    Every kerasteps callback of a `fit()` call shares one run: `callback.run`
    during the run, and `event.run` in `on_step`. It is the whole contract between
    callbacks: they learn the step from the event, the facts of the run from here,
    and tell each other things only through it (a guard marks a non-finite step, a
    checkpoint reads the mark; a sink asks whether a name may be provided). The
    dispatcher keeps each callback's window and last fired step itself.

    Args:
        dispatcher: The dispatcher of the `fit()` call, which makes its run (with
            its `model`, `tracker` and `carry`); a callback only reads the run.

    Attributes:
        model: The Keras model being trained.
        start_step: The global step when `fit()` began (a resumed run's restored
            step).
        global_counter: The name of the counter that is the global step (`"step"`
            for a plain model, `"g_step"` for a WGAN).
        counter_names: The model's step counters (`["step"]`, `["d_step",
            "g_step"]`).
        accumulation: Gradient accumulation steps of the global optimizer (1 when
            off): batches per global step.
        steps_per_execution: The model's `steps_per_execution`: the step moves by
            this at a batch end (divided by `accumulation`).
        is_chief: False on a worker other than the chief (multi-worker
            `tf.distribute`, JAX multi-process): chief-only callbacks do nothing
            there.
        lockstep: True where several processes train the model (multi-worker
            `tf.distribute`, JAX multi-process): they must act at the same steps,
            so nothing may decide by one process's clock.
        run_id: The id of the run (32 hex digits), carried by every checkpoint and
            from one `fit()` to the next of the same model: new when a run starts
            at step 0.
        run_known: False when the run continues a state whose run is unknown (a
            model loaded from a `.keras` file at a step > 0): sinks keep what they
            find.
        links: `{name: id}`: what the run is known as elsewhere, carried with
            `run_id` by every checkpoint (`meta.json`'s `links`) and from one
            `fit()` to the next; a callback that creates the run in another system
            records its id here (`MLflowLogger`: `"mlflow_run_id"`) to find it
            again on resume. Ids are strings of at most 256 characters.
        forked_from: None, or the run this one branches off (a checkpoint
            restored from a copy of its folder while the original still exists):
            `{"run_id": ..., "step": ..., "links": {...}}`.
        resumed_from: The path of the checkpoint the run was restored from
            (`StepCheckpoint.restore_latest`), or None.
        thread: The id of the thread that runs `fit()` (Keras calls the callbacks'
            hooks there).
        began: `time.monotonic()` when the run began: at the first kerasteps
            callback's `on_train_begin`, before any of them did its own work.
        non_finite_at: The step where a guard found a non-finite value
            (`mark_non_finite`), or None: a checkpoint does not save that step.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StepCallback
    >>> class Show(StepCallback):
    ...     def on_run_begin(self, start_step):
    ...         run = self.run
    ...         print(run.start_step, run.steps_per_execution, run.global_counter)
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse", steps_per_execution=2)
    >>> x = np.zeros((8, 1))
    >>> _ = model.fit(x, x, batch_size=2, verbose=0, callbacks=[Show(every=2)])
    0 2 step
    """

    def __init__(self, dispatcher: Any):
        parts = ("model", "tracker", "carry")
        ok = all(hasattr(dispatcher, part) for part in parts)
        check_that("dispatcher", dispatcher, ok, "the dispatcher of a `fit()` call")
        self._dispatcher = dispatcher
        tracker, carry = dispatcher.tracker, dispatcher.carry
        self.model = dispatcher.model
        self.start_step: int = tracker.start_step
        self.global_counter: str = tracker.global_name
        self.counter_names: list[str] = list(tracker.counter_names)
        self.accumulation: int = tracker.accumulation
        self.steps_per_execution: int = tracker.steps_per_execution
        self.is_chief: bool = distribute.is_chief(self.model)
        self.lockstep: bool = dispatcher.lockstep
        self.run_id: str = carry.run_id
        self.run_known: bool = carry.run_known
        self.links: dict[str, str] = carry.links
        self.forked_from: Mapping[str, Any] | None = carry.forked_from
        self.resumed_from: str | None = carry.resumed_from
        self.thread: int = threading.get_ident()
        self.began: float = dispatcher.began
        self.non_finite_at: int | None = None

    @property
    def step(self) -> int:
        """The global step now (after the latest update the run tracked)."""
        return self._dispatcher.tracker.step

    @property
    def checkpoint_directory(self) -> str | None:
        """The directory of this run's `StepCheckpoint` (the first, if several), or
        None. Every callback of `fit()` has joined the run once its first batch
        ends; before that, one listed after the caller may not have."""
        return self._dispatcher.checkpoint_directory()

    @property
    def checkpoint_monitor(self) -> str | None:
        """The value that this run's `StepCheckpoint` ranks its checkpoints by
        (its `monitor`), or None."""
        checkpointer = self._dispatcher.checkpointer()
        return None if checkpointer is None else checkpointer.monitor

    @property
    def checkpoint_seconds(self) -> float:
        """How long the longest save of this run's `StepCheckpoint` took so far
        (state copy to commit), or 0.0 (none yet, or no `StepCheckpoint`)."""
        checkpointer = self._dispatcher.checkpointer()
        return 0.0 if checkpointer is None else checkpointer.save_seconds

    @property
    def ended(self) -> bool:
        """True once the run is over (`fit()` ended, or a callback aborted it)."""
        return self._dispatcher.ended

    @property
    def acting(self) -> bool:
        """True while kerasteps callbacks of this run act (a run's begin, a step's
        dispatch, an epoch end, the run's end).

        On the training thread (`thread`) while the run has not `ended`, False
        means the thread is elsewhere: in Keras, another callback, or past a
        `fit()` that raised (Keras calls no hook then).
        """
        return self._dispatcher.acting

    def mark_non_finite(self, step: int) -> None:
        """Marks `step` as one where a loss was not finite (guards call it).

        Args:
            step: The global step.
        """
        self.non_finite_at = int(step)

    def may_provide(self, name: str) -> bool:
        """Whether a callback of this run may add a value called `name`.

        True when a provider declares it (`StepCallback.may_provide`), or when a
        provider that declares no names has not acted yet.

        Args:
            name: A value name, e.g. `"steps_per_second"`.
        """
        return self._dispatcher.may_provide(name)

    def saved_state(self, key: str) -> Mapping[str, Any] | None:
        """The state that the callback with this `state_key` had decided at the
        step the run starts from (carried by the checkpoint it resumes from, or
        by the model's previous `fit()`), or None.

        Args:
            key: A callback's `state_key` (`"StepEarlyStopping:val_loss"`).
        """
        state = self._dispatcher.carry.decisions.get(key)
        return state if isinstance(state, Mapping) else None

    def value_prefixes(self) -> list[str]:
        """The prefixes of the run's validation values: Keras's own `"val_"` (fit's
        `validation_data`) and each provider's `value_prefix` (`ValidateEvery`'s).

        Example:

        >>> from kerasteps.callbacks import StepCallback
        >>> # in on_run_begin: self.run.value_prefixes() -> ['val_']
        """
        return self._dispatcher.value_prefixes()

    def abort(self) -> None:
        """Ends the run now: every callback's `on_run_end` is called, and nothing
        is dispatched any more. Call it before raising an error from `on_step`."""
        self._dispatcher.abort()

    def wake(self) -> None:
        """Makes the next batch end reach every callback (`on_step` or
        `on_other_step`), due or not: for a signal or a background error."""
        self._dispatcher.wake()

    def resume_state(self) -> ResumeState:
        """What a checkpoint of the model now hands to a run that resumes from it:
        the step, the open windows of the sinks, the examples per step, the run id.
        """
        return self._dispatcher.resume_state()

    def __repr__(self) -> str:
        return (
            f"StepRun(start_step={self.start_step}, step={self.step}, "
            f"global_counter={self.global_counter!r})"
        )
