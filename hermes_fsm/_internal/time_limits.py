"""Time limits for coroutines, on one loop timer per event loop.

``asyncio.timeout`` schedules a loop timer for every block it guards and cancels it on
the way out: a ``TimerHandle``, a push on the loop's heap (compared by a Python
``__lt__``) and a context manager, about 7 µs on the bench machine, paid by every state
of a turn and every tool call that awaits something. Here a coroutine is first stepped
eagerly (:func:`within`): one that finishes without suspending cannot run out of time and
needs no timer at all. One that suspends gets an entry on its loop's :class:`_Timers`, a
heap of plain tuples with a single loop timer armed for the earliest live entry; an entry
whose coroutine finished is only marked (the heap is compacted when half of it is such
entries).

What happens when a limit runs out is what ``asyncio.timeout`` does, step for step: the
task is cancelled, and the ``CancelledError`` that comes out of the coroutine becomes
``TimeoutError`` unless another cancellation of the task was requested meanwhile
(``Task.cancelling``/``uncancel``: nested limits and an outside ``task.cancel()`` behave
as they do with nested ``asyncio.timeout`` blocks). ``tests/test_time_limits.py`` holds
the two to the same outcomes.

One difference, when the loop lags behind its timers: this timer ends every limit due by
the time it runs, where ``asyncio.timeout``'s timers end those due when the loop last read
its clock. Either way a limit ends only once its time has passed; under heavy lag, which
of the overdue coroutines still get to finish differs (a coroutine whose result came in
the same turn of the loop may be ended here and not there).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import types
import weakref
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any

__all__ = ["resume", "resume_within", "within"]


class _Limit:
    """One coroutine's time limit: its task, the task's cancellation count when the limit
    started, and whether it ran out (``expired``) or was taken off (``done``)."""

    __slots__ = ("cancelling", "done", "expired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task: asyncio.Task[Any] | None = task
        self.cancelling = task.cancelling()
        self.expired = False
        self.done = False


class _Timers:
    """The time limits running on one event loop: a heap of ``(when, n, limit)`` and one
    loop timer, armed for the earliest entry whose coroutine is still running."""

    __slots__ = ("armed", "count", "dead", "handle", "heap", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)  # _TIMERS holds this by the loop: it must not hold it
        self.heap: list[tuple[float, int, _Limit]] = []
        # the loop timer, held weakly: a closed loop drops it and is let go with it
        self.handle: weakref.ref[asyncio.TimerHandle] | None = None
        self.armed = math.inf  # when the loop timer fires (inf: none armed)
        self.dead = 0  # entries in the heap whose limit was taken off
        self.count = itertools.count()  # ties on `when` never compare the limits

    def start(self, loop: asyncio.AbstractEventLoop, seconds: float,
              task: asyncio.Task[Any]) -> _Limit:
        """Start a limit of ``seconds`` for ``task``, running now on ``loop`` (this one's)."""
        limit = _Limit(task)
        when = loop.time() + seconds
        heapq.heappush(self.heap, (when, next(self.count), limit))
        if when < self.armed:
            self._arm(loop, when)
        return limit

    def end(self, limit: _Limit) -> bool:
        """Take ``limit`` off; whether it ran out and its task has no other cancellation
        requested (then the ``CancelledError`` was the limit's: raise ``TimeoutError``)."""
        limit.done = True
        task, limit.task = limit.task, None  # a finished task is not kept alive by the heap
        if limit.expired:  # it left the heap when it ran out
            assert task is not None
            return task.uncancel() <= limit.cancelling
        self.dead += 1
        heap = self.heap
        if self.dead > 64 and self.dead * 2 > len(heap):
            heap[:] = [entry for entry in heap if not entry[2].done]
            heapq.heapify(heap)
            self.dead = 0
        return False

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        armed = self.handle() if self.handle is not None else None
        if armed is not None:
            armed.cancel()
        self.handle = weakref.ref(loop.call_at(when, self._fire))
        self.armed = when

    def _fire(self) -> None:
        """The loop timer: cancel the tasks whose limit ran out, arm for the next one."""
        loop = asyncio.get_running_loop()
        due = max(self.armed, loop.time())  # the loop judged `armed` to have come
        self.handle = None
        self.armed = math.inf
        heap = self.heap
        while heap:
            when, _, limit = heap[0]
            if limit.done:  # taken off: dropped here whatever its time
                heapq.heappop(heap)
                self.dead -= 1
                continue
            if when > due:
                self._arm(loop, when)
                return
            heapq.heappop(heap)
            limit.expired = True
            assert limit.task is not None
            limit.task.cancel()


_TIMERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timers] = \
    weakref.WeakKeyDictionary()
_last: list[_Timers | None] = [None]  # the last loop's, looked up without the dictionary


def _timers(loop: asyncio.AbstractEventLoop) -> _Timers:
    timers = _last[0]
    if timers is None or timers.loop() is not loop:
        timers = _TIMERS.get(loop)
        if timers is None:
            timers = _TIMERS[loop] = _Timers(loop)
        _last[0] = timers
    return timers


@types.coroutine
def resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Go on running ``coro``, which was stepped by hand and yielded ``yielded``, inside
    the current task (what ``await coro`` would have done after that first step)."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as done:
                return done.value


async def resume_within(coro: Coroutine[Any, Any, Any], yielded: Any,
                        seconds: float | None) -> Any:
    """:func:`resume` under a limit of ``seconds`` from now (``None``: no limit).

    Raises:
        TimeoutError: the limit ran out (the coroutine was cancelled).
    """
    if seconds is None:
        return await resume(coro, yielded)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task(loop)
    if task is None:
        raise RuntimeError("a time limit needs a task: await it inside one")
    timers = _timers(loop)
    limit = timers.start(loop, seconds, task)
    try:
        result = await resume(coro, yielded)
    except asyncio.CancelledError as exc:
        if timers.end(limit):
            raise TimeoutError from exc
        raise
    except BaseException:
        timers.end(limit)
        raise
    timers.end(limit)
    return result


async def within(awaitable: Awaitable[Any], seconds: float | None) -> Any:
    """Await ``awaitable`` under a limit of ``seconds`` (``None``: no limit), as
    ``async with asyncio.timeout(seconds): return await awaitable`` does; a coroutine
    that finishes without suspending runs with no timer.

    Raises:
        TimeoutError: the limit ran out (the awaitable was cancelled).
    """
    coro = awaitable if type(awaitable) is types.CoroutineType else _awaiting(awaitable)
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        return done.value
    return await resume_within(coro, yielded, seconds)


async def _awaiting(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
