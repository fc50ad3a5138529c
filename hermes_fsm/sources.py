"""Injectable sources of time and identity.

Every event carries a time and every turn an id; both come from here, so a test (or a
replay) can swap in deterministic sources and get byte-stable event streams.

>>> ids = SequentialIds()
>>> ids.new("turn"), ids.new("turn")
('turn-000001', 'turn-000002')
>>> clock = FixedClock()
>>> clock.now().isoformat(), clock.now().isoformat()
('2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00.001000+00:00')
"""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FixedClock", "IdFactory", "SequentialIds", "SystemClock", "UuidIds"]


@runtime_checkable
class Clock(Protocol):
    """Gives the current time as an aware UTC datetime."""

    def now(self) -> datetime: ...


@runtime_checkable
class IdFactory(Protocol):
    """Makes a new unique id; ``prefix`` names what the id is for (``turn``, ``call`` …)."""

    def new(self, prefix: str) -> str: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that starts at ``start`` and advances ``step`` on every reading.

    Args:
        start: first time returned (default 2026-01-01T00:00:00Z).
        step: how far each reading advances (default 1 ms).
    """

    def __init__(
        self,
        start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
        step: timedelta = timedelta(milliseconds=1),
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("FixedClock needs an aware datetime; pass tzinfo=UTC")
        self._next = start
        self._step = step

    def now(self) -> datetime:
        current = self._next
        self._next = current + self._step
        return current

    def advance(self, delta: timedelta) -> None:
        """Jump ``delta`` ahead (tests of windows and expiry, without sleeping)."""
        self._next += delta


class UuidIds:
    """Random ids: ``<prefix>-<32 hex digits>`` (128 random bits, like a uuid4)."""

    def new(self, prefix: str) -> str:
        return f"{prefix}-{os.urandom(16).hex()}"


class SequentialIds:
    """Deterministic ids: ``<prefix>-000001``, counting per prefix."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def new(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}-{next(counter):06d}"
