"""Every public constructor refuses a wrong argument when it is called, naming it.

The table is generated from the signatures of every public class of `kerasteps`,
`kerasteps.callbacks`, `kerasteps.models` and `kerasteps.checkpoint` (their
`__all__`): each parameter gets the values {None, a wrong type, out of range, a
bool as a string, NaN, inf}, minus those its annotation or default allows (None
for `X | None`, any string for `str`). Each value is passed alone, the other
parameters keep valid values, and the constructor must raise `TypeError` or
`ValueError` whose message names the parameter (in backquotes). Nothing trains:
construction only.

A new public class or parameter is covered without editing this file; a new
parameter without a default needs a valid value in `REQUIRED`. A value that is
legitimately allowed goes in `ALLOWED`, with the reason.
"""

from __future__ import annotations

import collections.abc
import importlib
import importlib.util
import inspect
import math
import numbers
import types
import typing
from typing import Any

import keras
import numpy as np
import pytest

NAMESPACES = (
    "kerasteps",
    "kerasteps.callbacks",
    "kerasteps.models",
    "kerasteps.checkpoint",
)

#: (class, parameter, value) that is refused by no rule, with the reason.
ALLOWED: dict[tuple[str, str, Any], str] = {
    ("StopOnNonFinite", "checkpoint", "False"): (
        "a directory path (str) is allowed: 'False' names a folder"
    ),
    ("CheckpointInfo", "path", ""): (
        "a checkpoint saved on another worker has no folder here: its path is ''"
    ),
    ("CheckpointInfo", "time", -1.0): (
        "the save's time as meta.json records it: any finite number is read, so "
        "that a listing never fails on a clock that was wrong"
    ),
    ("StepEarlyStopping", "baseline", -1.0): (
        "a baseline of the monitored value: any finite number (a loss may be negative)"
    ),
    ("StepReduceLROnPlateau", "baseline", -1.0): (
        "a baseline of the monitored value: any finite number (a loss may be negative)"
    ),
    ("CheckpointInfo", "value", -1.0): (
        "a monitored value as meta.json records it: any finite number (a loss "
        "may be negative)"
    ),
}

#: (class, parameter) whose messages name it otherwise, with the name they use.
MESSAGE_NAMES: dict[tuple[str, str], str] = {
    # `argument` says how the subclass's users know the place: `path` by default.
    ("StepSink", "place"): "path",
}

#: Classes without a signature of their own, with the reason.
NO_SIGNATURE = {
    "NonFiniteStateError": "an exception: takes a message, as ValueError does",
}


def public_classes() -> list[type]:
    """Every public class of the four namespaces, once."""
    found: dict[str, type] = {}
    for name in NAMESPACES:
        module = importlib.import_module(name)
        for attribute in module.__all__:
            value = getattr(module, attribute)
            if inspect.isclass(value):
                found.setdefault(value.__name__, value)
    return sorted(found.values(), key=lambda cls: cls.__name__)


def parameters(cls: type) -> list[tuple[inspect.Parameter, Any]]:
    """The constructor's named parameters, with their resolved annotations."""
    if cls.__name__ in NO_SIGNATURE:
        return []
    hints = typing.get_type_hints(cls.__init__)
    return [
        (parameter, hints.get(parameter.name, Any))
        for parameter in inspect.signature(cls).parameters.values()
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]


# -- the values -------------------------------------------------------------------
def admitted_types(annotation: Any) -> tuple[Any, ...] | None:
    """The types an annotation admits (`Sequence[str]` -> `Sequence`); None: any."""
    if annotation is Any:
        return None
    if annotation is None or annotation is type(None):
        return (type(None),)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for argument in typing.get_args(annotation):
            inner = admitted_types(argument)
            if inner is None:
                return None
            out += inner
        return tuple(out)
    return (origin or annotation,)


def admits(types_: tuple[Any, ...], value: Any) -> bool:
    """Whether `value`'s type is one the annotation admits (an int is a float)."""
    for kind in types_:
        if kind is int and isinstance(value, bool):
            continue
        if kind is float and isinstance(value, numbers.Real):
            return not isinstance(value, bool)
        if isinstance(value, kind):
            return True
    return False


