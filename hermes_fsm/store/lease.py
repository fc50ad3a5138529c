"""One writer per session: leases held while a turn runs.

- :class:`LocalLease`: asyncio, this process only (the default);
- :class:`RedisLease`: across processes — ``SET key token NX PX ttl`` to take, a
  compare-and-``PEXPIRE`` renewal while the turn runs, compare-and-``DEL`` to release.
  Takes and releases waiting at the same moment (many sessions' turns) go to Redis
  together, in one script call; renewals of every lease held long enough go in one
  call too, so a turn shorter than a third of the TTL is never renewed. A release is
  queued, not waited for: it goes out with the next call, a later take of the same
  session in this process waits until it is done (two calls in flight on two
  connections may run in either order), and :meth:`RedisLease.close` waits for what is
  still queued.
  A call that fails on a dropped connection (Redis restarted, ``CLIENT KILL``, a proxy's
  idle timeout) is made again on a fresh one, a couple of times with a short backoff;
  the take is idempotent (a retried take finds its own token and keeps it). A release
  that still could not be sent leaves a stale lease of this process in Redis: this
  process remembers its token and takes it back at its next take of the session (no
  turn of ours holds it), while other processes wait for its TTL as for any lease.

A refused session is described by ``describe_busy`` (for :class:`~hermes_fsm.errors.
SessionBusy`): a turn running in this process, or a lease held elsewhere that expires in
so many milliseconds.

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
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from hermes_fsm._internal.group_commit import GroupCommit
from hermes_fsm._internal.redact import redact, redact_url, register_url
from hermes_fsm.errors import StoreError

__all__ = ["LeaseHold", "LocalLease", "RedisLease", "SessionLease"]

_log = logging.getLogger("hermes_fsm.store.lease")
_T = TypeVar("_T")
_ATTEMPTS = 3  # a call on a dropped connection is made again on a fresh one, this often
_BACKOFF_S = 0.05  # before the second attempt; doubled before the third
_HERE = "a turn is running on it in this process"


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

    async def describe_busy(self, session_id: str) -> str:
        """Why :meth:`acquire` refused ``session_id``: a turn of this process holds it."""
        return _HERE

    async def close(self) -> None:
        """Nothing to close."""


_TAKE_OR_RELEASE = """
local out = {}
local n = #KEYS
for i = 1, n do
  local key, token, stale = KEYS[i], ARGV[n + i], ARGV[2 * n + i]
  if ARGV[i] == 'take' then
    local held = redis.call('get', key)
    if not held or (stale ~= '' and held == stale) then  -- free, or our unreleased own
      redis.call('set', key, token, 'PX', ARGV[3 * n + 1])
      out[i] = 1
    elseif held == token then  -- a retried take that went through
      out[i] = redis.call('pexpire', key, ARGV[3 * n + 1])
    else
      out[i] = 0
    end
  elseif redis.call('get', key) == token then
    out[i] = redis.call('del', key)
  else
    out[i] = 0
  end
