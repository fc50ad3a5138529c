"""The working tier: a session's hot context (recent messages, slots of the task in progress).

Everything expires ``ttl_s`` after its last write (default 15 minutes).
:class:`InProcessWorkingMemory` is the embedded default; :mod:`.redis_working` the real one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["DEFAULT_TTL_S", "InProcessWorkingMemory", "TurnWrite", "WorkingMemory"]

DEFAULT_TTL_S = 15 * 60.0


@dataclass(frozen=True, slots=True)
class TurnWrite:
    """One turn's write to working memory (the arguments of ``record_turn``)."""

    user_id: str
    session_id: str
    turn_id: str
    messages: Sequence[Mapping[str, Any]]
    slots: Mapping[str, Any]
    window: int = 20


@runtime_checkable
class WorkingMemory(Protocol):
    """Per (user, session): a bounded window of recent messages and a dict of slots."""

    name: str
    ttl_s: float

    async def record_turn(self, user_id: str, session_id: str, turn_id: str,
                          messages: Sequence[Mapping[str, Any]], slots: Mapping[str, Any],
                          window: int = 20) -> bool:
        """Append a turn's messages (keeping the last ``window``), set slots, refresh the TTL.

        Idempotent per turn: recording ``turn_id`` again changes nothing and returns False.
        All or nothing.
        """
        ...

    async def record_turns(self, turns: Sequence[TurnWrite]) -> list[bool]:
        """:meth:`record_turn` for several turns at once (one round trip where the backend
        can), all or nothing; one flag per turn (False: it was recorded already)."""
        ...

    async def recent(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """The recent messages, oldest first ([] once expired)."""
        ...

    async def slots(self, user_id: str, session_id: str) -> dict[str, Any]:
        """The slots of the task in progress ({} once expired)."""
        ...

    async def forget(self, user_id: str) -> int:
        """Drop every session of ``user_id``; returns how many sessions were dropped."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class InProcessWorkingMemory:
    """Working memory in a dict, honouring the TTL on every read.

    Args:
        ttl_s: seconds after the last write before a session's context expires.
        clock: monotonic seconds (inject one to test expiry without sleeping).
    """

    name = "in-process working memory"

    def __init__(self, ttl_s: float = DEFAULT_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._data: dict[tuple[str, str], tuple[float, list[dict[str, Any]], dict[str, Any]]] = {}

    def _live(self, user_id: str, session_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        entry = self._data.get((user_id, session_id))
        if entry is None or entry[0] <= self._clock():
            self._data.pop((user_id, session_id), None)
            return [], {}
        return entry[1], entry[2]

    async def record_turn(self, user_id: str, session_id: str, turn_id: str,
                          messages: Sequence[Mapping[str, Any]], slots: Mapping[str, Any],
                          window: int = 20) -> bool:
        recent, current = self._live(user_id, session_id)
        if current.get("_turn") == turn_id:
            return False
        recent = [*recent, *(dict(m) for m in messages)][-window:]
        self._data[(user_id, session_id)] = (self._clock() + self.ttl_s, recent,
                                             {**current, **slots, "_turn": turn_id})
        return True

    async def record_turns(self, turns: Sequence[TurnWrite]) -> list[bool]:
        return [await self.record_turn(t.user_id, t.session_id, t.turn_id, t.messages,
                                       t.slots, t.window) for t in turns]

    async def recent(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        return list(self._live(user_id, session_id)[0])

    async def slots(self, user_id: str, session_id: str) -> dict[str, Any]:
        return {k: v for k, v in self._live(user_id, session_id)[1].items() if k != "_turn"}

    async def forget(self, user_id: str) -> int:
        mine = [k for k in self._data if k[0] == user_id]
        for k in mine:
            del self._data[k]
        return len(mine)

    async def close(self) -> None:
        return None

    def count(self, user_id: str) -> int:
        """Live sessions of ``user_id``."""
        return sum(1 for k in list(self._data) if k[0] == user_id and any(self._live(*k)))
