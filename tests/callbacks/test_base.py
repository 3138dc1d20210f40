"""The step semantics every kerasteps callback keeps, checked on all three sinks.

Each test runs real `fit` calls on tiny data and reads back what was written: the
TensorBoard event files with TensorBoard's own reader, the JSON lines, the log lines.
"""

from __future__ import annotations

import logging
import re

import keras
import pytest

import kerasteps
from kerasteps import Every
from kerasteps.callbacks import JSONLinesLogger, LogEvery, StepCallback, StepTensorBoard
from tests.helpers import read_jsonl, read_scalar_steps, tiny_data, tiny_model

pytestmark = [pytest.mark.neutral, pytest.mark.keras_range]


class Sinks:
    """The three sinks on one log directory, re-created for each `fit()`."""

    def __init__(self, tmp_path, every):
        self.log_dir = str(tmp_path / "tb")
        self.jsonl = str(tmp_path / "log.jsonl")
        self.every = every

    def callbacks(self):
        return [
            LogEvery(self.every),
            StepTensorBoard(self.log_dir, every=self.every),
            JSONLinesLogger(self.jsonl, every=self.every),
        ]

    def steps(self, caplog) -> dict[str, list[int]]:
        lines = [r.getMessage() for r in caplog.records if r.name == "kerasteps"]
        return {
            "log": [
                int(m.group(1))
                for m in map(re.compile(r"^loss=.* at step (\d+)$").match, lines)
                if m
            ],
            "tb": read_scalar_steps(self.log_dir, "train", "loss"),
            "jsonl": [r["step"] for r in read_jsonl(self.jsonl) if "loss" in r],
        }


def assert_all(steps: dict[str, list[int]], expected: list[int]):
    for sink, got in steps.items():
        assert got == expected, f"{sink}: {got} != {expected}"


@pytest.fixture
def caplog_info(caplog):
    caplog.set_level(logging.INFO, logger="kerasteps")
    return caplog


def test_two_epochs_of_ten_batches_every_3(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=3)
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=sinks.callbacks())
    assert kerasteps.global_step(model) == 20
    assert_all(sinks.steps(caplog_info), [3, 6, 9, 12, 15, 18])


def test_second_fit_continues_the_step(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=3)
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=sinks.callbacks())
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=sinks.callbacks())
    assert kerasteps.global_step(model) == 30
    assert_all(sinks.steps(caplog_info), [3, 6, 9, 12, 15, 18, 21, 24, 27, 30])


def test_same_instances_reused_across_fit_calls(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=4)
    callbacks = sinks.callbacks()
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=callbacks)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=callbacks)
    assert_all(sinks.steps(caplog_info), [4, 8, 12, 16, 20])


def test_save_load_continue(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=3)
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=sinks.callbacks())
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert kerasteps.global_step(loaded) == 10
    loaded.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=sinks.callbacks())
    assert kerasteps.global_step(loaded) == 20
    assert_all(sinks.steps(caplog_info), [3, 6, 9, 12, 15, 18])


def test_steps_per_execution_4_reports_true_steps(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=3)
    model = tiny_model(steps_per_execution=4)
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=sinks.callbacks())
    assert kerasteps.global_step(model) == 20
    # Executions end at 4, 8, 10 | 14, 18, 20: fire at the first boundary at or
    # after each multiple of 3 (15 and 18 both fall in (14, 18]: one line).
    assert_all(sinks.steps(caplog_info), [4, 8, 10, 14, 18])


def test_start_1_logs_like_tf1_log_every_n(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=Every(3, start=1))
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=sinks.callbacks())
    assert_all(sinks.steps(caplog_info), [1, 4, 7, 10, 13, 16, 19])


def test_first_and_last(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=Every(7, first=True, last=True))
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=sinks.callbacks())
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=sinks.callbacks())
    # Run 1: steps 1..20; run 2: steps 21..30 (first of run 2 is 21).
    assert_all(sinks.steps(caplog_info), [1, 7, 14, 20, 21, 28, 30])


def test_last_does_not_repeat_a_step_that_already_fired(tmp_path, caplog_info):
    sinks = Sinks(tmp_path, every=Every(5, last=True))
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=sinks.callbacks())
    assert_all(sinks.steps(caplog_info), [5, 10, 15, 20])


