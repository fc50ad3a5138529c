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
from tests.memory.conftest import REDIS_URL, need


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
