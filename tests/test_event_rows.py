"""A turn's own events kept as compact rows when no sink takes them (hermes_fsm.events.rows):
what anyone reads of them — the turn's events, the session's log, its JSON lines — is what
the field dicts a sink gets would have given, and a log of rows costs the garbage
collector nothing."""

from __future__ import annotations

import gc
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from pydantic import ConfigDict
from pydantic_core import to_json

from hermes_fsm import ToolRegistry
from hermes_fsm.contracts import ContractRegistry
from hermes_fsm.contracts.base import Contract
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.events.model import (
    EVENT_ADAPTER,
    EventList,
    Retry,
    StateExited,
    event_data,
)
from hermes_fsm.events.rows import ENTERED, OUTPUT_JSON, ROW_KINDS, row_data, stamp_time
from hermes_fsm.graph.loader import parse_graph
from hermes_fsm.sources import FixedClock, SequentialIds
from hermes_fsm.testing import ScriptedBrain


class Listed(Contract):
    contract_name: ClassVar[str] = "listed"
    items: list[str]
    note: dict[str, Any]


class Scored(Contract):  # a float field: its dump is checked for NaN at run time
    model_config = ConfigDict(allow_inf_nan=True)
    contract_name: ClassVar[str] = "scored"
    text: str
    score: float


async def first(ctx: Any) -> dict[str, Any]:
    return {"items": ["a", "b"], "note": {"n": 1, "big": 2**70, "when": "2026-01-01"}}


async def second(ctx: Any) -> dict[str, Any]:
    ctx.outputs["FIRST"].items.append("changed later")  # a later state changes an output
    return {"text": "done", "score": 0.25}


async def nan_second(ctx: Any) -> dict[str, Any]:
    return {"text": "done", "score": float("nan")}


async def second_noting(ctx: Any) -> dict[str, Any]:
    ctx.emit(Retry, state="SECOND", attempt=1, reason="error", delay_s=0.5)  # a dict event
    return {"text": "done", "score": 0.75}


class Name(str):
    """A str subclass: orjson (as the engine calls it) refuses it, pydantic writes it."""


async def second_odd(ctx: Any) -> dict[str, Any]:
    ctx.emit(Retry, state=Name("SECOND"), attempt=1, reason="error", delay_s=0.5)
    return {"text": "done", "score": 0.75}


async def second_str(ctx: Any) -> str:
    return '{"text": "done", "score": 0.5}'  # raw text, as a model answers


def two_states(second_handler: str = "second") -> Any:
    return parse_graph(
        "name: rows\ninitial: IDLE\nstates:\n  IDLE: {}\n"
        f"  FIRST: {{handler: {__name__}.first, contract: {Listed.ref()}, on_failure: IDLE}}\n"
        f"  SECOND: {{handler: {__name__}.{second_handler}, contract: {Scored.ref()}, "
        "on_failure: IDLE}\n"
        "transitions:\n  - {trigger: start, source: IDLE, dest: FIRST}\n"
        "  - {source: FIRST, dest: SECOND}\n  - {source: SECOND, dest: IDLE}\n",
        "rows.yaml", contracts=ContractRegistry([Listed, Scored]))


class DataSink:
    """A sink that takes field dicts: the turn builds them as it goes (no rows)."""

    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []

    def emit(self, event: Any) -> None:  # pragma: no cover - emit_data is used
        raise AssertionError("a data sink gets field dicts")

    def emit_data(self, kind: type[Any], data: Any) -> None:
        self.data.append(dict(data))


def orchestrator(graph: Any, *sinks: Any, **options: Any) -> Orchestrator:
    options.setdefault("clock", FixedClock())
    options.setdefault("ids", SequentialIds())
    return Orchestrator(graph, brain=ScriptedBrain({}), tools=ToolRegistry(), sinks=sinks,
                        **options)


