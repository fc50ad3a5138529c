"""Redis connections killed during a burst: every call ends with a terminal answer, and
the orchestrator's and the worker's sides reconnect by themselves."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

from hermes_fsm.tools.bus import RedisStreamsBus, Worker, serve_over_bus, specs_of
from hermes_fsm.tools.bus.sandbox import InlineRunner
from hermes_fsm.tools.executor import ToolExecutor
from tests.bus import tools as test_tools
from tests.bus.conftest import Events
from tests.memory.conftest import REDIS_URL, need, redis_connections_named


async def _kill_connections(admin, names: set[str]) -> int:
    """Kill the connections of these buses (by client name; nobody else's)."""
    killed = 0
    for client in await admin.client_list():
        if client.get("name", "") in names:
            try:
                await admin.client_kill_filter(_id=client["id"])
                killed += 1
            except Exception:  # gone already
                pass
    return killed


async def test_killed_connections_during_a_burst_lose_no_call():
    need(REDIS_URL, 6379, "Redis")
    from redis.asyncio import Redis

    prefix = f"hermes-test-bus:{uuid.uuid4().hex}"
    events = Events()
    caller = RedisStreamsBus(REDIS_URL, prefix=prefix, visibility_timeout_s=0.5,
                             on_event=events)
    served = RedisStreamsBus(REDIS_URL, prefix=prefix, visibility_timeout_s=0.5,
                             on_event=events)
    worker_registry = test_tools.registry
    worker = Worker(served, "default", specs_of(worker_registry), InlineRunner(worker_registry),
                    concurrency=16, heartbeat_s=0.2, on_event=events)
    registry = test_tools.build_registry()
    serve_over_bus(registry, caller)
    executor = ToolExecutor(registry, sleep=lambda _s: asyncio.sleep(0.05))
    admin = Redis.from_url(REDIS_URL)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.run(stop))
    try:
        (warm,) = await executor.execute([("warm-s1-c1", "noop", {})])
        assert warm["success"]
        names = {f"hermes-bus:{caller.process_id}", f"hermes-bus:{served.process_id}"}
        burst = [asyncio.create_task(executor.execute([(f"b{i}-s1-c1", "nap",
                                                        {"seconds": 0.0})]))
                 for i in range(1000)]
        killed = 0
        for _ in range(3):
            await asyncio.sleep(0.15)
            killed += await _kill_connections(admin, names)
        envelopes = [e for (e,) in await asyncio.gather(*burst)]
        (after,) = await executor.execute([("after-s1-c1", "noop", {})])
    finally:
        stop.set()
        await asyncio.wait_for(serving, 20)
        keys = [k async for k in admin.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await admin.delete(*keys)
        await admin.aclose()
        await caller.aclose()
        await served.aclose()
    assert killed > 0
    outcomes = Counter("ok" if e["success"] else e["error_code"] for e in envelopes)
    assert sum(outcomes.values()) == 1000  # each call ended with an answer
    assert set(outcomes) <= {"ok", "TIMEOUT", "SERVER_UNAVAILABLE"}, outcomes
    assert outcomes["ok"] >= 900, outcomes
    print(f"killed {killed} connections; outcomes {dict(outcomes)}; "
          f"reconnections {len(events.named('bus.reconnecting'))}")
    assert after["success"]  # both sides reconnected by themselves


async def test_a_redis_that_lost_its_streams_is_served_again():
    need(REDIS_URL, 6379, "Redis")
    from tests.bus.conftest import drop_bus, make_bus, request, running

    events = Events()
    bus = make_bus("redis", events, visibility_timeout_s=0.5)
    try:
        async with running(bus):
            first = await bus.call(request("noop"), "default")
            # Redis restarted without persistence: the streams and the consumer group are gone
            await bus.client.delete(f"{bus.prefix}:req:default")
            await asyncio.sleep(0.2)
            again = await bus.call(request("noop"), "default")
    finally:
        await drop_bus(bus)
    assert first.kind == again.kind == "EXECUTE_RESULT"
    assert events.named("bus.reconnecting")  # the worker saw NOGROUP and made the group again


async def test_a_connection_made_while_the_bus_closes_is_closed_too():
    """``aclose`` awaits while it closes its own connections; a blocking reader or a send
    that asks for its connection meanwhile must not leave one open (its client would be
    collected after the loop closed, its socket never closed)."""
    need(REDIS_URL, 6379, "Redis")
    bus = RedisStreamsBus(REDIS_URL, prefix=f"hermes-test-bus:{uuid.uuid4().hex}")
    first = bus._connection("replies")
    await first.ping()
    late: list[Any] = []
    close_first = first.aclose

    async def closing(*args, **kwargs):
        late.append(bus._connection("take:late"))  # asked for while the bus closes
        await late[0].ping()
        await close_first(*args, **kwargs)

    first.aclose = closing
    await bus.aclose()
    assert late and late[0].connection is None  # closed: its connection given back
    assert bus._own == {}


async def test_a_closed_bus_leaves_no_connection_open_on_the_server():
    need(REDIS_URL, 6379, "Redis")
    bus = RedisStreamsBus(REDIS_URL, prefix=f"hermes-test-bus:{uuid.uuid4().hex}")
    name = f"hermes-bus:{bus.process_id}"
    await asyncio.gather(*(bus.client.ping() for _ in range(4)))  # pooled connections
    await bus._connection("replies").ping()  # and one of its own
    assert await redis_connections_named(name, settle_s=0) >= 2
    await bus.aclose()
    assert await redis_connections_named(name) == 0, "connections of the closed bus still open"
