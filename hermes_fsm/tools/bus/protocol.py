"""The ``Bus`` protocol: what an orchestrator and a tool worker need of the transport.

Two sides share one object:

- the **orchestrator** side, :meth:`Bus.call`: send an :class:`ExecuteRequest` on a tool
  group's request stream and wait — without holding anything but the awaiting task —
  for its terminal reply on this process's reply stream; no reply within the request's
  ``timeout_ms`` is an :class:`ExecuteTimeout`, said by the bus;
- the **worker** side: :meth:`Bus.take` new requests (at-least-once: each stays pending
  until :meth:`Bus.ack`), :meth:`Bus.reclaim` those a dead worker held past the
  visibility timeout, :meth:`Bus.touch` the ones it still runs (so they are not
  reclaimed from it), :meth:`Bus.reply`, :meth:`Bus.dead_letter` what cannot be served,
  and :meth:`Bus.heartbeat`.

Implementations: :class:`~hermes_fsm.tools.bus.inprocess.InProcessBus` (the embedded
default) and :class:`~hermes_fsm.tools.bus.redis_streams.RedisStreamsBus`; one conformance
suite (``tests/bus/``) runs on both.

Nothing that comes off the bus may crash a side: a malformed request is dead-lettered by
the worker, a malformed reply by the orchestrator, each with a ``bus.message_refused``
event (:data:`BusEvent`); a reply for a request nobody waits for any more (it timed out,
its turn moved on) is a ``bus.late_reply`` event, counted in :attr:`ReplyWaiters.late`,
and is never applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hermes_fsm.tools.bus.messages import (
    ExecuteAck,
    ExecuteRequest,
    ExecuteTimeout,
    MalformedMessage,
    Reply,
    decode,
)

__all__ = ["Bus", "BusEvent", "Delivery", "ReplyWaiters", "WorkerInfo", "log_event"]

BusEvent = Callable[..., None]
"""``on_event(name, **fields)``: how a bus reports refused messages, late replies,
reconnections and dead letters (default: :func:`log_event`)."""

_log = logging.getLogger("hermes_fsm.bus")


def log_event(name: str, **fields: Any) -> None:
    """The default :data:`BusEvent`: a warning on the ``hermes_fsm.bus`` logger."""
    _log.warning("%s %s", name, " ".join(f"{k}={v!r}" for k, v in fields.items()))


@dataclass(slots=True)
class Delivery:
    """One request as a worker received it.

    Attributes:
        entry_id: the transport's id of the entry (acked with it).
        group: the tool group (request stream) it came from.
        raw: the entry's bytes, as sent.
        count: how many times the bus has delivered it (1 the first time).
    """

    entry_id: str
    group: str
    raw: bytes | None
    count: int = 1


@dataclass(slots=True)
class WorkerInfo:
    """What a worker's heartbeat says about it (``hermes-fsm workers list``)."""

    worker_id: str
    group: str
    tools: list[str]
    pid: int
    host: str
    concurrency: int
    in_flight: int = 0
    served: int = 0
    started_at: float = 0.0
    last_heartbeat: float = 0.0
    catalog: list[dict[str, Any]] = field(default_factory=list)
    """The contracts of the MCP tools it serves (:mod:`~hermes_fsm.tools.bus.mcp`): the
    orchestrator registers its stand-ins from them."""
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    """The MCP servers it runs, as it sees them: ``{name, transport, status, tools,
    last_error}`` each (``hermes-fsm mcp list`` says which worker serves which)."""

    def as_dict(self) -> dict[str, Any]:
        """The heartbeat as JSON-ready fields."""
        return {"worker_id": self.worker_id, "group": self.group, "tools": self.tools,
                "pid": self.pid, "host": self.host, "concurrency": self.concurrency,
                "in_flight": self.in_flight, "served": self.served,
                "started_at": self.started_at, "last_heartbeat": self.last_heartbeat,
                "catalog": self.catalog, "mcp_servers": self.mcp_servers}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerInfo:
        """A heartbeat read back; fields it does not know (a newer worker's) are left out.

        Raises:
            TypeError: a required field is missing.
        """
        return cls(**{k: v for k, v in data.items() if k in _WORKER_FIELDS})


_WORKER_FIELDS = frozenset(f.name for f in dataclasses.fields(WorkerInfo))


