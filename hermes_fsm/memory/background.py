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
        self._users: dict[asyncio.Task[Any], str] = {}  # task → the user it commits for

    def retry(self, commit: Callable[[], Awaitable[Any]],
              on_success: Callable[[int, Any], None],
              on_failure: Callable[[int, MemoryStoreError], None], *,
              user_id: str | None = None) -> asyncio.Task[Any]:
        """Run ``commit`` again up to ``attempts`` times; report how it ended.

        ``on_success(attempt, result)`` or ``on_failure(attempts, last_error)`` is called
        once (attempts count the first, failed one: the first retry is attempt 2).
        ``user_id``: whose memory it writes, so that :meth:`cancel_user` can stop it.
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
        task.add_done_callback(self._done)
        if user_id is not None:
            self._users[task] = user_id
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        self._users.pop(task, None)

    async def cancel_user(self, user_id: str) -> int:
        """Cancel the pending retries of ``user_id``'s commits and wait until they have
        stopped (a write in flight is cut off before this returns), so that nothing is
        written for her afterwards; returns how many were cancelled. Neither callback
        of a cancelled retry is called."""
        tasks = [t for t, u in self._users.items() if u == user_id and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

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
