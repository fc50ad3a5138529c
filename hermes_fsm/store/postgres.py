"""The session store on PostgreSQL (psycopg 3, async, pooled): for real use and scale-out.

The schema is created and migrated on open (``{schema}.hermes_schema_version``, under an
advisory lock so processes starting together migrate once).

Appends are group-committed: every step awaits its own append, but the appends waiting
at the same moment (from any number of sessions) go to PostgreSQL as *one* statement —
one round trip and one commit for all of them. Each append in it is fenced on its own:
the session row is updated only where the epoch and the expected seq still match, and
only the events (messages, checkpoint) of the appends that passed are inserted; the
others raise :class:`StaleWriter`. The events table is also unique by (session, seq).
A step's events travel as the JSON array the engine serialized once for its own log
(:attr:`~hermes_fsm.store.protocol.Append.events_json`); PostgreSQL splits it into rows.
Claims are group-committed the same way. Both run on writer connections kept out of the
pool (see :class:`PostgresStore`), so a step costs one round trip, not two.

An append (a claim, a read) whose connection drops is tried again on a fresh, checked
connection, twice at most, after the pool's idle connections were swept (the dead ones
replaced at once, see :mod:`hermes_fsm._internal.pg_pool`); if an earlier try of an append
had committed (the session is already at the batch's last seq under the same epoch), the
retry recognises it and succeeds.

Requires the ``postgres`` extra: ``pip install 'hermes-fsm[postgres]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hermes_fsm._internal.group_commit import GroupCommit
from hermes_fsm._internal.json_safe import dumps, safe_blob, safe_text
from hermes_fsm._internal.pg_pool import (
    close_pool,
    drop_schema,
    dropped,
    migrate_schema,
    open_pool,
    sweep_pool,
)
from hermes_fsm._internal.redact import redact_url, register_url
from hermes_fsm.errors import SessionError, StaleWriter, StoreError, UsageError
from hermes_fsm.store.protocol import (
    DELETED_KINDS,
    Append,
    Checkpoint,
    Effect,
    Message,
    SessionRecord,
    read_event,
)

__all__ = ["PostgresStore"]

_ATTEMPTS = 3
"""Tries of a statement whose connection dropped (each retry on a fresh, checked one)."""

_MIGRATIONS = [
    """
    CREATE TABLE IF NOT EXISTS {s}.hermes_sessions (
        session_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, state TEXT NOT NULL,
        seq BIGINT NOT NULL DEFAULT 0, epoch BIGINT NOT NULL DEFAULT 1,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        archived BOOLEAN NOT NULL DEFAULT false, summary TEXT NOT NULL DEFAULT '');
    CREATE INDEX IF NOT EXISTS hermes_sessions_user ON {s}.hermes_sessions (user_id, created_at);
    CREATE TABLE IF NOT EXISTS {s}.hermes_events (
        session_id TEXT NOT NULL, seq BIGINT NOT NULL, turn_id TEXT NOT NULL,
        kind TEXT NOT NULL, body JSON NOT NULL, PRIMARY KEY (session_id, seq));
    CREATE TABLE IF NOT EXISTS {s}.hermes_messages (
        position BIGSERIAL PRIMARY KEY, message_id TEXT UNIQUE NOT NULL,
        session_id TEXT NOT NULL, user_id TEXT NOT NULL, role TEXT NOT NULL,
        content TEXT NOT NULL, tool_calls JSONB, tool_call_id TEXT,
        created_at TIMESTAMPTZ NOT NULL);
    CREATE INDEX IF NOT EXISTS hermes_messages_session
        ON {s}.hermes_messages (session_id, position);
    CREATE TABLE IF NOT EXISTS {s}.hermes_checkpoints (
        session_id TEXT PRIMARY KEY, seq BIGINT NOT NULL, state TEXT NOT NULL,
        data JSONB NOT NULL);
    CREATE TABLE IF NOT EXISTS {s}.hermes_effects (
        key TEXT PRIMARY KEY, session_id TEXT NOT NULL, tool TEXT NOT NULL,
        status TEXT NOT NULL, outcome JSONB, updated_at TIMESTAMPTZ NOT NULL DEFAULT now());
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)

