"""Commits cut short: a dropped connection leaves no partial write, says so, and is retried;
a failed commit never fails the answered turn."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.events.sinks import ListSink
from hermes_fsm.memory import BackgroundCommits, HashingEmbedder, InProcessMemory
from hermes_fsm.memory.experience import Experience
from hermes_fsm.testing import ScriptedBrain
from tests.memory.conftest import PG_URL, REDIS_URL, need
from tests.memory.cutting_proxy import Cut, CuttingProxy
from tests.support import INTENT_CHAT, happy_script

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def entries(n: int) -> list[Experience]:
    return [Experience(entry_id=f"t1:c{i}", kind="tool_call", user_id="u1", session_id="s1",
                       turn_id="t1", at=NOW, tool="inventory_lookup") for i in range(n)]


async def test_a_postgres_connection_dropped_mid_commit_writes_nothing_then_retry_succeeds():
    need(PG_URL, 5432, "PostgreSQL")
    from hermes_fsm.memory.postgres_experience import PostgresExperienceLog

    log = PostgresExperienceLog(PG_URL, schema=f"hermes_test_{uuid.uuid4().hex[:10]}",
                                embedder=HashingEmbedder(64))
    dropped: list[Any] = []

    async def drop_connection(conn):  # the rows are inserted; kill the backend before COMMIT
        if not dropped:
            dropped.append(True)
            pid = conn.info.backend_pid
            import psycopg

            async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
                await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    log._before_commit = drop_connection  # type: ignore[method-assign]
    try:
        with pytest.raises(MemoryStoreError, match="nothing of it was written"):
            await log.record(entries(5))
        assert await log.count("u1") == 0
        assert await log.record(entries(5)) == 5  # the pool replaces the dead connection
        assert await log.count("u1") == 5
    finally:
        await log.drop_schema()
        await log.close()



async def test_an_experience_schema_newer_than_this_hermes_fsm_is_refused_on_open():
    """A database migrated by a newer hermes-fsm is not written by an older one."""
    need(PG_URL, 5432, "PostgreSQL")
    from hermes_fsm.memory.postgres_experience import _MIGRATIONS, PostgresExperienceLog

    schema = f"hermes_test_{uuid.uuid4().hex[:10]}"
    log = PostgresExperienceLog(PG_URL, schema=schema, embedder=HashingEmbedder(64))
    older = PostgresExperienceLog(PG_URL, schema=schema, embedder=HashingEmbedder(64))
    try:
        assert await log.record(entries(1)) == 1
        async with log._pool.connection() as conn:
            await conn.execute(f'INSERT INTO "{schema}".hermes_schema_version VALUES (%s)',
                               (len(_MIGRATIONS) + 1,))
        newer = len(_MIGRATIONS) + 1
        with pytest.raises(MemoryStoreError, match=f"schema version {newer} is newer"):
            await older.record(entries(1))
        assert await log.count("u1") == 1  # the older process wrote nothing
    finally:
        await older.close()
        await log.drop_schema()
        await log.close()

@contextlib.asynccontextmanager
async def working_behind_proxy() -> AsyncIterator[tuple[CuttingProxy, Any]]:
    """A RedisWorkingMemory whose client reaches Redis through a :class:`CuttingProxy`
    (no client-side retries), under a prefix of its own; its keys are deleted after."""
    import redis.asyncio as redis

    from hermes_fsm.memory.redis_working import RedisWorkingMemory

    admin = redis.Redis.from_url(REDIS_URL)
    async with CuttingProxy(REDIS_URL) as proxy:
        client = redis.Redis.from_url(proxy.url, retry=None, socket_timeout=5)
        working = RedisWorkingMemory(proxy.url, prefix=f"hermes-test:{uuid.uuid4().hex}",
                                     client=client)
        try:
            yield proxy, working
        finally:
            async for key in admin.scan_iter(match=f"{working.prefix}:*"):
                await admin.delete(key)
            await admin.aclose()
            await working.close()


async def test_a_redis_connection_dropped_mid_script_writes_nothing_then_retry_succeeds():
    """Half of the turn's EVAL reaches Redis, then the connection drops."""
    need(REDIS_URL, 6379, "Redis")
    turn = ("u1", "s1", "t1", [{"role": "user", "content": "a"}], {"step": 1})
    async with working_behind_proxy() as (proxy, working):
        proxy.cut = Cut(b"EVAL", keep=0.5)
        with pytest.raises(MemoryStoreError, match=r"turn write failed.*all of it or nothing "
                                                   r"was kept.*writing it again is safe"):
            await working.record_turn(*turn)
        proxy.cut = None
        assert await working.keys("u1") == []
        made = proxy.cuts[0]
        assert made.command == b"EVAL" and 0 < made.sent < made.length  # mid-command
        assert await working.record_turn(*turn)  # True: the script had not run before
        assert await working.slots("u1", "s1") == {"step": 1}
        assert await working.recent("u1", "s1") == [{"role": "user", "content": "a"}]


