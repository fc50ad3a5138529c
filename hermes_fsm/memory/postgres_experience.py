"""The experience log on PostgreSQL (psycopg 3, async, pooled).

The package creates and migrates its schema on open: ``{schema}.hermes_schema_version``
holds the applied version; migrations run in one transaction under an advisory lock, so
concurrent processes starting together migrate once. A batch of entries is one
transaction: a connection dropped mid-write leaves nothing written. Text and JSON are
written as the session stores write them (:mod:`hermes_fsm._internal.json_safe`: U+0000
as U+FFFD, non-finite numbers as the strings ``"NaN"``, ``"Infinity"``), which
PostgreSQL would otherwise refuse — for the whole batch.

Requires the ``postgres`` extra: ``pip install 'hermes-fsm[postgres]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hermes_fsm._internal.json_safe import dumps, safe_text
from hermes_fsm._internal.pg_pool import close_pool, drop_schema, migrate_schema, open_pool
from hermes_fsm._internal.redact import redact_url, register_url
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory.embedders import Embedder, HashingEmbedder
from hermes_fsm.memory.experience import (
    NOT_CALLED,
    Experience,
    ToolHealth,
    VersionHealth,
    like_pattern,
    top_requests,
)

__all__ = ["PostgresExperienceLog"]

_MIGRATIONS = [
    """
    CREATE TABLE IF NOT EXISTS {schema}.hermes_experience (
        entry_id TEXT PRIMARY KEY, kind TEXT NOT NULL, user_id TEXT NOT NULL,
        session_id TEXT NOT NULL, turn_id TEXT NOT NULL, at TIMESTAMPTZ NOT NULL,
        ok BOOLEAN NOT NULL, tool TEXT, request TEXT NOT NULL, arguments JSONB NOT NULL,
        error_code TEXT, detail JSONB, duration_ms DOUBLE PRECISION NOT NULL, caused_by TEXT,
        event_seq INTEGER);
    CREATE INDEX IF NOT EXISTS hermes_experience_tool_at ON {schema}.hermes_experience (tool, at);
    CREATE INDEX IF NOT EXISTS hermes_experience_user_at
        ON {schema}.hermes_experience (user_id, at);
    """,
    # failure_rates reads one window of every tool's calls
    "CREATE INDEX IF NOT EXISTS hermes_experience_kind_at ON {schema}.hermes_experience "
    "(kind, at);",
    # similar_outcomes reads one user's latest tool calls
    "CREATE INDEX IF NOT EXISTS hermes_experience_user_kind_at ON {schema}.hermes_experience "
    "(user_id, kind, at);",
    # the version of a canaried tool that ran the call: canaries read each version's last
    # calls (and the latest rollback) from the log, across processes
    "ALTER TABLE {schema}.hermes_experience ADD COLUMN IF NOT EXISTS tool_version TEXT; "
    "CREATE INDEX IF NOT EXISTS hermes_experience_tool_version_at "
    "ON {schema}.hermes_experience (tool, tool_version, kind, at);",
    # the memory domain of the session an entry came from: a domain's recall reads its own
    "ALTER TABLE {schema}.hermes_experience ADD COLUMN IF NOT EXISTS domain TEXT;",
]
_WINDOW = ("kind = 'tool_call' AND at > %s AND at <= %s AND tool IS NOT NULL "
           "AND coalesce(error_code, '') <> ALL(%s)")
# one array per column, sent in binary: the statement's text is the same for any number of
# rows (a multi-row VALUES list made psycopg parse a new, long query for every batch, and
# text-format arrays cost a regular-expression escape per value)
_INSERT = ("INSERT INTO {table} ({columns}) SELECT * FROM unnest(%b::text[], %b::text[], "
           "%b::text[], %b::text[], %b::text[], %b::timestamptz[], %b::boolean[], %b::text[], "
           "%b::text[], %b::jsonb[], %b::text[], %b::jsonb[], %b::float8[], %b::text[], "
           "%b::integer[], %b::text[], %b::text[]) ON CONFLICT (entry_id) DO NOTHING")
_COLUMNS = ("entry_id, kind, user_id, session_id, turn_id, at, ok, tool, request, arguments, "
            "error_code, detail, duration_ms, caused_by, event_seq, tool_version, domain")


class PostgresExperienceLog:
    """The experience log in PostgreSQL.

    Args:
        url: a libpq URL (``postgresql://postgres@127.0.0.1:5432/test``).
        schema: the schema to create tables in (give each deployment or test its own).
        embedder: ranks requests for :meth:`similar_outcomes` (default: hashing).
        pool_size: the most connections kept.
    """

    def __init__(self, url: str, *, schema: str = "hermes", embedder: Embedder | None = None,
                 pool_size: int = 4) -> None:
        if not schema.isidentifier():
            raise MemoryStoreError(f"PostgreSQL schema name {schema!r} must be an identifier "
                                   "(letters, digits, underscores)")
        self.url, self.schema = url, schema
        register_url(url)  # the password: never in a message or an event
        self.name = f"PostgreSQL experience log at {redact_url(url)} (schema {schema})"
        self.embedder = embedder or HashingEmbedder()
        self._pool_size = pool_size
        self._pool: Any = None
        self._table = f'"{schema}".hermes_experience'
        self._insert = _INSERT.format(table=self._table, columns=_COLUMNS)

    async def _open(self) -> Any:
        if self._pool is not None:
            return self._pool
        self._pool = await open_pool(self.url, size=self._pool_size, name=self.name,
                                     what="the PostgreSQL experience log",
                                     migrate=self._migrate, error=MemoryStoreError)
        return self._pool

    async def _migrate(self, pool: Any) -> None:
        await migrate_schema(
            pool, f'"{self.schema}"', f"hermes-migrate:{self.schema}", _MIGRATIONS,
            on_newer=lambda version: MemoryStoreError(
                f"{self.name}: schema version {version} is newer than this hermes-fsm knows "
                f"({len(_MIGRATIONS)}); upgrade hermes-fsm"))

    async def record(self, entries: Sequence[Experience]) -> int:
        """One transaction, one ``INSERT`` of all entries (one array per column)."""
        if not entries:
            return 0
        from psycopg.types.json import Jsonb

        pool = await self._open()
        text, json = _text, _json
        columns = [[text(e.entry_id) for e in entries], [text(e.kind) for e in entries],
                   [text(e.user_id) for e in entries], [text(e.session_id) for e in entries],
                   [text(e.turn_id) for e in entries], [e.at for e in entries],
                   [bool(e.ok) for e in entries], [text(e.tool) for e in entries],
                   [text(e.request) for e in entries],
                   [Jsonb(e.arguments, dumps=json) for e in entries],
                   [text(e.error_code) for e in entries],
                   [Jsonb(e.detail, dumps=json) for e in entries],
                   [float(e.duration_ms) for e in entries], [text(e.caused_by) for e in entries],
                   [e.event_seq for e in entries], [text(e.tool_version) for e in entries],
                   [text(e.domain) for e in entries]]
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(self._insert, columns)
                new = max(0, int(cur.rowcount))
                await self._before_commit(conn)
        except Exception as exc:
            raise MemoryStoreError(
                f"{self.name}: write failed ({type(exc).__name__}: {exc}); the batch was one "
                "transaction, so nothing of it was written; the commit will be retried") from exc
        return new

    async def _before_commit(self, conn: Any) -> None:
        """Called inside the write transaction before it commits (tests inject faults here)."""

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                return list(await (await conn.execute(sql, params)).fetchall())
        except Exception as exc:
            raise MemoryStoreError(f"{self.name}: read failed ({type(exc).__name__}: {exc}); "
                                   "check that PostgreSQL is up") from exc

    async def failure_rate(self, tool: str, window: timedelta,
                           now: datetime | None = None) -> float:
        now = now or datetime.now(UTC)
        (total, failed), = await self._fetch(
            f"SELECT count(*), count(*) FILTER (WHERE NOT ok) FROM {self._table} "
            f"WHERE tool = %s AND {_WINDOW}", (tool, now - window, now, list(NOT_CALLED)))
        return failed / total if total else 0.0

    async def failure_rates(self, window: timedelta,
                            now: datetime | None = None) -> dict[str, ToolHealth]:
        now = now or datetime.now(UTC)
        rows = await self._fetch(
            f"SELECT tool, count(*), count(*) FILTER (WHERE NOT ok) FROM {self._table} "
            f"WHERE {_WINDOW} GROUP BY tool", (now - window, now, list(NOT_CALLED)))
        return {tool: ToolHealth(tool, int(calls), int(failed)) for tool, calls, failed in rows}

    async def version_outcomes(self, tool: str, versions: Sequence[str],
                               last: int) -> VersionHealth:
        rows = await self._fetch(
            f"SELECT v.version, count(o.ok), count(*) FILTER (WHERE NOT o.ok) FROM "
            f"unnest(%s::text[]) AS v(version) LEFT JOIN LATERAL (SELECT ok FROM "
            f"{self._table} WHERE tool = %s AND tool_version = v.version AND kind = "
            f"'tool_call' AND coalesce(error_code, '') <> ALL(%s) ORDER BY at DESC "
            f"LIMIT %s) o ON true GROUP BY v.version",
            (list(versions), tool, list(NOT_CALLED), last))
        health = {str(v): ToolHealth(str(v), int(c), int(f)) for v, c, f in rows}
        found = await self._fetch(
            f"SELECT tool_version, detail FROM {self._table} WHERE tool = %s "
            "AND kind = 'canary_rollback' ORDER BY at DESC LIMIT 1", (tool,))
        rolled = (str(found[0][0]), str(found[0][1])) if found and found[0][0] else None
        return VersionHealth(health, rolled)

    async def similar_outcomes(self, user_id: str, text: str, k: int = 5, *,
                               domain: str | None = None,
                               shared: bool = False) -> list[Experience]:
        where, params = _in_domain(domain, shared)
        candidates = await self._fetch(
            f"SELECT entry_id, request FROM {self._table} WHERE user_id = %s "
            f"AND kind = 'tool_call'{where} ORDER BY at DESC LIMIT 500", (user_id, *params))
        best = top_requests([(r[0], r[1]) for r in candidates], text, self.embedder, k)
        if not best:
            return []
        rows = {r[0]: r for r in await self._fetch(
            f"SELECT {_COLUMNS} FROM {self._table} WHERE user_id = %s "
            "AND entry_id = ANY(%s)", (user_id, [i for i, _ in best]))}
        return [replace(_entry(rows[i]), score=s) for i, s in best if i in rows]

    async def entries(self, user_id: str, limit: int = 1000) -> list[Experience]:
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM {self._table} WHERE user_id = %s "
            "ORDER BY at DESC, entry_id LIMIT %s", (user_id, limit))
        return [_entry(r) for r in rows]

    async def mentioning(self, user_id: str, names: Sequence[str], limit: int = 50, *,
                         domain: str | None = None,
                         shared: bool = False) -> list[Experience]:
        """The latest entries of ``user_id`` whose request or arguments contain one of
        ``names`` (``ILIKE``), newest first: found by PostgreSQL, not by reading every
        entry (the turn's recall asks this each turn). With ``domain``, of that domain
        only (``shared``: and of none)."""
        if not names:
            return []
        wanted = " OR ".join("request ILIKE %s OR arguments::text ILIKE %s" for _ in names)
        params = [p for n in names for p in (like_pattern(n),) * 2]
        where, in_domain = _in_domain(domain, shared)
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM {self._table} WHERE user_id = %s{where} AND ({wanted}) "
            "ORDER BY at DESC, entry_id LIMIT %s", (user_id, *in_domain, *params, limit))
        return [_entry(r) for r in rows]

    async def count(self, user_id: str) -> int:
        """Rows of ``user_id`` in the table itself."""
        (n,), = await self._fetch(f"SELECT count(*) FROM {self._table} WHERE user_id = %s",
                                  (user_id,))
        return int(n)

    async def forget(self, user_id: str) -> int:
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(f"DELETE FROM {self._table} WHERE user_id = %s",
                                         (user_id,))
                return int(cur.rowcount)
        except Exception as exc:
            raise MemoryStoreError(f"{self.name}: delete failed ({type(exc).__name__}: {exc}); "
                                   "nothing was deleted; run forget again") from exc

    async def drop_schema(self) -> None:
        """Drop the whole schema (tests and teardown)."""
        await drop_schema(await self._open(), f'"{self.schema}"')

    async def close(self) -> None:
        await close_pool(self)


def _in_domain(domain: str | None, shared: bool) -> tuple[str, tuple[str, ...]]:
    """The ``AND …`` condition (and its parameters) of entries a recall in ``domain`` sees
    (:func:`~.experience.seen_in_domain`)."""
    if domain is None:
        return "", ()
    if shared:
        return " AND (domain = %s OR domain IS NULL)", (domain,)
    return " AND domain = %s", (domain,)


def _text(value: str | None) -> str | None:
    return None if value is None else safe_text(value)


def _json(value: Any) -> str:
    return dumps(value).decode()


def _entry(r: Sequence[Any]) -> Experience:
    return Experience(entry_id=r[0], kind=r[1], user_id=r[2], session_id=r[3], turn_id=r[4],
                      at=r[5], ok=bool(r[6]), tool=r[7], request=r[8], arguments=r[9] or {},
                      error_code=r[10], detail=r[11], duration_ms=r[12], caused_by=r[13],
                      event_seq=r[14], tool_version=r[15], domain=r[16])
