"""The embedded bus: streams, consumer groups and reply streams in this process.

The default when no Redis is configured: requests wait in a per-group queue until a
worker of this process takes them, stay pending until acked, are reclaimed from a
consumer that holds them past the visibility timeout, and go to a dead-letter list after
``max_deliveries`` — the same semantics as :class:`~.redis_streams.RedisStreamsBus`, so one
conformance suite checks both. Messages cross it as bytes, encoded and decoded exactly as
over Redis.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from hermes_fsm.tools.bus.messages import ExecuteAck, ExecuteRequest, Reply, encode
from hermes_fsm.tools.bus.protocol import BusEvent, Delivery, ReplyWaiters, WorkerInfo, log_event

__all__ = ["InProcessBus"]


@dataclass(slots=True)
class _Pending:
    consumer: str
    raw: bytes | None
    count: int
    since: float


@dataclass(slots=True)
class _Group:
    queue: deque[tuple[str, bytes | None]] = field(default_factory=deque)
    pending: dict[str, _Pending] = field(default_factory=dict)
    dead: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=1000))
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


class InProcessBus:
    """A :class:`~hermes_fsm.tools.bus.protocol.Bus` inside one process.

    Args:
        visibility_timeout_s: how long a taken request may stay unacked before another
            consumer may reclaim it.
        max_deliveries: deliveries after which a request is dead-lettered.
        on_event: how refused messages and late replies are reported.
    """

    name = "in-process"

    def __init__(self, *, visibility_timeout_s: float = 30.0, max_deliveries: int = 3,
                 on_event: BusEvent = log_event) -> None:
        self.visibility_timeout_s = visibility_timeout_s
        self.max_deliveries = max_deliveries
        self.on_event = on_event
        self.reply_stream = "replies:local"
        self.waiters = ReplyWaiters(on_event)
        self._groups: dict[str, _Group] = {}
        self._ids = itertools.count(1)
        self._workers: dict[str, tuple[WorkerInfo, float]] = {}

    def _group(self, name: str) -> _Group:
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = _Group()
        return group

    async def call(self, request: ExecuteRequest, group: str) -> Reply:
        """See :meth:`Bus.call`."""
        request = request.model_copy(update={"reply_to": self.reply_stream})
        future = self.waiters.expect(request.request_id)
        await self.send_raw(group, encode(request))
        return await self.waiters.wait(request, future)

    async def send_raw(self, group: str, raw: bytes) -> None:
        """See :meth:`Bus.send_raw`."""
        g = self._group(group)
        g.queue.append((f"{next(self._ids)}-0", raw))
        g.arrived.set()

    async def take(self, group: str, consumer: str, count: int,
                   block_s: float) -> list[Delivery]:
        """See :meth:`Bus.take`."""
        g = self._group(group)
        if not g.queue:
            g.arrived.clear()
            try:
                async with asyncio.timeout(block_s):
                    await g.arrived.wait()
            except TimeoutError:
                return []
        taken: list[Delivery] = []
        now = time.monotonic()
        while g.queue and len(taken) < count:
            entry_id, raw = g.queue.popleft()
            g.pending[entry_id] = _Pending(consumer, raw, 1, now)
            taken.append(Delivery(entry_id, group, raw, 1))
        return taken

    async def reclaim(self, group: str, consumer: str, count: int) -> list[Delivery]:
        """See :meth:`Bus.reclaim`."""
        g = self._group(group)
        now = time.monotonic()
        taken: list[Delivery] = []
        for entry_id, p in list(g.pending.items()):
            if len(taken) >= count:
                break
            if now - p.since >= self.visibility_timeout_s:
                p.consumer, p.count, p.since = consumer, p.count + 1, now
                taken.append(Delivery(entry_id, group, p.raw, p.count))
        return taken

    async def touch(self, group: str, consumer: str, entry_ids: list[str]) -> None:
        """See :meth:`Bus.touch`."""
        g = self._group(group)
        now = time.monotonic()
        for entry_id in entry_ids:
            p = g.pending.get(entry_id)
            if p is not None:
                p.consumer, p.since = consumer, now

    async def ack(self, group: str, entry_id: str) -> None:
        """See :meth:`Bus.ack`."""
        self._group(group).pending.pop(entry_id, None)

    async def reply(self, reply_to: str, message: ExecuteAck | Reply) -> None:
        """See :meth:`Bus.reply`."""
        await self.reply_raw(reply_to, encode(message))

    async def reply_raw(self, reply_to: str, raw: bytes) -> None:
        """See :meth:`Bus.reply_raw` (only this process's reply stream exists)."""
        if reply_to == self.reply_stream:
            self.waiters.deliver(raw, reply_to)

    async def finish(self, reply_to: str, message: Reply, group: str, entry_id: str, *,
                     ack: ExecuteAck | None = None) -> None:
        """See :meth:`Bus.finish`."""
        if reply_to:
            if ack is not None:
                await self.reply(reply_to, ack)
            await self.reply(reply_to, message)
        await self.ack(group, entry_id)

    async def dead_letter(self, group: str, delivery: Delivery, reason: str) -> None:
        """See :meth:`Bus.dead_letter`."""
        self._group(group).dead.append({"raw": delivery.raw, "reason": reason,
                                        "count": delivery.count,
                                        "entry_id": delivery.entry_id})
        self.on_event("bus.dead_lettered", group=group, entry_id=delivery.entry_id,
                      reason=reason)

    async def dead_letters(self, group: str, count: int = 100) -> list[dict[str, Any]]:
        """See :meth:`Bus.dead_letters`."""
        return list(self._group(group).dead)[-count:]

    async def heartbeat(self, info: WorkerInfo, ttl_s: float) -> None:
        """See :meth:`Bus.heartbeat`."""
        info.last_heartbeat = time.time()
        self._workers[info.worker_id] = (info, time.monotonic() + ttl_s)

    async def workers(self) -> list[WorkerInfo]:
        """See :meth:`Bus.workers`."""
        now = time.monotonic()
        return [info for info, until in self._workers.values() if until > now]

    async def aclose(self) -> None:
        """Nothing to release."""
