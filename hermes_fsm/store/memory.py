"""An in-memory session store: a real implementation of the protocol, for tests.

Everything lives in dicts of this process (events, checkpoints and effects kept as JSON,
written like the durable stores write them), so the semantics — epochs, fencing, atomic
appends, what U+0000 and non-finite numbers become — are the same as PostgreSQL's and
SQLite's, checked by the same conformance suite.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hermes_fsm._internal.json_safe import dumps, loads, safe_text
from hermes_fsm.errors import SessionError, StaleWriter
from hermes_fsm.store.protocol import (
    Append,
    Checkpoint,
    Effect,
    Message,
    SessionRecord,
    read_event,
)

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """The session store in this process's memory (lost when it exits)."""

    name = "in-memory session store"

    def __init__(self) -> None:
        self._sessions: dict[str, SessionRecord] = {}
        self._events: dict[str, list[tuple[int, bytes]]] = {}
        self._messages: dict[str, list[Message]] = {}
        self._checkpoints: dict[str, Checkpoint] = {}
        self._effects: dict[str, Effect] = {}

    async def open(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Nothing to close (the data stays until the object goes)."""

    async def claim(self, session_id: str, user_id: str, state: str) -> SessionRecord:
        now = datetime.now(UTC)
        record = self._sessions.get(session_id)
        if record is None:
            record = SessionRecord(session_id, user_id, state, 0, 1, now, now)
        elif record.user_id != user_id:
            raise SessionError(f"session {session_id!r} belongs to another user; "
                               "use a session id of your own (or omit it to get a new one)")
        else:
            record = replace(record, epoch=record.epoch + 1)
        self._sessions[session_id] = record
        return record

    async def get(self, session_id: str) -> SessionRecord | None:
        return self._sessions.get(session_id)

    async def sessions_of(self, user_id: str) -> list[SessionRecord]:
        return sorted((r for r in self._sessions.values() if r.user_id == user_id),
                      key=lambda r: (r.created_at, r.session_id))

    async def append(self, batch: Append) -> None:
        sid = batch.session_id
        record = self._sessions.get(sid)
        if record is None:
            raise StaleWriter(sid, "the session does not exist", reason="missing")
        if record.epoch != batch.epoch:
            raise StaleWriter(sid, f"epoch {batch.epoch} was superseded by {record.epoch}")
        if record.seq != batch.prev_seq:
            raise StaleWriter(sid, f"expected seq {batch.prev_seq} but the log is at "
                                   f"{record.seq}", reason="seq")
        rows = [(e["seq"], dumps(e)) for e in batch.events]
        self._events.setdefault(sid, []).extend(rows)
        self._messages.setdefault(sid, []).extend(
            replace(m, content=safe_text(m.content),
                    tool_calls=None if m.tool_calls is None else loads(dumps(m.tool_calls)))
            for m in batch.messages)
        if batch.checkpoint is not None:
            c = batch.checkpoint
            self._checkpoints[sid] = replace(c, data=loads(dumps(c.data)))
        self._sessions[sid] = replace(record, state=batch.state, seq=batch.last_seq,
                                      updated_at=datetime.now(UTC))

    async def events_after(self, session_id: str, seq: int = 0) -> list[dict[str, Any]]:
        return [read_event(self.name, session_id, s, body)
                for s, body in self._events.get(session_id, ()) if s > seq]

    async def messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        messages = self._messages.get(session_id, [])
        return list(messages[-limit:] if limit else messages)

    async def checkpoint(self, session_id: str) -> Checkpoint | None:
        return self._checkpoints.get(session_id)

    async def archive(self, session_id: str, summary: str) -> None:
        record = self._sessions.get(session_id)
        if record is not None:
            self._sessions[session_id] = replace(record, archived=True,
                                                 summary=safe_text(summary))

    async def idle_sessions(self, before: datetime) -> list[str]:
        return [r.session_id for r in self._sessions.values()
                if not r.archived and r.updated_at < before]

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Effect | None:
        existing = self._effects.get(key)
        if existing is None:
            self._effects[key] = Effect(key, session_id, tool, "started")
        return existing

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        effect = self._effects[key]
        self._effects[key] = replace(effect, status="finished",
                                    outcome=loads(dumps(outcome)))

    async def delete_user(self, user_id: str) -> dict[str, int]:
        ids = {sid for sid, r in self._sessions.items() if r.user_id == user_id}
        counts = {"sessions": len(ids), "messages": 0, "events": 0, "checkpoints": 0,
                  "effects": 0}
        for sid in ids:
            del self._sessions[sid]
            counts["messages"] += len(self._messages.pop(sid, ()))
            counts["events"] += len(self._events.pop(sid, ()))
            counts["checkpoints"] += self._checkpoints.pop(sid, None) is not None
        effects = [k for k, e in self._effects.items() if e.session_id in ids]
        for key in effects:
            del self._effects[key]
        counts["effects"] = len(effects)
        return counts
