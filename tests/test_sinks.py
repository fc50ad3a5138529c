"""Event sinks: object sinks (``emit``) and data sinks (``emit_data``) see the same events."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog

from hermes_fsm.events import ListSink, StructlogSink
from hermes_fsm.events.model import (
    BrainCall,
    ContractViolation,
    StateOutput,
    TurnFinished,
    _Event,
    event_data,
    make_event,
)
from hermes_fsm.events.sinks import DataSink, EventSink, event_from_data, event_json, sink_plan
from hermes_fsm.server.wire import sse, sse_data
from hermes_fsm.testing import HANG, ScriptedBrain, capture_events
from tests.support import INTENT_TOOLS, PLAN_EMPTY, PLAN_LOOKUP, graph_with, happy_script

COMMIT = {"memory_updates": [{"key": "preference.contact", "update_type": "create",
                              "value": "email", "evidence_source": "user_message"}]}


class DataRecorder:
    """A data sink: keeps what ``emit_data`` got (and, apart, what ``emit`` got)."""

    def __init__(self) -> None:
        self.data: list[tuple[type[Any], dict[str, Any]]] = []
        self.objects: list[Any] = []

    def emit(self, event: Any) -> None:
        self.objects.append(event)

    def emit_data(self, kind: type[Any], data: Mapping[str, Any]) -> None:
        self.data.append((kind, dict(data)))


class ObjectOnly:
    """A sink written before data sinks existed: ``emit`` only."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


def busy_turn_orchestrator(make_orchestrator: Any, sinks: list[Any]) -> Any:
    """A turn with a timeout, a contract violation, a failing handler, retries, a failure
    route, tool calls and a memory write: most kinds of event."""
    graph = graph_with({"INTENT": {"timeout_s": 0.02},
                        "RESULT": {"handler": "tests.test_engine.crashing_report"}})
    bad_intent = {**INTENT_TOOLS, "confidence": 1.7}
    brain = ScriptedBrain(happy_script(intent=[HANG, bad_intent, INTENT_TOOLS],
                                       memory_commit=[COMMIT]))
    return make_orchestrator(graph, brain=brain, sinks=sinks)


def edge_events() -> list[tuple[type[Any], dict[str, Any]]]:
    """Field values a lax caller might pass: an int for a float, a tuple in free-form data, an
    infinite float, nested models and non-ASCII text."""
    base = {"session_id": "s1", "turn_id": "t1", "seq": 7,
            "at": datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)}
    return [
        (BrainCall, event_data(BrainCall, {**base, "state": "INTENT", "attempt": 1,
                                           "brain": "rules", "duration_ms": 3})),
        (BrainCall, event_data(BrainCall, {**base, "state": "INTENT", "attempt": 1,
                                           "brain": "rules", "duration_ms": math.inf,
                                           "usage": {"prompt_tokens": 5}})),
        (TurnFinished, event_data(TurnFinished, {**base, "status": "completed",
                                                 "answer": "还剩 42 件 — ok",
                                                 "duration_ms": 1.5,
                                                 "path": ["IDLE", "INTENT", "IDLE"]})),
        (StateOutput, event_data(StateOutput, {**base, "state": "INTENT", "attempt": 1,
                                               "contract": "intent@1",
                                               "output": {"nested": [1, 2.5, None]},
                                               "raw": '{"x": 1}'})),
        (ContractViolation, event_data(ContractViolation, {
            **base, "state": "INTENT", "attempt": 2, "contract": "intent@1",
            "errors": [{"loc": ("confidence",), "msg": "too big", "type": "less_than"}]})),
    ]


