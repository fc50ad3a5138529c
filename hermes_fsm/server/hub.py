"""Running turns and their live event streams, for the ASGI app.

A turn started over HTTP runs as its own asyncio task, not tied to the request: a client
that disconnects mid-stream neither cancels nor corrupts it. The task carries its
:class:`RunningTurn` in a context variable; :class:`TurnHub` is an event sink (sinks are
called synchronously by ``TurnContext.emit``) that hands each event to the running turn of
the task that emitted it — so a stream can only ever see its own session's events, even
with many turns in flight. It is a data sink (see :mod:`hermes_fsm.events.sinks`): it keeps each
event's field dict, and an event object is built only if someone reads one (a stream
writes its frames from the dicts) — a JSON turn nobody streams builds none.

A running turn keeps the events it has emitted so far, so a stream that joins late (or
resumes with ``after=SEQ``) gets them all: the session's log holds a turn's events only
once the turn is over (see :func:`read_events`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from hermes_fsm.engine.session import Session
from hermes_fsm.engine.turn import TurnResult
from hermes_fsm.errors import HermesError
from hermes_fsm.events.model import Event, EventList

__all__ = ["EventLogs", "RunningTurn", "Subscription", "TurnHub", "TurnRunner", "read_events"]

log = logging.getLogger("hermes_fsm.server")

_CURRENT: contextvars.ContextVar[RunningTurn | None] = contextvars.ContextVar(
    "hermes_fsm_running_turn", default=None)


class EventLogs(Protocol):
    """Where the server reads sessions' event logs (an orchestrator is one)."""

    def sessions(self) -> Mapping[str, Session]: ...


class TurnRunner(Protocol):
    """What the hub runs turns on (an orchestrator is one)."""

    async def run_turn(self, session_id: str | None, text: str,
                       user_id: str = ..., *, domain: str | None = ...) -> TurnResult: ...


def read_events(orchestrator: EventLogs, session_id: str, after: int) -> list[Event] | None:
    """The recorded events of a session with ``seq > after``; ``None`` for an unknown session.

    The one read path of the server into the session log (swap it for a durable store here).
    """
    session = orchestrator.sessions().get(session_id)
    if session is None:
        return None
    events: list[Event] = session.events_after(after)
    return events


class Subscription:
    """A reader of a running turn's events, from where it joined to the turn's end.

    :meth:`ready` takes every event emitted since the previous call; :meth:`wait` waits
    until there is one (or the turn is over). A turn emits its events in bursts between
    awaits, and a reader woken by the first event of a burst takes the whole burst:
    publishing costs an append and, once per burst, a wake-up — no per-event queue.
    """

    def __init__(self, running: RunningTurn, start: int) -> None:
        self.running = running
        self.closed = False
        self._cursor = start
        self._waiter: asyncio.Future[None] | None = None

    def ready(self) -> list[Event]:
        """The events not read yet (possibly none); they count as read."""
        events = self.running.events
        batch: list[Event] = events[self._cursor:]
        self._cursor = len(events)
        return batch

    def ready_data(self) -> list[tuple[type[Any], dict[str, Any]]]:
        """The same as :meth:`ready`, as ``(event class, field dict)`` pairs (no objects
        built; see :func:`hermes_fsm.events.sinks.event_json` for their JSON)."""
        events = self.running.events
        start, self._cursor = self._cursor, len(events)
        return events.pairs(start)

    async def wait(self, timeout_s: float | None = None) -> None:
        """Return once an event is unread, the turn is over, or the subscription closed.

        Raises:
            TimeoutError: none of these within ``timeout_s``.
        """
        if (self._cursor < len(self.running.events) or self.running.finished
                or self.closed):
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def wake(self) -> None:
        """Wake a reader waiting in :meth:`wait` (new events, the end, or closing)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """Stop reading (the client went away)."""
        self.closed = True
        self.running.unsubscribe(self)
        self.wake()


def _expire(waiter: asyncio.Future[None]) -> None:
    """A :meth:`Subscription.wait` ran out of time (cheaper than ``asyncio.wait_for``)."""
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class RunningTurn:
    """A turn started by the server: its task, its events so far, its subscribers.

    Attributes:
        session_id: the session the turn runs on.
        events: the events emitted so far, in order (an :class:`~hermes_fsm.events.model.EventList`:
            each becomes an object when read).
        task: the task running the turn.
        result: the turn's result once it is over (``None`` before, or if it raised).
        error: what the turn raised instead (e.g. :class:`SessionBusy`).
        finished: whether the turn is over.
    """

    def __init__(self, session_id: str, hub: TurnHub | None = None) -> None:
        self.session_id = session_id
        self.hub = hub
        self.events = EventList()
        self.task: asyncio.Task[TurnResult] | None = None
        self.result: TurnResult | None = None
        self.error: BaseException | None = None
        self.finished = False
        self._subscribers: list[Subscription] = []

    def subscribe(self, after: int = 0) -> Subscription:
        """A :class:`Subscription` to this turn's events with ``seq > after`` (those so far
        first)."""
        start = 0
        pairs = self.events.pairs()
        while start < len(pairs) and pairs[start][1]["seq"] <= after:
            start += 1
        subscription = Subscription(self, start)
        if not self.finished:
            self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop waking ``subscription`` (a client went away)."""
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def publish(self, event: Event) -> None:
        """Keep ``event`` and wake every subscriber (once per burst: a woken one is skipped)."""
        self.events.add(type(event), event.__dict__, event)
        for subscription in self._subscribers:
            subscription.wake()

    def publish_data(self, kind: type[Any], data: dict[str, Any]) -> None:
        """:meth:`publish` for an event given as its class and field dict."""
        self.events.add(kind, data)
        for subscription in self._subscribers:
            waiter = subscription._waiter  # subscription.wake(), inline: once per event
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def finish(self) -> None:
        """Mark the turn over and wake every subscriber (each reads what is left)."""
        self.finished = True
        for subscription in self._subscribers:
            subscription.wake()
        self._subscribers.clear()


