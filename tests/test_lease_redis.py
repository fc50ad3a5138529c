"""The Redis lease (real Redis): one holder per session, batched takes and releases,
renewal only of leases held long enough, loss detected, releases sent before close."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hermes_fsm.errors import StoreError
from hermes_fsm.store.lease import RedisLease
from tests.memory.conftest import REDIS_URL, need, redis_connections_named


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    need(REDIS_URL, 6379, "Redis")
    import redis.asyncio as aioredis

    made = f"hermes-test:{uuid.uuid4().hex}:"
    yield made
    admin = aioredis.Redis.from_url(REDIS_URL)
    async for key in admin.scan_iter(match=f"{made}*"):
        await admin.delete(key)
    await admin.aclose()


async def admin_call(*args: Any) -> Any:
    import redis.asyncio as aioredis

    admin = aioredis.Redis.from_url(REDIS_URL)
    try:
        return await admin.execute_command(*args)
    finally:
        await admin.aclose()


async def test_a_held_session_is_refused_to_another_process_until_released(prefix):
    ours, theirs = RedisLease(REDIS_URL, prefix=prefix), RedisLease(REDIS_URL, prefix=prefix)
    try:
        hold = await ours.acquire("s1")
        assert hold is not None and not hold.lost
        assert await theirs.acquire("s1") is None
        await hold.release()
        again = await ours.acquire("s1")  # queued behind the release: never refused
        assert again is not None
        await again.release()
        await ours.close()  # sends the queued release
        assert await theirs.acquire("s1") is not None
    finally:
        await ours.close()
        await theirs.close()


async def test_takes_waiting_together_go_to_redis_in_one_call_or_two(prefix):
    lease = RedisLease(REDIS_URL, prefix=prefix)
    try:
        holds = await asyncio.gather(*(lease.acquire(f"s{i}") for i in range(50)))
        assert all(h is not None for h in holds)
        assert lease.round_trips <= 2  # shared out between at most two concurrent calls
        await asyncio.gather(*(h.release() for h in holds if h is not None))
        await lease.close()
        assert lease.round_trips <= 4
        assert await admin_call("EXISTS", *(f"{prefix}s{i}" for i in range(50))) == 0
    finally:
        await lease.close()


async def test_a_short_turn_takes_and_releases_without_renewing(prefix):
    lease = RedisLease(REDIS_URL, prefix=prefix, ttl_s=5)
    hold = await lease.acquire("s1")
    assert hold is not None
    await hold.release()
    await lease.close()
    assert lease.round_trips == 2


async def test_a_lease_held_past_its_ttl_is_renewed_and_stays_ours(prefix):
    ours, theirs = RedisLease(REDIS_URL, prefix=prefix, ttl_s=0.3), RedisLease(
        REDIS_URL, prefix=prefix)
    try:
        hold = await ours.acquire("s1")
        assert hold is not None
        await asyncio.sleep(1.0)  # over three TTLs
        assert not hold.lost
        assert await theirs.acquire("s1") is None
        assert ours.round_trips > 2  # renewals
    finally:
        await ours.close()
        await theirs.close()


async def test_a_lease_taken_over_is_marked_lost(prefix):
    lease = RedisLease(REDIS_URL, prefix=prefix, ttl_s=0.3)
    try:
        hold = await lease.acquire("s1")
        assert hold is not None
        await admin_call("SET", f"{prefix}s1", "someone-else")
        for _ in range(50):  # the next renewal finds it gone
            if hold.lost:
                break
            await asyncio.sleep(0.05)
        assert hold.lost
        await hold.release()  # not ours: left alone
        assert await admin_call("GET", f"{prefix}s1") == b"someone-else"
    finally:
        await lease.close()


async def test_a_waiting_acquire_gets_the_lease_when_it_is_released(prefix):
    ours, theirs = RedisLease(REDIS_URL, prefix=prefix), RedisLease(REDIS_URL, prefix=prefix)
    try:
        hold = await ours.acquire("s1")
        assert hold is not None
        waiting = asyncio.ensure_future(theirs.acquire("s1", wait_s=5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await hold.release()
        assert await waiting is not None
    finally:
        await ours.close()
        await theirs.close()


async def test_an_unreachable_redis_is_a_store_error_naming_the_session():
    lease = RedisLease("redis://127.0.0.1:1/0")
    try:
        with pytest.raises(StoreError, match=r"'s1'.*HERMES_REDIS_URL"):
            await lease.acquire("s1")
    finally:
        await lease.close()


# --- a dropped connection (issue 16, defect 7) ---------------------------------------------


async def kill_connections(client_name: str) -> int:
    """``CLIENT KILL`` every connection named ``client_name``; how many there were."""
    clients = await admin_call("CLIENT", "LIST")
    text = clients.decode() if isinstance(clients, bytes) else str(clients)
    ids = [field.split("=", 1)[1] for line in text.splitlines() if f" name={client_name} " in line
           for field in line.split() if field.startswith("id=")]
    for client_id in ids:
        await admin_call("CLIENT", "KILL", "ID", client_id)
    return len(ids)


async def test_a_take_on_a_dropped_connection_is_made_again_on_a_fresh_one(prefix):
    name = f"hermes-test-{uuid.uuid4().hex[:8]}"
    lease = RedisLease(REDIS_URL, prefix=prefix, client_name=name)
    try:
        first = await lease.acquire("s1")
        assert first is not None
        await first.release()
        await lease.close()  # the release sent; the client is made again below
        warm = await lease.acquire("s0")
        assert warm is not None
        await warm.release()
        await asyncio.sleep(0.05)  # the queued release sent: its connection is idle now
        assert await kill_connections(name) >= 1
        hold = await lease.acquire("s2")  # the next turn's take
        assert hold is not None and not hold.lost
        assert await admin_call("GET", f"{prefix}s2") == hold.token.encode()
        await hold.release()
    finally:
        await lease.close()


async def test_a_release_on_a_dropped_connection_frees_the_session_at_once(prefix):
    name = f"hermes-test-{uuid.uuid4().hex[:8]}"
    ours = RedisLease(REDIS_URL, prefix=prefix, client_name=name, ttl_s=30)
    theirs = RedisLease(REDIS_URL, prefix=prefix)
    try:
        hold = await ours.acquire("s1")
        assert hold is not None
        assert await kill_connections(name) >= 1  # dropped while the turn ran
        await hold.release()
        taken = await theirs.acquire("s1", wait_s=1.0)  # not refused for the lease's 30 s
        assert taken is not None
        await taken.release()
    finally:
        await ours.close()
        await theirs.close()


async def test_a_take_retried_after_it_went_through_keeps_the_lease(prefix):
    """A take whose answer was lost (the connection dropped after Redis ran it) is sent
    again: it finds its own token and holds the lease, rather than calling it busy."""
    lease = RedisLease(REDIS_URL, prefix=prefix)
    try:
        lease._redis()
        keys, token = [f"{prefix}s1"], "retried-token"
        args = ["take", token, "", lease.ttl_ms]  # ops, tokens, stale tokens, TTL
        assert await lease._take_or_release(keys=keys, args=args) == [1]
        assert await lease._take_or_release(keys=keys, args=args) == [1]  # sent again
        assert await lease._take_or_release(keys=keys, args=["take", "other", "", 1000]) == [0]
    finally:
        await lease.close()


async def test_a_refused_session_says_what_holds_it(prefix, tmp_path):
    from hermes_fsm.errors import SessionBusy
    from hermes_fsm.store import SQLiteStore
    from hermes_fsm.testing import HANG, ScriptedBrain, demo_orchestrator
    from tests.support import graph_with, happy_script

    elsewhere = RedisLease(REDIS_URL, prefix=prefix, ttl_s=20)
    ours = RedisLease(REDIS_URL, prefix=prefix, ttl_s=20)
    store = SQLiteStore(tmp_path / "sessions.sqlite3")
    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(
        happy_script(intent=[HANG])), store=store, lease=ours)
    try:
        other = await elsewhere.acquire("s1")  # another process's turn (or a stale lease)
        assert other is not None
        with pytest.raises(SessionBusy) as refused:
            await orchestrator.run_turn("s1", "hello", user_id="u1")
        message = str(refused.value)
        assert "held by a lease that expires in" in message and " ms" in message
        left = int(message.split("expires in ")[1].split(" ms")[0])
        assert 15_000 < left <= 20_000
        assert "in this process" not in message
        await other.release()
        await elsewhere.close()

        task = asyncio.create_task(orchestrator.run_turn("s2", "first", user_id="u1"))
        await asyncio.sleep(0.1)
        with pytest.raises(SessionBusy, match="a turn is running on it in this process"):
            await orchestrator.run_turn("s2", "second", user_id="u1")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await elsewhere.close()
        await orchestrator.aclose()


async def test_turns_run_and_the_session_is_free_after_connections_drop(prefix, tmp_path):
    """Through the engine: a dropped connection before a take (the next turn runs) and
    before a release (killed while the turn runs: another process gets the session at
    once, not after the lease's TTL)."""
    from hermes_fsm.store import SQLiteStore
    from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
    from tests.support import INTENT_CHAT, graph_with, happy_script

    name = f"hermes-test-{uuid.uuid4().hex[:8]}"

    class KillingBrain(ScriptedBrain):
        kill = False

        async def decide(self, request: Any) -> Any:
            if self.kill and request.state == "MEMORY_COMMIT":
                assert await kill_connections(name) >= 1  # the lease's, idle in the turn
            return await super().decide(request)

    brain = KillingBrain(happy_script(intent=[INTENT_CHAT]))
    lease = RedisLease(REDIS_URL, prefix=prefix, client_name=name, ttl_s=30)
    theirs = RedisLease(REDIS_URL, prefix=prefix)
    orchestrator = demo_orchestrator(graph_with(), brain=brain, lease=lease,
                                     store=SQLiteStore(tmp_path / "sessions.sqlite3"))
    try:
        first = await orchestrator.run_turn("s1", "hello", user_id="u1")
        await asyncio.sleep(0.05)  # its release sent
        assert await kill_connections(name) >= 1
        second = await orchestrator.run_turn("s1", "hello again", user_id="u1")
        assert first.status == second.status == "completed"
        brain.kill = True
        third = await orchestrator.run_turn("s1", "and again", user_id="u1")
        assert third.status == "completed"
        taken = await theirs.acquire("s1", wait_s=1.0)
        assert taken is not None
        await taken.release()
    finally:
        await theirs.close()
        await orchestrator.aclose()


async def test_a_closed_lease_leaves_no_connection_open_on_the_server(prefix: str) -> None:
    name = f"hermes-test-lease-{uuid.uuid4().hex[:8]}"
    lease = RedisLease(REDIS_URL, prefix=prefix, client_name=name)
    holds = await asyncio.gather(*(lease.acquire(f"s{i}") for i in range(20)))  # a burst
    for hold in holds:
        assert hold is not None
        await hold.release()
    assert await redis_connections_named(name, settle_s=0) >= 1
    await lease.close()
    assert await redis_connections_named(name) == 0, "connections of the closed lease still open"
