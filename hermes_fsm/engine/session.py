"""Sessions: a user's conversation, its position in the graph, and its event log.

Creating one is a few attribute writes: no machine is built per session (see
:mod:`hermes_fsm.graph.machine`).

The in-process event log keeps each turn's events as one JSON array (bytes) — for a turn
made only of the engine's own events (no sink attached, no handler or tool emitting one
of its own), the compact JSON of their rows (:func:`~hermes_fsm.events.rows.rows_json`:
arrays, no field names, no dict made) — not as live objects: tens of events per turn
kept as objects (even tuples, which the collector stops tracking after a pass) would make
Python's garbage collector rescan a growing heap (measured: more than half the engine's
time after a few thousand turns, and ~20,000 instructions a turn for kept rows), and JSON
is what recordings and durable stores hold anyway. Reading the log parses the JSON back
into events. A session made with ``log=False`` keeps no log at all (an orchestrator's
``event_log=False``: for callers that read each turn's events from its result, its sinks
or a durable store, such as a replay rerun).

**Bounded memory.** A session made with ``log_turns=N`` keeps the events of its last ``N``
log entries only (an entry is a turn's events, or a batch of late events delivered after
its turn): the older ones are dropped, and :attr:`Session.dropped` says how many and up
to which seq. A :class:`~hermes_fsm.events.recording.RecordingSink` still writes every
event to its file as it happens; a durable store still has every event. With a store,
the orchestrator's :class:`SessionCache` is bounded by bytes (``max_bytes``): the least
recently used idle sessions are evicted, and the durable layer rebuilds an evicted one
from the store at its next turn (:mod:`hermes_fsm.engine.durable`) as it was: its state,
messages, summary, conversation graph and — within the window — its log
(:meth:`Session.record_stored`).
:meth:`Session.approx_bytes` is what the bound counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pydantic_core import from_json, to_json

from hermes_fsm.conversation.graph import Conversation
from hermes_fsm.errors import SessionError, UsageError
from hermes_fsm.events.model import EVENTS_ADAPTER, Event, EventList, write_json
from hermes_fsm.events.rows import rows_data

__all__ = ["Session", "SessionCache", "check_domain", "declare_domain"]


class Session:
    """One conversation.

    Attributes:
        session_id: the session's id (not the user's).
        user_id: the user it belongs to.
        domain: its memory domain (seed 003 §5), declared when it is created (``None``:
            none): recall and commit of its turns stay inside it (see
            :mod:`hermes_fsm.engine.memory_handlers`).
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
        dropped: ``(entries, seq)``: how many log entries (turns, or batches of late
            events) the log window dropped, and the last seq among them (``(0, 0)``: none;
            a session rebuilt from its store with a window of 0 reads none of its log back
            and does not count them: ``(0, seq)``).

    Args:
        log: keep the event log (``False``: :meth:`record` drops each turn's events, and
            the log reads as empty).
        log_turns: keep only the last ``log_turns`` entries of the log (``None``: all).
    """

    __slots__ = ("_lock", "_log", "_log_turns", "busy", "conversation", "domain", "dropped",
                 "epoch", "history", "late", "seq", "session_id", "state", "summary", "user_id")

    def __init__(self, session_id: str, user_id: str, state: str, log: bool = True,
                 log_turns: int | None = None, domain: str | None = None) -> None:
        self.session_id = session_id
        self.user_id = user_id
        self.domain = domain
        self.state = state
        self.seq = 0
        self.epoch = 0
        # (first seq, last seq, JSON array, whether of rows) per turn; None: no log kept
        self._log: list[tuple[int, int, bytes, bool]] | None = [] if log else None
        self._log_turns = log_turns
        self.dropped = (0, 0)
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
            blob, rows = events.log_json()
            self._append(self._log, events.first_seq(), events.last_seq(), blob, rows)

    def record_stored(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Append events read back from a store (JSON data, in seq order) as one log entry:
        the durable layer rebuilds an evicted session's log this way, entry by entry, so
        it reads as it did while the session was cached (within the same window)."""
        if events and self._log is not None:
            self._append(self._log, events[0]["seq"], events[-1]["seq"],
                         to_json(list(events)), False)

    def _append(self, log: list[tuple[int, int, bytes, bool]], first: int, last: int,
                blob: bytes, rows: bool) -> None:
        # a right-sized copy: orjson (3.12 on) hands out its buffer rounded up to a power of
        # two and never shrinks it (32 KiB held for a demo turn's 11 KB of JSON), and the
        # log keeps the entry for the session's life; the copy costs ~0.15 µs a turn
        log.append((first, last, b"".join((blob, b"")), rows))
        keep = self._log_turns
        if keep is not None and len(log) > keep:
            gone = log[: len(log) - keep]
            del log[: len(gone)]
            self.dropped = (self.dropped[0] + len(gone), gone[-1][1])

    @property
    def keeps_log(self) -> bool:
        """Whether :meth:`record` keeps anything (a log, and a window above 0 turns)."""
        return self._log is not None and self._log_turns != 0

    def approx_bytes(self) -> int:
        """About how many bytes the session holds: its log's JSON, its messages, summary
        and conversation graph, and a fixed overhead (what a bounded :class:`SessionCache`
        counts; ``bench/session_memory.py`` prints it beside tracemalloc's figure)."""
        size = _SESSION_BYTES + len(self.summary) + sum(
            _MESSAGE_BYTES + len(m.get("content", "")) for m in self.history)
        for entry in self._log or ():
            size += _ENTRY_BYTES + len(entry[2])
        conv = self.conversation
        if conv is not None:
            size += _NODE_BYTES * (len(conv.entities) + len(conv.intents) + len(conv.edges)
                                   + len(conv.tasks))
        return size

    @property
    def events(self) -> list[Event]:
        """The whole event log, parsed."""
        return self.events_after(0)

    def events_after(self, seq: int) -> list[Event]:
        """The recorded events with a sequence number above ``seq`` (numbered from 1)."""
        out: list[Event] = []
        for _, last, blob, rows in self._log or ():
            if last > seq:
                out.extend(e for e in EVENTS_ADAPTER.validate_json(_json(blob, rows))
                           if e.seq > seq)
        return out

    def event_lines(self) -> list[bytes]:
        """The log as JSON lines, one event each (what a recording holds)."""
        return [to_json(item) for _, _, blob, rows in self._log or ()
                for item in (rows_data(blob) if rows else from_json(blob))]

    def turn_events(self, turn_id: str) -> list[Event]:
        """The events of one turn of this session."""
        return [e for e in self.events if e.turn_id == turn_id]

    def snapshot(self) -> dict[str, Any]:
        """A plain-data view, for printing and tests."""
        return {"session_id": self.session_id, "user_id": self.user_id, "state": self.state,
                "seq": self.seq, "messages": len(self.history)}


