"""`StepCallback`: the base class of every kerasteps callback."""

from __future__ import annotations

from typing import Any, ClassVar

import keras

from kerasteps.callbacks import _windows
from kerasteps.callbacks._dispatch import Dispatcher, get_dispatcher
from kerasteps.callbacks.step_event import StepEvent
from kerasteps.callbacks.step_run import StepRun
from kerasteps.schedule import Every

__all__ = ["StepCallback"]


class StepCallback(keras.callbacks.Callback):
    """Base class for callbacks that act on the global step, on an `Every` schedule.

    Subclasses implement `on_step(event)` and, when they need them, `on_run_begin`
    and `on_run_end`; they never override the Keras batch hooks. The shared dispatcher
    (one per model and `fit()` call) tracks the true global step, calls every
    kerasteps callback at a step in a fixed order (providers such as validation,
    then guards, sinks, checkpoints and stop), and passes on the values that
    providers computed.

    `event.step` is always the true global step after the update that produced the
    values; with `steps_per_execution=K` the step moves by K between calls and the
    callback fires when a scheduled step was crossed. `event.values()` gives the
    values to record, reduced as `reduce` says (see `kerasteps.callbacks.StepEvent`):
    by default the mean over the steps since this callback's previous point.

    kerasteps callbacks read the training state (the step, metric totals) at the
    steps where they act, and always on the training thread. On JAX and PyTorch,
    Keras hands batch ends to a thread of its own when every callback that has
    batch-end hooks declares `async_safe = True` (TensorFlow always runs them on
    the training thread); a step's callbacks then act at the next batch begin, on
    the training thread, before the next step, with the state exactly as it was
    after their step; at the steps where none acts nothing is read, and training
    never waits for the device. A callback may declare `async_safe = True` when it
    never sets `model.stop_training` from what it sees at a step (that stop would
    come one step late): the `StepSink`s, `LogEvery`, `Throughput`,
    `ValidateEvery`, `StepReduceLROnPlateau` and `StepCheckpoint` (a signal's
    handler stops training itself) do. One that may stop declares
    `stops_training = True` too (`StopAtStep`, `StepEarlyStopping`,
    `StopOnNonFinite`, `StopAtTime`): in a run with one, Keras runs the batch ends
    of the executions where any callback acts (or a timer or signal woke the run)
    on the training thread, so a stop decided there comes before Keras's check,
    and hands only the quiet ones to its thread. (`StepProgressBar` acts at every
    step, so each step's logs would cross threads: not measured yet, it stays on
    the training thread.) The default, False, keeps every batch end of the run on
    the training thread, as any Keras callback with batch-end hooks does.

    Under JAX the trained state lives apart from the model's variables between
    steps. Where only callbacks with `reads_model = False` act (they use their
    events' values, or `self.model`, which puts the state back itself), the
    values come from that state in one transfer; otherwise the dispatcher puts
    the state back into the model before the callbacks act (the default, True).

    Args:
        every: Positive int or `kerasteps.Every`, when `on_step` fires. `None` for a
            callback that only records values others provide.
        reduce: `"mean"` (default), `"last"` or `"epoch"`: what `event.values()`
            gives for `loss` and the `Mean`-type metrics. `"mean"`: the mean over
            the steps since this callback's previous point; `"last"`: the step's
            own batch (with `steps_per_execution=K`, its last execution; costs one
            more read of the metric state per point); `"epoch"`: Keras's running
            mean since the epoch began.

    Example:

    >>> import numpy as np, keras
    >>> from kerasteps.callbacks import StepCallback
    >>> class PrintStep(StepCallback):
    ...     def on_step(self, event):
    ...         print("step", event.step, "loss", round(event.values()["loss"], 3))
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> x = np.zeros((8, 1)); y = np.zeros((8, 1))
    >>> _ = model.fit(x, y, batch_size=2, verbose=0, callbacks=[PrintStep(every=2)])
    step 2 loss 0.0
    step 4 loss 0.0
    """

    #: What the callback does at a step (`_dispatch.ROLES`); it decides the order of the
    #: kerasteps callbacks acting at one step: `"provider"` adds values for the
    #: others (`ValidateEvery`'s `val_*`, `Throughput`), `"guard"` checks them
    #: (`StopOnNonFinite`), `"sink"` records them (`LogEvery`, `StepTensorBoard`,
    #: `JSONLinesLogger`, `StepProgressBar`), `"action"` acts on the run
    #: (`StepCheckpoint`, `StopAtStep`). Within a role, the order given to `fit()`.
    role: ClassVar[str] = "sink"
    #: Sinks also record values that providers or Keras validation add at a step
    #: where their own schedule did not fire.
    records_extras: ClassVar[bool] = False
    #: False for callbacks that never record training values (control callbacks):
    #: the dispatcher keeps no window for them, and their events carry none.
    reads_values: ClassVar[bool] = True
    #: Keras may run the run's batch ends on a thread of its own: True for a
    #: callback that never stops training from what it sees at a step, or that
    #: declares `stops_training` (see above).
    async_safe: ClassVar[bool] = False
    #: The callback may set `model.stop_training` from what it sees at a step: the
    #: ends of executions where it may act run on the training thread (see above).
    stops_training: ClassVar[bool] = False
    #: The callback may read the model's variables where it acts (weights, an
    #: optimizer's state): under JAX the dispatcher then puts the trained state
    #: into them first. False for callbacks that use only what their events give
    #: (values, rates, counters) and `self.model`, which syncs it itself.
    reads_model: ClassVar[bool] = True
    #: Under a multi-worker `tf.distribute` strategy, act on the chief only (sinks).
    chief_only: ClassVar[bool] = False
    #: A provider's key prefix (`"val_"`): Keras's own values with it are warned of.
    value_prefix: str | None = None
    #: The names a provider adds (`Throughput`: `steps_per_second`...), when known
    #: before it acts; see `may_provide`.
    provides: ClassVar[tuple[str, ...]] = ()

    def __init__(self, every: int | Every | None = 100, reduce: str = "mean"):
        super().__init__()
        self.every = None if every is None else Every.coerce(every, name="every")
        self.reduce = _windows.check_reduce(reduce)
        self._run: StepRun | None = None
        self._dispatcher: Dispatcher | None = None

    # -- what subclasses implement ------------------------------------------------
    def on_run_begin(self, start_step: int) -> None:
        """Called once per `fit()`, before training, with the global step then.

        Validate the run and prepare files here: raising stops training before any
        update, and the kerasteps callbacks that already began are closed first. A
        resumed run (`start_step` below what a sink already holds) drops the
        entries written after `start_step`.

        Args:
            start_step: The model's global step when `fit()` begins.
        """

    #: The name of the callback's decision state in a checkpoint, or None (no
    #: state): a decider's state (`state_dict`) is saved with every checkpoint and
    #: handed back to the same callback of a resumed run (`run.saved_state(key)`).
    state_name: str | None = None
    #: How many callbacks of the run with the same `state_name` began before this
    #: one (two early stops on one monitor keep two states, by their order).
    state_twin: int = 0

    @property
    def state_key(self) -> str | None:
        """The key of the callback's state in a checkpoint (`state_name`, then
        `#2`, `#3`... for its twins), or None."""
        if self.state_name is None or not self.state_twin:
            return self.state_name
        return f"{self.state_name}#{self.state_twin + 1}"

    def state_dict(self) -> dict[str, Any]:
        """The callback's decision state (JSON types), for `state_key`'s callbacks."""
        return {}

    def on_run_closed(self) -> None:
        """Called once per `fit()` that ended without an error, after every
        kerasteps callback's `on_run_end`: the run's files are complete (the final
        checkpoint committed). `StepEarlyStopping(restore_best_weights=True)`
        restores the best checkpoint here.
        """

    def on_run_ready(self) -> None:
        """Called once per `fit()`, when every kerasteps callback of the run has
        begun, before the first step (at Keras's first `on_epoch_begin`).

        Check here what depends on the other callbacks of the run (the values
        they provide: `run.value_prefixes()`); raising stops training before any
        update, and every kerasteps callback of the run is closed first.
        """

    def on_step(self, event: StepEvent) -> dict[str, Any] | None:
        """Acts at a step. Providers return values to share with the sinks.

        Args:
            event: The `StepEvent`: true step, logs, extras, counters, `values()`.
        """

    def wants_values(self, step: int) -> bool:
        """Whether this callback records training values at `step`, where its
        schedule fired: its event then carries them (`event.values()`), read once
        for all callbacks at that step. Override to read them less often than the
        schedule fires (`StepProgressBar` redraws at most every few seconds).

        Args:
            step: The global step.
        """
        return True

    def on_other_step(self, event: StepEvent) -> None:
        """Called at a step where the dispatcher stopped but `on_step` is not called.

        The dispatcher stops at the steps where some callback is due; this one's own
        `every` did not fire there (and a sink got no values to record). Act here on
        other schedules of this callback (`StepTensorBoard`'s histograms and images,
        returned by `schedules()`) or check state (`StepCheckpoint`'s signals). Not
        overriding it costs nothing.

        Args:
            event: The `StepEvent` of that step (`event.scheduled` is False).
        """

    def on_run_end(self, final_step: int) -> None:
        """Called once when `fit()` ends (flush and close files here).

        Args:
            final_step: The model's global step at the end of the run.
        """

    def flush(self) -> None:
        """Called at every epoch end, after Keras's validation values were passed on.

        Sinks that hold a step's record until all its values are known write it here.
        """

    def schedules(self) -> list[Every]:
        """Every schedule this callback acts on; batches where none is due are skipped.

        Example:

        >>> from kerasteps.callbacks import StepCallback
        >>> StepCallback(every=5).schedules()
        [Every(5)]
        """
        return [self.every] if self.every is not None else []

    # -- the run -----------------------------------------------------------------
    @property
    def run(self) -> StepRun:
        """The `StepRun` this callback is part of (start step, steps per execution,
        accumulation, abort, the non-finite mark...); set from the run's begin."""
        if self._run is None:
            raise RuntimeError(
                f"{type(self).__name__} is not part of a running `fit()` call."
            )
        return self._run

    @property
    def is_provider(self) -> bool:
        """Whether this callback adds values for the others (`role == "provider"`)."""
        return self.role == "provider"

    @property
    def acts_between_steps(self) -> bool:
        """Whether this callback overrides `on_other_step` (else it is not called)."""
        return type(self).on_other_step is not StepCallback.on_other_step

    def may_provide(self, name: str) -> bool:
        """Whether this callback declares `name` among the values it may add.

        True for a provider whose `provides` names it, whose `value_prefix` starts
        it, or whose latest values (`last_values`, when it keeps them) hold it;
        False for other roles. `StepRun.may_provide` asks every callback of a run
        (`LogEvery` does, before refusing a `fmt` field as a name nobody logs).

        Args:
            name: A value name, e.g. `"steps_per_second"`.

        Example:

        >>> from kerasteps.callbacks import StepCallback, Throughput
        >>> StepCallback(every=5).may_provide("loss")
        False
        >>> speed = Throughput(5)
        >>> speed.may_provide("steps_per_second"), speed.may_provide("x")
        (True, False)
        """
        return self.is_provider and (
            name in self.provides
            or bool(self.value_prefix and name.startswith(self.value_prefix))
            or name in getattr(self, "last_values", {})
        )

    # -- Keras hooks (final: subclasses implement the on_run_*/on_step hooks) ------
    def on_train_begin(self, logs: dict | None = None) -> None:
        dispatcher = get_dispatcher(self.model, self.params)
        self._dispatcher = dispatcher  # the Keras hooks below feed it
        dispatcher.find_switch(self)
        self._run = dispatcher.run
        if not self.active:
            dispatcher.register(self, active=False)  # on another worker: no acts
            return
        self.state_twin = dispatcher.twins(self)
        try:
            with dispatcher.act():
                self.on_run_begin(self._run.start_step)
        except BaseException:
            dispatcher.abort()  # close the callbacks that already began
            raise
        dispatcher.register(self)

    @property
    def active(self) -> bool:
        """False on a worker that is not the chief, for a chief-only callback."""
        return self._run is not None and (self._run.is_chief or not self.chief_only)

    # The hooks below come after `on_train_begin` in `fit()`; `on_test_begin` also
    # comes in an `evaluate()` of its own, where the callback is not part of a run.
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._dispatcher.epoch_begin(epoch)

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._dispatcher.batch_begin(batch)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._dispatcher.batch_end(batch, logs)

    def on_test_begin(self, logs: dict | None = None) -> None:
        if self._dispatcher is not None:
            self._dispatcher.test_begin()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._dispatcher.epoch_end(epoch, logs)

    def on_train_end(self, logs: dict | None = None) -> None:
        self._dispatcher.train_end()
