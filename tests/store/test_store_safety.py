"""What a tool, a model or a user can put into a session that a store cannot keep as it is:
U+0000, non-finite numbers, deep nesting. Every store writes and reads them alike, no
session is bricked, and no session fails for another session's data (issue 16: 1, 2, 5)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_core import to_json

from hermes_fsm.contracts.base import Contract
from hermes_fsm.contracts.states import Intent
from hermes_fsm.errors import StoreError, UsageError
from hermes_fsm.store import InMemoryStore, SQLiteStore
from hermes_fsm.store.protocol import Append, Checkpoint, Message
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry
from tests.store.conftest import dispose_store, make_store
from tests.support import INTENT_TOOLS, graph_with, happy_script

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NAN, INF = float("nan"), float("inf")


def event(sid: str, seq: int, **fields: Any) -> dict[str, Any]:
    return {"session_id": sid, "turn_id": "t1", "seq": seq, "at": "2026-01-01T00:00:00Z",
            "kind": "tool_call_finished", **fields}


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def registry_returning(output: Any) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool()
    def inventory_lookup(sku: str, warehouse: str | None = None) -> Any:
        """Whatever the test says."""
        return output

    return registry


# --- 1 and 2: U+0000 and non-finite numbers, the same in every store ----------------------


async def test_nul_and_non_finite_numbers_are_written_and_read_alike_by_every_store(store):
    sid = "s1"
    await store.claim(sid, "u1", "IDLE")
    events = [event(sid, 1, output={"text": "a\x00b", "k\x00": [NAN, INF, -INF, 1.5],
                                    "escaped": "\\u0000"}),
              event(sid, 2, duration_ms=NAN)]
    messages = [Message("m1", sid, "u1", "assistant", "an\x00swer", NOW,
                        tool_calls=[{"arguments": {"x": NAN, "y": "\x00"}}])]
    checkpoint = Checkpoint(sid, 2, "IDLE", {"history": [{"role": "assistant",
                                                          "content": "an\x00swer"}],
                                             "score": NAN})
    blob = to_json(events, serialize_unknown=True)  # what the engine hands over: NaN tokens
    await store.append(Append(sid, 1, 0, "IDLE", events, messages, checkpoint, blob))
    await store.effect_begin("s1/c1", sid, "lookup")
    await store.effect_finish("s1/c1", {"success": True, "output": {"v": NAN, "s": "\x00"}})

    first, second = await store.events_after(sid)
    assert first["output"] == {"text": "a\ufffdb", "k\ufffd": ["NaN", "Infinity", "-Infinity", 1.5],
                               "escaped": "\\u0000"}
    assert second["duration_ms"] == "NaN"
    (message,) = await store.messages(sid)
    assert message.content == "an\ufffdswer"
    assert message.tool_calls == [{"arguments": {"x": "NaN", "y": "\ufffd"}}]
    stored = await store.checkpoint(sid)
    assert stored is not None
    assert stored.data == {"history": [{"role": "assistant", "content": "an\ufffdswer"}],
                           "score": "NaN"}
    effect = await store.effect_begin("s1/c1", sid, "lookup")
    assert effect is not None and effect.outcome == {"success": True,
                                                     "output": {"v": "NaN", "s": "\ufffd"}}
    await store.archive(sid, "sum\x00mary")
    record = await store.get(sid)
    assert record is not None and record.summary == "sum\ufffdmary"


async def test_a_nul_in_the_users_message_is_refused_up_front_and_the_session_goes_on(tmp_path):
    store = await make_store("postgres", tmp_path)
    try:
        orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()),
                                         store=store)
        with pytest.raises(UsageError, match=r"U\+0000 .* at position 1"):
            await orchestrator.run_turn("s1", "a\x00b", user_id="u1")
        with pytest.raises(UsageError, match="the session id holds U"):
            await orchestrator.run_turn("s\x001", "hi", user_id="u1")
        with pytest.raises(UsageError, match="the user id holds U"):
            await orchestrator.run_turn("s1", "hi", user_id="u\x00")
        for _ in range(2):  # the session is not left mid-turn
            result = await orchestrator.run_turn("s1", "how many?", user_id="u1")
            assert result.status == "completed"
        kinds = [e["kind"] for e in await store.events_after("s1")]
        assert kinds.count("turn_started") == kinds.count("turn_finished") == 2
    finally:
        await dispose_store(store)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_a_tool_output_with_nul_and_nan_completes_the_turn_in_every_store(kind, tmp_path):
    store = await make_store(kind, tmp_path)
    try:
        orchestrator = demo_orchestrator(
            graph_with(), brain=ScriptedBrain(happy_script()), store=store,
            tools=registry_returning({"quantity": NAN, "note": "x\x00y"}))
        for _ in range(2):
            result = await orchestrator.run_turn("s1", "how many?", user_id="u1")
            assert result.status == "completed"
        finished = [e for e in await store.events_after("s1") if e["kind"] == "tool_call_finished"]
        assert finished and all(e["output"] == {"quantity": "NaN", "note": "x\ufffdy"}
                                for e in finished)
    finally:
        await dispose_store(store)


async def test_concurrent_sessions_complete_when_one_models_output_carries_nan(tmp_path):
    store = await make_store("postgres", tmp_path)
    try:
        nan_intent = {**INTENT_TOOLS, "confidence": NAN}  # a contract violation, retried
        brains = [ScriptedBrain(happy_script(intent=[nan_intent, INTENT_TOOLS]) if n == 3
                                else happy_script()) for n in range(8)]
        orchestrators = [demo_orchestrator(graph_with(), brain=b, store=store) for b in brains]
        results = await asyncio.gather(*(o.run_turn(f"s{n}", "how many?", user_id="u1")
                                         for n, o in enumerate(orchestrators)))
        assert [r.status for r in results] == ["completed"] * 8
        for n in range(8):
            events = await store.events_after(f"s{n}")
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert events[-1]["kind"] == "turn_finished"
        violations = [e for e in await store.events_after("s3")
                      if e["kind"] == "contract_violation"]
        assert violations
    finally:
        await dispose_store(store)


async def test_an_append_postgres_refuses_fails_alone_not_its_whole_group_commit(tmp_path):
    store = await make_store("postgres", tmp_path)
    try:
        for n in range(6):
            await store.claim(f"s{n}", "u1", "IDLE")
        appends = [Append(f"s{n}", 1, 0, "IDLE", [event(f"s{n}", 1, output=n)],
                          events_json=b"[{not json" if n == 2 else None) for n in range(6)]
        outcomes = await asyncio.gather(*(store.append(a) for a in appends),
                                        return_exceptions=True)
        assert [o is None for o in outcomes] == [True, True, False, True, True, True]
        assert isinstance(outcomes[2], StoreError)
        assert "refused the data" in str(outcomes[2]) and "'s2'" in str(outcomes[2])
        for n in (0, 1, 3, 4, 5):
            assert [e["output"] for e in await store.events_after(f"s{n}")] == [n]
        record = await store.get("s2")
        assert record is not None and record.seq == 0
    finally:
        await dispose_store(store)


def test_a_contract_float_field_refuses_nan_and_infinity_from_model_json():
    class Scored(Contract):
        contract_name = "scored"
        score: float

    for token in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValidationError):
            Scored.validate_output(f'{{"score": {token}}}')
        with pytest.raises(ValidationError):
            Intent.validate_output('{"intent_type": "smalltalk", "parameters": {}, '
                                   f'"confidence": {token}, "needs_tools": false}}')
    assert Scored.validate_output('{"score": 0.5}').score == 0.5  # type: ignore[attr-defined]


# --- 5: nesting and size ----------------------------------------------------------------------


async def test_a_deeply_nested_tool_output_is_refused_and_the_session_stays_readable(tmp_path):
    store = await make_store("postgres", tmp_path)
    try:
        for levels in (230, 300):
            orchestrator = demo_orchestrator(
                graph_with(), brain=ScriptedBrain(happy_script()), store=store,
                tools=registry_returning(nested(levels)))
            result = await orchestrator.run_turn(f"s{levels}", "how many?", user_id="u1")
            assert result.status == "completed"
            events = await store.events_after(f"s{levels}")  # readable
            finished = [e for e in events if e["kind"] == "tool_call_finished"]
            assert finished and all(e["error"]["error_code"] == "OUTPUT_TOO_LARGE"
                                    for e in finished)
            assert "nested more than 64 levels" in finished[0]["error"]["message"]
    finally:
        await dispose_store(store)


@pytest.mark.parametrize(("output", "why"), [
    (nested(65), "nested more than 64 levels deep"),
    (nested(300), "nested more than 64 levels deep"),
    ({"blob": "x" * 2_000}, "over the limit of 1000 bytes"),
])
async def test_the_executor_refuses_outputs_beyond_the_stored_bounds(output, why):
    executor = ToolExecutor(registry_returning(output), max_output_bytes=1000)
    (envelope,) = await executor.execute([("c1", "inventory_lookup", {"sku": "A1"})])
    assert (envelope["success"], envelope["error_code"]) == (False, "OUTPUT_TOO_LARGE")
    assert why in envelope["message"] and not envelope["retryable"]
    (fine,) = await ToolExecutor(registry_returning(nested(64))).execute(
        [("c1", "inventory_lookup", {"sku": "A1"})])
    assert fine["success"]


async def test_an_event_nested_past_pydantics_parser_is_read_back_by_every_store(store):
    await store.claim("s1", "u1", "IDLE")
    deep = nested(240)  # pydantic writes it, but its parser stops at about 200 levels
    await store.append(Append("s1", 1, 0, "IDLE", [event("s1", 1, output=deep)]))
    (stored,) = await store.events_after("s1")
    assert stored["output"] == deep


def damage(store: Any, sid: str, seq: int, body: str) -> Any:
    """Overwrite a stored event's body (as a faulty disk or another program might)."""
    if isinstance(store, InMemoryStore):
        store._events[sid] = [(s, body.encode() if s == seq else b) for s, b in store._events[sid]]
        return None
    if isinstance(store, SQLiteStore):
        store._conn().execute("UPDATE hermes_events SET body = ? WHERE session_id = ? AND seq = ?",
                              (body, sid, seq))
        return None
    return store._fetch("damaging", f"UPDATE {store._s}.hermes_events SET body = %s::json "
                        "WHERE session_id = %s AND seq = %s RETURNING 1", (body, sid, seq))


@pytest.mark.parametrize("body", ["[" * 3000 + "]" * 3000, "[1, 2]"])
async def test_an_unreadable_event_is_a_store_error_naming_session_and_seq(store, body):
    await store.claim("s1", "u1", "IDLE")
    await store.append(Append("s1", 1, 0, "IDLE", [event("s1", 1), event("s1", 2)]))
    pending = damage(store, "s1", 2, body)
    if pending is not None:
        await pending
    with pytest.raises(StoreError, match=r"event seq 2 of session 's1' cannot be read"):
        await store.events_after("s1")


def test_record_export_of_an_unreadable_session_is_one_clear_line(tmp_path, monkeypatch, capsys):
    from hermes_fsm.cli.main import main

    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    code = main(["run", "--session", "bad-1", "--user", "zoe", "How many A1001 are left?"])
    assert code == 0
    capsys.readouterr()
    (db_path,) = [p for p in tmp_path.rglob("*.sqlite3") if "session" in p.name]
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE hermes_events SET body = ? WHERE session_id = 'bad-1' AND seq = 3",
                   ("[" * 3000 + "]" * 3000,))
    code = main(["record", "export", "bad-1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "event seq 3 of session 'bad-1' cannot be read" in err