def check_domain(domain: str | None) -> str | None:
    """``domain`` as a session's memory domain (``None``: none).

    Raises:
        UsageError: it is blank, or holds U+0000.
    """
    if domain is not None and (not isinstance(domain, str) or not domain.strip()
                               or "\x00" in domain):
        raise UsageError(f"a memory domain is a non-blank name (e.g. 'credit_card'), "
                         f"not {domain!r}")
    return domain


def declare_domain(session: Session, domain: str | None) -> None:
    """Give ``session`` the memory ``domain`` a caller declares for it: set on a session
    that has had no turn yet; on one that has, ``None`` or its own domain.

    Raises:
        SessionError: the session is of another domain (or of none) already.
        UsageError: ``domain`` is blank.
    """
    if domain is None or domain == session.domain:
        return
    check_domain(domain)
    if session.seq == 0 and not session.busy:  # created, no turn yet: it declares now
        session.domain = domain
        return
    mine = f"memory domain {session.domain!r}" if session.domain else "no memory domain"
    raise SessionError(f"session {session.session_id!r} was created in {mine}, not "
                       f"{domain!r}; a session keeps the domain it was created in: start a "
                       "new session for another domain")


def _json(blob: bytes, rows: bool) -> bytes:
    """A log entry's events as one JSON array (an entry of rows written out as their turn
    would have written its events: the same JSON)."""
    return write_json(rows_data(blob), True) if rows else blob


_SESSION_BYTES = 600  # the object, its slots, ids and the cache's entry
_MESSAGE_BYTES = 330  # a message dict with its role (content counted apart)
_ENTRY_BYTES = 120  # a log entry's tuple and bytes header
_NODE_BYTES = 700  # a conversation node, edge or task, with its fields


