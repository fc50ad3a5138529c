"""What is particular to the PostgreSQL store: group commit across sessions on writer
connections, events stored exactly as serialized once, appends checked before sending."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_core import to_json

from hermes_fsm.errors import StaleWriter, UsageError
from hermes_fsm.store import Append, Checkpoint, Message
from tests.memory.conftest import need
from tests.store.conftest import PG_URL, dispose_store

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
async def store() -> Any:
    need(PG_URL, 5432, "PostgreSQL")
    from hermes_fsm.store import PostgresStore

    made = PostgresStore(PG_URL, schema=f"hermes_test_{uuid.uuid4().hex[:10]}")
    await made.open()
    yield made
    await dispose_store(made)


def step(sid: str, first: int, count: int, turn: str = "t1") -> list[dict[str, Any]]:
    return [{"session_id": sid, "turn_id": turn, "seq": seq, "at": NOW, "kind": "state_entered",
             "state": "INTENT", "text": 'a "quoted" \x1e line\nbreak ☃'}
            for seq in range(first, first + count)]


async def test_appends_of_many_sessions_waiting_together_share_one_round_trip(store):
    records = [await store.claim(f"s{i}", "u1", "IDLE") for i in range(40)]
    before = store.round_trips
    await asyncio.gather(*(store.append(Append(r.session_id, r.epoch, 0, "INTENT",
                                               step(r.session_id, 1, 3)))
                           for r in records))
    assert store.round_trips - before <= 2  # one statement (and a first connection check)
    for r in records:
        assert [e["seq"] for e in await store.events_after(r.session_id)] == [1, 2, 3]


async def test_a_fenced_append_in_a_group_commit_fails_alone(store):
    a = await store.claim("a", "u1", "IDLE")
    b = await store.claim("b", "u1", "IDLE")
    await store.claim("b", "u1", "IDLE")  # another process took b over
    ok: Any
    stale: Any
    ok, stale = await asyncio.gather(
        store.append(Append("a", a.epoch, 0, "INTENT", step("a", 1, 2))),
        store.append(Append("b", b.epoch, 0, "INTENT", step("b", 1, 2))),
        return_exceptions=True)
    assert ok is None and isinstance(stale, StaleWriter)
    assert len(await store.events_after("a")) == 2 and await store.events_after("b") == []


async def test_events_are_stored_as_the_json_the_writer_serialized(store):
    record = await store.claim("s1", "u1", "IDLE")
    events = step("s1", 1, 2, "t1") + step("s1", 3, 1, "t2")  # two turns in one append
    blob = to_json(events)
    await store.append(Append("s1", record.epoch, 0, "IDLE", events,
                              [Message("m1", "s1", "u1", "user", "hi", NOW)],
                              Checkpoint("s1", 3, "IDLE", {"history": []}), blob))
    got = await store.events_after("s1")
    assert to_json(got) == blob
    async with store._pool.connection() as conn:
        rows = await (await conn.execute(
            f"SELECT seq, turn_id, kind FROM {store._s}.hermes_events ORDER BY seq")).fetchall()
    assert rows == [(1, "t1", "state_entered"), (2, "t1", "state_entered"),
                    (3, "t2", "state_entered")]
    assert [m.message_id for m in await store.messages("s1")] == ["m1"]


async def test_an_append_whose_events_do_not_number_on_is_refused_before_sending(store):
    record = await store.claim("s1", "u1", "IDLE")
    before = store.round_trips
    with pytest.raises(UsageError, match="prev_seq 0"):
        await store.append(Append("s1", record.epoch, 0, "INTENT", step("s1", 2, 2)))
    assert store.round_trips == before


async def test_a_dead_writer_connection_is_replaced(store):
    record = await store.claim("s1", "u1", "IDLE")
    for conn in store._writers:  # the server drops every writer connection
        async with store._pool.connection() as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    await store.append(Append("s1", record.epoch, 0, "INTENT", step("s1", 1, 1)))
    assert len(await store.events_after("s1")) == 1


async def test_a_schema_newer_than_this_hermes_fsm_is_refused_on_open(store):
    """A database migrated by a newer hermes-fsm is not written by an older one."""
    from hermes_fsm.errors import StoreError
    from hermes_fsm.store import PostgresStore
    from hermes_fsm.store.postgres import SCHEMA_VERSION

    async with store._pool.connection() as conn:
        await conn.execute(f"INSERT INTO {store._s}.hermes_schema_version VALUES (%s)",
                           (SCHEMA_VERSION + 1,))
    older = PostgresStore(PG_URL, schema=store.schema)
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        await older.open()