@pytest.mark.parametrize("handler", ["second", "second_str"])
async def test_rows_read_back_as_the_field_dicts_a_sink_gets(handler: str) -> None:
    plain, sink = orchestrator(two_states(handler)), DataSink()
    watched = orchestrator(two_states(handler), sink)
    for _ in range(2):
        rows_result = await plain.run_turn("s1", "hi")
        dict_result = await watched.run_turn("s1", "hi")
        assert rows_result.status == dict_result.status == "completed"
        rows_events, dict_events = rows_result.events, dict_result.events
        assert isinstance(rows_events, EventList) and rows_events.rows() is not None
        assert isinstance(dict_events, EventList) and dict_events.rows() is None
        assert timeless(rows_events.data) == timeless(dict_events.data)
        turn = sink.data[-len(rows_events):]
        assert [list(d) for d in rows_events.data] == [list(d) for d in turn]
        assert timeless(e.model_dump() for e in rows_events) == timeless(
            e.model_dump() for e in dict_events)
        assert untimed(rows_events.to_json()) == untimed(dict_events.to_json())
    session, other = plain.sessions()["s1"], watched.sessions()["s1"]
    # the log's JSON, byte for byte (but the durations measured)
    assert [untimed(line) for line in session.event_lines()] == [
        untimed(line) for line in other.event_lines()]
    assert timeless(e.model_dump() for e in session.events_after(12)) == timeless(
        e.model_dump() for e in other.events_after(12))
    assert session.approx_bytes() > 0


def timeless(data: Any) -> list[dict[str, Any]]:
    """Field dicts with their measured durations set to 0."""
    return [{**d, "duration_ms": 0.0} if "duration_ms" in d else dict(d) for d in data]


def untimed(json: bytes) -> bytes:
    """JSON with its measured durations set to 0."""
    return re.sub(rb'"duration_ms":[-+.0-9eE]+', b'"duration_ms":0', json)


async def test_an_output_is_recorded_as_it_was_validated_not_as_changed_later() -> None:
    o = orchestrator(two_states())
    result = await o.run_turn("s1", "hi")
    output = result.outputs["FIRST"]
    assert output["items"] == ["a", "b"]
    assert output["note"] == {"n": 1, "big": 2**70, "when": "2026-01-01"}
    logged = [e for e in o.sessions()["s1"].events if e.kind == "state_output"]
    assert logged[0].output["items"] == ["a", "b"]


async def test_a_nan_in_a_float_field_is_kept_and_logged_as_pydantic_writes_it() -> None:
    o = orchestrator(two_states("nan_second"))
    result = await o.run_turn("s1", "hi")
    events = result.events
    assert isinstance(events, EventList)
    blob, rows = events.log_json()
    assert not rows and b'"score":NaN' in blob  # not the rows' JSON: it has no NaN
    output = next(d for d in events.data if d["kind"] == "state_output" and
                  d["state"] == "SECOND")["output"]
    assert output["score"] != output["score"]  # NaN, as model_dump gives it
    assert b"NaN" in o.sessions()["s1"].event_lines()[-4]


async def test_the_system_clock_s_rows_carry_the_instant_of_each_event() -> None:
    o = Orchestrator(two_states(), brain=ScriptedBrain({}), tools=ToolRegistry())
    before = datetime.now(UTC)
    result = await o.run_turn("s1", "hi")
    after = datetime.now(UTC)
    events = result.events
    assert isinstance(events, EventList)
    stamps = [d["at"] for d in events.data]
    assert all(type(at) is datetime and at.tzinfo is not None for at in stamps)
    assert before <= stamps[0] and stamps[-1] <= after and stamps == sorted(stamps)
    assert events.at(0) == stamps[0] and events.at(-1) == stamps[-1]
    for data in events.data:  # each a valid event of its model
        assert EVENT_ADAPTER.validate_python(data).model_dump() == data


