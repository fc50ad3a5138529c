"""PostgreSQL connections that all drop together (``pg_terminate_backend``, a restart): the
store replaces them at once and goes on — no ``PoolTimeout`` after 30 s behind dead
connections, no step lost (issue 16, the fault campaign's first finding)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from hermes_fsm.store import Append
from tests.memory.conftest import need
from tests.store.conftest import PG_URL, dispose_store
from tests.store.test_postgres import step


@pytest.fixture
async def store() -> Any:
    need(PG_URL, 5432, "PostgreSQL")
    from hermes_fsm.store import PostgresStore

    tag = uuid.uuid4().hex[:10]
    made = PostgresStore(PG_URL, schema=f"hermes_test_{tag}", pool_size=8,
                         application_name=f"hermes-test-dropped-{tag}")
    await made.open()
    yield made
    await dispose_store(made)


async def grow_to_full(store: Any) -> None:
    """Every connection of the pool opened and idle (the state after a busy moment); the
    store's idle writer connections are out of the pool."""
    pool = store._pool
    release = asyncio.Event()
    held, wanted = 0, pool.max_size - len(store._writers)

    async def hold() -> None:
        nonlocal held
        async with pool.connection():
            held += 1
            await release.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(wanted)]
    while held < wanted:
        await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(*tasks)


async def terminate_all(store: Any) -> int:
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
        rows = await (await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (store.application_name,))).fetchall()
    return len(rows)


async def test_reads_and_appends_go_on_when_every_pooled_connection_was_terminated(store):
    """Before: the pool checked its eight dead connections one by one with a growing
    backoff, and the first read after the kill failed with PoolTimeout after 30 s."""
    record = await store.claim("s1", "u1", "IDLE")
    await grow_to_full(store)
    assert await terminate_all(store) == store._pool.max_size  # the writer's too
    assert (await store.get("s1")).seq == 0
    await store.append(Append("s1", record.epoch, 0, "INTENT", step("s1", 1, 2)))
    assert [e["seq"] for e in await store.events_after("s1")] == [1, 2]


async def test_an_append_after_every_connection_was_terminated_is_stored_once(store):
    """The writer connections die with the pool's: the append is tried again on a fresh,
    checked connection, never on another dead idle writer, and its events are stored."""
    records = [await store.claim(f"s{i}", "u1", "IDLE") for i in range(6)]
    await asyncio.gather(*(store.append(Append(r.session_id, r.epoch, 0, "INTENT",
                                               step(r.session_id, 1, 1)))
                           for r in records))  # writers are now open and idle
    await grow_to_full(store)
    await terminate_all(store)
    await asyncio.gather(*(store.append(Append(r.session_id, r.epoch, 1, "PLANNING",
                                               step(r.session_id, 2, 2)))
                           for r in records))
    for r in records:
        assert [e["seq"] for e in await store.events_after(r.session_id)] == [1, 2, 3]
        assert (await store.get(r.session_id)).seq == 3