_APPEND = """
WITH input AS (
  SELECT (x->>0)::int AS n, x->>1 AS session_id, (x->>2)::bigint AS epoch,
         (x->>3)::bigint AS prev, (x->>4)::bigint AS last, x->>5 AS state,
         x->>6 AS turn_id, x->7 AS kinds, x->8 AS turns
  FROM jsonb_array_elements(%(i)s::jsonb) AS x),
fence AS (
  UPDATE {s}.hermes_sessions AS t SET seq = i.last, state = i.state, updated_at = now()
  FROM input AS i
  WHERE t.session_id = i.session_id AND t.epoch = i.epoch AND t.seq = i.prev
  RETURNING i.n, i.session_id, i.prev, i.turn_id, i.kinds, i.turns),
ev AS (
  INSERT INTO {s}.hermes_events (session_id, seq, turn_id, kind, body)
  SELECT f.session_id, f.prev + x.ord, coalesce(f.turns ->> (x.ord::int - 1), f.turn_id),
         f.kinds ->> (x.ord::int - 1), x.body
  FROM fence AS f
  JOIN unnest(string_to_array(%(e)s, E'\\x1e')) WITH ORDINALITY AS b(events, n) ON b.n = f.n
  CROSS JOIN LATERAL json_array_elements(b.events::json) WITH ORDINALITY AS x(body, ord)),
msg AS (
  INSERT INTO {s}.hermes_messages (message_id, session_id, user_id, role, content, tool_calls,
                                  tool_call_id, created_at)
  SELECT x->>1, x->>2, x->>3, x->>4, x->>5,
         CASE WHEN jsonb_typeof(x->6) = 'null' THEN NULL ELSE (x->6)::jsonb END,
         x->>7, (x->>8)::timestamptz
  FROM jsonb_array_elements(%(m)s::jsonb) WITH ORDINALITY AS m(x, ord)
  WHERE (x->>0)::int IN (SELECT n FROM fence) ORDER BY ord),
ck AS (
  INSERT INTO {s}.hermes_checkpoints (session_id, seq, state, data)
  SELECT x->>1, (x->>2)::bigint, x->>3, (x->4)::jsonb
  FROM jsonb_array_elements(%(c)s::jsonb) AS x
  WHERE (x->>0)::int IN (SELECT n FROM fence)
  ON CONFLICT (session_id) DO UPDATE
    SET seq = excluded.seq, state = excluded.state, data = excluded.data)
SELECT n FROM fence
"""
"""One group commit: the appends of many sessions in one statement, one round trip, one
commit. ``i``: per append (numbered ``n`` from 1) its session, fencing values, new state,
turn and its events' kinds (their seqs run on from ``prev``; ``turns`` only if they are
of more than one turn); ``e``: per append its events as one JSON array — the very text
the step serialized once (:attr:`Append.events_json`) — separated by U+001E (which JSON
text never holds unescaped), split and parsed by PostgreSQL into rows as they are, never
re-read key by key; ``m``: messages and ``c``: checkpoints, ``[n, ...]`` each. Only what
passed the fence is inserted."""

_SESSION_COLUMNS = ("session_id, user_id, state, seq, epoch, created_at, updated_at, archived, "
                    "summary")