def test_stamp_time_is_the_datetime_now_of_that_instant() -> None:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert stamp_time(1_999) == epoch + timedelta(microseconds=1)  # rounded down
    assert stamp_time(1_700_000_000_123_456_789) == datetime(
        2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    for _ in range(100):
        low = datetime.now(UTC)
        at = stamp_time(time.time_ns())
        assert low <= at <= datetime.now(UTC)
    given = datetime(2026, 1, 1, tzinfo=UTC)
    assert stamp_time(given) is given  # an injected clock's reading stays as it is


def test_an_event_list_of_rows_answers_without_making_dicts() -> None:
    events = EventList()
    add = events.appender()
    at = time.time_ns()
    add((ENTERED, "s", "t", 7, at, "A", "IDLE", "start", 1))
    assert events.first_seq() == events.last_seq() == 7 and len(events) == 1
    assert events.rows() is not None  # nothing made so far
    assert events.at(0) == events.at(-1) == stamp_time(at)
    assert events.rows() is None and events.data[0]["at"] == stamp_time(at)  # made, kept
    assert events.of_kinds({"state_entered"})[0].state == "A"
    exited = event_data(StateExited, {"session_id": "s", "turn_id": "t", "seq": 8,
                                      "at": stamp_time(at), "state": "A",
                                      "trigger": "done", "dest": "IDLE",
                                      "duration_ms": 1.0})
    events.add(StateExited, exited, scalars=True)
    assert events.rows() is None and events.last_seq() == 8
    assert events.data[1] is exited
    assert events.data[0] == row_data((ENTERED, "s", "t", 7, at, "A", "IDLE", "start", 1))
    assert [e.kind for e in events] == ["state_entered", "state_exited"]
    assert ROW_KINDS[ENTERED] == "state_entered"


async def test_a_log_of_rows_adds_nothing_for_the_garbage_collector() -> None:
    o = orchestrator(two_states(), clock=None, ids=None)
    for _ in range(20):  # history window and caches settle
        result = await o.run_turn("s1", "hi")
    for _ in range(3):
        gc.collect()
    before = len(gc.get_objects())
    for _ in range(300):
        await o.run_turn("s1", "hi")
    for _ in range(3):  # a tuple is untracked once what it holds is: a level a collection
        gc.collect()
    grown = len(gc.get_objects()) - before
    # 300 turns of 10 events each are in the log; held as dicts they would be 3,000+
    assert len(o.sessions()["s1"].events) == 320 * len(result.events)
    assert grown < 100, grown


async def test_a_log_of_rows_holds_about_what_its_json_would_and_what_it_counts() -> None:
    """What a session's log of rows holds for each turn (tracemalloc) is about the turn's
    JSON, and about what approx_bytes counts for it (a bounded session cache counts that):
    no writer's spare buffer kept with an output (orjson keeps its buffer's capacity)."""
    import tracemalloc

    o = orchestrator(two_states(), clock=None, ids=None)
    for _ in range(30):  # the history window full, caches warm
        await o.run_turn("s1", "hi")
    session = o.sessions()["s1"]
    counted_before = session.approx_bytes()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100):
            await o.run_turn("s1", "hi")
        gc.collect()
        held = (tracemalloc.get_traced_memory()[0] - before) / 100
    finally:
        tracemalloc.stop()
    counted = (session.approx_bytes() - counted_before) / 100
    lines = session.event_lines()
    json = sum(len(line) + 1 for line in lines) / 130
    assert held <= 1.25 * json, (held, json)
    assert 0.8 * held <= counted <= 1.5 * held, (held, counted)


async def test_a_durable_turn_of_rows_logs_what_its_steps_stored() -> None:
    from hermes_fsm.store import InMemoryStore

    store = InMemoryStore()
    o = orchestrator(two_states(), store=store)
    result = await o.run_turn("s1", "hi")
    events = result.events
    assert isinstance(events, EventList)
    blob, rows = events.log_json()
    assert not rows  # the steps' arrays, joined: serialized once, for the store
    stored = await store.events_after("s1")
    assert [to_json(e) for e in stored] == o.sessions()["s1"].event_lines()
    assert blob == to_json(stored)
    await o.aclose()


