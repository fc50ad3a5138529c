"""The execution bus on Redis Streams.

Keys, under a prefix (``hermes`` by default):

============================== ===================================================
``<prefix>:req:<group>``        requests of a tool group; workers read it through the
                                consumer group ``workers`` (``XREADGROUP``, ``XACK``);
                                trimmed by age (``MINID ~``: an entry older than
                                ``retention_s`` is past every deadline)
``<prefix>:rep:<process>``      replies to one orchestrator process (``XREAD``), trimmed
                                ``MAXLEN ~``, expiring a day after its last use; an
                                entry's ``m`` is a message, its ``a`` (optional) the
                                ``EXECUTE_ACK`` sent with it
``<prefix>:dlq:<group>``        dead letters: malformed requests, requests delivered
                                ``max_deliveries`` times; ``MAXLEN ~``
``<prefix>:worker:<id>``        a worker's heartbeat (JSON), expiring with its TTL
============================== ===================================================

A worker that dies leaves its requests pending; after ``visibility_timeout_s`` another
worker takes them over (``XAUTOCLAIM``), their delivery count (``XPENDING``) one higher.
A live worker keeps its running calls from being reclaimed by claiming them again to
itself (``XCLAIM … JUSTID``, which leaves the count alone).

Connections lost are retried by the loops that use them (the reply reader backs off and
reconnects; a worker's calls to :meth:`take` raise and its loop retries): nothing needs
restarting after Redis comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

from hermes_fsm.tools.bus.messages import ExecuteAck, ExecuteRequest, Reply, encode
from hermes_fsm.tools.bus.protocol import BusEvent, Delivery, ReplyWaiters, WorkerInfo, log_event

__all__ = ["RedisStreamsBus"]

_GROUP = "workers"
_FINISH = """
if ARGV[4] ~= '' then
  if ARGV[5] then
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'm', ARGV[4], 'a', ARGV[5])
  else
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'm', ARGV[4])
  end