class PostgresStore:
    """The session store in PostgreSQL.

    Args:
        url: a libpq URL (``postgresql://postgres@127.0.0.1:5432/test``).
        schema: the schema holding the tables (give each deployment or test its own).
        pool_size: the most connections kept.
        max_flushes: how many group commits (of appends; of claims) may be in flight at once.
        min_batch: the fewest appends (claims) worth a group commit of their own while
            another is in flight; fewer wait for the next one (each commit flushes the
            log to disk: fewer, larger commits cost PostgreSQL and this process less).
        application_name: how the connections show in ``pg_stat_activity``.

    Group commits (appends, claims) run on *writer* connections taken from the pool and
    kept (at most half the pool): the pool checks a connection with a round trip each
    time it hands one out, which would double the round trips of every step. A writer
    whose statement fails is handed back to the pool (which replaces a dead one), and
    so are the idle writers with it; the retry runs on a connection the pool has just
    checked, never on an idle writer (one may have died with the first).

    Attributes:
        round_trips: statements sent to PostgreSQL so far, with the pool's checks of the
            connections it handed out (each is a round trip too).
    """

    def __init__(self, url: str, *, schema: str = "hermes", pool_size: int = 8,
                 max_flushes: int = 2, min_batch: int = 64,
                 application_name: str = "hermes-fsm") -> None:
        if not schema.isidentifier():
            raise StoreError(f"PostgreSQL schema name {schema!r} must be an identifier "
                             "(letters, digits, underscores)")
        self.url, self.schema = url, schema
        register_url(url)  # the password: never in a message or an event
        self.name = f"PostgreSQL session store at {redact_url(url)} (schema {schema})"
        self._pool_size = pool_size
        self.application_name = application_name
        self._pool: Any = None
        self._opening: asyncio.Lock | None = None
        self._s = f'"{schema}"'
        self._append_sql = _APPEND.format(s=self._s)
        self._appends: GroupCommit[Append, None] = GroupCommit(
            self._append_batch, key=lambda b: b.session_id, max_in_flight=max_flushes,
            min_batch=min_batch)
        self._claims: GroupCommit[tuple[str, str, str], SessionRecord] = GroupCommit(
            self._claim_batch, key=lambda c: c[0], max_in_flight=max_flushes,
            min_batch=min_batch)
        self._writers: list[Any] = []  # idle writer connections (out of the pool)
        self._writer_slots = asyncio.Semaphore(max(1, pool_size // 2))
        self.round_trips = 0

    # --- connections ---------------------------------------------------------------------

    async def open(self) -> None:
        await self._open()

    async def _open(self) -> Any:
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is not None:
                return self._pool
            self._pool = await open_pool(
                self.url, size=self._pool_size, name=self.name,
                what="the PostgreSQL session store", migrate=self._migrate, error=StoreError,
                application_name=self.application_name)
            return self._pool

    async def _migrate(self, pool: Any) -> None:
        await migrate_schema(
            pool, self._s, f"hermes-sessions-migrate:{self.schema}", _MIGRATIONS,
            on_newer=lambda version: StoreError(
                f"{self.name}: schema version {version} is newer than this hermes-fsm knows "
                f"({SCHEMA_VERSION}); upgrade hermes-fsm"))

    async def drop_schema(self) -> None:
        """Drop the schema and everything in it (tests; irreversible)."""
        await drop_schema(await self._open(), self._s)

    async def close(self) -> None:
        await self._return_writers()
        await close_pool(self)

    async def _on_writer(self, sql: str, params: Any, *, fresh: bool = False) -> list[Any]:
        """Run one statement on a writer connection (``fresh``: one the pool checks now,
        not an idle writer): the rows, or the exception (after which the writers go back
        to the pool, see the class docs, and a dropped connection's pool is swept)."""
        async with self._writer_slots:
            if self._writers and not fresh:
                conn = self._writers.pop()
            else:
                conn = await (await self._open()).getconn()
                self.round_trips += 1  # the pool's check of the connection
            try:
                self.round_trips += 1
                rows: list[Any] = await (await conn.execute(sql, params)).fetchall()
            except BaseException as exc:
                self._writers.append(conn)
                await self._return_writers()
                if isinstance(exc, Exception) and dropped(exc) and self._pool is not None:
                    await sweep_pool(self._pool)
                raise
            self._writers.append(conn)
            return rows

    async def _on_writer_retried(self, sql: str, params: Any) -> tuple[list[Any], bool]:
        """:meth:`_on_writer`, tried again on a fresh connection when the connection
        dropped (:data:`_ATTEMPTS` in all): the rows and whether it was tried again.
        A statement PostgreSQL refused for its data is not tried again."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return await self._on_writer(sql, params, fresh=attempt > 1), attempt > 1
            except Exception as exc:
                if attempt == _ATTEMPTS or not dropped(exc):
                    raise
        raise AssertionError("unreachable")

    async def _return_writers(self) -> None:
        writers, self._writers = self._writers, []
        for conn in writers:
            if self._pool is not None:
                try:
                    await self._pool.putconn(conn)
                except Exception:  # pragma: no cover - the pool closed meanwhile
                    await conn.close()

    async def _fetch(self, what: str, sql: str, params: Sequence[Any] | dict[str, Any],
                     *, retry: bool = True) -> list[Any]:
        """Run one statement on a pooled connection: its rows. One whose connection
        dropped is tried again on a fresh one (``retry``: the statement is safe to run
        twice: a read, or a write that is idempotent)."""
        pool = await self._open()
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with pool.connection() as conn:
                    self.round_trips += 2  # the pool's check of the connection, the statement
                    return list(await (await conn.execute(sql, params)).fetchall())
            except SessionError:
                raise
            except Exception as exc:
                if retry and attempt < _ATTEMPTS and dropped(exc):
                    await sweep_pool(pool)
                    continue
                raise StoreError(f"{self.name}: {what} failed ({type(exc).__name__}: {exc}); "
                                 "check that PostgreSQL is up, then try again") from exc
        raise AssertionError("unreachable")

    # --- sessions ------------------------------------------------------------------------

    async def claim(self, session_id: str, user_id: str, state: str) -> SessionRecord:
        return await self._claims.submit_nowait((session_id, user_id, state))

    async def _claim_batch(self, claims: list[tuple[str, str, str]]
                           ) -> list[SessionRecord | BaseException]:
        """Claims waiting together: one statement (group-committed like appends)."""
        ordered = sorted(claims)  # rows locked in one order by every process
        sql = (f"INSERT INTO {self._s}.hermes_sessions (session_id, user_id, state) "
               "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[]) "
               "ON CONFLICT (session_id) DO UPDATE SET epoch = hermes_sessions.epoch + 1 "
               "WHERE hermes_sessions.user_id = excluded.user_id "
               f"RETURNING {_SESSION_COLUMNS}")
        params = ([c[0] for c in ordered], [c[1] for c in ordered], [c[2] for c in ordered])
        try:  # a dropped connection: again, on a checked one (a claim may run twice)
            rows, _ = await self._on_writer_retried(sql, params)
        except Exception as exc:
            raise StoreError(f"{self.name}: claiming {len(claims)} session(s) failed "
                             f"({type(exc).__name__}: {exc}); check that PostgreSQL is up, "
                             "then try again") from exc
        by_id = {r[0]: SessionRecord(*r) for r in rows}
        return [by_id.get(sid) or SessionError(
            f"session {sid!r} belongs to another user; use a session id of your own "
            "(or omit it to get a new one)") for sid, _, _ in claims]

    async def get(self, session_id: str) -> SessionRecord | None:
        rows = await self._fetch(
            f"reading session {session_id!r}",
            f"SELECT {_SESSION_COLUMNS} FROM {self._s}.hermes_sessions WHERE session_id = %s",
            (session_id,))
        return SessionRecord(*rows[0]) if rows else None

    async def sessions_of(self, user_id: str) -> list[SessionRecord]:
        rows = await self._fetch(
            f"listing the sessions of {user_id!r}",
            f"SELECT {_SESSION_COLUMNS} FROM {self._s}.hermes_sessions WHERE user_id = %s "
            "ORDER BY created_at, session_id", (user_id,))
        return [SessionRecord(*r) for r in rows]

    # --- appends (group-committed) -----------------------------------------------------------

    async def append(self, batch: Append) -> None:
        events = batch.events
        if events and (events[0]["seq"] != batch.prev_seq + 1
                       or len(events) != batch.last_seq - batch.prev_seq):
            raise UsageError(f"session {batch.session_id!r}: an append's events must number "
                             f"on from its prev_seq {batch.prev_seq} without gaps")
        await self._appends.submit_nowait(batch)

    async def _append_batch(self, batches: list[Append]) -> list[BaseException | None]:
        try:  # a dropped connection: again, on a fresh one (see _stale for a first try
            passed, retried = await self._write(batches)  # that had committed)
        except Exception as exc:
            if _refused_data(exc):  # the data of an append, not the connection: trying
                if len(batches) == 1:  # again cannot help; several go on one by one, so
                    raise self._refused(batches[0], exc) from exc  # only its own fails
                return [await self._alone(b) for b in batches]
            raise StoreError(
                f"{self.name}: append failed ({type(exc).__name__}: {exc}; a dropped "
                f"connection is tried {_ATTEMPTS} times in all); the step may or may not be "
                "stored — the session stays consistent: resume it (Orchestrator.resume) when "
                "the store is back") from exc
        outcomes: list[BaseException | None] = []
        for n, batch in enumerate(batches):
            if n in passed:
                outcomes.append(None)
                continue
            error = await self._stale(batch, retried)
            outcomes.append(None if isinstance(error, _AlreadyWritten) else error)
        return outcomes

    def _refused(self, batch: Append, exc: BaseException) -> StoreError:
        return StoreError(
            f"{self.name}: PostgreSQL refused the data of the append to session "
            f"{batch.session_id!r} (seqs {batch.prev_seq + 1}-{batch.last_seq}: "
            f"{type(exc).__name__}: {exc}); the step was not stored and the session is at seq "
            f"{batch.prev_seq} — report this message as a bug of hermes-fsm")

    async def _alone(self, batch: Append) -> BaseException | None:
        """One append of a refused group commit, on its own: no session fails for the data
        of another."""
        try:
            return (await self._append_batch([batch]))[0]
        except StoreError as exc:
            return exc

    async def _write(self, batches: list[Append]) -> tuple[set[int], bool]:
        """A group commit: the indexes (from 0) of the appends that passed, and whether it
        was tried again (its connection dropped)."""
        rows, retried = await self._on_writer_retried(self._append_sql, _append_params(batches))
        return {r[0] - 1 for r in rows}, retried

    async def _stale(self, batch: Append, retried: bool) -> Exception:
        try:
            record = await self.get(batch.session_id)
        except StoreError as exc:
            return exc
        sid = batch.session_id
        if record is None:
            return StaleWriter(sid, "the session does not exist", reason="missing")
        if record.epoch != batch.epoch:
            return StaleWriter(sid, f"epoch {batch.epoch} was superseded by {record.epoch}")
        if retried and record.seq == batch.last_seq and batch.events:
            rows = await self._fetch("checking a retried append",
                                     f"SELECT 1 FROM {self._s}.hermes_events "
                                     "WHERE session_id = %s AND seq = %s AND turn_id = %s",
                                     (sid, batch.last_seq, batch.events[-1]["turn_id"]))
            if rows:  # the first try committed before its connection dropped
                return _AlreadyWritten()
        return StaleWriter(sid, f"expected seq {batch.prev_seq} but the log is at {record.seq}",
                           reason="seq")

    # --- reads -------------------------------------------------------------------------------

    async def events_after(self, session_id: str, seq: int = 0) -> list[dict[str, Any]]:
        rows = await self._fetch(
            f"reading the events of {session_id!r}",
            f"SELECT seq, body::text FROM {self._s}.hermes_events WHERE session_id = %s "
            "AND seq > %s ORDER BY seq", (session_id, seq))
        return [read_event(self.name, session_id, r[0], r[1]) for r in rows]

    async def messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        rows = await self._fetch(
            f"reading the messages of {session_id!r}",
            "SELECT message_id, session_id, user_id, role, content, created_at, tool_calls, "
            f"tool_call_id FROM {self._s}.hermes_messages WHERE session_id = %s "
            "ORDER BY position DESC LIMIT %s", (session_id, limit))
        return [Message(*r) for r in reversed(rows)]

    async def checkpoint(self, session_id: str) -> Checkpoint | None:
        rows = await self._fetch(
            f"reading the checkpoint of {session_id!r}",
            f"SELECT seq, state, data FROM {self._s}.hermes_checkpoints WHERE session_id = %s",
            (session_id,))
        return Checkpoint(session_id, *rows[0]) if rows else None

    async def archive(self, session_id: str, summary: str) -> None:
        await self._fetch(f"archiving {session_id!r}",
                          f"UPDATE {self._s}.hermes_sessions SET archived = true, summary = %s "
                          "WHERE session_id = %s RETURNING 1", (safe_text(summary), session_id))

    async def idle_sessions(self, before: datetime) -> list[str]:
        rows = await self._fetch(
            "listing idle sessions",
            f"SELECT session_id FROM {self._s}.hermes_sessions WHERE NOT archived "
            "AND updated_at < %s ORDER BY updated_at", (before,))
        return [r[0] for r in rows]

    # --- effects journal ---------------------------------------------------------------------

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Effect | None:
        rows = await self._fetch(
            f"journalling call {key!r}",
            f"INSERT INTO {self._s}.hermes_effects (key, session_id, tool, status) "
            "VALUES (%s, %s, %s, 'started') ON CONFLICT (key) DO NOTHING RETURNING key",
            (key, session_id, tool))
        if rows:
            return None
        rows = await self._fetch(
            f"reading call {key!r}",
            f"SELECT session_id, tool, status, outcome FROM {self._s}.hermes_effects "
            "WHERE key = %s", (key,))
        return Effect(key, *rows[0])

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        await self._fetch(
            f"journalling the outcome of call {key!r}",
            f"UPDATE {self._s}.hermes_effects SET status = 'finished', outcome = %s::jsonb, "
            "updated_at = now() WHERE key = %s RETURNING 1",
            (dumps(outcome).decode(), key))

    # --- forgetting a user -------------------------------------------------------------------

    async def delete_user(self, user_id: str) -> dict[str, int]:
        s = self._s
        rows = await self._fetch(
            f"deleting the data of user {user_id!r} (nothing was deleted if this failed; "
            "try again)",
            f"WITH ids AS (SELECT session_id FROM {s}.hermes_sessions WHERE user_id = %(u)s), "
            f"m AS (DELETE FROM {s}.hermes_messages WHERE user_id = %(u)s "
            "OR session_id IN (SELECT session_id FROM ids) RETURNING 1), "
            f"e AS (DELETE FROM {s}.hermes_events WHERE session_id IN "
            "(SELECT session_id FROM ids) RETURNING 1), "
            f"c AS (DELETE FROM {s}.hermes_checkpoints WHERE session_id IN "
            "(SELECT session_id FROM ids) RETURNING 1), "
            f"f AS (DELETE FROM {s}.hermes_effects WHERE session_id IN "
            "(SELECT session_id FROM ids) RETURNING 1), "
            f"x AS (DELETE FROM {s}.hermes_sessions WHERE user_id = %(u)s RETURNING 1) "
            "SELECT (SELECT count(*) FROM x), (SELECT count(*) FROM m), "
            "(SELECT count(*) FROM e), (SELECT count(*) FROM c), (SELECT count(*) FROM f)",
            {"u": user_id}, retry=False)  # a retry after a commit would report zeros
        return dict(zip(DELETED_KINDS, (int(n) for n in rows[0]), strict=True))


class _AlreadyWritten(Exception):
    """Not an error: the retried append had been committed by its first try."""


def _append_params(batches: list[Append]) -> dict[str, Any]:
    """The parameters of one group-committed append statement (see ``_APPEND``)."""
    appends: list[tuple[Any, ...]] = []
    bodies: list[bytes] = []
    messages: list[tuple[Any, ...]] = []
    checkpoints: list[tuple[Any, ...]] = []
    for n, b in enumerate(batches, start=1):
        sid = b.session_id
        events = b.events
        turn = events[0]["turn_id"] if events else None
        turns = None
        for e in events:
            if e["turn_id"] != turn:  # events of more than one turn: named one by one
                turns = [e["turn_id"] for e in events]
                break
        appends.append((n, sid, b.epoch, b.prev_seq, b.last_seq, b.state, turn,
                        [e["kind"] for e in events], turns))
        blob = b.events_json
        bodies.append(dumps(events) if blob is None else safe_blob(blob, events))
        if b.messages:
            messages.extend((n, m.message_id, sid, m.user_id, m.role, m.content, m.tool_calls,
                             m.tool_call_id, m.created_at) for m in b.messages)
        if b.checkpoint is not None:
            c = b.checkpoint
            checkpoints.append((n, sid, c.seq, c.state, c.data))
    return {"i": dumps(appends).decode(), "e": b"\x1e".join(bodies).decode(),
            "m": dumps(messages).decode() if messages else "[]",
            "c": dumps(checkpoints).decode() if checkpoints else "[]"}


def _refused_data(exc: BaseException) -> bool:
    """Whether PostgreSQL refused the statement for its data (SQLSTATE class 22, "data
    exception"), not for its connection: trying it again as it is cannot help."""
    return str(getattr(exc, "sqlstate", None) or "").startswith("22")