@pytest.mark.parametrize(("cut", "batch_sent"), [
    (Cut(b"EVAL", nth=3, keep=0.5), [b"MULTI", b"EVAL", b"EVAL"]),
    (Cut(b"EXEC"), [b"MULTI", b"EVAL", b"EVAL", b"EVAL"]),
], ids=["mid-third-script", "before-exec"])
async def test_a_redis_connection_dropped_mid_batch_writes_no_turn_then_retry_succeeds(
        cut, batch_sent):
    """Three turns in one batch; the connection drops part-way through it: no turn is kept."""
    need(REDIS_URL, 6379, "Redis")
    from hermes_fsm.memory.working import TurnWrite

    turns = [TurnWrite(f"u{n}", f"s{n}", f"t{n}", [{"role": "user", "content": "a"}],
                       {"step": n}) for n in range(3)]
    async with working_behind_proxy() as (proxy, working):
        proxy.cut = cut
        with pytest.raises(MemoryStoreError, match=r"turn writes failed.*all of its turns or "
                                                   r"none were kept.*again is safe"):
            await working.record_turns(turns)
        proxy.cut = None
        for n in range(3):
            assert await working.keys(f"u{n}") == []
        made = proxy.cuts[0]
        assert made.before[-len(batch_sent):] == batch_sent  # the fault is mid-batch
        assert made.command == cut.command and made.sent < made.length
        assert await working.record_turns(turns) == [True, True, True]
        assert await working.record_turns(turns) == [False, False, False]
        assert await working.slots("u2", "s2") == {"step": 2}


async def test_a_failed_read_or_delete_says_what_it_left_and_claims_no_write():
    """The error says what the failed call left behind: nothing for a read, maybe some keys
    for a delete; only a write's error speaks of what was kept."""
    from hermes_fsm.memory.redis_working import RedisWorkingMemory

    async with CuttingProxy(REDIS_URL) as proxy:
        url = proxy.url
    working = RedisWorkingMemory(url, prefix="hermes-test:gone")  # nothing listens there now
    try:
        with pytest.raises(MemoryStoreError, match=r"read failed") as read:
            await working.recent("u1", "s1")
        assert "kept" not in str(read.value) and "check that Redis is up" in str(read.value)
        with pytest.raises(MemoryStoreError, match=r"scan failed") as scan:
            await working.forget("u1")
        assert "kept" not in str(scan.value)
    finally:
        await working.close()