def test_resume_from_an_earlier_step_continues_the_curve_and_keeps_the_rest(
    tmp_path, caplog_info
):
    sinks = Sinks(tmp_path, every=3)
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=sinks.callbacks())
    model.save(tmp_path / "step10.keras")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=sinks.callbacks())
    assert_all(sinks.steps(caplog_info), [3, 6, 9, 12, 15, 18])
    # The run "crashed" at step 20; resume from the step-10 save, train to 30.
    resumed = keras.saving.load_model(tmp_path / "step10.keras")
    caplog_info.clear()
    resumed.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=sinks.callbacks())
    steps = sinks.steps(caplog_info)
    assert steps["tb"] == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    assert steps["jsonl"] == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    assert steps["log"] == [12, 15, 18, 21, 24, 27, 30]
    # A model loaded from a .keras file carries no run id: kerasteps cannot tell
    # whose points 12..18 are, so they are kept whole aside, not deleted.
    kept = [
        r.getMessage() for r in caplog_info.records if "kept whole" in r.getMessage()
    ]
    assert kept == [
        f"{sink}: {place} held points after step 10, and this run's state (at step "
        f"10) comes with no record of the run that wrote them: they are kept whole "
        f"in {aside}, and the points up to step 10 are copied back to {place}."
        for sink, place, aside in (
            ("StepTensorBoard", sinks.log_dir, f"{sinks.log_dir}/earlier-1"),
            ("JSONLinesLogger", sinks.jsonl, str(tmp_path / "log.earlier-1.jsonl")),
        )
    ]
    assert read_scalar_steps(f"{sinks.log_dir}/earlier-1", "train", "loss") == [
        3,
        6,
        9,
        12,
        15,
        18,
    ]
    assert [r["step"] for r in read_jsonl(tmp_path / "log.earlier-1.jsonl")] == [
        3,
        6,
        9,
        12,
        15,
        18,
    ]


def test_keras_validation_lands_at_the_step_it_was_computed(tmp_path):
    log_dir, jsonl = str(tmp_path / "tb"), str(tmp_path / "l.jsonl")
    model = tiny_model()
    x, y = tiny_data(20)
    # 10 batches per epoch, every=4 does not divide it: Keras's own TensorBoard
    # drops the epoch scalars in this case; kerasteps writes val_loss at 10, 20.
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=2,
        verbose=0,
        validation_data=(x, y),
        callbacks=[StepTensorBoard(log_dir, every=4), JSONLinesLogger(jsonl, every=4)],
    )
    assert read_scalar_steps(log_dir, "validation", "loss") == [10, 20]
    records = read_jsonl(jsonl)
    assert [r["step"] for r in records] == [4, 8, 10, 12, 16, 20]
    assert [r["step"] for r in records if "val_loss" in r] == [10, 20]


def test_validation_at_a_fired_step_is_one_json_record(tmp_path):
    jsonl = str(tmp_path / "l.jsonl")
    model = tiny_model()
    x, y = tiny_data(20)
    model.fit(
        x,
        y,
        batch_size=2,
        epochs=2,
        verbose=0,
        validation_data=(x, y),
        callbacks=[JSONLinesLogger(jsonl, every=5)],
    )
    records = read_jsonl(jsonl)
    assert [r["step"] for r in records] == [5, 10, 15, 20]
    assert {"loss", "val_loss", "step", "time"} <= set(records[1])
    assert "val_loss" not in records[0]


def test_every_step_once_in_order_on_the_training_thread(tmp_path):
    """The sinks act at every step, once, in order; they let Keras dispatch batch
    ends to its threads, and read on the training thread (test_async_dispatch.py)."""
    sinks = Sinks(tmp_path, every=1)
    callbacks = sinks.callbacks()
    assert all(cb.async_safe for cb in callbacks)
    model = tiny_model()
    x, y = tiny_data(200)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=callbacks)
    records = read_jsonl(sinks.jsonl)
    assert [r["step"] for r in records] == list(range(1, 201))
    assert read_scalar_steps(sinks.log_dir, "train", "loss") == list(range(1, 201))


class Recorder(StepCallback):
    """Records (prev, step) pairs, to check the hub's bookkeeping directly."""

    def __init__(self, every):
        super().__init__(every)
        self.seen = []

    def on_step(self, event):
        self.seen.append((event.prev, event.step))


def test_prev_and_step_under_steps_per_execution():
    recorder = Recorder(every=1)
    model = tiny_model(steps_per_execution=4)
    x, y = tiny_data(20)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=[recorder])
    assert recorder.seen == [(0, 4), (4, 8), (8, 10), (10, 14), (14, 18), (18, 20)]


