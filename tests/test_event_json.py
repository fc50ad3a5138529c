"""The JSON of event batches: the fast writer (orjson, ``hermes-fsm[fast]``) writes what
pydantic writes, byte for byte, or leaves the batch to pydantic."""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import math
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, computed_field, model_validator
from pydantic_core import to_json

from hermes_fsm.contracts.base import Contract
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.events import ListSink
from hermes_fsm.events.model import (
    EventList,
    StateOutput,
    event_data,
    finite,
    write_json,
)

needs_orjson = pytest.mark.skipif(importlib.util.find_spec("orjson") is None,
                                  reason="orjson (hermes-fsm[fast]) is not installed")


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


class Inner(BaseModel):
    x: int


@dataclasses.dataclass
class Point:
    x: int


VALUES: list[Any] = [
    "plain", "a\u2028b\x1f\x7f/\"\\é😀", "", 0, -1, 2**63 - 1, -(2**63), 2**64, 10**30,
    True, False, None, 0.1, 1.0, -0.0, 1e16, 1e-7, 5e-324, 1e300, 123456789.123,
    datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 1, 2, 3, 4, tzinfo=UTC),
    datetime(2026, 1, 1, 1, 2, 3, 400000),
    datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=1))),
    date(2026, 1, 2), time(1, 2, 3, 5), timedelta(seconds=1.5), uuid.UUID(int=7),
    Colour.RED, Level.HIGH, Name("sub"), Decimal("1.5"), {1, 2}, b"bytes", Inner(x=1), Point(1),
    (1, "two"), [1, [2, {"k": 3.5}]], {"nested": {"deep": [None, 1.25]}}, {1: "int key"},
    {Name("k"): 1}, float("nan"), float("inf"), -float("inf"), [float("nan")],
    {"x": {"y": float("inf")}},
]


@needs_orjson
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_fast_writer_writes_pydantics_bytes(value: Any) -> None:
    data = [{"kind": "x", "value": value}]
    expected = to_json(data, serialize_unknown=True)
    assert write_json(data, finite(data)) == expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"),
                                   [1, {"a": float("nan")}], (float("inf"),)], ids=repr)
def test_a_non_finite_float_anywhere_is_found(value: Any) -> None:
    assert not finite({"v": value})


@pytest.mark.parametrize("value", ["nan", None, [None, 1.5], {"a": 0.0}, 1e308], ids=repr)
def test_finite_values_are_finite(value: Any) -> None:
    assert finite({"v": value})


def _batch(fields: dict[str, Any], *, through_add: bool) -> EventList:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    batch = EventList()
    data = event_data(StateOutput, {"session_id": "s", "turn_id": "t", "seq": 1, "at": at,
                                    "state": "A", "attempt": 1, **fields})
    if through_add:
        batch.add(StateOutput, data)
    else:  # as the turn adds it
        batch.appender()(data)
        batch.unchecked.append(data)
    return batch


def test_a_batch_given_a_nan_through_add_writes_it_as_pydantic_does() -> None:
    for through_add in (True, False):
        batch = _batch({"output": {"score": float("nan")}}, through_add=through_add)
        assert b'"score":NaN' in batch.to_json()
        assert batch.to_json() == to_json(batch.data, serialize_unknown=True)


def test_a_nan_added_to_an_output_after_it_was_emitted_is_still_seen() -> None:
    output: dict[str, Any] = {"score": 1.0}
    batch = _batch({"output": output}, through_add=False)
    output["late"] = float("inf")  # the log is written at the end of the turn
    assert batch.to_json() == to_json(batch.data, serialize_unknown=True)
    assert b'"late":Infinity' in batch.to_json()


def test_each_durable_step_checks_what_it_writes() -> None:
    batch = _batch({"output": {"score": 1.0}}, through_add=False)
    assert batch.json_from(0) == to_json(batch.data, serialize_unknown=True)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    batch.add(StateOutput, event_data(StateOutput, {
        "session_id": "s", "turn_id": "t", "seq": 2, "at": at, "state": "A", "attempt": 1,
        "output": {"score": float("nan")}}))
    assert batch.json_from(1) == to_json(batch.data[1:], serialize_unknown=True)
    assert batch.to_json() == to_json(batch.data, serialize_unknown=True)


async def test_a_turn_whose_output_holds_nan_keeps_nan_in_its_log() -> None:
    """A handler's NaN reaches the log as NaN (the fast writer would write null)."""
    from hermes_fsm import ToolRegistry
    from hermes_fsm.graph.loader import parse_graph
    from hermes_fsm.testing import ScriptedBrain

    graph = parse_graph(
        "name: nan\ninitial: IDLE\nstates:\n  IDLE: {}\n"
        f"  SCORE: {{handler: {__name__}.score, on_failure: IDLE}}\n"
        "transitions:\n  - {trigger: start, source: IDLE, dest: SCORE}\n"
        "  - {source: SCORE, dest: IDLE}\n", "nan.yaml")
    orchestrator = Orchestrator(graph, brain=ScriptedBrain({}), tools=ToolRegistry())
    result = await orchestrator.run_turn("s1", "hi")
    assert result.status == "completed"
    lines = orchestrator.session("s1").event_lines()
    assert any(b'"score":NaN' in line for line in lines)
    outputs = [e for e in orchestrator.session("s1").events if e.kind == "state_output"]
    assert math.isnan(outputs[0].output["score"])