class SessionCache:
    """The sessions an orchestrator holds in this process, by id.

    Without a session store this is where sessions live; with one it caches the store's
    sessions: the durable layer (:mod:`hermes_fsm.engine.durable`) adds each session it
    rebuilds from the store, drops a copy the store has moved past, and calls
    :meth:`settle` after each turn. ``Orchestrator.sessions()`` is a read-only view of it
    (:attr:`view`).

    With ``max_bytes`` it is an LRU cache bounded by size: :meth:`settle` measures the
    session (:meth:`Session.approx_bytes`) and evicts the least recently used idle
    sessions until the cached ones hold at most ``max_bytes`` (the session just settled
    always stays). Only a cache over a store may evict: an evicted session is rebuilt from
    the store at its next turn.

    Args:
        sessions: the dict it holds the sessions in (default: a new one). The orchestrator
            passes its own, which it reads directly at every turn.
        max_bytes: the bound (``None``: unbounded).

    Attributes:
        get: ``get(session_id)``, the cached session or ``None`` (a bounded cache counts
            it as used).
        view: a read-only, live view of the cached sessions by id.
        max_bytes: the bound, or ``None``.
        evicted: how many sessions were evicted so far.
    """

    __slots__ = ("_by_id", "_sizes", "bytes", "evicted", "get", "max_bytes", "view")

    def __init__(self, sessions: dict[str, Session] | None = None,
                 max_bytes: int | None = None) -> None:
        self._by_id: dict[str, Session] = sessions if sessions is not None else {}
        self.view: Mapping[str, Session] = MappingProxyType(self._by_id)
        self.max_bytes = max_bytes
        self._sizes: dict[str, int] = {}  # session id → its size when last settled
        self.bytes = 0  # the sum of _sizes: what the cached sessions hold, about
        self.evicted = 0
        self.get: Callable[[str], Session | None] = (
            self._by_id.get if max_bytes is None else self._get_used)  # no Python call

    def _get_used(self, session_id: str) -> Session | None:
        session = self._by_id.pop(session_id, None)
        if session is not None:
            self._by_id[session_id] = session  # the most recently used: last in order
        return session

    def add(self, session: Session) -> Session:
        """Cache ``session`` (replacing a cached one of the same id); returns it."""
        self._by_id.pop(session.session_id, None)
        self._by_id[session.session_id] = session
        if self.max_bytes is not None:
            self._resize(session.session_id, session.approx_bytes())
        return session

    def discard(self, session_id: str, session: Session | None = None) -> None:
        """Drop the cached session ``session_id`` if there is one — with ``session``,
        only if that very object is the cached one (a newer copy stays)."""
        if session is None:
            self._by_id.pop(session_id, None)
        elif self._by_id.get(session_id) is session:
            del self._by_id[session_id]
        else:
            return
        self._resize(session_id, 0)

    def settle(self, session: Session, keep: Container[str] = ()) -> None:
        """Measure ``session`` after its turn and evict least recently used sessions while
        the cache is over ``max_bytes`` (a no-op when unbounded). Busy sessions, those
        whose ids are in ``keep`` (their turns hold a lease here) and ``session`` itself
        stay."""
        if self.max_bytes is None or self._by_id.get(session.session_id) is not session:
            return
        self._resize(session.session_id, session.approx_bytes())
        if self.bytes <= self.max_bytes:
            return
        excess, victims = self.bytes - self.max_bytes, []
        for session_id, cached in self._by_id.items():  # oldest first; stops when enough
            if excess <= 0:
                break
            if cached is session or cached.busy or session_id in keep:
                continue
            victims.append(session_id)
            excess -= self._sizes.get(session_id, 0)
        for session_id in victims:
            del self._by_id[session_id]
            self._resize(session_id, 0)
        self.evicted += len(victims)

    def _resize(self, session_id: str, size: int) -> None:
        old = self._sizes.pop(session_id, 0)
        if size:
            self._sizes[session_id] = size
        self.bytes += size - old

    def info(self) -> dict[str, int | None]:
        """``sessions``, ``bytes`` (about), ``max_bytes`` and ``evicted``: what readiness
        and ``serve`` report (unbounded, ``bytes`` is measured now: one pass over them)."""
        held = (self.bytes if self.max_bytes is not None
                else sum(s.approx_bytes() for s in self._by_id.values()))
        return {"sessions": len(self._by_id), "bytes": held,
                "max_bytes": self.max_bytes, "evicted": self.evicted}

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)
