"""Working memory on Redis (``redis`` asyncio client): keys expire by Redis' own TTL.

Keys are ``{prefix}:{sha(user)}:{sha(session)}:recent`` (a list of JSON messages) and
``…:slots`` (a hash of JSON values). User and session ids are hashed, so no id can reach
into another user's keys (``*``, ``:`` or ``?`` in an id mean nothing). Each write is one
Lua script (atomic in Redis): a connection lost mid-write leaves nothing half-written.
Several turns' writes go in one ``MULTI``/``EXEC`` pipeline: one round trip, all or none.

Requires the ``redis`` extra: ``pip install 'hermes-fsm[redis]'``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_fsm._internal.redact import redact, redact_url, register_url
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory.working import DEFAULT_TTL_S, TurnWrite

__all__ = ["RedisWorkingMemory"]


def _h(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:32]


_AFTER = {
    "turn write": "a turn is written in one transaction, so all of it or nothing was kept "
                  "(all of it only if the connection dropped after Redis ran it); writing "
                  "it again is safe: a turn kept already is not applied twice; ",
    "turn writes": "each batch is one transaction, so all of its turns or none were kept "
                   "(all only if the connection dropped after Redis ran it); writing them "
                   "again is safe: a turn kept already is not applied twice; ",
    "delete": "some of the user's keys may be left: forgetting her again removes them; ",
}
"""What a failed call of :meth:`RedisWorkingMemory._run` left behind, by what it was."""


class RedisWorkingMemory:
    """Working memory in Redis.

    Args:
        url: ``redis://host:port/db``.
        ttl_s: seconds after the last write before a session's context expires.
        prefix: key prefix (give each deployment or test its own).
        client: an existing ``redis.asyncio.Redis`` (then ``url`` is only for messages).
    """

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, ttl_s: float = DEFAULT_TTL_S,
                 prefix: str = "hermes:wm", client: Any = None) -> None:
        self.url, self.ttl_s, self.prefix = url, ttl_s, prefix
        register_url(url)  # its password: never in a message or an event
        self.name = f"Redis working memory at {redact_url(url)} (prefix {prefix!r})"
        self._client = client

    def _redis(self) -> Any:
        if self._client is None:
            try:
                import redis.asyncio as redis
            except ImportError:  # pragma: no cover - depends on the install
                raise MemoryStoreError("Redis working memory needs the redis package: "
                                       "pip install 'hermes-fsm[redis]'") from None
            self._client = redis.Redis.from_url(self.url, socket_timeout=5,
                                                socket_connect_timeout=5)
        return self._client

    def _key(self, user_id: str, session_id: str, part: str) -> str:
        return f"{self.prefix}:{_h(user_id)}:{_h(session_id)}:{part}"

    async def _run(self, what: str, coro: Any) -> Any:
        try:
            return await coro
        except MemoryStoreError:
            raise
        except Exception as exc:  # redis.ConnectionError, TimeoutError, ResponseError …
            raise MemoryStoreError(
                f"{self.name}: {what} failed ({redact(f'{type(exc).__name__}: {exc}')}); "
                f"{_AFTER.get(what, '')}check that Redis is up") from exc

    async def record_turn(self, user_id: str, session_id: str, turn_id: str,
                          messages: Sequence[Mapping[str, Any]], slots: Mapping[str, Any],
                          window: int = 20) -> bool:
        """Append messages, set slots, refresh the TTL: one Lua script, idempotent per turn."""
        done = await self._run("turn write", self._redis().eval(
            *self._script_args(TurnWrite(user_id, session_id, turn_id, messages, slots,
                                         window))))
        return bool(done)

    async def record_turns(self, turns: Sequence[TurnWrite]) -> list[bool]:
        """Each turn's script in one ``MULTI``/``EXEC``: one round trip; a connection lost
        before ``EXEC`` reaches Redis runs none of them."""
        if not turns:
            return []
        pipe = self._redis().pipeline(transaction=True)
        for turn in turns:
            pipe.eval(*self._script_args(turn))
        done = await self._run("turn writes", pipe.execute())
        return [bool(d) for d in done]

    def _script_args(self, turn: TurnWrite) -> list[Any]:
        args: list[Any] = [_RECORD_TURN, 2, self._key(turn.user_id, turn.session_id, "recent"),
                           self._key(turn.user_id, turn.session_id, "slots"), turn.turn_id,
                           turn.window, max(1, int(self.ttl_s * 1000)), len(turn.messages)]
        args += [json.dumps(dict(m), ensure_ascii=False) for m in turn.messages]
        for name, value in turn.slots.items():
            args += [name, json.dumps(value, ensure_ascii=False)]
        return args

    async def recent(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        raw = await self._run("read", self._redis().lrange(
            self._key(user_id, session_id, "recent"), 0, -1))
        return [json.loads(r) for r in raw]

    async def slots(self, user_id: str, session_id: str) -> dict[str, Any]:
        raw = await self._run("read", self._redis().hgetall(
            self._key(user_id, session_id, "slots")))
        out = {}
        for k, v in raw.items():
            name = k.decode() if isinstance(k, bytes) else k
            if name != "_turn":
                out[name] = json.loads(v)
        return out

    async def keys(self, user_id: str) -> list[str]:
        """Every key of ``user_id`` in Redis (for checks and ``forget``)."""
        pattern = f"{_glob_escape(self.prefix)}:{_h(user_id)}:*"
        found = []
        async for key in self._redis().scan_iter(match=pattern, count=500):
            found.append(key.decode() if isinstance(key, bytes) else key)
        return found

    async def forget(self, user_id: str) -> int:
        keys = await self._run("scan", self.keys(user_id))
        if keys:
            await self._run("delete", self._redis().delete(*keys))
        return len({k.rsplit(":", 1)[0] for k in keys})

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


_RECORD_TURN = """
if redis.call('HGET', KEYS[2], '_turn') == ARGV[1] then return 0 end
local n = tonumber(ARGV[4])
for i = 1, n do redis.call('RPUSH', KEYS[1], ARGV[4 + i]) end
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
redis.call('HSET', KEYS[2], '_turn', ARGV[1])
for i = 5 + n, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"""


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)