async def score(ctx: Any) -> dict[str, Any]:
    return {"score": float("nan"), "text": "done"}


async def test_a_turn_of_plain_values_takes_the_fast_writer() -> None:
    from hermes_fsm import ToolRegistry
    from hermes_fsm.graph.loader import parse_graph
    from hermes_fsm.testing import ScriptedBrain

    graph = parse_graph(
        "name: plain\ninitial: IDLE\nstates:\n  IDLE: {}\n"
        f"  ANSWER: {{handler: {__name__}.answer, on_failure: IDLE}}\n"
        "transitions:\n  - {trigger: start, source: IDLE, dest: ANSWER}\n"
        "  - {source: ANSWER, dest: IDLE}\n", "plain.yaml")
    orchestrator = Orchestrator(graph, brain=ScriptedBrain({}), tools=ToolRegistry())
    result = await orchestrator.run_turn("s1", "hi")
    events = result.events
    assert isinstance(events, EventList)
    # only the output is checked: the engine's own events (transitions, turn_started and
    # turn_finished) hold strings, ints and the engine's finite durations
    assert events.unchecked == [{"text": "done", "score": 0.5, "none": None}]
    assert events.to_json() == to_json(events.data, serialize_unknown=True)


async def answer(ctx: Any) -> dict[str, Any]:
    return {"text": "done", "score": 0.5, "none": None}


def test_every_event_class_is_found_by_its_kind() -> None:
    from typing import get_args

    from hermes_fsm.events.model import EVENT_CLASSES, Event

    classes = get_args(get_args(Event)[0])
    assert len(EVENT_CLASSES) == len(classes)
    for cls in classes:
        assert EVENT_CLASSES[cls.model_fields["kind"].default] is cls


def test_an_event_of_a_class_its_kind_does_not_name_is_read_back_as_that_class() -> None:
    class Custom(StateOutput):  # the same kind, another class
        pass

    at = datetime(2026, 1, 1, tzinfo=UTC)
    batch = EventList()
    fields = {"session_id": "s", "turn_id": "t", "seq": 1, "at": at, "state": "A",
              "attempt": 1, "contract": None, "output": 1}
    batch.add(Custom, event_data(Custom, fields))
    batch.add(StateOutput, event_data(StateOutput, {**fields, "seq": 2}))
    assert [type(e) for e in batch] == [Custom, StateOutput]
    assert [kind for kind, _ in batch.pairs()] == [Custom, StateOutput]


# --- outputs the engine knows to be finite ----------------------------------------------
# A contract's JSON-mode dump writes a non-finite float as None wherever pydantic infers the
# type; a ``float`` serializer keeps it. The engine skips the check only for contracts whose
# every ``float`` validation keeps finite and nothing changes after it (a frozen model's own
# field, ``allow_inf_nan`` off, no validator function), with the default ``ser_json_inf_nan``.


def _nan() -> float:
    return float("nan")


class Loose(Contract):
    contract_name, contract_version = "loose", "1.0.0"
    text: str
    data: dict[str, Any]
    items: list[Any]


class FloatSetByValidator(Contract):
    contract_name, contract_version = "float_by_validator", "1.0.0"
    text: str
    score: Annotated[float, AfterValidator(lambda v: _nan())]


class ComputedFloat(Contract):
    contract_name, contract_version = "computed_float", "1.0.0"
    text: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def score(self) -> float:
        return _nan()


class LooseNested(BaseModel):  # a plain model: NaN allowed in its float field
    score: float


class NestedFloat(Contract):
    contract_name, contract_version = "nested_float", "1.0.0"
    text: str
    inner: LooseNested


class ConstantsConfig(Contract):
    model_config = ConfigDict(ser_json_inf_nan="constants")
    contract_name, contract_version = "constants_config", "1.0.0"
    text: str
    data: dict[str, Any]


class BoundedScore(Contract):  # floats a Contract validates: finite, and frozen after
    contract_name, contract_version = "bounded_score", "1.0.0"
    text: str
    score: float = Field(ge=0, le=1)
    spread: float | None = None


class NanAllowedField(Contract):
    contract_name, contract_version = "nan_allowed", "1.0.0"
    text: str
    score: float = Field(allow_inf_nan=True)


