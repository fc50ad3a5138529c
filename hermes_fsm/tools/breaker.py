"""Circuit breakers: stop calling a tool that keeps failing, and tell planning why.

The executor records every call's outcome; planning asks :meth:`CircuitBreaker.problem`
and neither offers nor accepts a tool whose breaker is open. Before planning and before a
plan runs, :meth:`CircuitBreaker.refresh` lets a breaker catch up with shared state.
:class:`WindowBreaker` keeps a window of recent outcomes per tool in process;
:class:`ExperienceBreaker` adds what the experience log says about every session and
process (a tool that keeps failing anywhere trips it everywhere).

>>> now = [0.0]
>>> breaker = WindowBreaker(window=4, min_calls=4, failure_rate=0.5, cooldown_s=30,
...                         clock=lambda: now[0])
>>> for ok in (False, False, True, False):
...     breaker.record("flaky", ok)
>>> breaker.problem("flaky")
'circuit breaker open for flaky: 3 of the last 4 calls failed; retry after 30s'
>>> now[0] = 31.0
>>> breaker.problem("flaky") is None      # half-open: one call may test the tool
True
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.sources import Clock, SystemClock

__all__ = ["CircuitBreaker", "ExperienceBreaker", "NoBreaker", "WindowBreaker"]


@runtime_checkable
class CircuitBreaker(Protocol):
    """Decides whether a tool may be called, from the outcomes it was told about."""

    def problem(self, tool: str) -> str | None:
        """``None`` when ``tool`` may be called, else why its breaker is open."""
        ...

    def any_open(self) -> bool:
        """Whether some breaker is open (lets the catalog skip per-tool checks)."""
        ...

    def record(self, tool: str, ok: bool) -> None:
        """Tell the breaker how a call of ``tool`` ended."""
        ...

    async def refresh(self) -> None:
        """Catch up with outcomes recorded elsewhere (called before planning and execution)."""
        ...


class NoBreaker:
    """A breaker that never opens."""

    def problem(self, tool: str) -> str | None:
        return None

    def any_open(self) -> bool:
        return False

    def record(self, tool: str, ok: bool) -> None:
        return None

    async def refresh(self) -> None:
        return None


class WindowBreaker:
    """Opens when ``failure_rate`` of the last ``window`` calls of a tool failed.

    At least ``min_calls`` outcomes are needed before it opens. After ``cooldown_s`` it
    lets calls through again (half-open); a success closes it, a failure re-opens it.
    """

    def __init__(self, window: int = 10, min_calls: int = 5, failure_rate: float = 0.5,
                 cooldown_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.min_calls = min_calls
        self.failure_rate = failure_rate
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._outcomes: dict[str, deque[bool]] = {}
        self._opened: dict[str, tuple[float, str]] = {}

    def problem(self, tool: str) -> str | None:
        opened = self._opened.get(tool)
        if opened is None:
            return None
        at, why = opened
        if self._clock() - at >= self.cooldown_s:
            return None  # half-open: the next outcome decides
        return why

    def any_open(self) -> bool:
        return bool(self._opened)

    async def refresh(self) -> None:
        return None  # it knows only what this process told it

    def record(self, tool: str, ok: bool) -> None:
        outcomes = self._outcomes.get(tool)
        if outcomes is None:
            outcomes = self._outcomes[tool] = deque(maxlen=self.window)
        outcomes.append(ok)
        if ok:
            if tool in self._opened:  # a half-open test call passed: close, start afresh
                del self._opened[tool]
                outcomes.clear()
            return
        failed = outcomes.count(False)
        if tool in self._opened or (len(outcomes) >= self.min_calls
                                    and failed / len(outcomes) >= self.failure_rate):
            self._opened[tool] = (self._clock(), (
                f"circuit breaker open for {tool}: {failed} of the last {len(outcomes)} calls "
                f"failed; retry after {self.cooldown_s:g}s"))


class ExperienceBreaker:
    """A :class:`WindowBreaker` for this process, plus the experience log's failure rates.

    :meth:`refresh` reads every tool's calls and failures within ``window`` before now from
    ``outcomes`` (an experience log: all sessions and processes writing to it); a tool with
    at least ``min_calls`` calls of which at least ``failure_rate`` failed is open until
    enough of its failures leave the window. The log is read at most once per
    ``refresh_s`` of ``clock`` time; while it cannot be read, the last rates read hold.

    Args:
        outcomes: has ``async failure_rates(window, now) -> {tool: ToolHealth}``
            (:class:`~hermes_fsm.memory.experience.ToolOutcomes`).
        local: the in-process breaker (outcomes not yet in the log: a turn's calls are
            logged when it commits its memory).
        clock: the time the log's entries were stamped with (the orchestrator's clock).
    """

    def __init__(self, outcomes: Any, *, local: CircuitBreaker | None = None,
                 window: timedelta = timedelta(minutes=10), min_calls: int = 10,
                 failure_rate: float = 0.5, refresh_s: float = 5.0,
                 clock: Clock | None = None) -> None:
        self.outcomes = outcomes
        self.local: CircuitBreaker = local if local is not None else WindowBreaker()
        self.window, self.min_calls, self.failure_rate = window, min_calls, failure_rate
        self.refresh_s = refresh_s
        self.clock: Clock = clock or SystemClock()
        self.error: str | None = None  # why the last refresh could not read the log
        self._read_at: datetime | None = None
        self._opened: dict[str, str] = {}

    def problem(self, tool: str) -> str | None:
        return self.local.problem(tool) or self._opened.get(tool)

    def any_open(self) -> bool:
        return bool(self._opened) or self.local.any_open()

    def record(self, tool: str, ok: bool) -> None:
        self.local.record(tool, ok)

    async def refresh(self) -> None:
        await self.local.refresh()
        now = self.clock.now()
        if self._read_at is not None and (now - self._read_at).total_seconds() < self.refresh_s:
            return
        self._read_at = now  # turns refreshing meanwhile use what is known: one read at a time
        try:
            rates = await self.outcomes.failure_rates(self.window, now)
        except MemoryStoreError as exc:  # keep what was known; planning goes on
            self.error = str(exc)
            return
        self.error = None
        minutes = f"{self.window.total_seconds() / 60:g} min"
        self._opened = {
            tool: (f"circuit breaker open for {tool}: {h.failed} of its {h.calls} calls in "
                   f"the last {minutes} failed (experience log, all sessions); it closes "
                   "when fewer of its calls fail within that window")
            for tool, h in rates.items()
            if h.calls >= self.min_calls and h.failed >= self.failure_rate * h.calls}
