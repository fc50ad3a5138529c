"""The experience log on SQLite (stdlib ``sqlite3``): the embedded default.

One file (or ``":memory:"``), WAL journal; the schema is created and migrated on open
(``PRAGMA user_version`` holds its version). Reads are short and run on the event loop's
thread; writes to a file (a batch's ``record``, ``forget``) run in a worker thread on a
connection of their own (WAL: readers do not wait for them), since a commit can take
milliseconds on a busy disk. ``":memory:"`` has one connection, used on the loop. Text and
JSON are written as the session stores write them (:mod:`hermes_fsm._internal.json_safe`:
U+0000 as U+FFFD, non-finite numbers as the strings ``"NaN"``, ``"Infinity"``), so every
experience backend reads back the same.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import string
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_fsm._internal.json_safe import dumps, safe_text
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory.embedders import Embedder, HashingEmbedder
from hermes_fsm.memory.experience import (
    NOT_CALLED,
    Experience,
    ToolHealth,
    VersionHealth,
    top_requests,
)
from hermes_fsm.memory.sqlite_files import open_sqlite

__all__ = ["SQLiteExperienceLog"]

_MIGRATIONS = [
    """
    CREATE TABLE IF NOT EXISTS hermes_experience (
        entry_id TEXT PRIMARY KEY, kind TEXT NOT NULL, user_id TEXT NOT NULL,
        session_id TEXT NOT NULL, turn_id TEXT NOT NULL, at REAL NOT NULL,
        ok INTEGER NOT NULL, tool TEXT, request TEXT NOT NULL, arguments TEXT NOT NULL,
        error_code TEXT, detail TEXT, duration_ms REAL NOT NULL, caused_by TEXT,
        event_seq INTEGER);
    CREATE INDEX IF NOT EXISTS hermes_experience_tool_at ON hermes_experience (tool, at);
    CREATE INDEX IF NOT EXISTS hermes_experience_user_at ON hermes_experience (user_id, at);
    """,
    # failure_rates reads one window of every tool's calls
    "CREATE INDEX IF NOT EXISTS hermes_experience_kind_at ON hermes_experience (kind, at);",
    # similar_outcomes reads one user's latest tool calls: without it SQLite walked every
    # user's calls through (kind, at), and PLANNING got slower as the log grew
    "CREATE INDEX IF NOT EXISTS hermes_experience_user_kind_at "
    "ON hermes_experience (user_id, kind, at);",
    # ... and with the two columns it ranks on in the index, it reads no table row for its
    # 500 candidates (it looked each one up: as long as ranking them); this one replaces it
    "CREATE INDEX IF NOT EXISTS hermes_experience_user_kind_at_request "
    "ON hermes_experience (user_id, kind, at, entry_id, request); "
    "DROP INDEX IF EXISTS hermes_experience_user_kind_at;",
    # the version of a canaried tool that ran the call: canaries read each version's last
    # calls (and the latest rollback) from the log, across processes
    "ALTER TABLE hermes_experience ADD COLUMN tool_version TEXT; "
    "CREATE INDEX IF NOT EXISTS hermes_experience_tool_version_at "
    "ON hermes_experience (tool, tool_version, kind, at);",
    # the memory domain of the session an entry came from: a domain's recall reads its own
    # (the covering index of similar_outcomes carries it, so that read stays index-only)
    "ALTER TABLE hermes_experience ADD COLUMN domain TEXT; "
    "CREATE INDEX IF NOT EXISTS hermes_experience_user_kind_at_request_domain "
    "ON hermes_experience (user_id, kind, at, entry_id, request, domain); "
    "DROP INDEX IF EXISTS hermes_experience_user_kind_at_request;",
    # a count of the rows deleted or changed, by any connection: similar_outcomes keeps a
    # user's latest calls in this process and reads only the rows added since, which is
    # exact only while no row was taken away or rewritten (_Window)
    "CREATE TABLE IF NOT EXISTS hermes_experience_rewrites (n INTEGER NOT NULL); "
    "INSERT INTO hermes_experience_rewrites SELECT 0 "
    "WHERE NOT EXISTS (SELECT 1 FROM hermes_experience_rewrites); "
    "CREATE TRIGGER IF NOT EXISTS hermes_experience_deleted AFTER DELETE ON hermes_experience "
    "BEGIN UPDATE hermes_experience_rewrites SET n = n + 1; END; "
    "CREATE TRIGGER IF NOT EXISTS hermes_experience_updated AFTER UPDATE ON hermes_experience "
    "BEGIN UPDATE hermes_experience_rewrites SET n = n + 1; END; "
    # INSERT OR REPLACE deletes the row it replaces without a delete trigger (unless the
    # writer turned recursive_triggers on); an insert of an id already there counts too
    # (ours, ON CONFLICT DO NOTHING, change nothing then: a window read again for nothing)
    "CREATE TRIGGER IF NOT EXISTS hermes_experience_replaced BEFORE INSERT ON "
    "hermes_experience WHEN EXISTS (SELECT 1 FROM hermes_experience WHERE entry_id = "
    "NEW.entry_id) BEGIN UPDATE hermes_experience_rewrites SET n = n + 1; END",
]
WINDOW_ROWS = 500
"""How many of a user's latest tool calls :meth:`SQLiteExperienceLog.similar_outcomes` ranks."""
CACHED_ROWS = 20_000
"""At most this many of those rows are kept in the process, over all users (the least
recently ranked user's go first): ~8 MiB (~400 bytes a row with the demo's ids and
requests, tracemalloc)."""
_MARKS = ("SELECT n, (SELECT coalesce(max(rowid), 0) FROM hermes_experience), "
          "(SELECT schema_version FROM pragma_schema_version) FROM hermes_experience_rewrites")
