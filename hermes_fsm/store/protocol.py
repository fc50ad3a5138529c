"""The session store protocol: sessions, messages, the event log, checkpoints, effects.

A store keeps what a session needs to survive its process:

- **sessions**: one row each (a user has many; session ids are not user ids) with the
  graph state, the sequence number of the last event appended, and the lease *epoch*
  (bumped by every :meth:`SessionStore.claim`) that fences stale writers;
- **events**: the event log, one row per event, unique by (session, seq);
- **messages**: the conversation (user/assistant/tool/system);
- **checkpoints**: a session's state after its last finished turn (history window,
  rolling summary); a session is rebuilt from its checkpoint plus the events after it;
- **effects**: the journal of tool calls by idempotency key, so a resumed turn never
  repeats a call that finished, nor acts twice when the outcome is unknown.

:meth:`SessionStore.append` is the one write a step makes: its events, the session's new
state and seq, and (at a turn's end) its messages and checkpoint, all or nothing, and
only if the writer's epoch and expected seq still match (else :class:`StaleWriter`).

Every store writes its JSON and text through :mod:`hermes_fsm._internal.json_safe`: U+0000
becomes U+FFFD and a non-finite number the string ``"NaN"``, ``"Infinity"`` or
``"-Infinity"``, in every store alike. What a store cannot read back raises
:class:`~hermes_fsm.errors.StoreError` naming the session and the seq (:func:`read_event`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from hermes_fsm._internal.json_safe import loads
from hermes_fsm.errors import StoreError

__all__ = ["DELETED_KINDS", "Append", "Checkpoint", "Effect", "Message", "SessionRecord",
           "SessionStore", "read_event", "unreadable"]

DELETED_KINDS = ("sessions", "messages", "events", "checkpoints", "effects")
"""The keys of :meth:`SessionStore.delete_user`'s counts, in this order."""

Role = Literal["user", "assistant", "tool", "system"]


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session as the store holds it.

    Attributes:
        state: the graph state after the last append (the initial state between turns).
        seq: the sequence number of the last event appended (0: none yet).
        epoch: bumped by every claim; an append must carry the current one.
        archived: archived sessions keep their summary; their messages are not reused.
    """

    session_id: str
    user_id: str
    state: str
    seq: int
    epoch: int
    created_at: datetime
    updated_at: datetime
    archived: bool = False
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation."""

    message_id: str
    session_id: str
    user_id: str
    role: Role
    content: str
    created_at: datetime
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A session's state after a finished turn: ``data`` holds history and summary."""

    session_id: str
    seq: int
    state: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Effect:
    """A journalled tool call: ``started`` (outcome unknown) or ``finished`` (``outcome``)."""

    key: str
    session_id: str
    tool: str
    status: Literal["started", "finished"]
    outcome: dict[str, Any] | None = None


@dataclass(slots=True)
class Append:
    """One step's write.

    Attributes:
        events: the step's events as field dicts, seqs contiguous from ``prev_seq + 1``.
        prev_seq: the seq the writer believes the session is at (the fencing check).
        epoch: the writer's claim (the fencing check).
        state: the session's graph state after the step.
        messages, checkpoint: written with a turn's last step.
        events_json: ``events`` already serialized as one JSON array, when the writer has
            it (the engine serializes a step's events once, for the store and its own
            log); a store may use it rather than serialize ``events`` again.
    """

    session_id: str
    epoch: int
    prev_seq: int
    state: str
    events: Sequence[dict[str, Any]]
    messages: Sequence[Message] = ()
    checkpoint: Checkpoint | None = None
    events_json: bytes | None = None
    last_seq: int = field(init=False)

    def __post_init__(self) -> None:
        self.last_seq = self.events[-1]["seq"] if self.events else self.prev_seq


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live between (and during) turns. Every method may raise
    :class:`~hermes_fsm.errors.StoreError` when the backend fails."""

    name: str

    async def open(self) -> None:
        """Connect and create or migrate the schema (idempotent)."""

    async def close(self) -> None:
        """Release connections (idempotent)."""

    async def claim(self, session_id: str, user_id: str, state: str) -> SessionRecord:
        """Create the session (in ``state``) or take it over: bump and return its epoch.

        Raises:
            SessionError: the session belongs to another user.
        """

    async def get(self, session_id: str) -> SessionRecord | None:
        """The session, or ``None``."""

    async def sessions_of(self, user_id: str) -> list[SessionRecord]:
        """A user's sessions, oldest first."""

    async def append(self, batch: Append) -> None:
        """Write one step atomically (events, state, seq; messages and checkpoint if any).

        Raises:
            StaleWriter: ``batch.epoch`` is no longer the session's, or its seq moved on.
        """

    async def events_after(self, session_id: str, seq: int = 0) -> list[dict[str, Any]]:
        """The events with a seq above ``seq``, in order, as field dicts (JSON data)."""

    async def messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        """The session's messages, oldest first (the last ``limit`` when given)."""

    async def checkpoint(self, session_id: str) -> Checkpoint | None:
        """The latest checkpoint, or ``None``."""

    async def archive(self, session_id: str, summary: str) -> None:
        """Mark the session archived, keeping ``summary``."""

    async def idle_sessions(self, before: datetime) -> list[str]:
        """Ids of unarchived sessions last written before ``before``."""

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Effect | None:
        """Journal a call as started; ``None`` when new, else the existing record."""

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        """Journal a call's outcome (its result envelope)."""

    async def delete_user(self, user_id: str) -> dict[str, int]:
        """Delete everything of ``user_id``: her sessions and, of those sessions, every
        message, event, checkpoint and journalled call, in one transaction. Other users'
        data is untouched. Irreversible; a later turn on one of her old session ids starts
        a new, empty session. Returns the rows removed, by kind (:data:`DELETED_KINDS`)."""


def unreadable(store: str, session_id: str, what: str, exc: BaseException) -> StoreError:
    """The error for stored data that cannot be read back: what, where, what to do."""
    return StoreError(
        f"{store}: {what} of session {session_id!r} cannot be read ({type(exc).__name__}: "
        f"{exc}); the stored data is damaged or was written by another version — archive "
        "the session (its later turns cannot be rebuilt) and report this message")


def read_event(store: str, session_id: str, seq: int, body: str | bytes) -> dict[str, Any]:
    """A stored event's JSON as field dicts.

    Raises:
        StoreError: it cannot be parsed (naming the store, the session and the seq).
    """
    try:
        event = loads(body)
    except ValueError as exc:
        raise unreadable(store, session_id, f"event seq {seq}", exc) from exc
    if not isinstance(event, dict):
        raise unreadable(store, session_id, f"event seq {seq}",
                         ValueError(f"a JSON {type(event).__name__}, not an object"))
    return event
