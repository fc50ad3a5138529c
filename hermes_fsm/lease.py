"""One writer per session: leases held while a turn runs.

- :class:`LocalLease`: asyncio, this process only (the default);
- :class:`RedisLease`: across processes — ``SET key token NX PX ttl`` to take, a
  compare-and-``PEXPIRE`` renewal while the turn runs, compare-and-``DEL`` to release.

A lease is advisory: it keeps two processes from *starting* turns on one session at the
same time. What makes a stale holder harmless (a process paused past its lease's expiry)
is the store's fencing: every claim bumps the session's epoch and every append must carry
the current one (see :mod:`hermes_fsm.store`).

>>> import asyncio
>>> async def demo():
...     lease = LocalLease()
...     hold = await lease.acquire("s1")
...     busy = await lease.acquire("s1")
...     await hold.release()
...     return busy is None, (await lease.acquire("s1")) is not None
>>> asyncio.run(demo())
(True, True)
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any, Protocol, runtime_checkable

from .errors import StoreError

__all__ = ["LeaseHold", "LocalLease", "RedisLease", "SessionLease"]

_log = logging.getLogger("hermes_fsm.lease")


@runtime_checkable
class LeaseHold(Protocol):
    """A held lease: ``lost`` turns true if it expired or was taken while held."""

    session_id: str
    token: str
    lost: bool

    async def release(self) -> None:
        """Give the lease up (only if still ours)."""


@runtime_checkable
class SessionLease(Protocol):
    """Hands out one lease per session at a time."""

    async def acquire(self, session_id: str, wait_s: float = 0.0) -> LeaseHold | None:
        """The session's lease, waiting up to ``wait_s``; ``None`` if it stayed busy."""

    async def close(self) -> None:
        """Release connections."""


class _LocalHold:
    __slots__ = ("_lease", "lost", "session_id", "token")

    def __init__(self, lease: LocalLease, session_id: str, token: str) -> None:
        self._lease, self.session_id, self.token, self.lost = lease, session_id, token, False

    async def release(self) -> None:
        self._lease._release(self)


class LocalLease:
    """Leases within this process (asyncio; no fencing needed across processes)."""

    def __init__(self) -> None:
        self._held: dict[str, str] = {}
        self._waiters: dict[str, asyncio.Event] = {}

    async def acquire(self, session_id: str, wait_s: float = 0.0) -> LeaseHold | None:
        deadline = time.monotonic() + wait_s
        while session_id in self._held:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            event = self._waiters.setdefault(session_id, asyncio.Event())
            try:
                async with asyncio.timeout(remaining):
                    await event.wait()
            except TimeoutError:
                return None
        token = secrets.token_hex(8)
        self._held[session_id] = token
        return _LocalHold(self, session_id, token)

    def _release(self, hold: _LocalHold) -> None:
        if self._held.get(hold.session_id) == hold.token:
            del self._held[hold.session_id]
            event = self._waiters.pop(hold.session_id, None)
            if event is not None:
                event.set()

    async def close(self) -> None:
        """Nothing to close."""


_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class _RedisHold:
    __slots__ = ("_lease", "_renewal", "lost", "session_id", "token")

    def __init__(self, lease: RedisLease, session_id: str, token: str) -> None:
        self._lease, self.session_id, self.token, self.lost = lease, session_id, token, False
        self._renewal: asyncio.Task[None] | None = None

    async def release(self) -> None:
        if self._renewal is not None:
            self._renewal.cancel()
        await self._lease._release(self)


class RedisLease:
    """Leases in Redis, shared by every process serving the sessions.

    Args:
        url: ``redis://host:port/db``.
        prefix: key prefix (``<prefix><session_id>``); give each deployment or test its own.
        ttl_s: how long a lease lives without renewal (renewed every third of it).
        poll_s: how often a waiting acquire tries again.
        client_name: how the connections show in ``CLIENT LIST``.
        max_connections: the most connections kept (more callers wait for one).
    """

    def __init__(self, url: str, *, prefix: str = "hermes:lease:", ttl_s: float = 10.0,
                 poll_s: float = 0.01, client_name: str = "hermes-fsm-lease",
                 max_connections: int = 32) -> None:
        self.max_connections = max_connections
        self.url, self.prefix, self.client_name = url, prefix, client_name
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.poll_s = poll_s
        self._client: Any = None
        self._renew: Any = None
        self._release_script: Any = None

    def _redis(self) -> Any:
        if self._client is None:
            try:
                import redis.asyncio as aioredis
            except ImportError:  # pragma: no cover - depends on the install
                raise StoreError("the Redis lease needs redis: pip install 'hermes-fsm[redis]'"
                                 ) from None
            pool = aioredis.BlockingConnectionPool.from_url(  # waits for a free connection
                self.url, max_connections=self.max_connections, timeout=5, socket_timeout=5,
                socket_connect_timeout=5, client_name=self.client_name)
            self._client = aioredis.Redis(connection_pool=pool)
            self._renew = self._client.register_script(_RENEW)
            self._release_script = self._client.register_script(_RELEASE)
        return self._client

    async def acquire(self, session_id: str, wait_s: float = 0.0) -> LeaseHold | None:
        client = self._redis()
        key = self.prefix + session_id
        token = secrets.token_hex(16)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                taken = await client.set(key, token, nx=True, px=self.ttl_ms)
            except Exception as exc:
                raise StoreError(f"Redis lease at {self.url}: cannot take the lease of session "
                                 f"{session_id!r} ({type(exc).__name__}: {exc}); check "
                                 "HERMES_REDIS_URL and that Redis is up") from exc
            if taken:
                hold = _RedisHold(self, session_id, token)
                hold._renewal = asyncio.get_running_loop().create_task(self._keep(hold))
                return hold
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(self.poll_s)

    async def _keep(self, hold: _RedisHold) -> None:
        """Renew the lease every third of its TTL while held; mark it lost when it is gone."""
        key = self.prefix + hold.session_id
        interval = self.ttl_ms / 3000.0
        expires = time.monotonic() + self.ttl_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                renewed = await self._renew(keys=[key], args=[hold.token, self.ttl_ms])
            except Exception as exc:  # Redis unreachable: keep trying until the TTL is up
                _log.warning("lease renewal of session %s failed: %s", hold.session_id, exc)
                if time.monotonic() >= expires:
                    hold.lost = True
                    return
                continue
            if not renewed:
                hold.lost = True
                return
            expires = time.monotonic() + self.ttl_ms / 1000.0

    async def _release(self, hold: _RedisHold) -> None:
        try:
            await self._release_script(keys=[self.prefix + hold.session_id], args=[hold.token])
        except Exception as exc:  # it expires by itself after ttl_s
            _log.warning("lease release of session %s failed (it expires in %d ms): %s",
                         hold.session_id, self.ttl_ms, exc)

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