async def test_a_log_of_rows_reads_back_as_its_turns_events() -> None:
    o = orchestrator(two_states(), clock=None, ids=None)  # the system clock: time_ns rows
    results = [await o.run_turn("s1", "hi") for _ in range(3)]
    session = o.sessions()["s1"]
    data = [d for r in results if isinstance(r.events, EventList) for d in r.events.data]
    assert len(data) == sum(len(r.events) for r in results)
    assert [to_json(d) for d in data] == session.event_lines()
    assert [e for r in results for e in r.events] == session.events
    assert session.events_after(25) == list(results[-1].events)[5:]


@pytest.mark.parametrize("writer", ["orjson", "pydantic"])
async def test_rows_json_reads_back_the_rows_field_dicts(writer: str,
                                                         monkeypatch: Any) -> None:
    from hermes_fsm.events import rows as rows_module

    if writer == "pydantic":  # hermes-fsm without its [fast] extra
        from hermes_fsm.engine import turn as turn_module

        monkeypatch.setattr(rows_module, "_orjson", None)
        monkeypatch.setattr(rows_module, "OUTPUT_JSON", None)
        monkeypatch.setattr(turn_module, "OUTPUT_JSON", None)
    for clock in (None, FixedClock()):
        result = await orchestrator(two_states(), clock=clock).run_turn("s1", "hi")
        events = result.events
        assert isinstance(events, EventList)
        rows = events.rows()
        assert rows is not None
        back = rows_module.rows_data(rows_module.rows_json(rows))
        assert [to_json(d) for d in back] == [to_json(d) for d in events.data]


@pytest.mark.skipif(OUTPUT_JSON is None, reason="orjson (hermes-fsm[fast]) is not "
                    "installed: rows keep an output's JSON as bytes, no fragment")
def test_rows_orjson_gives_up_on_write_their_output_json_through_pydantic() -> None:
    from hermes_fsm.events import rows as rows_module

    fragment = rows_module.OUTPUT_JSON
    assert fragment is not None
    output = fragment(b'{"x":[1,2.5]}')  # what a row of a finite dump holds
    rows = [(rows_module.OUTPUT, "s", "t", 1, 1_700_000_000_000_000_000, "A", 1, "c@1.0.0",
             output, None),
            (rows_module.EXITED, "s", "t", 2, 1_700_000_000_000_000_000, "A", "done", "B",
             2**70)]  # an int beyond 64 bits: orjson gives up on the batch, pydantic writes it
    blob = rows_module.rows_json(rows)
    assert b'"{\\"x\\":[1,2.5]}"' in blob  # the output's JSON, as a string
    back = rows_module.rows_data(blob)
    assert back[0]["output"] == {"x": [1, 2.5]} and back[1]["duration_ms"] == 2**70
    assert [to_json(d) for d in back] == [to_json(row_data(r)) for r in rows]


@pytest.mark.parametrize("clock", [None, FixedClock()], ids=["system clock", "fixed clock"])
async def test_a_turn_of_rows_and_field_dicts_writes_what_its_dicts_would(clock: Any) -> None:
    o = orchestrator(two_states("second_noting"), clock=clock)
    result = await o.run_turn("s1", "hi")
    events = result.events
    assert isinstance(events, EventList) and events.rows() is None
    blob = events.to_json()  # before any dict is read: no output parsed to be written
    as_rows = [type(entry) is tuple for entry in events._data]
    first_dict = as_rows.index(False)  # the handler's event: the turn's events from then on
    assert first_dict > 3 and not any(as_rows[first_dict:])  # are dicts (written as dicts)
    assert {d["kind"] for d in events.data} >= {"retry", "state_output"}
    assert blob == to_json(list(events.data), serialize_unknown=True)  # pydantic, the dicts
    assert o.sessions()["s1"].event_lines() == [to_json(d) for d in events.data]


async def test_a_batch_orjson_refuses_is_written_by_pydantic_rows_and_all() -> None:
    o = orchestrator(two_states("second_odd"))
    result = await o.run_turn("s1", "hi")
    events = result.events
    assert isinstance(events, EventList)
    blob = events.to_json()  # rows among the dicts, and a value orjson gives up on
    assert blob == to_json(list(events.data), serialize_unknown=True)
    assert o.sessions()["s1"].event_lines() == [to_json(d) for d in events.data]