def element_type(annotation: Any) -> Any:
    """The element type of the `Sequence[X]` or `Iterable[X]` in an annotation."""
    for argument in typing.get_args(annotation) or (annotation,):
        if typing.get_origin(argument) in (
            collections.abc.Sequence,
            collections.abc.Iterable,
        ):
            return typing.get_args(argument)[0]
    return None


def out_of_range(types_: tuple[Any, ...], annotation: Any) -> list[Any]:
    """Values of an admitted type that no parameter of that type takes."""
    out: list[Any] = []
    if int in types_:
        out.append(-1)
    elif float in types_:
        out.append(-1.0)
    if str in types_:
        out.append("")
    element = element_type(annotation)
    if element is str:
        out.append([2])  # a name that is no string
    elif element is int:
        out.append([-1])
    if collections.abc.Mapping in types_:
        out.append({2: "x"})  # a key that is no string
    if tuple in types_:
        out.append(())
    return out


def bad_values(parameter: inspect.Parameter, annotation: Any) -> list[tuple[str, Any]]:
    """The (label, value) pairs the parameter must refuse."""
    types_ = admitted_types(annotation)
    values: list[tuple[str, Any]] = [("None", None)]
    if types_ is not None:
        wrong = [v for v in (2, "1", 1.5) if not admits(types_, v)]
        values += [("wrong type", wrong[0])] if wrong else []
        values += [("out of range", v) for v in out_of_range(types_, annotation)]
    values += [("bool as str", "False"), ("NaN", math.nan), ("inf", math.inf)]
    default = parameter.default
    allowed_none = default is None or (types_ is not None and type(None) in types_)
    return [
        (label, value)
        for label, value in values
        if not (value is None and allowed_none)
        and not (label == "bool as str" and types_ is not None and str in types_)
        and not (type(value) is type(default) and value == default)
    ]


# -- valid values of the parameters without a default --------------------------------
def shared_objects() -> dict[str, Any]:
    """The few objects a valid argument needs: tiny networks, a run's dispatcher."""
    from kerasteps.callbacks._dispatch import Dispatcher
    from kerasteps.callbacks.step_event import StepRecord

    def dense(units: int) -> keras.Model:
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(units)])

    model = dense(1)
    model.compile("sgd", "mse")
    dispatcher = Dispatcher(model, {"epochs": 1, "steps": 1, "verbose": 0})
    record = StepRecord(1, 0, {}, dispatcher.run, dispatcher.tracker)
    return {
        "generator": dense(2),
        "critic": dense(1),
        "dispatcher": dispatcher,
        "record": record,
    }


@pytest.fixture(scope="module")
def shared():
    return shared_objects()


#: A valid value of each parameter without a default, by name: `tmp` is the test's
#: folder, `shared` the objects of the fixture.
REQUIRED: dict[str, Any] = {
    "n": lambda tmp, shared: 5,
    "every": lambda tmp, shared: 5,
    "place": lambda tmp, shared: None,
    "path": lambda tmp, shared: str(tmp / "file.log"),
    "log_dir": lambda tmp, shared: str(tmp / "logs"),
    "directory": lambda tmp, shared: str(tmp / "checkpoints"),
    "validation_data": lambda tmp, shared: (np.ones((4, 2)), np.ones((4, 1))),
    "max_steps": lambda tmp, shared: 10,
    "total_steps": lambda tmp, shared: 10,
    "latent_dim": lambda tmp, shared: 2,
    "generator": lambda tmp, shared: shared["generator"],
    "critic": lambda tmp, shared: shared["critic"],
    "dispatcher": lambda tmp, shared: shared["dispatcher"],
    "record": lambda tmp, shared: shared["record"],
    "scheduled": lambda tmp, shared: True,
    "name": lambda tmp, shared: "ckpt-5",
    "step": lambda tmp, shared: 5,
    "time": lambda tmp, shared: 0.0,
    "max_seconds": lambda tmp, shared: 10.0,
}

#: (class, parameter) with a default that needs a value all the same, with why.
ALSO_REQUIRED: dict[tuple[str, str], str] = {
    ("StepCheckpoint", "every"): "None only with `every_seconds`, None by default",
}


