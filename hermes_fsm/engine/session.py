"""Sessions: a user's conversation, its position in the graph, and its event log.

Creating one is a few attribute writes: no machine is built per session (see
:mod:`hermes_fsm.graph.machine`).

The in-process event log keeps each turn's events as one JSON array (bytes), not as live
objects:
tens of events per turn kept as objects would make Python's garbage collector rescan an
ever-growing heap (measured: more than half the engine's time after a few thousand
turns), and JSON is what recordings and durable stores hold anyway. Reading the log
parses the lines back into events. A session made with ``log=False`` keeps no log at all
(an orchestrator's ``event_log=False``: for callers that read each turn's events from its
result, its sinks or a durable store, such as a replay rerun).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from pydantic_core import from_json, to_json

from hermes_fsm.conversation.graph import Conversation
from hermes_fsm.events.model import EVENTS_ADAPTER, Event, EventList

__all__ = ["Session", "SessionCache"]


class Session:
    """One conversation.

    Attributes:
        session_id: the session's id (not the user's).
        user_id: the user it belongs to.
        state: the graph state it is in (the initial state between turns).
        seq: the sequence number of its last event (events are numbered from 1).
        epoch: its claim in a durable store (0 without one; see :mod:`hermes_fsm.engine.durable`).
        events: its event log, in order.
        history: its messages (``role``, ``content``), oldest first: the sliding window.
        summary: the rolling summary of the messages that left the window (see
            :mod:`hermes_fsm.engine.context`; "" until the first fold).
        conversation: its conversation graph and pending tasks
            (:class:`~hermes_fsm.conversation.graph.Conversation`; ``None`` until the first
            ``graph_updated`` event), the fold of its ``graph_updated`` events.
        late: late events of a finished turn (:meth:`TurnContext.emit_late`) waiting for
            the running turn to end before they are numbered (no store; see
            :mod:`hermes_fsm.engine.memory_handlers`).

    Args:
        log: keep the event log (``False``: :meth:`record` drops each turn's events, and
            the log reads as empty).
    """

    __slots__ = ("_lock", "_log", "busy", "conversation", "epoch", "history", "late", "seq",
                 "session_id", "state", "summary", "user_id")

    def __init__(self, session_id: str, user_id: str, state: str, log: bool = True) -> None:
        self.session_id = session_id
        self.user_id = user_id
        self.state = state
        self.seq = 0
        self.epoch = 0
        # (first seq, last seq, JSON array) per turn; None: no log kept
        self._log: list[tuple[int, int, bytes]] | None = [] if log else None
        self.history: list[dict[str, str]] = []
        self.summary = ""
        self.conversation: Conversation | None = None
        self.busy = False
        # waiting for a seq; a list only once one is late (most sessions never have one)
        self.late: list[tuple[type[Event], dict[str, Any]]] | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def lock(self) -> asyncio.Lock:
        """The lock that queues turns (created on first use, so sessions stay cheap)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def __repr__(self) -> str:
        return f"Session({self.session_id!r}, user={self.user_id!r}, state={self.state!r})"

    def remember(self, role: str, content: str, window: int) -> None:
        """Append a message to the history, keeping the last ``window`` messages."""
        self.history.append({"role": role, "content": content})
        if len(self.history) > window:
            del self.history[: len(self.history) - window]

    def record(self, events: EventList) -> None:
        """Append a turn's events to the log (the engine does this as a turn ends)."""
        if len(events) and self._log is not None:
            first, last = events.data[0]["seq"], events.last_seq()
            self._log.append((first, last, events.to_json()))

    @property
    def events(self) -> list[Event]:
        """The whole event log, parsed."""
        return self.events_after(0)

    def events_after(self, seq: int) -> list[Event]:
        """The recorded events with a sequence number above ``seq`` (numbered from 1)."""
        out: list[Event] = []
        for _, last, blob in self._log or ():
            if last > seq:
                out.extend(e for e in EVENTS_ADAPTER.validate_json(blob) if e.seq > seq)
        return out

    def event_lines(self) -> list[bytes]:
        """The log as JSON lines, one event each (what a recording holds)."""
        return [to_json(item) for _, _, blob in self._log or () for item in from_json(blob)]

    def turn_events(self, turn_id: str) -> list[Event]:
        """The events of one turn of this session."""
        return [e for e in self.events if e.turn_id == turn_id]

    def snapshot(self) -> dict[str, Any]:
        """A plain-data view, for printing and tests."""
        return {"session_id": self.session_id, "user_id": self.user_id, "state": self.state,
                "seq": self.seq, "messages": len(self.history)}


class SessionCache:
    """The sessions an orchestrator holds in this process, by id.

    Without a session store this is where sessions live; with one it caches the store's
    sessions: the durable layer (:mod:`hermes_fsm.engine.durable`) adds each session it
    rebuilds from the store and drops a copy the store has moved past.
    ``Orchestrator.sessions()`` is a read-only view of it (:attr:`view`).

    Args:
        sessions: the dict it holds the sessions in (default: a new one). The orchestrator
            passes its own, which it reads directly at every turn.

    Attributes:
        get: ``get(session_id)``, the cached session or ``None``.
        view: a read-only, live view of the cached sessions by id.
    """

    __slots__ = ("_by_id", "get", "view")

    def __init__(self, sessions: dict[str, Session] | None = None) -> None:
        self._by_id: dict[str, Session] = sessions if sessions is not None else {}
        self.get: Callable[[str], Session | None] = self._by_id.get  # no Python call
        self.view: Mapping[str, Session] = MappingProxyType(self._by_id)

    def add(self, session: Session) -> Session:
        """Cache ``session`` (replacing a cached one of the same id); returns it."""
        self._by_id[session.session_id] = session
        return session

    def discard(self, session_id: str, session: Session | None = None) -> None:
        """Drop the cached session ``session_id`` if there is one — with ``session``,
        only if that very object is the cached one (a newer copy stays)."""
        if session is None:
            self._by_id.pop(session_id, None)
        elif self._by_id.get(session_id) is session:
            del self._by_id[session_id]

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)
