"""A turn whose lease expired while it ran (its renewal came too late: the event loop was
starved, the process paused) takes the lease again and goes on when no one else took it
— the store's fencing guards the next append — and still fails as a stale writer when
another holder has it (real Redis; the long fault campaign's lease losses under load)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from hermes_fsm.errors import StaleWriter
from hermes_fsm.store import InMemoryStore
from hermes_fsm.store.lease import RedisLease
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from tests.memory.conftest import REDIS_URL, need
from tests.support import INTENT_CHAT, graph_with, happy_script
from tests.test_lease_redis import admin_call

TTL_S = 0.3


class StallingBrain(ScriptedBrain):
    """Blocks the event loop in RESPONSE past the lease's TTL (no renewal can run), then
    yields long enough for the renewer to find the lease gone; ``meanwhile`` runs in
    between (another process taking the session)."""

    meanwhile: Any = None

    async def decide(self, request: Any) -> Any:
        if request.state == "RESPONSE":
            time.sleep(TTL_S * 3)  # the point: a starved event loop
            if self.meanwhile is not None:
                await self.meanwhile()
            await asyncio.sleep(TTL_S)  # the renewer runs and marks the lease lost
        return await super().decide(request)


@pytest.fixture
def prefix() -> str:
    need(REDIS_URL, 6379, "Redis")
    return f"hermes-test:{uuid.uuid4().hex}:"


async def test_a_turn_whose_lease_expired_unclaimed_takes_it_again_and_finishes(prefix):
    """Before: the next append raised StaleWriter out of run_turn, though no one else
    had taken the session."""
    store = InMemoryStore()
    lease = RedisLease(REDIS_URL, prefix=prefix, ttl_s=TTL_S)
    brain = StallingBrain(happy_script(intent=[INTENT_CHAT]))
    orchestrator = demo_orchestrator(graph_with(), brain=brain, lease=lease, store=store)
    try:
        result = await orchestrator.run_turn("s1", "hello", user_id="u1")
        assert result.path[-1] == "IDLE" and result.status == "completed"
        stored = await store.events_after("s1")
        assert [(e["seq"], e["kind"]) for e in stored] == [(e.seq, e.kind)
                                                          for e in result.events]
        await asyncio.sleep(0.05)  # the release of the lease taken again is sent
        assert await admin_call("GET", f"{prefix}s1") is None  # nothing left held
        again = await orchestrator.run_turn("s1", "hello again", user_id="u1")
        assert again.status == "completed"
    finally:
        await orchestrator.aclose()


async def test_a_turn_whose_expired_lease_another_process_took_is_a_stale_writer(prefix):
    store = InMemoryStore()
    lease = RedisLease(REDIS_URL, prefix=prefix, ttl_s=TTL_S)
    theirs = RedisLease(REDIS_URL, prefix=prefix, ttl_s=30)
    brain = StallingBrain(happy_script(intent=[INTENT_CHAT]))
    taken: list[Any] = []

    async def take_it() -> None:
        taken.append(await theirs.acquire("s1"))

    brain.meanwhile = take_it
    orchestrator = demo_orchestrator(graph_with(), brain=brain, lease=lease, store=store)
    try:
        with pytest.raises(StaleWriter, match="lease expired or was taken"):
            await orchestrator.run_turn("s1", "hello", user_id="u1")
        assert taken and taken[0] is not None  # theirs holds it, untouched by our turn
        assert await admin_call("GET", f"{prefix}s1") == taken[0].token.encode()
        await taken[0].release()
    finally:
        await orchestrator.aclose()
        await theirs.close()
