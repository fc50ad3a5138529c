"""Buses for the conformance suite: in-process and real Redis (a key prefix per test)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from hermes_fsm.tools.bus import InProcessBus, RedisStreamsBus, Worker, specs_of
from hermes_fsm.tools.bus.messages import ExecuteRequest
from hermes_fsm.tools.bus.sandbox import InlineRunner
from tests.bus.tools import registry
from tests.memory.conftest import REDIS_URL, need


class Events:
    """A bus's events, kept for assertions."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, **fields: Any) -> None:
        self.seen.append((name, fields))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [f for n, f in self.seen if n == name]


def make_bus(kind: str, events: Events, **options: Any) -> Any:
    if kind == "redis":
        need(REDIS_URL, 6379, "Redis")
        return RedisStreamsBus(REDIS_URL, prefix=f"hermes-test-bus:{uuid.uuid4().hex}",
                               on_event=events, **options)
    return InProcessBus(on_event=events, **options)


async def drop_bus(bus: Any) -> None:
    if isinstance(bus, RedisStreamsBus):
        client = bus.client
        keys = [k async for k in client.scan_iter(match=f"{bus.prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    await bus.aclose()


@pytest.fixture(params=["inprocess", "redis"])
def bus_kind(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
async def bus(bus_kind: str, events: Events) -> AsyncIterator[Any]:
    made = make_bus(bus_kind, events, visibility_timeout_s=0.5, max_deliveries=3)
    yield made
    await drop_bus(made)


def request(tool: str, timeout_s: float = 5.0, **params: Any) -> ExecuteRequest:
    """A request as an orchestrator would send it."""
    rid = uuid.uuid4().hex
    spec = registry.get(tool)
    assert spec.contract is not None
    return ExecuteRequest(request_id=rid, call_id=f"t-{rid[:8]}-s1-c1",
                          idempotency_key=f"test/{rid}", tool_name=tool,
                          idempotent=spec.contract.is_idempotent, input_params=params,
                          timeout_ms=int(timeout_s * 1000), sent_at=time.time())


@contextlib.asynccontextmanager
async def running(bus: Any, group: str = "default", runner: Any = None,
                  **options: Any) -> AsyncIterator[Worker]:
    """A worker serving the test tools on ``bus`` while the block runs."""
    worker = Worker(bus, group, specs_of(registry), runner or InlineRunner(registry),
                    heartbeat_s=0.2, on_event=bus.on_event, **options)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def eventually(check: Callable[[], Any], timeout_s: float = 5.0) -> Any:
    """Poll ``check`` (sync or async) until it returns something true."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if hasattr(value, "__await__"):
            value = await value
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.02)
