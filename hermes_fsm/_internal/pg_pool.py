"""Opening a PostgreSQL connection pool and migrating its schema: one way for every backend.

Backends (the session store, the experience log) call :func:`open_pool`; a failure to
import psycopg, to connect, or to migrate becomes the backend's own error type, saying
what to check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hermes_fsm._internal.redact import redact

__all__ = ["close_pool", "drop_schema", "migrate_schema", "open_pool"]


async def open_pool(url: str, *, size: int, name: str, what: str,
                    migrate: Callable[[Any], Awaitable[None]], error: type[Exception],
                    application_name: str | None = None) -> Any:
    """An open ``psycopg_pool.AsyncConnectionPool`` whose schema ``migrate`` has brought
    up to date (autocommit connections, 5 s connect timeout, 10 s to open).

    Args:
        name: the backend, for messages (e.g. "PostgreSQL session store at …").
        what: what needs psycopg, for the install hint (e.g. "the PostgreSQL session store").

    Raises:
        error: psycopg is missing, or the pool cannot open or migrate.
    """
    try:
        from psycopg_pool import AsyncConnectionPool
    except ImportError:  # pragma: no cover - depends on the install
        raise error(f"{what} needs psycopg: pip install 'hermes-fsm[postgres]'") from None
    options: dict[str, Any] = {"autocommit": True, "connect_timeout": 5}
    if application_name:
        options["application_name"] = application_name
    pool = AsyncConnectionPool(url, min_size=1, max_size=size, open=False,
                               check=AsyncConnectionPool.check_connection, kwargs=options)
    try:
        await pool.open(wait=True, timeout=10)
        await migrate(pool)
    except Exception as exc:
        await pool.close()
        if isinstance(exc, error):  # ours, already saying what to do (a newer schema)
            raise
        raise error(f"{name}: cannot open ({redact(f'{type(exc).__name__}: {exc}')}); "
                    "check HERMES_POSTGRES_URL and that PostgreSQL is up") from exc
    return pool


async def migrate_schema(pool: Any, schema: str, lock: str, migrations: Sequence[str], *,
                         on_newer: Callable[[int], Exception]) -> None:
    """Bring ``schema`` (a quoted identifier) up to ``migrations``, in one transaction under
    an advisory lock named ``lock`` (so processes starting together migrate once).

    Each DDL is formatted with ``s`` and ``schema`` (both the quoted schema); the applied
    versions are kept in ``hermes_schema_version``. ``on_newer(version)`` is raised when
    the stored version is newer than ``migrations`` knows (a database migrated by a newer
    hermes-fsm is never written by an older one).
    """
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock,))
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {schema}.hermes_schema_version "
                           "(version INTEGER NOT NULL)")
        row = await (await conn.execute(
            f"SELECT max(version) FROM {schema}.hermes_schema_version")).fetchone()
        version = row[0] or 0
        if version > len(migrations):
            raise on_newer(version)
        for number, ddl in enumerate(migrations[version:], start=version + 1):
            await conn.execute(ddl.format(s=schema, schema=schema))
            await conn.execute(f"INSERT INTO {schema}.hermes_schema_version VALUES (%s)",
                               (number,))


async def drop_schema(pool: Any, schema: str) -> None:
    """Drop ``schema`` (a quoted identifier) and everything in it: tests; irreversible."""
    async with pool.connection() as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def close_pool(owner: Any) -> None:
    """Close ``owner._pool`` if it is open, and forget it (idempotent)."""
    if owner._pool is not None:
        pool, owner._pool = owner._pool, None
        await pool.close()
