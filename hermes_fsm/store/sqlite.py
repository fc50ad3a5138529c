"""The session store in a SQLite file: the embedded default.

Calls run on the event loop's thread (a local SQLite write in WAL mode with
``synchronous=NORMAL`` takes tens of microseconds; a thread hop would cost more). The
schema is created and migrated on open (``hermes_schema_version``); an append is one
transaction guarded by the session's epoch and expected seq. Several processes may share
the file: SQLite serializes their writes, and the fencing check refuses a stale one.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_fsm._internal.json_safe import dumps, loads, safe_text
from hermes_fsm.errors import SessionError, StaleWriter, StoreError
from hermes_fsm.store.protocol import (
    DELETED_KINDS,
    Append,
    Checkpoint,
    Effect,
    Message,
    SessionRecord,
    read_event,
    unreadable,
)

__all__ = ["SQLiteStore"]

_MIGRATIONS = [
    """
    CREATE TABLE IF NOT EXISTS hermes_sessions (
        session_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, state TEXT NOT NULL,
        seq INTEGER NOT NULL DEFAULT 0, epoch INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        archived INTEGER NOT NULL DEFAULT 0, summary TEXT NOT NULL DEFAULT '');
    CREATE INDEX IF NOT EXISTS hermes_sessions_user ON hermes_sessions (user_id, created_at);
    CREATE TABLE IF NOT EXISTS hermes_events (
        session_id TEXT NOT NULL, seq INTEGER NOT NULL, turn_id TEXT NOT NULL,
        kind TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session_id, seq));
    CREATE TABLE IF NOT EXISTS hermes_messages (
        message_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, user_id TEXT NOT NULL,
        role TEXT NOT NULL, content TEXT NOT NULL, tool_calls TEXT, tool_call_id TEXT,
        created_at TEXT NOT NULL, position INTEGER NOT NULL);
    CREATE INDEX IF NOT EXISTS hermes_messages_session ON hermes_messages (session_id, position);
    CREATE TABLE IF NOT EXISTS hermes_checkpoints (
        session_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state TEXT NOT NULL,
        data TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS hermes_effects (
        key TEXT PRIMARY KEY, session_id TEXT NOT NULL, tool TEXT NOT NULL,
        status TEXT NOT NULL, outcome TEXT);
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)


