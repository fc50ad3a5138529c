"""Running turns and their live event streams, for the ASGI app.

A turn started over HTTP runs as its own asyncio task, not tied to the request: a client
that disconnects mid-stream neither cancels nor corrupts it. The task carries its
:class:`RunningTurn` in a context variable; :class:`TurnHub` is an event sink (sinks are
called synchronously by ``TurnContext.emit``) that hands each event to the running turn of
the task that emitted it — so a stream can only ever see its own session's events, even
with many turns in flight.

A running turn keeps the events it has emitted so far, so a stream that joins late (or
resumes with ``after=SEQ``) gets them all: the session's log holds a turn's events only
once the turn is over (see :func:`read_events`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

from ..errors import HermesError
from ..events import Event
from ..turn import TurnResult

__all__ = ["END", "RunningTurn", "TurnHub", "read_events"]

log = logging.getLogger("hermes_fsm.server")

END: Any = object()
"""Put on a subscriber's queue when its turn is over (result or error on the RunningTurn)."""

_CURRENT: contextvars.ContextVar[RunningTurn | None] = contextvars.ContextVar(
    "hermes_fsm_running_turn", default=None)


def read_events(orchestrator: Any, session_id: str, after: int) -> list[Event] | None:
    """The recorded events of a session with ``seq > after``; ``None`` for an unknown session.

    The one read path of the server into the session log (swap it for a durable store here).
    """
    session = orchestrator.sessions().get(session_id)
    if session is None:
        return None
    events: list[Event] = session.events_after(after)
    return events


class RunningTurn:
    """A turn started by the server: its task, its events so far, its subscribers.

    Attributes:
        session_id: the session the turn runs on.
        events: the events emitted so far, in order.
        task: the task running the turn.
        result: the turn's result once it is over (``None`` before, or if it raised).
        error: what the turn raised instead (e.g. :class:`SessionBusy`).
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events: list[Event] = []
        self.task: asyncio.Task[TurnResult] | None = None
        self.result: TurnResult | None = None
        self.error: BaseException | None = None
        self.finished = False
        self._subscribers: list[asyncio.Queue[Any]] = []

    def subscribe(self, after: int = 0) -> asyncio.Queue[Any]:
        """A queue that gets this turn's events with ``seq > after`` (those so far first),
        then :data:`END`."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for event in self.events:
            if event.seq > after:
                queue.put_nowait(event)
        if self.finished:
            queue.put_nowait(END)
        else:
            self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Any]) -> None:
        """Stop feeding ``queue`` (a client went away)."""
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    def publish(self, event: Event) -> None:
        """Keep ``event`` and hand it to every subscriber."""
        self.events.append(event)
        for queue in self._subscribers:
            queue.put_nowait(event)

    def finish(self) -> None:
        """Mark the turn over and end every subscription."""
        self.finished = True
        for queue in self._subscribers:
            queue.put_nowait(END)
        self._subscribers.clear()


class TurnHub:
    """Starts turns as tasks and routes their events to live streams.

    Attach it as a sink of the orchestrator (``create_app`` does). ``running`` maps a
    session id to the turn running on it, from the turn's first event to its end.
    """

    def __init__(self, orchestrator: Any) -> None:
        self.orchestrator = orchestrator
        self.running: dict[str, RunningTurn] = {}
        self._tasks: set[asyncio.Task[TurnResult]] = set()

    def emit(self, event: Event) -> None:
        """Sink entry point: give ``event`` to the running turn of the emitting task."""
        running = _CURRENT.get()
        if running is None or running.session_id != event.session_id or running.finished:
            return
        if not running.events:
            self.running[running.session_id] = running
        running.publish(event)

    def start(self, session_id: str, text: str, user_id: str) -> RunningTurn:
        """Start a turn in its own task (it outlives the request that asked for it)."""
        running = RunningTurn(session_id)
        context = contextvars.copy_context()
        context.run(_CURRENT.set, running)
        coro = self.orchestrator.run_turn(session_id, text, user_id=user_id)
        task = asyncio.get_running_loop().create_task(coro, context=context)
        running.task = task
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._finished(running, t))
        return running

    def _finished(self, running: RunningTurn, task: asyncio.Task[TurnResult]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            running.error = asyncio.CancelledError()
        else:
            error = task.exception()
            if error is None:
                running.result = task.result()
            else:
                running.error = error
                if not isinstance(error, HermesError):  # an engine bug: never lose it
                    log.error("turn on session %s failed", running.session_id, exc_info=error)
        if self.running.get(running.session_id) is running:
            del self.running[running.session_id]
        running.finish()

    async def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for running turns to end; cancel those that do not."""
        tasks = list(self._tasks)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()  # a cancelled turn still ends in the initial state
        if pending:
            await asyncio.wait(pending)
