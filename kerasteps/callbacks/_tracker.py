"""`StepTracker`: where a `fit()` run is, in global steps (private).

- **The step.** It reads the global step when the run begins and then tracks it in
  Python: after the batch that ends at epoch-local index `b` the model has trained on
  `epoch_start + b + 1` batches (the global step is that, divided by the gradient
  accumulation steps). It reads the true step where tracking cannot know it: at the
  epoch's last batch (Keras runs whole executions of `steps_per_execution` steps, so
  an epoch of 200 steps with K=7 trains 203), at every batch when the epoch length is
  unknown and K > 1 or when the optimizer may skip steps (loss scaling), and at every
  epoch end. A model that returns its global counter in its logs (`WGAN`) is taken at
  its word.
- **Counting is checked.** At the first batch of a run it checks that the global step
  moved; if it did not while the model trained (a GAN training with optimizers of its
  own, `model.optimizer` unused), training stops with an error that names the
  optimizers and the one-line declaration.
- **The facts of a step**, read on request: the step counters and the learning rates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import keras

from kerasteps import _compat
from kerasteps import steps as steps_lib
from kerasteps._variables import read_int
from kerasteps.callbacks.step_event import scalar_items
from kerasteps.steps import StepNotCountedError

logger = logging.getLogger("kerasteps")

#: How many batches of a run the tracker checks that the global step moves.
_PROGRESS_CHECK_BATCHES = 100


def _weights_fingerprint(model: keras.Model) -> list[float] | None:
    sums = [keras.ops.sum(v) for v in model.trainable_variables]
    return [float(keras.ops.convert_to_numpy(s)) for s in sums] or None


def _iterations(optimizers: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for name, optimizer in optimizers.items():
        try:
            out[name] = read_int(optimizer.iterations)
        except Exception:  # noqa: BLE001 - an optimizer not built yet
            out[name] = 0
    return out


def _declaration(suggestion: str) -> str:
    return f'    kerasteps.count_optimizer_steps(model, global_step="{suggestion}")\n'


class _ProgressCheck:
    """Checks that the global step counts training: before the run when the model
    certainly trains with optimizers of its own (`steps.undeclared_optimizers`),
    else at its first batches."""

    def __init__(self, model: keras.Model, start_step: int, start_micro: int):
        self.model = model
        self.start_step = start_step
        self.start_micro = start_micro
        own = steps_lib.undeclared_optimizers(model)
        if own:
            raise StepNotCountedError(self._refusal(own))
        self.batches = 0
        self.weights = _weights_fingerprint(model)
        self.optimizers = _iterations(steps_lib.optimizer_attributes(model))
        self.counters = steps_lib.step_counters(model)

    def moved(self, step: int, micro: int) -> bool:
        """True once the step moved; raises if the model trained without counting."""
        self.batches += 1
        if step > self.start_step or micro > self.start_micro:
            return True
        if steps_lib.step_counters(self.model) != self.counters:
            return True  # another declared counter moved (the critic's)
        found = steps_lib.optimizer_attributes(self.model)
        optimizers = _iterations(found)
        deltas = {k: v - self.optimizers.get(k, 0) for k, v in optimizers.items()}
        moving = {k: delta for k, delta in deltas.items() if delta}
        global_optimizer = steps_lib.global_optimizer(self.model)
        weights = _weights_fingerprint(self.model)
        changed = self.weights is not None and weights not in (None, self.weights)
        if changed or any(found[k] is not global_optimizer for k in moving):
            raise StepNotCountedError(self._message(optimizers, moving))
        return self.batches >= _PROGRESS_CHECK_BATCHES  # nothing trained: look again

    def _refusal(self, own: dict[str, Any]) -> str:
        """Before training: the model's train_step uses optimizers of its own."""
        name = type(self.model).__name__
        found = ", ".join(f"`{attr}`" for attr in own)
        suggestion = steps_lib.suggest_global_step({k: 0 for k in own})
        return (
            f"kerasteps: {name} defines its own train_step and holds the optimizers "
            f"{found}, while `model.optimizer` is the RMSprop that compile() sets "
            "when given none: the model counts its steps with optimizers other than "
            "`model.optimizer`, whose iterations would stay at "
            f"{self.start_step}, and every step-based callback would see step "
            f"{self.start_step} (no logs, no checkpoints, no stop). Nothing was "
            "trained. Declare which optimizer counts the global step (for a GAN, "
            "the generator's), once after compile() and again after building the "
            "model anew, before restoring a checkpoint:\n\n"
            f"{_declaration(suggestion)}\n"
            "If your train_step does update `model.optimizer`, declare that one: "
            'global_step="optimizer".'
        )

    def _message(self, optimizers: dict[str, int], moving: dict[str, int]) -> str:
        """In the first steps: the model trained, its global step did not move
        (`moving`: the optimizers' iterations that did, by how much)."""
        name = type(self.model).__name__
        if steps_lib.is_plain(self.model):
            what = f"`model.optimizer.iterations` stayed at {self.start_step}"
        else:
            counter = steps_lib.global_step_name(self.model)
            what = f"its global counter `{counter}` stayed at {self.start_step}"
        found = ", ".join(
            f"`{attr}` (iterations {count})" for attr, count in optimizers.items()
        )
        if moving:
            suggestion = steps_lib.suggest_global_step(moving)
            applied = (
                " That step was applied: the optimizers' counters hold it (after "
                f"the declaration the global step is {optimizers[suggestion]}). To "
                "train from the same start again, rebuild or reload the model first."
            )
        else:
            suggestion, applied = "<optimizer>", ""
        return (
            f"kerasteps: {name} trained in the first step of this run, but its global "
            f"step did not move: {what}. The model updates its weights with "
            "optimizers other than `model.optimizer`, so every step-based callback "
            f"would see step {self.start_step} (no logs, no checkpoints, no stop). "
            f"Optimizers found on the model: {found or 'none'}. Declare which one "
            "counts the global step (for a GAN, the generator's), once after "
            "compile() (and again after building the model anew):\n\n"
            f"{_declaration(suggestion)}\n{applied.strip()}"
        ).rstrip() + "\n"