def test_dataset_of_unknown_length(tmp_path):
    import tensorflow as tf

    x, y = tiny_data(20)
    dataset = (
        tf.data.Dataset.from_tensor_slices((x, y)).batch(2).filter(lambda a, b: True)
    )
    recorder = Recorder(every=3)
    model = tiny_model()
    model.fit(dataset, epochs=2, verbose=0, callbacks=[recorder])
    # Keras 3.15 also counts the end-of-data call of each epoch in
    # `optimizer.iterations` when the length is unknown (11 per 10-batch epoch);
    # kerasteps reports that counter as it is, re-read at each epoch end.
    final = kerasteps.global_step(model)
    assert final in (20, 22)
    seen = [s for _, s in recorder.seen]
    assert seen == list(range(3, final + 1, 3))


def test_bad_every_is_refused_before_training(tmp_path):
    for cls, kwargs in [
        (LogEvery, {}),
        (StepTensorBoard, {"log_dir": str(tmp_path / "tb")}),
        (JSONLinesLogger, {"path": str(tmp_path / "l.jsonl")}),
    ]:
        with pytest.raises(
            ValueError, match="`every` must be a positive int .* received 0"
        ):
            cls(every=0, **kwargs)
        with pytest.raises(
            TypeError, match="`every` must be a positive int .* received 2.5"
        ):
            cls(every=2.5, **kwargs)


def test_uncompiled_model_is_refused_before_training(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="bare")
    x, y = tiny_data(4)
    callback = JSONLinesLogger(str(tmp_path / "l.jsonl"), every=1)
    callback.set_model(model)
    callback.set_params({"steps": 2})
    with pytest.raises(ValueError, match="'bare' is not compiled"):
        callback.on_train_begin()
    assert not (tmp_path / "l.jsonl").exists()


def test_a_step_callback_reads_the_trained_state_without_reading_values():
    """The hub attaches the trained state (JAX keeps it apart mid-epoch) before any
    callback acts, whether or not a callback read the metrics first."""
    seen = []

    class Rates(StepCallback):
        reads_values = False

        def on_step(self, event):
            kernel = self.model.layers[-1].kernel
            seen.append(
                (
                    event.step,
                    event.learning_rates()[""],
                    float(keras.ops.convert_to_numpy(keras.ops.sum(kernel))),
                )
            )

    model = tiny_model(optimizer=keras.optimizers.SGD(0.05))
    x, y = tiny_data(40)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[Rates(every=4)])
    assert [s for s, _, _ in seen] == [4, 8, 12, 16, 20]
    assert all(rate == pytest.approx(0.05) for _, rate, _ in seen)
    kernels = [k for _, _, k in seen]
    assert len(set(kernels)) == 5  # a new state at every point
    final = float(keras.ops.convert_to_numpy(keras.ops.sum(model.layers[-1].kernel)))
    assert kernels[-1] == final


def test_roles_order_callbacks_at_a_step_whatever_the_list_order(tmp_path):
    """A provider listed after a sink still provides first; actions act last."""
    seen = []

    class Provider(StepCallback):
        role = "provider"

        def on_step(self, event):
            seen.append(("provider", event.step))
            return {"answer": 42.0}

    class Action(StepCallback):
        role = "action"
        reads_values = False

        def on_step(self, event):
            seen.append(("action", event.step))

    class Every4(StepCallback):
        def on_step(self, event):
            seen.append(("sink", event.step))

        def on_other_step(self, event):
            seen.append(("other", event.step))

    x, y = tiny_data(16)
    tiny_model().fit(
        x,
        y,
        batch_size=2,
        verbose=0,
        callbacks=[
            Action(every=2),
            JSONLinesLogger(tmp_path / "log.jsonl", every=2),
            Every4(every=4),
            Provider(every=2),
        ],
    )
    assert [r["answer"] for r in read_jsonl(tmp_path / "log.jsonl")] == [42.0] * 4
    assert seen == [
        ("other", 1),  # the hub checks the first step of a run
        ("provider", 2),
        ("other", 2),  # the hub stopped at 2, where Every4 is not due
        ("action", 2),
        ("provider", 4),
        ("sink", 4),
        ("action", 4),
        ("provider", 6),
        ("other", 6),
        ("action", 6),
        ("provider", 8),
        ("sink", 8),
        ("action", 8),
        ("other", 8),  # the run's end: only Every(last=True) schedules fire
    ]


def test_an_unknown_role_is_refused_before_training():
    class Odd(StepCallback):
        role = "observer"

    model = tiny_model()
    x, y = tiny_data(4)
    with pytest.raises(ValueError, match=r"Odd.role must be one of provider, guard, "):
        model.fit(x, y, batch_size=2, verbose=0, callbacks=[Odd(every=1)])
    assert kerasteps.global_step(model) == 0