@runtime_checkable
class Bus(Protocol):
    """A transport for :mod:`~hermes_fsm.tools.bus.messages` (see the module docs)."""

    name: str
    visibility_timeout_s: float
    max_deliveries: int

    async def call(self, request: ExecuteRequest, group: str) -> Reply:
        """Send ``request`` to ``group``'s workers and wait for how it ends: a result, an
        error, or :class:`ExecuteTimeout` after ``request.timeout_ms``."""
        ...

    async def send_raw(self, group: str, raw: bytes) -> None:
        """Put ``raw`` on ``group``'s request stream as it is (tools and tests)."""
        ...

    async def take(self, group: str, consumer: str, count: int,
                   block_s: float) -> list[Delivery]:
        """Up to ``count`` new requests for ``consumer``, waiting up to ``block_s``."""
        ...

    async def reclaim(self, group: str, consumer: str, count: int) -> list[Delivery]:
        """Requests left unacked by another consumer for longer than the visibility
        timeout, now ``consumer``'s (their ``count`` went up by one)."""
        ...

    async def touch(self, group: str, consumer: str, entry_ids: list[str]) -> None:
        """Reset the idle time of entries ``consumer`` still works on."""
        ...

    async def ack(self, group: str, entry_id: str) -> None:
        """The entry is done with; it is not delivered again."""
        ...

    async def reply(self, reply_to: str, message: ExecuteAck | Reply) -> None:
        """Send ``message`` to the orchestrator's reply stream ``reply_to``."""
        ...

    async def reply_raw(self, reply_to: str, raw: bytes) -> None:
        """Put ``raw`` on a reply stream as it is (tests)."""
        ...

    async def finish(self, reply_to: str, message: Reply, group: str, entry_id: str, *,
                     ack: ExecuteAck | None = None) -> None:
        """:meth:`reply` with ``message`` (unless ``reply_to`` is empty), then :meth:`ack`
        the entry — in one round trip where the transport allows. ``ack``: an
        ``EXECUTE_ACK`` not sent yet (a call that ended quickly), sent just before."""
        ...

    async def dead_letter(self, group: str, delivery: Delivery, reason: str) -> None:
        """Keep ``delivery`` on the dead-letter stream with why; the caller acks it."""
        ...

    async def dead_letters(self, group: str, count: int = 100) -> list[dict[str, Any]]:
        """The latest dead letters of ``group``: ``{raw, reason, count}`` each."""
        ...

    async def heartbeat(self, info: WorkerInfo, ttl_s: float) -> None:
        """Say ``info``'s worker is alive for ``ttl_s`` more seconds."""
        ...

    async def workers(self) -> list[WorkerInfo]:
        """The workers whose last heartbeat has not expired."""
        ...

    async def aclose(self) -> None:
        """Stop reading replies and release connections (idempotent)."""
        ...


class ReplyWaiters:
    """The orchestrator side's bookkeeping: one future per request awaiting its end.

    Both buses feed :meth:`deliver` with each raw reply off this process's reply stream.
    A malformed reply is refused (``bus.message_refused``) and handed to ``dead_letter``;
    a reply whose request nobody awaits is late (``bus.late_reply``, counted); an ack
    is remembered (:attr:`acks`), never a terminal answer.
    """

    def __init__(self, on_event: BusEvent) -> None:
        self._waiting: dict[str, asyncio.Future[Reply]] = {}
        self.acks: dict[str, ExecuteAck] = {}
        self.late: list[Reply] = []
        self.refused = 0
        self.on_event = on_event

    def expect(self, request_id: str) -> asyncio.Future[Reply]:
        """A future that :meth:`deliver` completes with the request's terminal reply."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        return future

    def forget(self, request_id: str) -> None:
        """Nobody waits for this request any more (its reply, if one comes, is late)."""
        self._waiting.pop(request_id, None)
        self.acks.pop(request_id, None)

    def deliver(self, raw: bytes | None, where: str) -> str | None:
        """Dispatch one raw reply; returns why it was refused, or ``None``."""
        try:
            message = decode(raw)
        except MalformedMessage as exc:
            self.refused += 1
            self.on_event("bus.message_refused", where=where, reason=str(exc))
            return str(exc)
        if message.kind == "EXECUTE_REQUEST":
            self.refused += 1
            reason = "a request on a reply stream"
            self.on_event("bus.message_refused", where=where, reason=reason)
            return reason
        if message.kind == "EXECUTE_ACK":
            if message.request_id in self._waiting:
                self.acks[message.request_id] = message
            return None
        future = self._waiting.pop(message.request_id, None)
        if future is None or future.done():
            self.late.append(message)
            self.on_event("bus.late_reply", where=where, request_id=message.request_id,
                          kind=message.kind)
            return None
        future.set_result(message)
        return None

    async def wait(self, request: ExecuteRequest, future: asyncio.Future[Reply]) -> Reply:
        """The request's terminal reply, or :class:`ExecuteTimeout` at its bus timeout."""
        try:
            async with asyncio.timeout(request.timeout_ms / 1000):
                return await future
        except TimeoutError:
            acked = request.request_id in self.acks
            return ExecuteTimeout(
                request_id=request.request_id, timeout_ms=request.timeout_ms,
                reason=("a worker took it but gave no answer in time" if acked
                        else "no worker took it in time"))
        finally:
            self.forget(request.request_id)

    def pending(self) -> int:
        """How many requests are awaited now."""
        return len(self._waiting)