class SQLiteStore:
    """The session store in one SQLite file.

    Args:
        path: the database file (created with its directory), or ``":memory:"``.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.name = f"SQLite session store at {self.path}"
        self._db: sqlite3.Connection | None = None

    async def open(self) -> None:
        self._conn()

    def _conn(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                 timeout=10.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._migrate(db)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.name}: cannot open ({exc}); check the path is writable "
                             "(HERMES_DATA_DIR) and not used by an incompatible version") from exc
        self._db = db
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS hermes_schema_version (version INTEGER)")
            row = db.execute("SELECT max(version) FROM hermes_schema_version").fetchone()
            current = row[0] or 0
            if current > SCHEMA_VERSION:
                raise StoreError(f"{self.name}: schema version {current} is newer than this "
                                 f"hermes-fsm knows ({SCHEMA_VERSION}); upgrade hermes-fsm")
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version - 1].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO hermes_schema_version VALUES (?)", (version,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _fail(self, what: str, exc: sqlite3.Error) -> StoreError:
        return StoreError(f"{self.name}: {what} failed ({type(exc).__name__}: {exc}); "
                          "the session is unchanged, try again")

    async def claim(self, session_id: str, user_id: str, state: str) -> SessionRecord:
        db = self._conn()
        now = _now()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT user_id FROM hermes_sessions WHERE session_id = ?",
                                 (session_id,)).fetchone()
                if row is None:
                    db.execute("INSERT INTO hermes_sessions (session_id, user_id, state, "
                               "created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                               (session_id, user_id, state, now, now))
                elif row[0] != user_id:
                    raise SessionError(f"session {session_id!r} belongs to another user; use "
                                       "a session id of your own (or omit it to get a new one)")
                else:
                    db.execute("UPDATE hermes_sessions SET epoch = epoch + 1 "
                               "WHERE session_id = ?", (session_id,))
                record = self._record(db, session_id)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._fail(f"claiming session {session_id!r}", exc) from exc
        assert record is not None
        return record

    def _record(self, db: sqlite3.Connection, session_id: str) -> SessionRecord | None:
        row = db.execute("SELECT session_id, user_id, state, seq, epoch, created_at, updated_at,"
                         " archived, summary FROM hermes_sessions WHERE session_id = ?",
                         (session_id,)).fetchone()
        return None if row is None else _session(row)

    async def get(self, session_id: str) -> SessionRecord | None:
        return self._record(self._conn(), session_id)

    async def sessions_of(self, user_id: str) -> list[SessionRecord]:
        rows = self._conn().execute(
            "SELECT session_id, user_id, state, seq, epoch, created_at, updated_at, archived, "
            "summary FROM hermes_sessions WHERE user_id = ? ORDER BY created_at, session_id",
            (user_id,)).fetchall()
        return [_session(r) for r in rows]

    async def append(self, batch: Append) -> None:
        db = self._conn()
        sid = batch.session_id
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                cur = db.execute(
                    "UPDATE hermes_sessions SET state = ?, seq = ?, updated_at = ? "
                    "WHERE session_id = ? AND epoch = ? AND seq = ?",
                    (batch.state, batch.last_seq, _now(), sid, batch.epoch, batch.prev_seq))
                if cur.rowcount != 1:
                    detail, reason = self._why_stale(db, batch)
                    raise StaleWriter(sid, detail, reason=reason)
                db.executemany(
                    "INSERT INTO hermes_events (session_id, seq, turn_id, kind, body) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(sid, e["seq"], e["turn_id"], e["kind"], dumps(e).decode())
                     for e in batch.events])
                if batch.messages:
                    # the next position, from the end of the (session_id, position)
                    # index: count(*) walked every message of the session at each turn
                    start = db.execute("SELECT coalesce(max(position) + 1, 0) FROM "
                                       "hermes_messages WHERE session_id = ?",
                                       (sid,)).fetchone()[0]
                    db.executemany(
                        "INSERT INTO hermes_messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [(m.message_id, m.session_id, m.user_id, m.role, safe_text(m.content),
                          _json(m.tool_calls), m.tool_call_id, m.created_at.isoformat(),
                          start + i) for i, m in enumerate(batch.messages)])
                if batch.checkpoint is not None:
                    c = batch.checkpoint
                    db.execute("INSERT OR REPLACE INTO hermes_checkpoints VALUES (?, ?, ?, ?)",
                               (sid, c.seq, c.state, _json(c.data)))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.IntegrityError as exc:
            raise StaleWriter(sid, f"an event seq was already taken ({exc})",
                              reason="seq") from exc
        except sqlite3.Error as exc:
            raise self._fail(f"appending to session {sid!r}", exc) from exc

    def _why_stale(self, db: sqlite3.Connection, batch: Append) -> tuple[str, str]:
        record = self._record(db, batch.session_id)
        if record is None:
            return "the session does not exist", "missing"
        if record.epoch != batch.epoch:
            return f"epoch {batch.epoch} was superseded by {record.epoch}", "epoch"
        return f"expected seq {batch.prev_seq} but the log is at {record.seq}", "seq"

    async def events_after(self, session_id: str, seq: int = 0) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            "SELECT seq, body FROM hermes_events WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, seq)).fetchall()
        return [read_event(self.name, session_id, r[0], r[1]) for r in rows]

    async def messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        rows = self._conn().execute(
            "SELECT message_id, session_id, user_id, role, content, tool_calls, tool_call_id, "
            "created_at FROM hermes_messages WHERE session_id = ? ORDER BY position DESC "
            "LIMIT ?", (session_id, -1 if limit is None else limit)).fetchall()
        try:
            return [Message(r[0], r[1], r[2], r[3], r[4], datetime.fromisoformat(r[7]),
                            loads(r[5]) if r[5] else None, r[6]) for r in reversed(rows)]
        except ValueError as exc:
            raise unreadable(self.name, session_id, "a message", exc) from exc

    async def checkpoint(self, session_id: str) -> Checkpoint | None:
        row = self._conn().execute(
            "SELECT seq, state, data FROM hermes_checkpoints WHERE session_id = ?",
            (session_id,)).fetchone()
        if row is None:
            return None
        try:
            return Checkpoint(session_id, row[0], row[1], loads(row[2]))
        except ValueError as exc:
            raise unreadable(self.name, session_id, f"the checkpoint at seq {row[0]}",
                             exc) from exc

    async def archive(self, session_id: str, summary: str) -> None:
        self._conn().execute("UPDATE hermes_sessions SET archived = 1, summary = ? "
                             "WHERE session_id = ?", (safe_text(summary), session_id))

    async def idle_sessions(self, before: datetime) -> list[str]:
        rows = self._conn().execute(
            "SELECT session_id FROM hermes_sessions WHERE archived = 0 AND updated_at < ? "
            "ORDER BY updated_at", (before.astimezone(UTC).isoformat(),)).fetchall()
        return [r[0] for r in rows]

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Effect | None:
        db = self._conn()
        cur = db.execute("INSERT OR IGNORE INTO hermes_effects (key, session_id, tool, status) "
                         "VALUES (?, ?, ?, 'started')", (key, session_id, tool))
        if cur.rowcount == 1:
            return None
        row = db.execute("SELECT session_id, tool, status, outcome FROM hermes_effects "
                         "WHERE key = ?", (key,)).fetchone()
        try:
            outcome = loads(row[3]) if row[3] else None
        except ValueError as exc:
            raise unreadable(self.name, row[0], f"the journalled outcome of call {key!r}",
                             exc) from exc
        return Effect(key, row[0], row[1], row[2], outcome)

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        self._conn().execute("UPDATE hermes_effects SET status = 'finished', outcome = ? "
                             "WHERE key = ?", (_json(outcome), key))

    async def delete_user(self, user_id: str) -> dict[str, int]:
        db = self._conn()
        of_user = "session_id IN (SELECT session_id FROM hermes_sessions WHERE user_id = ?)"
        counts: dict[str, int] = {}
        try:
            db.execute("PRAGMA secure_delete = ON")  # her rows' bytes are overwritten
            db.execute("BEGIN IMMEDIATE")
            try:
                for kind, table in (("messages", "hermes_messages"),
                                    ("events", "hermes_events"),
                                    ("checkpoints", "hermes_checkpoints"),
                                    ("effects", "hermes_effects")):
                    where = of_user + (" OR user_id = ?" if kind == "messages" else "")
                    params = (user_id, user_id) if kind == "messages" else (user_id,)
                    counts[kind] = db.execute(f"DELETE FROM {table} WHERE {where}",
                                              params).rowcount
                counts["sessions"] = db.execute(
                    "DELETE FROM hermes_sessions WHERE user_id = ?", (user_id,)).rowcount
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"{self.name}: deleting the data of user {user_id!r} failed "
                             f"({type(exc).__name__}: {exc}); nothing was deleted, try "
                             "again") from exc
        try:  # the deleted pages are zeroed in the file (and WAL) at the next checkpoint
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:  # pragma: no cover - another process reads: it runs later
            pass
        return {k: counts[k] for k in DELETED_KINDS}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _json(value: Any) -> str | None:
    return None if value is None else dumps(value).decode()


def _session(row: Any) -> SessionRecord:
    return SessionRecord(row[0], row[1], row[2], row[3], row[4],
                         datetime.fromisoformat(row[5]), datetime.fromisoformat(row[6]),
                         bool(row[7]), row[8])