_WINDOW = (f"kind = 'tool_call' AND at > ? AND at <= ? AND tool IS NOT NULL "
           f"AND coalesce(error_code, '') NOT IN ({', '.join('?' * len(NOT_CALLED))})")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
"""What SQLite's built-in ``lower`` does to a text (no ICU): ASCII letters only."""
_COLUMNS = ("entry_id, kind, user_id, session_id, turn_id, at, ok, tool, request, arguments, "
            "error_code, detail, duration_ms, caused_by, event_seq, tool_version, domain")


def _migrate(db: sqlite3.Connection) -> None:
    """Bring the schema to the latest version (``PRAGMA user_version`` holds it)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    for number, ddl in enumerate(_MIGRATIONS[version:], start=version + 1):
        db.executescript(f"BEGIN; {ddl}; PRAGMA user_version={number}; COMMIT;")


class SQLiteExperienceLog:
    """The experience log in a SQLite file.

    Args:
        path: the database file (its directory is created), or ``":memory:"``.
        embedder: ranks requests for :meth:`similar_outcomes` (default: hashing).
    """

    def __init__(self, path: str | Path = ":memory:", embedder: Embedder | None = None) -> None:
        self.path = str(path)
        self.name = f"SQLite experience log at {self.path}"
        self.embedder = embedder or HashingEmbedder()
        self._db: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None  # a file's writes, in worker threads
        self._writing = threading.Lock()
        self._opening = threading.Lock()
        # similar_outcomes' candidates by (user, domain, shared), least recently used first
        self._windows: dict[tuple[str, str | None, bool], _Window] = {}
        self._cached_rows = 0

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            with self._opening:  # the loop and a writer thread may both open first
                return self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            # opened in whichever thread came first; then read on the loop's only
            self._db = open_sqlite(self.path, self.name,
                                   pragmas=("journal_mode=WAL", "synchronous=NORMAL"),
                                   setup=_migrate)
        return self._db

    def _write_conn(self) -> sqlite3.Connection:
        """The writers' connection (a worker thread's, under ``_writing``)."""
        if self._writer is None:
            self._conn()  # creates and migrates the schema
            self._writer = open_sqlite(self.path, self.name, pragmas=("synchronous=NORMAL",))
        return self._writer

    async def _write(self, call: Any, *args: Any) -> Any:
        """``call(connection, *args)``: in a worker thread for a file, on the loop in memory."""
        if self.path == ":memory:":
            return call(self._conn(), *args)

        def locked() -> Any:
            with self._writing:
                return call(self._write_conn(), *args)

        return await asyncio.to_thread(locked)

    async def record(self, entries: Sequence[Experience]) -> int:
        if not entries:
            return 0
        rows = [_row(e) for e in entries]
        return int(await self._write(self._record_now, rows))

    def _record_now(self, db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> int:
        try:
            db.execute("BEGIN")
            # the rows inserted (rowcount: the statements' own changes, not their triggers')
            new = db.executemany(f"INSERT INTO hermes_experience ({_COLUMNS}) VALUES "
                                 f"({', '.join('?' * 17)}) ON CONFLICT (entry_id) DO NOTHING",
                                 rows).rowcount
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise MemoryStoreError(f"{self.name}: write failed ({exc}); nothing was written; "
                                   "the commit will be retried") from exc
        return new

    async def failure_rate(self, tool: str, window: timedelta,
                           now: datetime | None = None) -> float:
        now = now or datetime.now(UTC)
        total, failed = self._conn().execute(
            f"SELECT count(*), coalesce(sum(1 - ok), 0) FROM hermes_experience "
            f"WHERE tool = ? AND {_WINDOW}",
            (tool, (now - window).timestamp(), now.timestamp(), *NOT_CALLED)).fetchone()
        return failed / total if total else 0.0

    async def failure_rates(self, window: timedelta,
                            now: datetime | None = None) -> dict[str, ToolHealth]:
        now = now or datetime.now(UTC)
        try:
            rows = self._conn().execute(
                f"SELECT tool, count(*), coalesce(sum(1 - ok), 0) FROM hermes_experience "
                f"WHERE {_WINDOW} GROUP BY tool",
                ((now - window).timestamp(), now.timestamp(), *NOT_CALLED)).fetchall()
        except sqlite3.Error as exc:
            raise MemoryStoreError(f"{self.name}: read failed ({exc}); check the file "
                                   "(memory.data_dir)") from exc
        return {tool: ToolHealth(tool, calls, failed) for tool, calls, failed in rows}

    async def version_outcomes(self, tool: str, versions: Sequence[str],
                               last: int) -> VersionHealth:
        conn = self._conn()
        try:
            health: dict[str, ToolHealth] = {}
            for version in versions:
                calls, failed = conn.execute(
                    "SELECT count(*), coalesce(sum(1 - ok), 0) FROM (SELECT ok FROM "
                    "hermes_experience WHERE tool = ? AND tool_version = ? AND kind = "
                    f"'tool_call' AND coalesce(error_code, '') NOT IN "
                    f"({', '.join('?' * len(NOT_CALLED))}) ORDER BY at DESC LIMIT ?)",
                    (tool, version, *NOT_CALLED, last)).fetchone()
                health[version] = ToolHealth(version, int(calls), int(failed))
            row = conn.execute(
                "SELECT tool_version, detail FROM hermes_experience WHERE tool = ? "
                "AND kind = 'canary_rollback' ORDER BY at DESC LIMIT 1", (tool,)).fetchone()
        except sqlite3.Error as exc:
            raise MemoryStoreError(f"{self.name}: read failed ({exc}); check the file "
                                   "(memory.data_dir)") from exc
        rolled = (str(row[0]), str(json.loads(row[1]))) if row and row[0] else None
        return VersionHealth(health, rolled)

    async def similar_outcomes(self, user_id: str, text: str, k: int = 5, *,
                               domain: str | None = None,
                               shared: bool = False) -> list[Experience]:
        conn = self._conn()
        try:
            candidates = self._candidates(conn, user_id, domain, shared)
        except sqlite3.Error as exc:
            raise MemoryStoreError(f"{self.name}: read failed ({exc}); check the file "
                                   "(memory.data_dir)") from exc
        best = top_requests(candidates, text, self.embedder, k)
        if not best:
            return []
        marks = ",".join("?" * len(best))
        rows = {r[0]: r for r in conn.execute(
            # by primary key (``+user_id``: not through a user index, which walked every
            # row of the user), still only the user's rows
            f"SELECT {_COLUMNS} FROM hermes_experience WHERE entry_id IN ({marks}) "
            f"AND +user_id = ?", (*(i for i, _ in best), user_id)).fetchall()}
        return [replace(_entry(rows[i]), score=s) for i, s in best if i in rows]

    def _candidates(self, conn: sqlite3.Connection, user_id: str, domain: str | None,
                    shared: bool) -> list[tuple[str, str]]:
        """``(entry_id, request)`` of the user's latest :data:`WINDOW_ROWS` tool calls (in
        ``domain``), newest first (ties on ``at``: the greater ``entry_id`` first).

        Kept between calls (:class:`_Window`): a call reads the log's marks, then only the
        rows added since the last one, by any connection or process. A row deleted,
        changed or replaced anywhere (the ``hermes_experience_rewrites`` triggers) or a
        schema change (``VACUUM`` may renumber rows) makes it read the whole window again,
        as the first call does. Reading the 500 rows through the index cost ~0.4 ms a
        PLANNING step."""
        where, params = _in_domain(domain, shared)
        key = (user_id, domain, shared)
        window = self._windows.pop(key, None)  # put back last: the most recently used
        if window is not None:
            self._cached_rows -= len(window.rows)
        rewrites, upto, schema = conn.execute(_MARKS).fetchone()
        if window is None or (rewrites, schema) != window.marks or upto < window.upto:
            rows = conn.execute(
                "SELECT at, entry_id, request FROM hermes_experience WHERE user_id = ? "
                f"AND kind = 'tool_call'{where} ORDER BY at DESC, entry_id DESC "
                f"LIMIT {WINDOW_ROWS}", (user_id, *params)).fetchall()
            window = _Window(rows, upto, (rewrites, schema))
        elif upto > window.upto:
            # by rowid (``+``: not through the user's index, which walks all their rows)
            added = conn.execute(
                "SELECT at, entry_id, request FROM hermes_experience WHERE rowid > ? "
                f"AND +user_id = ? AND +kind = 'tool_call'{where}",
                (window.upto, user_id, *params)).fetchall()
            window = window.extended(added, upto)
        self._windows[key] = window
        self._cached_rows += len(window.rows)
        while self._cached_rows > CACHED_ROWS and len(self._windows) > 1:
            oldest = next(iter(self._windows))
            self._cached_rows -= len(self._windows.pop(oldest).rows)
        return window.pairs

    async def entries(self, user_id: str, limit: int = 1000) -> list[Experience]:
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM hermes_experience WHERE user_id = ? "
            "ORDER BY at DESC, entry_id LIMIT ?", (user_id, limit)).fetchall()
        return [_entry(r) for r in rows]

    async def mentioning(self, user_id: str, names: Sequence[str], limit: int = 50, *,
                         domain: str | None = None,
                         shared: bool = False) -> list[Experience]:
        """The latest entries of ``user_id`` whose request or arguments contain one of
        ``names`` (case-insensitive for ASCII), newest first: found by SQLite, not by
        parsing every entry (the turn's recall asks this each turn). With ``domain``, of
        that domain only (``shared``: and of none).

        The match is ``instr(lower(column), name)`` with ``name`` lowered as SQLite's
        ``lower`` lowers (ASCII only): what ``column LIKE '%name%'`` (wildcards escaped)
        matches, without LIKE's pattern walk at every position of every column, which was
        most of this query's time."""
        if not names:
            return []
        wanted = " OR ".join("instr(lower(request), ?) OR instr(lower(arguments), ?)"
                             for _ in names)
        params = [p for n in names for p in (n.translate(_ASCII_LOWER),) * 2]
        where, in_domain = _in_domain(domain, shared)
        rows = self._conn().execute(
            f"SELECT {_COLUMNS} FROM hermes_experience WHERE user_id = ?{where} "
            f"AND ({wanted}) ORDER BY at DESC, entry_id LIMIT ?",
            (user_id, *in_domain, *params, limit)).fetchall()
        return [_entry(r) for r in rows]

    async def count(self, user_id: str) -> int:
        """Rows of ``user_id`` in the table itself."""
        return int(self._conn().execute(
            "SELECT count(*) FROM hermes_experience WHERE user_id = ?", (user_id,)).fetchone()[0])

    async def forget(self, user_id: str) -> int:
        def delete(db: sqlite3.Connection) -> int:
            return db.execute("DELETE FROM hermes_experience WHERE user_id = ?",
                              (user_id,)).rowcount

        return int(await self._write(delete))

    async def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            await asyncio.to_thread(self._close_writer, writer)
        if self._db is not None:
            self._db.close()
            self._db = None
        self._windows.clear()
        self._cached_rows = 0

    def _close_writer(self, writer: sqlite3.Connection) -> None:
        with self._writing:  # after the write in progress
            writer.close()


class _Window:
    """One user's latest tool calls as :meth:`SQLiteExperienceLog.similar_outcomes` ranks
    them: ``rows`` ``(at, entry_id, request)`` newest first, ``pairs`` their ``(entry_id,
    request)``, read when the log's largest rowid was ``upto`` and its rewrite count and
    schema version were ``marks``."""

    __slots__ = ("marks", "pairs", "rows", "upto")

    def __init__(self, rows: list[tuple[float, str, str]], upto: int, marks: tuple[int, int],
                 pairs: list[tuple[str, str]] | None = None) -> None:
        self.rows = rows
        self.pairs = [(entry_id, request) for _, entry_id, request in rows] \
            if pairs is None else pairs
        self.upto = upto
        self.marks = marks

    def extended(self, added: list[tuple[float, str, str]], upto: int) -> _Window:
        """This window with rows ``added`` to the log since (any ``at``: merged in order).

        Exact while no row was deleted or changed: the window is the newest of the
        user's rows, so the newest of them and the added ones are the newest of all. A row
        read twice (added while the window was being read) is kept once."""
        if not added:
            self.upto = upto
            return self
        added.sort(reverse=True)  # at, then entry_id (unique): the query's ORDER BY
        if not self.rows or added[-1] > self.rows[0]:  # all newer (a turn's): in front
            keep = max(WINDOW_ROWS - len(added), 0)
            pairs = [(entry_id, request) for _, entry_id, request in added] + self.pairs[:keep]
            return _Window((added + self.rows[:keep])[:WINDOW_ROWS], upto, self.marks,
                           pairs[:WINDOW_ROWS])
        fresh = {entry_id for _, entry_id, _ in added}
        rows = [row for row in self.rows if row[1] not in fresh]
        rows.extend(added)
        rows.sort(reverse=True)
        return _Window(rows[:WINDOW_ROWS], upto, self.marks)


def _in_domain(domain: str | None, shared: bool) -> tuple[str, tuple[str, ...]]:
    """The ``AND …`` condition (and its parameters) of entries a recall in ``domain`` sees
    (:func:`~.experience.seen_in_domain`)."""
    if domain is None:
        return "", ()
    if shared:
        return " AND (domain = ? OR domain IS NULL)", (domain,)
    return " AND domain = ?", (domain,)


def _dumps(value: Any) -> str:
    return dumps(value).decode()


def _text(value: str | None) -> str | None:
    return None if value is None else safe_text(value)


def _row(e: Experience) -> tuple[Any, ...]:
    text = _text
    return (text(e.entry_id), text(e.kind), text(e.user_id), text(e.session_id),
            text(e.turn_id), e.at.timestamp(), int(e.ok), text(e.tool), text(e.request),
            _dumps(e.arguments), text(e.error_code), _dumps(e.detail), e.duration_ms,
            text(e.caused_by), e.event_seq, text(e.tool_version), text(e.domain))


def _entry(r: tuple[Any, ...]) -> Experience:
    return Experience(entry_id=r[0], kind=r[1], user_id=r[2], session_id=r[3], turn_id=r[4],
                      at=datetime.fromtimestamp(r[5], UTC), ok=bool(r[6]), tool=r[7],
                      request=r[8], arguments=json.loads(r[9]), error_code=r[10],
                      detail=None if r[11] is None or r[11] == "null" else json.loads(r[11]),
                      duration_ms=r[12], caused_by=r[13], event_seq=r[14], tool_version=r[15],
                      domain=r[16])
