"""Group commit: writes waiting at the same moment go to the database as one batch.

Every caller awaits its own write, so a step still starts only after its write is stored;
but the writes of many sessions that wait together share one round trip and one commit.
No timer is involved: while a batch is in flight the next one gathers.

>>> import asyncio
>>> async def demo():
...     sizes = []
...     async def run(items):
...         sizes.append(len(items))
...         await asyncio.sleep(0)
...         return [i * 2 for i in items]
...     group = GroupCommit(run, key=str, max_in_flight=1)
...     return await asyncio.gather(*(group.submit(i) for i in range(5))), sizes
>>> asyncio.run(demo())  # five callers waiting together: one batch of five
([0, 2, 4, 6, 8], [5])
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    """Batches submitted items for ``run``.

    Args:
        run: writes a batch; returns, per item in order, its result or the exception to
            raise to its caller. An exception raised by ``run`` itself goes to every caller
            of the batch.
        key: items with the same key never share a batch (one write per session each).
        max_in_flight: how many batches may be written at once.
    """

    def __init__(self, run: Callable[[list[T]], Awaitable[list[R | BaseException]]],
                 key: Callable[[T], str], max_in_flight: int = 2) -> None:
        self._run, self._key, self._max = run, key, max_in_flight
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: T) -> R:
        """Write ``item`` with whatever else is waiting; its result (or its exception)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if self._in_flight < self._max:
            self._in_flight += 1
            task = loop.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                taken: list[tuple[T, asyncio.Future[R]]] = []
                rest: list[tuple[T, asyncio.Future[R]]] = []
                seen: set[str] = set()
                for entry in self._pending:
                    key = self._key(entry[0])
                    (rest if key in seen else taken).append(entry)
                    seen.add(key)
                self._pending = rest
                await self._write(taken)
        finally:
            self._in_flight -= 1

    async def _write(self, taken: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            outcomes = await self._run([item for item, _ in taken])
        except BaseException as exc:  # handed to every caller of the batch
            for _, future in taken:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), outcome in zip(taken, outcomes, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