end
return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
"""
""":meth:`RedisStreamsBus.finish` as one command: the answer (with its ack, if any) on
the reply stream ``KEYS[2]``, then the request's ``XACK`` on ``KEYS[1]`` (``ARGV``: the
consumer group, the entry id, the reply stream's ``MAXLEN ~``, the answer or ``''`` for
none, the ``EXECUTE_ACK``). An answer that cannot be written leaves the entry pending."""


def _redis() -> Any:
    try:
        import redis.asyncio as aioredis
    except ImportError:  # pragma: no cover - the extra is missing
        from hermes_fsm.errors import ConfigError

        raise ConfigError("the Redis bus needs the redis extra: pip install 'hermes-fsm[redis]'"
                          ) from None
    return aioredis


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStreamsBus:
    """A :class:`~hermes_fsm.tools.bus.protocol.Bus` on Redis Streams (see the module docs).

    Args:
        url: the Redis URL (``redis://host:6379/0``).
        prefix: the key prefix (one per deployment; tests use one each).
        visibility_timeout_s: how long a taken request may stay unacked before another
            worker reclaims it.
        max_deliveries: deliveries after which a request is dead-lettered.
        retention_s: requests older than this are trimmed (keep it above every deadline).
        max_replies, max_dead: approximate lengths the reply and dead-letter streams are
            trimmed to.
        on_event: how refused messages, late replies and reconnections are reported.
        client: a ``redis.asyncio.Redis`` to use instead of one made from ``url``.
        max_connections: the connection pool's size (a burst past it waits for one).
    """

    name = "redis-streams"

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, prefix: str = "hermes",
                 visibility_timeout_s: float = 30.0, max_deliveries: int = 3,
                 retention_s: float = 3600.0, max_replies: int = 10_000,
                 max_dead: int = 10_000, on_event: BusEvent = log_event,
                 client: Any = None, max_connections: int = 32) -> None:
        self.url, self.prefix = url, prefix
        self.visibility_timeout_s = visibility_timeout_s
        self.max_deliveries = max_deliveries
        self.retention_s = retention_s
        self.max_replies, self.max_dead = max_replies, max_dead
        self.on_event = on_event
        self.max_connections = max_connections
        self.process_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.reply_stream = f"{prefix}:rep:{self.process_id}"
        self.waiters = ReplyWaiters(on_event)
        self._client = client
        self._pool_ours = client is None  # the pool it makes from url is its own to close
        self._own: dict[str, Any] = {}  # a connection of its own per blocking reader
        self._reader: asyncio.Task[None] | None = None
        self._groups_made: set[str] = set()
        self._closed = False
        self._finish: Any = None  # the finish script (EVALSHA; loaded again if Redis lost it)
        self._busy: set[str] = set()  # own connections a command of the call path holds

    # --- connections -----------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The ``redis.asyncio.Redis`` client (made at first use)."""
        if self._client is None:
            aioredis = _redis()
            pool = aioredis.BlockingConnectionPool.from_url(  # a burst waits for a connection
                self.url, max_connections=self.max_connections, timeout=10,
                client_name=f"hermes-bus:{self.process_id}",
                socket_connect_timeout=2.0, health_check_interval=10, retry_on_timeout=True)
            self._client = aioredis.Redis(connection_pool=pool)
        return self._client

    def _connection(self, name: str) -> Any:
        """A client on a connection of its own, for one loop's blocking reads (the reply
        reader, a worker's take): no pool checkout per read, and a read blocked for a
        second holds no connection the calls need."""
        own = self._own.get(name)
        if own is None:
            own = self._own[name] = self.client.client()
        return own

    @contextlib.contextmanager
    def _sender(self, name: str) -> Iterator[Any]:
        """A client for one command of the call path: the connection of its own named
        ``name`` while no other command uses it (no pool checkout: the common case of
        one call at a time), else the pool's (a burst does not queue on one socket)."""
        if name in self._busy:
            yield self.client
            return
        self._busy.add(name)
        try:
            yield self._connection(name)
        finally:
            self._busy.discard(name)

    def _requests(self, group: str) -> str:
        return f"{self.prefix}:req:{group}"

    async def _ensure_group(self, group: str) -> None:
        if group in self._groups_made:
            return
        try:
            await self.client.xgroup_create(self._requests(group), _GROUP, id="0",
                                            mkstream=True)
        except Exception as exc:  # BUSYGROUP: it exists (another worker made it)
            if "BUSYGROUP" not in str(exc):
                raise
        self._groups_made.add(group)

    def _lost_group(self, group: str, exc: Exception) -> None:
        """A Redis restarted without persistence has lost the stream and its consumer
        group (``NOGROUP``): make them again at the next call."""
        if "NOGROUP" in str(exc):
            self._groups_made.discard(group)

    # --- the orchestrator side -------------------------------------------------------------

    async def call(self, request: ExecuteRequest, group: str) -> Reply:
        """See :meth:`Bus.call`."""
        self._start_reader()
        request = request.model_copy(update={"reply_to": self.reply_stream})
        future = self.waiters.expect(request.request_id)
        try:
            await self.send_raw(group, encode(request))
        except BaseException:
            self.waiters.forget(request.request_id)
            raise
        return await self.waiters.wait(request, future)

    async def send_raw(self, group: str, raw: bytes) -> None:
        """See :meth:`Bus.send_raw`."""
        oldest = int((time.time() - self.retention_s) * 1000)
        with self._sender("send") as client:
            await client.xadd(self._requests(group), {"m": raw}, minid=f"{oldest}-0",
                              approximate=True)

    def _start_reader(self) -> None:
        if self._reader is None or self._reader.done():
            self._closed = False
            self._reader = asyncio.get_running_loop().create_task(
                self._read_replies(), name=f"hermes-bus-replies-{self.process_id}")

    async def _read_replies(self) -> None:
        last = "0-0"  # the stream is this process's own: everything on it is for us
        backoff = 0.05
        expired_at = 0.0
        while not self._closed:
            try:
                if time.monotonic() - expired_at > 600:
                    await self.client.expire(self.reply_stream, 86_400)
                    expired_at = time.monotonic()
                got = await self._connection("replies").xread({self.reply_stream: last},
                                                              count=256, block=1000)
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: back off, reconnect, read on from `last`
                self.on_event("bus.reconnecting", where=self.reply_stream,
                              error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            deliver = self.waiters.deliver
            for _stream, entries in got or ():
                for entry_id, fields in entries:
                    last = _text(entry_id)
                    ack = fields.get(b"a")  # an EXECUTE_ACK sent with its answer
                    if ack is not None:
                        deliver(ack, self.reply_stream)
                    deliver(fields.get(b"m"), self.reply_stream)

    # --- the worker side -------------------------------------------------------------------

    async def take(self, group: str, consumer: str, count: int,
                   block_s: float) -> list[Delivery]:
        """See :meth:`Bus.take`."""
        await self._ensure_group(group)
        try:
            got = await self._connection(f"take:{consumer}").xreadgroup(
                _GROUP, consumer, {self._requests(group): ">"}, count=count,
                block=max(1, int(block_s * 1000)))
        except Exception as exc:
            self._lost_group(group, exc)
            raise
        return [Delivery(_text(entry_id), group, fields.get(b"m"), 1)
                for _stream, entries in got or () for entry_id, fields in entries]

    async def reclaim(self, group: str, consumer: str, count: int) -> list[Delivery]:
        """See :meth:`Bus.reclaim`."""
        await self._ensure_group(group)
        stream = self._requests(group)
        try:
            result = await self.client.xautoclaim(stream, _GROUP, consumer,
                                                  int(self.visibility_timeout_s * 1000),
                                                  start_id="0-0", count=count)
        except Exception as exc:
            self._lost_group(group, exc)
            raise
        entries, deleted = result[1], (result[2] if len(result) > 2 else [])
        for entry_id in deleted:  # trimmed while pending: nothing left to serve
            await self.client.xack(stream, _GROUP, entry_id)
        taken: list[Delivery] = []
        for entry_id, fields in entries:
            if fields is None:
                continue
            key = _text(entry_id)
            rows = await self.client.xpending_range(stream, _GROUP, min=key, max=key, count=1)
            times = int(rows[0]["times_delivered"]) if rows else 2
            taken.append(Delivery(key, group, fields.get(b"m"), times))
        return taken

    async def touch(self, group: str, consumer: str, entry_ids: list[str]) -> None:
        """See :meth:`Bus.touch`."""
        if entry_ids:
            await self.client.xclaim(self._requests(group), _GROUP, consumer, 0, entry_ids,
                                     justid=True)

    async def ack(self, group: str, entry_id: str) -> None:
        """See :meth:`Bus.ack`."""
        await self.client.xack(self._requests(group), _GROUP, entry_id)

    async def reply(self, reply_to: str, message: ExecuteAck | Reply) -> None:
        """See :meth:`Bus.reply`."""
        await self.reply_raw(reply_to, encode(message))

    async def reply_raw(self, reply_to: str, raw: bytes) -> None:
        """See :meth:`Bus.reply_raw`."""
        if not reply_to.startswith(f"{self.prefix}:rep:"):
            self.on_event("bus.message_refused", where=reply_to,
                          reason="a reply stream outside this bus's prefix")
            return
        await self.client.xadd(reply_to, {"m": raw}, maxlen=self.max_replies,
                               approximate=True)

    async def finish(self, reply_to: str, message: Reply, group: str, entry_id: str, *,
                     ack: ExecuteAck | None = None) -> None:
        """See :meth:`Bus.finish` (one command, a script: the reply, then the XACK; an
        ``EXECUTE_ACK`` not sent yet rides in the answer's entry, field ``a``: one entry,
        one read of the reply stream)."""
        if reply_to and not reply_to.startswith(f"{self.prefix}:rep:"):
            await self.reply_raw(reply_to, b"")  # refused, with its event
            reply_to = ""
        stream = self._requests(group)
        args: list[Any] = [_GROUP, entry_id, self.max_replies,
                           encode(message) if reply_to else b""]
        if reply_to and ack is not None:
            args.append(encode(ack))
        if self._finish is None:
            self._finish = self.client.register_script(_FINISH)
        with self._sender("finish") as client:
            await self._finish(keys=[stream, reply_to or stream], args=args, client=client)

    async def dead_letter(self, group: str, delivery: Delivery, reason: str) -> None:
        """See :meth:`Bus.dead_letter`."""
        await self.client.xadd(f"{self.prefix}:dlq:{group}",
                               {"m": delivery.raw if delivery.raw is not None else b"",
                                "reason": reason, "count": delivery.count,
                                "entry_id": delivery.entry_id},
                               maxlen=self.max_dead, approximate=True)
        self.on_event("bus.dead_lettered", group=group, entry_id=delivery.entry_id,
                      reason=reason)

    async def dead_letters(self, group: str, count: int = 100) -> list[dict[str, Any]]:
        """See :meth:`Bus.dead_letters`."""
        rows = await self.client.xrevrange(f"{self.prefix}:dlq:{group}", count=count)
        return [{"raw": f.get(b"m"), "reason": _text(f.get(b"reason", b"")),
                 "count": int(f.get(b"count", 0)), "entry_id": _text(f.get(b"entry_id", b""))}
                for _id, f in reversed(rows)]

    async def heartbeat(self, info: WorkerInfo, ttl_s: float) -> None:
        """See :meth:`Bus.heartbeat`."""
        info.last_heartbeat = time.time()
        await self.client.set(f"{self.prefix}:worker:{info.worker_id}",
                              json.dumps(info.as_dict()), px=max(1, int(ttl_s * 1000)))

    async def workers(self) -> list[WorkerInfo]:
        """See :meth:`Bus.workers`."""
        found: list[WorkerInfo] = []
        async for key in self.client.scan_iter(match=f"{self.prefix}:worker:*", count=500):
            raw = await self.client.get(key)
            if raw is None:
                continue
            try:
                found.append(WorkerInfo.from_dict(json.loads(raw)))
            except (ValueError, TypeError, AttributeError):  # not a heartbeat: skipped
                continue
        return sorted(found, key=lambda w: w.worker_id)

    async def aclose(self) -> None:
        """See :meth:`Bus.aclose` (this process's reply stream is deleted)."""
        self._closed = True
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            try:
                await reader
            except (asyncio.CancelledError, Exception):
                pass
        while self._own:  # one asked for while the others close (a late read or send) too
            own, self._own = list(self._own.values()), {}
            for client in own:
                try:
                    await client.aclose()
                except Exception:  # Redis away: nothing to release
                    pass
        if self._client is not None:
            try:
                await self._client.delete(self.reply_stream)
            except Exception:  # Redis away: the stream expires by itself
                pass
            # a client given a pool leaves it open: the pool made here is closed with it
            await self._client.aclose(close_connection_pool=self._pool_ours)
            self._client = None
            self._pool_ours = True  # made again from url at the next use
            self._finish = None
            self._groups_made.clear()