async def test_a_data_sink_gets_the_fields_an_object_sink_gets(make_orchestrator: Any) -> None:
    objects, old, recorder = ListSink(), ObjectOnly(), DataRecorder()
    orchestrator = busy_turn_orchestrator(make_orchestrator, [objects, recorder, old])

    result = await orchestrator.run_turn("s1", "How many A1001?")

    assert len({e.kind for e in result.events}) >= 10
    assert recorder.objects == []  # a turn calls emit_data, never emit
    assert objects.events == old.events == list(result.events)
    assert all(a is b for a, b in zip(objects.events, result.events, strict=True))
    assert len(recorder.data) == len(objects.events)
    for (kind, data), event in zip(recorder.data, objects.events, strict=True):
        assert kind is type(event)
        assert data == event.__dict__ == dict(event)
        assert event_from_data(kind, data) == event


async def test_data_sinks_build_no_event_objects(make_orchestrator: Any) -> None:
    recorder = DataRecorder()
    without = await busy_turn_orchestrator(make_orchestrator, []).run_turn("s1", "How many?")
    result = await busy_turn_orchestrator(make_orchestrator, [recorder]).run_turn(
        "s1", "How many?")

    # only those the engine reads itself (as without sinks), none for the sink
    built = sorted(result.events._objects)
    assert built == sorted(without.events._objects)
    assert len(built) < len(result.events) // 2
    assert [data for _, data in recorder.data] == [e.model_dump() for e in result.events]


def test_the_sink_plan_sorts_sinks_and_is_kept_per_tuple() -> None:
    objects, recorder = ListSink(), DataRecorder()
    sinks = (objects, recorder)

    plan = sink_plan(sinks)

    assert plan == (True, ((objects, False), (recorder, True)))
    assert sink_plan(sinks) is plan
    assert sink_plan((recorder,)) == (False, ((recorder, True),))
    assert isinstance(recorder, DataSink) and isinstance(recorder, EventSink)
    assert not isinstance(objects, DataSink) and isinstance(objects, EventSink)


async def test_structlog_sink_logs_the_same_fields_from_data_as_from_objects(
        make_orchestrator: Any) -> None:
    sink = StructlogSink()
    orchestrator = busy_turn_orchestrator(make_orchestrator, [sink])
    with structlog.testing.capture_logs() as from_data:
        result = await orchestrator.run_turn("s1", "How many A1001?")
    with structlog.testing.capture_logs() as from_objects:
        for event in result.events:
            sink.emit(event)

    assert from_data == from_objects
    assert [entry["event"] for entry in from_data] == [e.kind for e in result.events]
    assert {entry["log_level"] for entry in from_data} == {"info", "warning"}


@pytest.mark.parametrize("index", range(len(edge_events())))
def test_structlog_sink_logs_lax_field_values_as_the_model_dumps_them(index: int) -> None:
    kind, data = edge_events()[index]
    sink = StructlogSink()
    with structlog.testing.capture_logs() as from_data:
        sink.emit_data(kind, data)
    with structlog.testing.capture_logs() as from_object:
        sink.emit(make_event(kind, data))

    assert from_data == from_object


async def test_event_json_is_the_models_json_byte_for_byte(make_orchestrator: Any) -> None:
    orchestrator = busy_turn_orchestrator(make_orchestrator, [DataRecorder()])
    result = await orchestrator.run_turn("s1", "How many A1001?")
    pairs = [(type(e), e.__dict__) for e in result.events] + edge_events()

    for kind, data in pairs:
        event = make_event(kind, data)
        assert event_json(kind, data) == event.model_dump_json().encode()
        assert sse_data(kind, data) == sse(event)


def _lax_field_dicts() -> list[tuple[type[Any], dict[str, Any]]]:
    """Every event class with each of its fields given each of many values, of its own type
    or not (an int for a float, a bool for an int, NaN, a model, a set, …)."""
    from tests.test_event_json import VALUES

    base = {"session_id": "s1", "turn_id": "t1", "seq": 7,
            "at": datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)}
    extra: list[Any] = [{"a": 1, "b": True}, {"a": 1.5}, {"a": 2**70}, ["x", 1], 7, 7.0]
    out = []
    for kind in _Event.__subclasses__():
        fields = {n: ("x" if f.annotation in (str, Any) else f.get_default(
            call_default_factory=True) if not f.is_required() else None)
            for n, f in kind.model_fields.items() if n not in base and n != "kind"}
        for name in [*base, *fields]:
            for value in [*VALUES, *extra]:
                out.append((kind, event_data(kind, {**base, **fields, name: value})))
    return out