end
return out
"""
_RENEW = """
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i] then
    renewed[i] = redis.call('pexpire', key, ARGV[#KEYS + 1])
  else
    renewed[i] = 0
  end
end
return renewed
"""
"""Scripts over many leases at once: one round trip for all the leases waiting together.
``KEYS``: the lease keys; ``ARGV``: (take/release: what to do with each, then) their
tokens, (take/release: then for each the token of this process's stale lease a take
may replace, or ``''``), then the TTL in ms. Both can be sent again safely (a take that
finds its own token keeps it; a release or renewal of a token no longer there does
nothing)."""


class _RedisHold:
    __slots__ = ("_lease", "key", "lost", "renewed", "session_id", "token")

    def __init__(self, lease: RedisLease, session_id: str, key: str, token: str,
                 renewed: float) -> None:
        self._lease, self.session_id, self.key, self.token = lease, session_id, key, token
        self.lost = False
        self.renewed = renewed  # when the last take or renewal was sent (monotonic)

    async def release(self) -> None:
        await self._lease._release(self)


class RedisLease:
    """Leases in Redis, shared by every process serving the sessions.

    Args:
        url: ``redis://host:port/db``.
        prefix: key prefix (``<prefix><session_id>``); give each deployment or test its own.
            On Redis Cluster, put a hash tag in it (``{hermes}:lease:``): a script call
            covers many keys, which must live in one slot.
        ttl_s: how long a lease lives without renewal (renewed once a third of it has
            passed since it was taken or last renewed).
        poll_s: how often a waiting acquire tries again.
        client_name: how the connections show in ``CLIENT LIST``.
        max_connections: the most connections kept (more callers wait for one).

    Attributes:
        round_trips: calls sent to Redis so far (takes, releases, renewals; a call made
            again on a fresh connection counts again).
    """

    def __init__(self, url: str, *, prefix: str = "hermes:lease:", ttl_s: float = 10.0,
                 poll_s: float = 0.01, client_name: str = "hermes-fsm-lease",
                 max_connections: int = 32) -> None:
        self.max_connections = max_connections
        self.url, self.prefix, self.client_name = url, prefix, client_name
        register_url(url)  # its password never reaches an error message or a log
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.poll_s = poll_s
        self._client: Any = None
        self._take_or_release: Any = None
        self._renew: Any = None
        self._holds: dict[_RedisHold, None] = {}  # held leases, oldest first
        self._renewer: asyncio.Task[None] | None = None
        self._renewing = False
        self._token_prefix = secrets.token_hex(8) + "-"  # tokens: unique, not secret
        self._tokens = itertools.count(1)
        self._ops: GroupCommit[tuple[str, str, str, str], bool] = GroupCommit(
            self._ops_batch, key=lambda op: op[1], min_batch=16)
        # ops: (take/release, key, token, stale token the take may replace or '')
        self._releasing: dict[str, asyncio.Future[bool]] = {}  # key -> its queued release
        self._unreleased: dict[str, str] = {}  # key -> our token a release failed to delete
        self.round_trips = 0

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
            self._take_or_release = self._client.register_script(_TAKE_OR_RELEASE)
            self._renew = self._client.register_script(_RENEW)
        return self._client

    async def _call(self, call: Callable[[Any], Awaitable[_T]]) -> _T:
        """``call(client)``, made again on a fresh connection when the connection it used
        was dropped (:data:`_ATTEMPTS` in all, :data:`_BACKOFF_S` apart, doubling)."""
        for attempt in range(1, _ATTEMPTS + 1):
            client = self._redis()
            self.round_trips += 1
            try:
                return await call(client)
            except Exception as exc:
                if attempt == _ATTEMPTS or not _dropped(exc):
                    raise
                _log.info("Redis lease at %s: connection dropped (%s); trying again on a "
                          "fresh one (attempt %d of %d)", redact_url(self.url),
                          redact(f"{type(exc).__name__}: {exc}"), attempt + 1, _ATTEMPTS)
                # the idle connections were likely dropped too (Redis restarted, a proxy's
                # timeout): open fresh ones rather than find the dead ones one by one
                await client.connection_pool.disconnect(inuse_connections=False)
                await asyncio.sleep(_BACKOFF_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    async def describe_busy(self, session_id: str) -> str:
        """Why :meth:`acquire` refused ``session_id`` just now, for
        :class:`~hermes_fsm.errors.SessionBusy`: a turn of this process holds it, or a
        lease held elsewhere expires in so many milliseconds (read from Redis now)."""
        if any(hold.session_id == session_id for hold in self._holds):
            return _HERE
        key = self.prefix + session_id
        try:
            left = int(await self._call(lambda client: client.pttl(key)))
        except Exception as exc:
            return (f"its lease is held in Redis at {redact_url(self.url)} (how long for "
                    f"could not be read: {redact(f'{type(exc).__name__}: {exc}')})")
        if left >= 0:
            return (f"it is held by a lease that expires in {left} ms (a turn in another "
                    "process, or one whose process stopped before releasing it; the lease "
                    "frees itself then)")
        if left == -1:
            return (f"its lease key {key!r} has no expiry (it was not set by hermes-fsm?); "
                    "delete it if no turn is running")
        return "its lease was released a moment ago; try again"

    async def acquire(self, session_id: str, wait_s: float = 0.0) -> LeaseHold | None:
        key = self.prefix + session_id
        deadline = time.monotonic() + wait_s
        releasing = self._releasing.get(key)
        if releasing is not None:  # our release of it goes first (see the module docs)
            await asyncio.wait([releasing])
        while True:
            token = f"{self._token_prefix}{next(self._tokens)}"
            sent = time.monotonic()
            if await self._ops.submit(("take", key, token, self._unreleased.get(key, ""))):
                hold = _RedisHold(self, session_id, key, token, sent)
                self._holds[hold] = None
                if self._renewer is None:
                    self._renewer = asyncio.get_running_loop().create_task(self._keep())
                return hold
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(self.poll_s)

    async def _ops_batch(self, ops: list[tuple[str, str, str, str]]
                         ) -> list[bool | BaseException]:
        """Takes and releases waiting together: one script call."""
        keys = [op[1] for op in ops]
        args = [*(op[0] for op in ops), *(op[2] for op in ops), *(op[3] for op in ops),
                self.ttl_ms]
        try:
            done = await self._call(
                lambda client: self._take_or_release(keys=keys, args=args, client=client))
        except Exception as exc:
            what = redact(f"{type(exc).__name__}: {exc}")
            outcomes: list[bool | BaseException] = []
            released = [op[1][len(self.prefix):] for op in ops if op[0] == "release"]
            if released:  # they expire by themselves after ttl_s; this process takes its
                _log.warning("lease release of %d session(s) (%s) failed after %d attempts "
                             "(they expire in %d ms, or this process takes them back at "
                             "its next turn of the session): %s", len(released),
                             ", ".join(released[:5]), _ATTEMPTS, self.ttl_ms, what)
            for op, key, token, _ in ops:
                if op == "release":
                    self._unreleased[key] = token  # own back (see the module docs)
                    outcomes.append(False)
                    continue
                error = StoreError(
                    f"Redis lease at {redact_url(self.url)}: cannot take the lease of "
                    f"session {key[len(self.prefix):]!r} ({what}); check HERMES_REDIS_URL "
                    "and that Redis is up")
                error.__cause__ = exc
                outcomes.append(error)
            return outcomes
        for op, key, _, stale in ops:
            if op == "take" and stale and self._unreleased.get(key) == stale:
                del self._unreleased[key]  # taken back, or expired and gone
        return [bool(d) for d in done]

    async def _keep(self) -> None:
        """Renew, in one call, every lease held for a third of its TTL since it was taken
        or last renewed; mark lost those gone (or unreachable until their TTL ran out).
        Runs while leases are held."""
        ttl = self.ttl_ms / 1000.0
        try:
            while self._holds:
                await asyncio.sleep(ttl / 6)
                now = time.monotonic()
                due = [hold for hold in self._holds if now - hold.renewed >= ttl / 3]
                if not due:
                    continue
                self._renewing = True
                keys, args = [h.key for h in due], [*(h.token for h in due), self.ttl_ms]
                try:
                    renewed = await self._call(  # called at once: the loop's keys
                        lambda client: self._renew(keys=keys, args=args,  # noqa: B023
                                                   client=client))
                except Exception as exc:  # Redis unreachable: keep trying until the TTL is up
                    _log.warning("lease renewal of %d session(s) failed: %s", len(due),
                                 redact(f"{type(exc).__name__}: {exc}"))
                    renewed = [None] * len(due)
                finally:
                    self._renewing = False
                late = time.monotonic()
                for hold, ok in zip(due, renewed, strict=True):
                    if ok:
                        hold.renewed = now
                    elif ok is not None or late >= hold.renewed + ttl:
                        hold.lost = True
                        self._holds.pop(hold, None)
        finally:
            if self._renewer is asyncio.current_task():
                self._renewer = None

    async def _release(self, hold: _RedisHold) -> None:
        if self._holds.pop(hold, self) is self:
            return  # released already, or lost (the key is not ours any more)
        if not self._holds and self._renewer is not None and not self._renewing:
            self._renewer.cancel()
            self._renewer = None
        future = self._ops.submit_nowait(("release", hold.key, hold.token, ""))
        self._releasing[hold.key] = future
        future.add_done_callback(lambda done: self._released(hold.key, done))

    def _released(self, key: str, future: asyncio.Future[bool]) -> None:
        if self._releasing.get(key) is future:
            del self._releasing[key]
        if not future.cancelled() and future.exception() is not None:
            _log.warning("lease release failed (it expires in %d ms): %s", self.ttl_ms,
                         redact(str(future.exception())))

    async def close(self) -> None:
        if self._releasing:  # queued releases: sent before the connections go
            await asyncio.wait(list(self._releasing.values()), timeout=5)
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose(close_connection_pool=True)  # the pool is ours (_redis)


def _dropped(exc: BaseException) -> bool:
    """Whether ``exc`` is a dropped or broken connection, which a fresh one may not have
    (not a refusal: a wrong password, a script error)."""
    from redis import exceptions

    if isinstance(exc, exceptions.AuthenticationError):
        return False
    return isinstance(exc, exceptions.ConnectionError | exceptions.TimeoutError | OSError)