_OUTPUTS: dict[str, dict[str, Any]] = {
    "bounded_score": {"text": "t", "score": 0.5, "spread": 1e300},
    "nan_allowed": {"text": "t", "score": float("nan")},
    "loose": {"text": "t", "data": {"x": float("nan")}, "items": [float("inf")]},
    "float_by_validator": {"text": "t", "score": 0.5},
    "computed_float": {"text": "t"},
    "nested_float": {"text": "t", "inner": {"score": float("nan")}},
    "constants_config": {"text": "t", "data": {"x": float("nan")}},
}


async def shaped(ctx: Any) -> dict[str, Any]:
    return dict(_OUTPUTS[ctx.state.contract.contract_name])


@pytest.mark.parametrize(("contract", "finite"), [
    (Loose, True), (FloatSetByValidator, False), (ComputedFloat, False),
    (NestedFloat, False), (ConstantsConfig, False), (BoundedScore, True),
    (NanAllowedField, False)], ids=lambda c: getattr(c, "__name__", c))
@pytest.mark.parametrize("sinks", [False, True], ids=["no sink", "a sink"])
async def test_an_output_is_left_unchecked_only_when_its_dump_cannot_hold_nan(
        contract: type[Contract], finite: bool, sinks: bool) -> None:
    from hermes_fsm import ToolRegistry
    from hermes_fsm.contracts import ContractRegistry
    from hermes_fsm.engine.orchestrator import _finite_dump
    from hermes_fsm.graph.loader import parse_graph
    from hermes_fsm.testing import ScriptedBrain

    assert _finite_dump(contract) is finite
    graph = parse_graph(
        "name: shapes\ninitial: IDLE\nstates:\n  IDLE: {}\n"
        f"  SHAPE: {{handler: {__name__}.shaped, contract: {contract.ref()}, "
        "on_failure: IDLE}\n"
        "transitions:\n  - {trigger: start, source: IDLE, dest: SHAPE}\n"
        "  - {source: SHAPE, dest: IDLE}\n", "shapes.yaml",
        contracts=ContractRegistry([contract]))
    orchestrator = Orchestrator(graph, brain=ScriptedBrain({}), tools=ToolRegistry(),
                                sinks=[ListSink()] if sinks else ())
    result = await orchestrator.run_turn("s1", "hi")
    assert result.status == "completed", result.answer
    events = result.events
    assert isinstance(events, EventList)
    data = next(d for d in events.data if d["kind"] == "state_output")
    assert (data["output"] in events.unchecked or data in events.unchecked) is not finite
    # whichever writer wrote the log, it holds what pydantic writes of the same data
    assert events.to_json() == to_json(events.data, serialize_unknown=True)
    if not finite:  # a non-finite float that reached the dump is in the log as pydantic wrote it
        assert b"NaN" in events.to_json()


class _FrozenStrict(BaseModel):
    model_config = ConfigDict(frozen=True, allow_inf_nan=False)
    score: float


class _MutableStrict(BaseModel):  # refuses NaN, but a hook may set one after validation
    model_config = ConfigDict(allow_inf_nan=False)
    score: float


class _FloatList(Contract):  # a list stays mutable inside a frozen model
    contract_name, contract_version = "float_list", "1.0.0"
    scores: list[float]


class _FloatDict(Contract):
    contract_name, contract_version = "float_dict", "1.0.0"
    scores: dict[str, float]


class _NestedFrozen(Contract):
    contract_name, contract_version = "nested_frozen", "1.0.0"
    inner: _FrozenStrict
    maybe: _FrozenStrict | None = None


class _NestedMutable(Contract):
    contract_name, contract_version = "nested_mutable", "1.0.0"
    inner: _MutableStrict


class _ModelValidated(Contract):  # an after validator may hand back anything
    contract_name, contract_version = "model_validated", "1.0.0"
    score: float

    @model_validator(mode="after")
    def _same(self) -> _ModelValidated:
        return self


class _ValidatedNoFloat(Contract):  # a validator, but no float for it to make NaN
    contract_name, contract_version = "validated_no_float", "1.0.0"
    text: str

    @model_validator(mode="after")
    def _same(self) -> _ValidatedNoFloat:
        return self


class _InitSets(Contract):
    contract_name, contract_version = "init_sets", "1.0.0"
    score: float

    def model_post_init(self, context: Any) -> None:
        object.__setattr__(self, "score", float("nan"))


@pytest.mark.parametrize(("contract", "finite"), [
    (_FloatList, False), (_FloatDict, False), (_NestedFrozen, True), (_NestedMutable, False),
    (_ModelValidated, False), (_ValidatedNoFloat, True), (_InitSets, False)],
    ids=lambda c: getattr(c, "__name__", c))
def test_a_float_counts_as_finite_only_where_nothing_can_change_it_after_validation(
        contract: type[Contract], finite: bool) -> None:
    from hermes_fsm.engine.orchestrator import _finite_dump

    assert _finite_dump(contract) is finite
    if contract is _InitSets:  # why: validated, then set to NaN, and written as a float
        assert b"NaN" in to_json(_InitSets(score=0.5).model_dump(mode="json"))
