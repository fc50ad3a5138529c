"""Background retries of memory commits that failed while the answer was already out."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from hermes_fsm.errors import MemoryStoreError

__all__ = ["BackgroundCommits"]


class BackgroundCommits:
    """Retries failed commits on the event loop, off the turn's path.

    Args:
        attempts: retries after the failed first attempt.
        delay_s: wait before the first retry; doubles each time.
        drain_timeout_s: how long :meth:`drain` waits at most.
    """

    def __init__(self, attempts: int = 3, delay_s: float = 0.5,
                 drain_timeout_s: float = 30.0) -> None:
        self.attempts, self.delay_s, self.drain_timeout_s = attempts, delay_s, drain_timeout_s
        self._tasks: set[asyncio.Task[Any]] = set()

    def retry(self, commit: Callable[[], Awaitable[Any]],
              on_success: Callable[[int, Any], None],
              on_failure: Callable[[int, MemoryStoreError], None]) -> asyncio.Task[Any]:
        """Run ``commit`` again up to ``attempts`` times; report how it ended.

        ``on_success(attempt, result)`` or ``on_failure(attempts, last_error)`` is called
        once (attempts count the first, failed one: the first retry is attempt 2).
        """

        async def run() -> None:
            last: MemoryStoreError | None = None
            for n in range(self.attempts):
                await asyncio.sleep(self.delay_s * (2 ** n))
                try:
                    result = await commit()
                except MemoryStoreError as exc:
                    last = exc
                    continue
                on_success(n + 2, result)
                return
            assert last is not None
            on_failure(self.attempts + 1, last)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def pending(self) -> int:
        """Commits still being retried."""
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for pending retries (at most ``drain_timeout_s``; the rest are cancelled)."""
        if not self._tasks:
            return
        tasks = list(self._tasks)
        _, late = await asyncio.wait(tasks, timeout=self.drain_timeout_s)
        for task in late:
            task.cancel()
