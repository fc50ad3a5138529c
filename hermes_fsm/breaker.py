"""Circuit breakers: stop calling a tool that keeps failing, and tell planning why.

The executor records every call's outcome; planning asks :meth:`CircuitBreaker.problem`
and neither offers nor accepts a tool whose breaker is open. :class:`WindowBreaker`
keeps a window of recent outcomes per tool in process; another implementation (fed by
the experience log) only has to satisfy the :class:`CircuitBreaker` protocol.

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
from typing import Protocol, runtime_checkable

__all__ = ["CircuitBreaker", "NoBreaker", "WindowBreaker"]


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


class NoBreaker:
    """A breaker that never opens."""

    def problem(self, tool: str) -> str | None:
        return None

    def any_open(self) -> bool:
        return False

    def record(self, tool: str, ok: bool) -> None:
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
