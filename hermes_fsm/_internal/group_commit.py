"""Group commit: writes waiting at the same moment go to the database as one batch.

Every caller awaits its own write, so a step still starts only after its write is stored;
but the writes of many sessions that wait together share one round trip and one commit.
No timer is involved: while a batch is in flight the next one gathers.

Up to ``max_in_flight`` batches are written at once. When many sessions wait at the
same moment, what waits is shared out among the free writers — two batches go out
together rather than one, so the database works on one while this process handles the
results of the other — but a batch smaller than ``min_batch`` is not written beside
another: it waits for the next write, since every write costs a commit (with
``synchronous_commit``, a flush of the log to disk).

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
        min_batch: the fewest items worth a write while another batch is being written.

    Attributes:
        batches, items: how many batches were written, with how many items in all.
    """

    def __init__(self, run: Callable[[list[T]], Awaitable[list[R | BaseException]]],
                 key: Callable[[T], str], max_in_flight: int = 2, min_batch: int = 1) -> None:
        self._run, self._key, self._max = run, key, max(1, max_in_flight)
        self._min_batch = max(1, min_batch)
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._in_flight = 0  # drain tasks
        self._writing = 0  # batches being written
        self._tasks: set[asyncio.Task[None]] = set()
        self.batches = 0
        self.items = 0

    async def submit(self, item: T) -> R:
        """Write ``item`` with whatever else is waiting; its result (or its exception)."""
        return await self.submit_nowait(item)

    def submit_nowait(self, item: T) -> asyncio.Future[R]:
        """Queue ``item`` now (behind what its key already has waiting); the future of its
        result, for a caller that need not wait for it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if self._in_flight < self._max:
            self._in_flight += 1
            task = loop.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return future

    async def _drain(self) -> None:
        try:
            while self._pending:
                pending = self._pending
                if self._writing and len(pending) < self._min_batch:
                    return  # too few for a write of their own: the busy writer takes them next
                share = len(pending)
                idle = self._in_flight - self._writing  # writers free to take some, this one too
                if not self._writing and idle > 1 and share >= 2 * self._min_batch:
                    share = -(-share // idle)  # shared out evenly
                key_of = self._key
                keys = [key_of(item) for item, _ in pending]
                taken: list[tuple[T, asyncio.Future[R]]]
                rest: list[tuple[T, asyncio.Future[R]]]
                if share == len(pending) and len(set(keys)) == len(keys):
                    taken, rest = pending, []  # the usual case: all of it, one item a key
                else:
                    taken, rest = [], []
                    seen: set[str] = set()
                    for entry, key in zip(pending, keys, strict=True):
                        if key in seen or len(taken) >= share:
                            rest.append(entry)
                        else:
                            taken.append(entry)
                            seen.add(key)
                self._pending = rest
                self.batches += 1
                self.items += len(taken)
                self._writing += 1
                try:
                    await self._write(taken)
                finally:
                    self._writing -= 1
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