class FlakyMemory(InProcessMemory):
    """Fails the first ``failures`` commits."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.background = BackgroundCommits(attempts=2, delay_s=0.01)
        self.failures = failures

    async def apply(self, *args, **kwargs):
        if self.failures:
            self.failures -= 1
            raise MemoryStoreError("PostgreSQL experience log: connection lost (test)")
        return await super().apply(*args, **kwargs)


COMMIT = {"memory_updates": [{"key": "preference.contact", "update_type": "create",
                              "value": "email", "evidence_source": "user_message"}]}


async def test_a_failed_commit_does_not_fail_the_turn_and_is_retried_in_background(
        make_orchestrator):
    memory = FlakyMemory(failures=1)
    brain = ScriptedBrain(happy_script(intent=[INTENT_CHAT], memory_commit=[COMMIT]))
    orchestrator = make_orchestrator(brain=brain, memory=memory)
    sink = ListSink()
    orchestrator.add_sink(sink)
    result = await orchestrator.run_turn("s1", "I prefer email", user_id="u1")
    assert result.status == "completed"
    (failed,) = [e for e in result.events if e.kind == "memory_commit_failed"]
    assert (failed.final, failed.keys) == (False, ["preference.contact"])
    await asyncio.wait_for(memory.background.drain(), 5)
    assert [i.value for i in await memory.items("u1")] == ["email"]
    late = orchestrator.session("s1", "u1").events[-1]
    assert (late.kind, late.status) == ("memory_write", "applied")
    assert sink.events[-1] == late  # the sinks get the late event too


async def test_a_commit_failing_every_retry_is_recorded_as_a_final_event(make_orchestrator):
    memory = FlakyMemory(failures=10)
    brain = ScriptedBrain(happy_script(intent=[INTENT_CHAT], memory_commit=[COMMIT]))
    orchestrator = make_orchestrator(brain=brain, memory=memory)
    result = await orchestrator.run_turn("s1", "I prefer email", user_id="u1")
    assert result.status == "completed" and result.answer
    await asyncio.wait_for(memory.background.drain(), 5)
    events = orchestrator.session("s1", "u1").events
    final = events[-1]
    assert (final.kind, final.final, final.attempts) == ("memory_commit_failed", True, 3)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert await memory.items("u1") == []


async def recall_turn(make_orchestrator, **options):
    """A turn of u1, who prefers email, asking about it: (the recall event, the brain)."""
    memory = InProcessMemory()
    await memory.apply("u1", "t0", [MemoryUpdate(key="preference.contact", update_type="create",
                                                 value="email", evidence_source="user_message")],
                       NOW, text="please email me")
    brain = ScriptedBrain(happy_script(intent=[INTENT_CHAT]))
    result = await make_orchestrator(brain=brain, memory=memory, **options).run_turn(
        "s1", "how should you contact me, by email?", user_id="u1")
    (recalled,) = [e for e in result.events if e.kind == "memory_recalled"]
    return recalled, brain, result


async def test_recall_at_intent_is_reported_with_items_scores_and_tokens(make_orchestrator):
    from hermes_fsm.events.model import EVENT_ADAPTER

    recalled, brain, _ = await recall_turn(make_orchestrator)
    assert recalled.state == "INTENT"
    assert [i["value"] for i in recalled.items] == ["email"]
    assert recalled.items[0]["score"] > 0 and recalled.tokens > 0
    assert "preference.contact: email" in brain.requests_for("INTENT")[0].memory
    assert EVENT_ADAPTER.validate_json(recalled.model_dump_json()) == recalled


class BytesCounter:
    """A token counter of one token per UTF-8 byte (unlike any estimate)."""

    name = "bytes"

    def count(self, text: str) -> int:
        return len(text.encode())


async def test_recalled_tokens_are_counted_by_the_context_builders_counter(make_orchestrator):
    """memory_recalled and context_built count the block with the same counter."""
    from hermes_fsm.engine.context import ContextBuilder

    recalled, brain, result = await recall_turn(
        make_orchestrator, context=ContextBuilder(counter=BytesCounter()))
    block = brain.requests_for("INTENT")[0].memory
    assert recalled.tokens == len(block.encode())
    built = next(e for e in result.events if e.kind == "context_built")
    assert built.counter == "bytes"

async def test_a_turn_records_its_tool_outcomes_in_the_experience_log(make_orchestrator):
    memory = InProcessMemory()
    result = await make_orchestrator(brain=ScriptedBrain(happy_script()), memory=memory).run_turn(
        "s1", "How many A1001 are left in the east?", user_id="u1")
    assert result.status == "completed"
    (call,) = [e for e in await memory.experience.entries("u1") if e.kind == "tool_call"]
    assert (call.tool, call.ok, call.request) == ("inventory_lookup", True,
                                                  "How many A1001 are left in the east?")
    assert await memory.experience.failure_rate("inventory_lookup", __import__(
        "datetime").timedelta(days=3650), datetime(2100, 1, 1, tzinfo=UTC)) == 0.0
