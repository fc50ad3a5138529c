"""The session-store protocol, checked against every backend (in-memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_fsm.errors import SessionError, StaleWriter
from hermes_fsm.store import Append, Checkpoint, Message, SessionStore

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def events(session_id: str, first: int, count: int, turn: str = "t1") -> list[dict[str, Any]]:
    return [{"kind": "state_entered", "session_id": session_id, "turn_id": turn, "seq": seq,
             "at": NOW, "state": "INTENT", "source": "IDLE", "trigger": "start", "attempt": 1}
            for seq in range(first, first + count)]


def message(session_id: str, n: int, role: Any = "user") -> Message:
    return Message(f"{session_id}-m{n}", session_id, "u1", role, f"text {n}", NOW)


async def test_every_backend_implements_the_protocol(store):
    assert isinstance(store, SessionStore)


async def test_claiming_a_new_session_creates_it_at_epoch_one(store):
    record = await store.claim("s1", "u1", "IDLE")
    assert (record.session_id, record.user_id, record.state, record.seq, record.epoch) == \
        ("s1", "u1", "IDLE", 0, 1)
    assert await store.get("s1") == record


async def test_claiming_again_bumps_the_epoch(store):
    await store.claim("s1", "u1", "IDLE")
    assert (await store.claim("s1", "u1", "IDLE")).epoch == 2


async def test_a_session_of_another_user_cannot_be_claimed(store):
    await store.claim("s1", "u1", "IDLE")
    with pytest.raises(SessionError, match="another user"):
        await store.claim("s1", "u2", "IDLE")


async def test_a_user_has_many_sessions_and_session_ids_are_not_user_ids(store):
    for sid in ("a", "b"):
        await store.claim(sid, "u1", "IDLE")
    await store.claim("c", "u2", "IDLE")
    assert [r.session_id for r in await store.sessions_of("u1")] == ["a", "b"]
    assert await store.sessions_of("a") == []


async def test_an_append_stores_events_state_and_seq(store):
    record = await store.claim("s1", "u1", "IDLE")
    await store.append(Append("s1", record.epoch, 0, "INTENT", events("s1", 1, 3)))
    stored = await store.get("s1")
    assert (stored.state, stored.seq) == ("INTENT", 3)
    got = await store.events_after("s1")
    assert [e["seq"] for e in got] == [1, 2, 3]
    assert got[0]["kind"] == "state_entered" and got[0]["turn_id"] == "t1"


async def test_events_after_skips_the_ones_up_to_the_given_seq(store):
    record = await store.claim("s1", "u1", "IDLE")
    await store.append(Append("s1", record.epoch, 0, "INTENT", events("s1", 1, 3)))
    await store.append(Append("s1", record.epoch, 3, "PLANNING", events("s1", 4, 2)))
    assert [e["seq"] for e in await store.events_after("s1", 2)] == [3, 4, 5]


async def test_an_append_with_a_superseded_epoch_is_refused_and_writes_nothing(store):
    old = await store.claim("s1", "u1", "IDLE")
    await store.claim("s1", "u1", "IDLE")  # another process took over
    with pytest.raises(StaleWriter, match="epoch"):
        await store.append(Append("s1", old.epoch, 0, "INTENT", events("s1", 1, 2),
                                  [message("s1", 1)]))
    assert await store.events_after("s1") == []
    assert await store.messages("s1") == []
    assert (await store.get("s1")).seq == 0


async def test_an_append_from_behind_the_log_is_refused(store):
    record = await store.claim("s1", "u1", "IDLE")
    await store.append(Append("s1", record.epoch, 0, "INTENT", events("s1", 1, 2)))
    with pytest.raises(StaleWriter, match="seq"):
        await store.append(Append("s1", record.epoch, 0, "INTENT", events("s1", 1, 2)))
    assert [e["seq"] for e in await store.events_after("s1")] == [1, 2]


async def test_an_append_to_an_unknown_session_is_refused(store):
    with pytest.raises(StaleWriter):
        await store.append(Append("nope", 1, 0, "INTENT", events("nope", 1, 1)))


async def test_the_last_append_of_a_turn_stores_messages_and_checkpoint(store):
    record = await store.claim("s1", "u1", "IDLE")
    checkpoint = Checkpoint("s1", 2, "IDLE", {"history": [{"role": "user", "content": "hi"}]})
    await store.append(Append("s1", record.epoch, 0, "IDLE", events("s1", 1, 2),
                              [message("s1", 1), message("s1", 2, "assistant")], checkpoint))
    assert await store.checkpoint("s1") == checkpoint
    got = await store.messages("s1")
    assert [(m.message_id, m.role, m.content) for m in got] == \
        [("s1-m1", "user", "text 1"), ("s1-m2", "assistant", "text 2")]
    assert got[0].created_at == NOW and got[0].tool_calls is None


async def test_messages_keep_tool_calls_and_limit_keeps_the_latest(store):
    record = await store.claim("s1", "u1", "IDLE")
    tool = Message("m3", "s1", "u1", "tool", "{}", NOW, None, "call-1")
    calls = Message("m2", "s1", "u1", "assistant", "", NOW, [{"id": "call-1", "name": "x"}])
    await store.append(Append("s1", record.epoch, 0, "IDLE", events("s1", 1, 1),
                              [message("s1", 1), calls, tool]))
    latest = await store.messages("s1", limit=2)
    assert [m.message_id for m in latest] == ["m2", "m3"]
    assert latest[0].tool_calls == [{"id": "call-1", "name": "x"}]
    assert latest[1].tool_call_id == "call-1"


async def test_a_newer_checkpoint_replaces_the_older(store):
    record = await store.claim("s1", "u1", "IDLE")
    await store.append(Append("s1", record.epoch, 0, "IDLE", events("s1", 1, 1), (),
                              Checkpoint("s1", 1, "IDLE", {"n": 1})))
    await store.append(Append("s1", record.epoch, 1, "IDLE", events("s1", 2, 1), (),
                              Checkpoint("s1", 2, "IDLE", {"n": 2})))
    assert (await store.checkpoint("s1")).data == {"n": 2}


async def test_archiving_keeps_the_summary_and_leaves_idle_listing(store):
    await store.claim("s1", "u1", "IDLE")
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert await store.idle_sessions(later) == ["s1"]
    await store.archive("s1", "talked about A1001 stock")
    record = await store.get("s1")
    assert record.archived and record.summary == "talked about A1001 stock"
    assert await store.idle_sessions(later) == []


async def test_idle_sessions_leave_out_recently_written_ones(store):
    await store.claim("s1", "u1", "IDLE")
    assert await store.idle_sessions(datetime.now(UTC) - timedelta(minutes=1)) == []


async def test_the_effects_journal_starts_a_call_once_and_keeps_its_outcome(store):
    await store.claim("s1", "u1", "IDLE")
    assert await store.effect_begin("s1/t1-s3-c1", "s1", "transfer") is None
    again = await store.effect_begin("s1/t1-s3-c1", "s1", "transfer")
    assert again is not None and again.status == "started" and again.outcome is None
    await store.effect_finish("s1/t1-s3-c1", {"success": True, "output": {"n": 1}})
    done = await store.effect_begin("s1/t1-s3-c1", "s1", "transfer")
    assert done.status == "finished" and done.outcome == {"success": True, "output": {"n": 1}}


async def _fill(store: Any, sid: str, user: str) -> None:
    record = await store.claim(sid, user, "IDLE")
    msgs = [Message(f"{sid}-m{n}", sid, user, "user", f"{user} says {n}", NOW)
            for n in range(2)]
    await store.append(Append(sid, record.epoch, 0, "IDLE", events(sid, 1, 3), msgs,
                              Checkpoint(sid, 3, "IDLE", {"history": [
                                  {"role": "user", "content": f"{user} says 0"}]})))
    await store.effect_begin(f"{sid}-call", sid, "lookup")
    await store.effect_finish(f"{sid}-call", {"ok": True, "output": f"{user} data"})


async def test_deleting_a_user_removes_her_sessions_and_everything_in_them(store):
    for sid in ("a1", "a2"):
        await _fill(store, sid, "alice")
    await _fill(store, "b1", "bob")
    counts = await store.delete_user("alice")
    assert counts == {"sessions": 2, "messages": 4, "events": 6, "checkpoints": 2,
                      "effects": 2}
    assert await store.sessions_of("alice") == []
    for sid in ("a1", "a2"):
        assert await store.get(sid) is None
        assert await store.events_after(sid) == []
        assert await store.messages(sid) == []
        assert await store.checkpoint(sid) is None
        assert await store.effect_begin(f"{sid}-call", sid, "lookup") is None  # a new call
    # bob is untouched
    assert [r.session_id for r in await store.sessions_of("bob")] == ["b1"]
    assert len(await store.events_after("b1")) == 3
    assert [m.content for m in await store.messages("b1")] == ["bob says 0", "bob says 1"]
    assert (await store.checkpoint("b1")) is not None
    effect = await store.effect_begin("b1-call", "b1", "lookup")
    assert effect is not None and effect.outcome == {"ok": True, "output": "bob data"}
    # her old session id is free again: it starts afresh
    record = await store.claim("a1", "alice", "IDLE")
    assert (record.seq, record.epoch) == (0, 1)
    assert await store.delete_user("nobody") == {"sessions": 0, "messages": 0, "events": 0,
                                                 "checkpoints": 0, "effects": 0}
