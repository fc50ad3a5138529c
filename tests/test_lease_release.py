"""A lease released by this process never refuses this process's next turn of the
session (real Redis behind a TCP proxy that stalls or drops connections): a take waits
for the release of the same session still on its way, and a release that could not be
delivered at all leaves a stale lease this process takes back (issue 16, the fault
campaign's third finding: an idle session refused as busy until the lease's TTL)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from hermes_fsm.store.lease import RedisLease
from tests.memory.conftest import REDIS_URL, need
from tests.test_lease_redis import admin_call


class Proxy:
    """A TCP proxy in front of Redis that can stall the connections open now (what they
    send waits until ``resume``) or be down (connections dropped and refused)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.down = False
        self.links: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter, asyncio.Event]] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        flowing = asyncio.Event()
        flowing.set()
        self.links.append((writer, up_writer, flowing))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       gate: asyncio.Event | None) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    if gate is not None:
                        await gate.wait()
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer, flowing), pipe(up_reader, writer, None))

    def stall_open_connections(self) -> None:
        for _, _, flowing in self.links:
            flowing.clear()

    def resume(self) -> None:
        for _, _, flowing in self.links:
            flowing.set()

    def go_down(self) -> None:
        self.down = True
        for writer, up_writer, flowing in self.links:
            flowing.set()
            writer.close()
            up_writer.close()
        self.links.clear()

    async def close(self) -> None:
        self.go_down()
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def proxied() -> AsyncIterator[tuple[Proxy, str, str]]:
    need(REDIS_URL, 6379, "Redis")
    url = urlsplit(REDIS_URL)
    proxy = Proxy(url.hostname or "127.0.0.1", url.port or 6379)
    port = await proxy.start()
    prefix = f"hermes-test:{uuid.uuid4().hex}:"
    yield proxy, f"redis://127.0.0.1:{port}{url.path or '/0'}", prefix
    await proxy.close()
    keys = await admin_call("KEYS", f"{prefix}*")
    if keys:
        await admin_call("DEL", *keys)


async def test_a_take_waits_for_the_release_of_the_same_session_still_on_its_way(proxied):
    """Before: with enough takes waiting, a second batch went out on another connection
    beside the one carrying the release, Redis ran it first, and this process's own next
    turn of the session was refused as busy."""
    proxy, url, prefix = proxied
    lease = RedisLease(url, prefix=prefix, ttl_s=30)
    try:
        hold = await lease.acquire("s0")
        assert hold is not None
        proxy.stall_open_connections()  # the release goes out on it, and waits there
        await hold.release()
        await asyncio.sleep(0.05)
        others = [asyncio.create_task(lease.acquire(f"o{i}")) for i in range(20)]
        again = asyncio.create_task(lease.acquire("s0"))  # the session's next turn
        await asyncio.sleep(0.2)  # the other takes went out on a fresh connection
        proxy.resume()
        got = await again
        assert got is not None, "this process's next turn was refused by its own old lease"
        assert await admin_call("GET", f"{prefix}s0") == got.token.encode()
        for task in others:
            taken = await task
            assert taken is not None
            await taken.release()
        await got.release()
    finally:
        await lease.close()


async def test_a_release_that_could_not_be_sent_does_not_refuse_the_next_turn(proxied):
    """Before: the stale lease refused the idle session for the rest of its TTL."""
    proxy, url, prefix = proxied
    lease = RedisLease(url, prefix=prefix, ttl_s=30)
    theirs = RedisLease(REDIS_URL, prefix=prefix, ttl_s=30)
    try:
        hold = await lease.acquire("s1")
        assert hold is not None
        proxy.go_down()
        await hold.release()  # every try fails: the lease stays in Redis, stale
        await asyncio.sleep(0.5)
        assert await admin_call("GET", f"{prefix}s1") == hold.token.encode()
        assert await theirs.acquire("s1") is None  # another process still waits for it
        proxy.down = False
        again: Any = await lease.acquire("s1")  # this process knows it is its own
        assert again is not None and again.token != hold.token
        assert await admin_call("GET", f"{prefix}s1") == again.token.encode()
        await again.release()
        await asyncio.sleep(0.05)
        taken = await theirs.acquire("s1")  # released for real this time
        assert taken is not None
        await taken.release()
    finally:
        await lease.close()
        await theirs.close()