def needs_mlflow(cls: type) -> bool:
    return cls.__name__ == "MLflowLogger" and importlib.util.find_spec("mlflow") is None


def cases() -> list[Any]:
    out = []
    for cls in public_classes():
        for parameter, annotation in parameters(cls):
            for label, value in bad_values(parameter, annotation):
                out.append(
                    pytest.param(
                        cls,
                        parameter.name,
                        value,
                        id=f"{cls.__name__}-{parameter.name}-{label}-{value!r}",
                    )
                )
    return out


def _allowed(key: tuple[str, str, Any]) -> bool:
    return any(
        key[:2] == known[:2] and type(key[2]) is type(known[2]) and key[2] == known[2]
        for known in ALLOWED
    )


def arguments(cls: type, tmp, shared_objects) -> dict[str, Any]:
    """Valid values of the parameters of `cls` without a default."""
    out = {}
    for parameter, _ in parameters(cls):
        also = (cls.__name__, parameter.name) in ALSO_REQUIRED
        if parameter.default is not parameter.empty and not also:
            continue
        assert parameter.name in REQUIRED, (
            f"{cls.__name__}({parameter.name}=...) has no default: give it a valid "
            "value in REQUIRED"
        )
        out[parameter.name] = REQUIRED[parameter.name](tmp, shared_objects)
    return out


# -- the tests ------------------------------------------------------------------------
def test_every_public_class_is_in_the_table():
    """Each class has parameters in the table, or a reason why it has none."""
    names = [cls.__name__ for cls in public_classes()]
    assert {"Every", "LogEvery", "WGAN", "ResumeState", "StepRun"} <= set(names)
    for cls in public_classes():
        assert parameters(cls) or cls.__name__ in NO_SIGNATURE, cls.__name__
    assert set(NO_SIGNATURE) <= set(names)


def test_the_table_holds_each_kind_of_value():
    labels = {
        label
        for cls in public_classes()
        for parameter, annotation in parameters(cls)
        for label, _ in bad_values(parameter, annotation)
    }
    assert labels == {"None", "wrong type", "out of range", "bool as str", "NaN", "inf"}


def test_the_allow_table_names_cases_of_the_table():
    keys = [(case.values[0].__name__, case.values[1], case.values[2]) for case in CASES]
    for known in ALLOWED:
        assert _allowed(known) and any(
            key[:2] == known[:2] and type(key[2]) is type(known[2]) for key in keys
        ), f"{known} is no case of the table: remove it from ALLOWED"


def test_a_valid_construction_of_every_class(tmp_path, monkeypatch, shared):
    """The required values of `REQUIRED` make each class (so a refusal below is the
    bad value's)."""
    monkeypatch.chdir(tmp_path)
    for cls in public_classes():
        if cls.__name__ in NO_SIGNATURE or needs_mlflow(cls):
            continue
        cls(**arguments(cls, tmp_path, shared))


CASES = cases()


@pytest.mark.parametrize(("cls", "name", "value"), CASES)
def test_a_wrong_argument_is_refused_naming_itself(
    cls, name, value, tmp_path, monkeypatch, shared
):
    if needs_mlflow(cls):
        pytest.skip("MLflowLogger needs MLflow's client")
    monkeypatch.chdir(tmp_path)  # a path that is allowed lands here
    kwargs = {**arguments(cls, tmp_path, shared), name: value}
    if _allowed((cls.__name__, name, value)):
        cls(**kwargs)  # else the entry of ALLOWED is stale: remove it
        return
    with pytest.raises((TypeError, ValueError)) as raised:
        cls(**kwargs)
    shown = MESSAGE_NAMES.get((cls.__name__, name), name)
    assert f"`{shown}`" in str(raised.value), str(raised.value)


def test_the_table_size():
    """How many cases the table holds (reported in the issue's note)."""
    classes = [cls for cls in public_classes() if parameters(cls)]
    count = sum(len(parameters(cls)) for cls in classes)
    assert len(classes) >= 19 and count >= 90 and len(CASES) >= 400, (
        len(classes),
        count,
        len(CASES),
    )