class StepTracker:
    """The global step of one `fit()` call, and the model's facts at a step."""

    def __init__(self, model: keras.Model, params: dict | None):
        self.model = model
        #: Reads a JAX run's trained state without a sync (`_compat.JaxStateReader`).
        self.state = _compat.JaxStateReader(model)
        self.counter_names = list(steps_lib.step_counter_variables(model))
        self.global_name = steps_lib.global_step_name(model)
        self.is_plain = steps_lib.is_plain(model)
        self.accumulation = steps_lib.accumulation_steps(model)
        self.start_step = steps_lib.global_step(model)
        self.start_micro = steps_lib.micro_steps(model)
        self.step = self.start_step
        self.micro = self.start_micro
        #: The step before the latest step change.
        self.last_prev = self.start_step
        steps = params.get("steps") if params else None
        self.steps_in_epoch = int(steps) if steps else None
        self.epoch_start_micro = self.start_micro
        # The index Keras passes `on_train_batch_end` -> the execution's last batch.
        self.batch_end_shift = _compat.batch_end_shift(self.steps_per_execution)
        self._reports_step = False
        self._progress: _ProgressCheck | None = _ProgressCheck(
            model, self.start_step, self.start_micro
        )
        optimizer = steps_lib.global_optimizer(model)
        scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        unknown_length = self.steps_in_epoch is None and self.steps_per_execution > 1
        self._exact = scaled or unknown_length
        self._warned: set[str] = set()

    @property
    def steps_per_execution(self) -> int:
        return max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))

    @property
    def batches(self) -> int:
        """The batches this run trained (micro steps, with gradient accumulation)."""
        return self.micro - self.start_micro

    @property
    def settled(self) -> bool:
        """True when counting batches in Python gives the step: no exact reads, no
        counter in the logs, no check still running."""
        return not (self._exact or self._reports_step or self._progress is not None)

    @property
    def checking(self) -> bool:
        """True while the run's first steps are checked to move the step (the
        check reads the trained state)."""
        return self._progress is not None

    def read_true(self) -> tuple[int, int]:
        """The model's (global step, micro steps), from the trained state."""
        steps_lib.sync_trained_state(self.model)
        step = steps_lib.global_step(self.model)
        micro = steps_lib.micro_steps(self.model) if self.accumulation > 1 else step
        return step, micro

    def epoch_begin(self) -> None:
        self.epoch_start_micro = self.micro

    def count(self, batch: int) -> None:
        """Counts a batch where nothing is due (`quiet_limit`)."""
        self.micro = self.epoch_start_micro + batch + 1
        self.step = self.micro // self.accumulation

    def quiet_limit(self, next_due: float) -> float:
        """Batches of this epoch with an index below this need only `count`: no
        callback is due before `next_due` and the epoch does not end."""
        limit = next_due * self.accumulation - self.epoch_start_micro - 1
        if self.steps_in_epoch is not None:
            limit = min(limit, self.steps_in_epoch - 1)
        return limit

    def advance(
        self, batch: int, logs: Mapping[str, Any]
    ) -> tuple[int, int, bool] | None:
        """The step after batch `batch`: `(prev, step, epoch_last)`, or None when no
        update finished (gradient accumulation, a skipped step).

        Raises:
            StepNotCountedError: the model trained but its global step did not move.
        """
        done = batch + 1
        epoch_last = self.steps_in_epoch is not None and done >= self.steps_in_epoch
        counted = logs.get(self.global_name) if not self.is_plain else None
        if isinstance(counted, (int, float)) and not isinstance(counted, bool):
            step = int(counted)  # the model reports its counter (WGAN)
            self.micro = step
            self._reports_step = True
        elif epoch_last or self._exact:
            step, self.micro = self.read_true()
        else:
            self.micro = self.epoch_start_micro + done
            step = self.micro // self.accumulation
        if self._progress is not None:
            step = self._check_progress(step)
        prev = self.step
        if step <= prev:
            return None
        self.step = step
        self.last_prev = prev
        return prev, step, epoch_last

    def _check_progress(self, step: int) -> int:
        true_step, true_micro = self.read_true()
        if self._progress.moved(true_step, true_micro):
            self._progress = None
        if true_step != step or true_micro != self.micro:
            # Tracking in Python would drift (the step does not move once per batch).
            self._exact = True
        self.micro = true_micro
        return true_step

    def resync(self) -> None:
        """Sets the tracked step to the model's true global step."""
        true_step, true_micro = self.read_true()
        if true_step != self.step:
            logger.debug(
                "kerasteps: tracked step %d, true step %d; using the true step.",
                self.step,
                true_step,
            )
            self.step = true_step
        self.micro = true_micro
        self.epoch_start_micro = true_micro

    def counters_at(self, step: int, logs: Mapping[str, Any]) -> dict[str, int]:
        """The step counters at `step`: from the logs when the model put them there."""
        if self.counter_names == [steps_lib.PLAIN_COUNTER]:
            return {steps_lib.PLAIN_COUNTER: int(step)}
        values = scalar_items({k: logs[k] for k in self.counter_names if k in logs})
        if len(values) == len(self.counter_names):
            counters = {k: int(values[k]) for k in self.counter_names}
        else:
            steps_lib.sync_trained_state(self.model)
            counters = steps_lib.step_counters(self.model)
        counters[self.global_name] = int(step)
        return counters

    def rate_variables(self) -> list[Any] | None:
        """The variables the learning rates are read from (a schedule needs none),
        or None when a rate is neither (a callable: read through the model)."""
        found = []
        for optimizer in steps_lib.step_optimizers(self.model).values():
            if optimizer is None or steps_lib.learning_rate_schedule(optimizer):
                continue
            variable = steps_lib.learning_rate_variable(optimizer)
            if variable is None:
                return None
            found.append(variable)
        return found

    def learning_rates(self, step: int) -> dict[str, float]:
        """The learning rate of each optimizer used by the update that made `step`."""
        rates: dict[str, float] = {}
        global_optimizer = steps_lib.global_optimizer(self.model)
        for name, optimizer in steps_lib.step_optimizers(self.model).items():
            if optimizer is None:
                continue
            at = step if optimizer is global_optimizer else None
            try:
                variable = steps_lib.learning_rate_variable(optimizer)
                held = None if variable is None else self.state.read([variable])
                if held is not None:  # from the trained state apart (JAX)
                    rates[name] = float(held[0])
                    continue
                rates[name] = steps_lib.learning_rate_at(optimizer, at)
            except Exception as error:  # noqa: BLE001 - report, do not stop training
                if name not in self._warned:
                    self._warned.add(name)
                    logger.warning(
                        "kerasteps: cannot read the learning rate of optimizer %r "
                        "(%s: %s); it is not logged.",
                        name or "optimizer",
                        type(error).__name__,
                        error,
                    )
        return rates
