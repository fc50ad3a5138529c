"""A PostgreSQL or Redis connection dropped mid-turn: the turn retries or fails cleanly,
and the session stays consistent and resumable (real services)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from hermes_fsm.errors import StoreError
from hermes_fsm.store.lease import RedisLease
from hermes_fsm.store.postgres import PostgresStore
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from tests.memory.conftest import PG_URL, REDIS_URL, need
from tests.support import graph_with, happy_script


@pytest.fixture
async def store() -> Any:
    need(PG_URL, 5432, "PostgreSQL")
    made = PostgresStore(PG_URL, schema=f"hermes_test_{uuid.uuid4().hex[:10]}",
                         application_name=f"hermes-test-{uuid.uuid4().hex[:8]}")
    yield made
    await made.drop_schema()
    await made.close()


async def terminate_backends(application_name: str) -> int:
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        rows = await (await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s", (application_name,))).fetchall()
    return len(rows)


class ActingBrain(ScriptedBrain):
    """Runs ``act`` once, when the turn reaches ``state``."""

    def __init__(self, state: str, act: Any) -> None:
        super().__init__(happy_script())
        self.state, self.act, self.acted = state, act, False

    async def decide(self, request: Any) -> Any:
        if request.state == self.state and not self.acted:
            self.acted = True
            await self.act()
        return await super().decide(request)


async def contiguous(store: PostgresStore, sid: str) -> list[dict[str, Any]]:
    events = await store.events_after(sid)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    return events


async def test_a_postgres_connection_terminated_mid_turn_is_replaced_and_the_turn_completes(
        store):
    async def drop() -> None:
        assert await terminate_backends(store.application_name) >= 1

    brain = ActingBrain("RESPONSE", drop)
    result = await demo_orchestrator(graph_with(), brain=brain, store=store).run_turn(
        "s1", "how many?", user_id="u1")
    assert brain.acted and result.status == "completed"
    events = await contiguous(store, "s1")
    assert [e["kind"] for e in events].count("turn_finished") == 1


async def test_an_append_whose_connection_keeps_dropping_fails_cleanly_and_resumes(store):
    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    await store.open()
    real_write = store._write

    async def dropping_write(batches: Any) -> Any:
        if batches[0].state == "RESPONSE":  # the step entering RESPONSE never gets through:
            async with store._pool.connection() as conn:  # its connection is terminated
                await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return await real_write(batches)

    store._write = dropping_write
    with pytest.raises(StoreError, match="resume it"):
        await orchestrator.run_turn("s1", "how many?", user_id="u1")
    store._write = real_write
    assert (await store.get("s1")).state == "RESULT"  # the last step that got through
    await contiguous(store, "s1")

    fresh = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    result = await fresh.resume("s1")
    assert result is not None and result.status == "completed"
    events = await contiguous(store, "s1")
    assert [e["kind"] for e in events].count("turn_finished") == 1


async def test_redis_connections_dropped_mid_turn_leave_the_turn_and_the_lease_working(store):
    need(REDIS_URL, 6379, "Redis")
    import redis.asyncio as aioredis

    name = f"hermes-test-{uuid.uuid4().hex[:8]}"
    lease = RedisLease(REDIS_URL, prefix=f"hermes-test:{uuid.uuid4().hex}:", ttl_s=0.3,
                       client_name=name)
    admin = aioredis.Redis.from_url(REDIS_URL)

    async def drop() -> None:
        for client in await admin.client_list():
            if client.get("name") == name:
                await admin.client_kill_filter(_id=client["id"])
        await asyncio.sleep(0.25)  # a renewal runs on a dropped connection meanwhile

    orchestrator = demo_orchestrator(graph_with(), brain=ActingBrain("RESPONSE", drop),
                                     store=store, lease=lease)
    try:
        result = await orchestrator.run_turn("s1", "how many?", user_id="u1")
        assert result.status == "completed"
        again = await orchestrator.run_turn("s1", "again?", user_id="u1")  # lease released
        assert again.status == "completed"
        await contiguous(store, "s1")
    finally:
        async for key in admin.scan_iter(match=f"{lease.prefix}*"):
            await admin.delete(key)
        await admin.aclose()
        await lease.close()
