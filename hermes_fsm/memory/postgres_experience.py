"""The experience log on PostgreSQL (psycopg 3, async, pooled).

The package creates and migrates its schema on open: ``{schema}.hermes_schema_version``
holds the applied version; migrations run in one transaction under an advisory lock, so
concurrent processes starting together migrate once. A batch of entries is one
transaction: a connection dropped mid-write leaves nothing written.

Requires the ``postgres`` extra: ``pip install 'hermes-fsm[postgres]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import MemoryStoreError
from ..pg_pool import close_pool, drop_schema, open_pool
from .embedders import Embedder, HashingEmbedder
from .experience import Experience, top_requests

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
]
_COLUMNS = ("entry_id, kind, user_id, session_id, turn_id, at, ok, tool, request, arguments, "
            "error_code, detail, duration_ms, caused_by, event_seq")


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
        self.name = f"PostgreSQL experience log at {_redact(url)} (schema {schema})"
        self.embedder = embedder or HashingEmbedder()
        self._pool_size = pool_size
        self._pool: Any = None
        self._table = f'"{schema}".hermes_experience'

    async def _open(self) -> Any:
        if self._pool is not None:
            return self._pool
        self._pool = await open_pool(self.url, size=self._pool_size, name=self.name,
                                     what="the PostgreSQL experience log",
                                     migrate=self._migrate, error=MemoryStoreError)
        return self._pool

    async def _migrate(self, pool: Any) -> None:
        schema = f'"{self.schema}"'
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                               (f"hermes-migrate:{self.schema}",))
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            await conn.execute(f"CREATE TABLE IF NOT EXISTS {schema}.hermes_schema_version "
                               "(version INTEGER NOT NULL)")
            row = await (await conn.execute(
                f"SELECT max(version) FROM {schema}.hermes_schema_version")).fetchone()
            version = row[0] or 0
            for number, ddl in enumerate(_MIGRATIONS[version:], start=version + 1):
                await conn.execute(ddl.format(schema=schema))
                await conn.execute(f"INSERT INTO {schema}.hermes_schema_version VALUES (%s)",
                                   (number,))

    async def record(self, entries: Sequence[Experience]) -> int:
        if not entries:
            return 0
        from psycopg.types.json import Jsonb

        pool = await self._open()
        rows = [(e.entry_id, e.kind, e.user_id, e.session_id, e.turn_id, e.at, e.ok, e.tool,
                 e.request, Jsonb(e.arguments), e.error_code, Jsonb(e.detail), e.duration_ms,
                 e.caused_by, e.event_seq) for e in entries]
        try:
            async with pool.connection() as conn:
                async with conn.transaction():
                    async with conn.cursor() as cur:
                        await cur.executemany(
                            f"INSERT INTO {self._table} ({_COLUMNS}) VALUES "
                            f"({', '.join(['%s'] * 15)}) ON CONFLICT (entry_id) DO NOTHING "
                            "RETURNING entry_id", rows, returning=True)
                        new = 0
                        while True:
                            new += len(await cur.fetchall())
                            if not cur.nextset():
                                break
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
            "WHERE kind = 'tool_call' AND tool = %s AND at > %s AND at <= %s",
            (tool, now - window, now))
        return failed / total if total else 0.0

    async def similar_outcomes(self, user_id: str, text: str, k: int = 5) -> list[Experience]:
        candidates = await self._fetch(
            f"SELECT entry_id, request FROM {self._table} WHERE user_id = %s "
            "AND kind = 'tool_call' ORDER BY at DESC LIMIT 500", (user_id,))
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


def _entry(r: Sequence[Any]) -> Experience:
    return Experience(entry_id=r[0], kind=r[1], user_id=r[2], session_id=r[3], turn_id=r[4],
                      at=r[5], ok=bool(r[6]), tool=r[7], request=r[8], arguments=r[9] or {},
                      error_code=r[10], detail=r[11], duration_ms=r[12], caused_by=r[13],
                      event_seq=r[14])


def _redact(url: str) -> str:
    """The URL without its password."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
    return url