class TurnHub:
    """Starts turns as tasks and routes their events to live streams.

    Attach it as a sink of the orchestrator (``create_app`` does). ``running`` maps a
    session id to the turn running on it, from the turn's first event to its end.
    """

    def __init__(self, orchestrator: TurnRunner) -> None:
        self.orchestrator = orchestrator
        self.running: dict[str, RunningTurn] = {}
        self._tasks: set[asyncio.Task[TurnResult]] = set()

    def emit(self, event: Event) -> None:
        """Sink entry point (an event object): give ``event`` to the running turn of the
        emitting task."""
        running = _CURRENT.get()
        if (running is None or running.hub is not self or running.finished
                or running.session_id != event.session_id):
            return  # not a turn of this hub's (another app on the same orchestrator)
        if not running.events:
            self.running[running.session_id] = running
        running.publish(event)

    def emit_data(self, kind: type[Any], data: dict[str, Any]) -> None:
        """Data sink entry point (what a turn calls): :meth:`emit` without the object."""
        running = _CURRENT.get()
        if (running is None or running.hub is not self or running.finished
                or running.session_id != data["session_id"]):
            return
        if not running.events:
            self.running[running.session_id] = running
        running.publish_data(kind, data)

    def start(self, session_id: str, text: str, user_id: str,
              domain: str | None = None) -> RunningTurn:
        """Start a turn in its own task (it outlives the request that asked for it);
        ``domain``: the memory domain a new session declares."""
        running = RunningTurn(session_id, self)
        context = contextvars.copy_context()
        context.run(_CURRENT.set, running)
        task = asyncio.get_running_loop().create_task(
            self._run(running, text, user_id, domain), context=context)
        running.task = task
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return running

    async def _run(self, running: RunningTurn, text: str, user_id: str,
                   domain: str | None = None) -> TurnResult:
        """The turn, then its end published in the same step as its last event (so a
        stream sends the last burst and the result together)."""
        try:
            result: TurnResult = await self.orchestrator.run_turn(
                running.session_id, text, user_id=user_id, domain=domain)
        except asyncio.CancelledError:
            running.error = asyncio.CancelledError()
            raise
        except BaseException as error:
            running.error = error
            if not isinstance(error, HermesError):  # an engine bug: never lose it
                log.error("turn on session %s failed", running.session_id, exc_info=error)
            raise
        else:
            running.result = result
            return result
        finally:
            if self.running.get(running.session_id) is running:
                del self.running[running.session_id]
            running.finish()

    def _done(self, task: asyncio.Task[TurnResult]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: kept on the RunningTurn, logged if a bug

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