def test_event_json_writes_the_models_bytes_for_lax_values_too() -> None:
    """The fast writer (orjson) is taken only where it writes what the model writes."""
    import warnings

    checked = 0
    for kind, data in _lax_field_dicts():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pydantic warns of unexpected types; both do
            try:
                want = make_event(kind, data).model_dump_json().encode()
            except Exception as exc:  # the model cannot write it: neither may event_json
                with pytest.raises(type(exc)):
                    event_json(kind, data)
                continue
            assert event_json(kind, data) == want, (kind.__name__, data)
        checked += 1
    assert checked > 5000


def test_every_event_class_has_a_field_serializer() -> None:
    from hermes_fsm.events.sinks import _serializer

    classes = _Event.__subclasses__()
    assert len(classes) >= 20
    assert all(_serializer(cls) is not None for cls in classes)


# --- attaching and detaching sinks ------------------------------------------------------


async def test_an_added_sink_gets_every_later_event_and_a_removed_one_none(
        make_orchestrator: Any) -> None:
    objects, recorder = ListSink(), DataRecorder()
    orchestrator = make_orchestrator(brain=ScriptedBrain(happy_script()))
    orchestrator.add_sink(objects)
    orchestrator.add_sink(recorder)
    assert orchestrator.sinks == (objects, recorder)

    first = await orchestrator.run_turn("s1", "How many A1001?")
    orchestrator.remove_sink(objects)
    orchestrator.remove_sink(recorder)
    second = await orchestrator.run_turn("s1", "And now?")

    assert objects.events == list(first.events)
    assert [data for _, data in recorder.data] == [e.model_dump() for e in first.events]
    assert len(second.events) > 0 and orchestrator.sinks == ()


async def test_a_sink_is_attached_once_and_removing_an_absent_one_does_nothing(
        make_orchestrator: Any) -> None:
    sink, stranger = ListSink(), ListSink()
    orchestrator = make_orchestrator(brain=ScriptedBrain(happy_script()))
    orchestrator.add_sink(sink)
    orchestrator.add_sink(sink)
    orchestrator.remove_sink(stranger)

    result = await orchestrator.run_turn("s1", "How many A1001?")

    assert orchestrator.sinks == (sink,)
    assert sink.events == list(result.events) and stranger.events == []


async def test_sinks_changed_mid_turn_take_effect_at_the_next_event(
        make_orchestrator: Any) -> None:
    early, late = ListSink(), ListSink()

    def swap(request: Any) -> Any:  # the brain answers PLANNING after swapping the sinks
        orchestrator.remove_sink(early)
        orchestrator.add_sink(late)
        return PLAN_LOOKUP

    orchestrator = make_orchestrator(brain=ScriptedBrain(happy_script(plan=[swap, PLAN_EMPTY])))
    orchestrator.add_sink(early)
    result = await orchestrator.run_turn("s1", "How many A1001?")

    events = list(result.events)
    cut = len(early.events)
    assert 0 < cut < len(events)
    assert early.events == events[:cut] and late.events == events[cut:]
    first = late.events[0]
    assert isinstance(first, BrainCall) and first.state == "PLANNING"
    assert late.events[-1].kind == "turn_finished"


def test_capture_events_detaches_its_sink_when_the_block_ends(make_orchestrator: Any) -> None:
    orchestrator = make_orchestrator(brain=ScriptedBrain(happy_script()))
    with capture_events(orchestrator) as captured:
        asyncio.run(orchestrator.run_turn("s1", "How many A1001?"))
    during = len(captured.events)
    asyncio.run(orchestrator.run_turn("s1", "And now?"))

    assert during > 0 and len(captured.events) == during and orchestrator.sinks == ()
