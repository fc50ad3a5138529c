"""Opening a PostgreSQL connection pool and migrating its schema: one way for every backend.

Backends (the session store, the experience log) call :func:`open_pool`; a failure to
import psycopg, to connect, or to migrate becomes the backend's own error type, saying
what to check.

Dropped connections (the server restarted, ``pg_terminate_backend``, a proxy's idle
timeout) usually drop together. The pool checks a connection before handing it out, but
it finds dead ones one at a time and backs off between them (1 s, 2 s, 4 s …): with a
pool of eight dead connections a request waited 30 s and failed with ``PoolTimeout``
while fresh connections sat behind the dead ones. So the pool's check here sweeps every
idle connection as soon as one is found dead (:func:`sweep_pool`: the dead are replaced
at once), and :func:`dropped` tells a caller when a statement failed on its connection,
not on its data, so that trying it again on a fresh one can help.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hermes_fsm._internal.redact import redact

__all__ = ["close_pool", "drop_schema", "dropped", "migrate_schema", "open_pool", "sweep_pool"]


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
    made: list[Any] = []

    async def check(conn: Any) -> None:  # the pool's check of a connection it hands out
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:  # its neighbours are likely dead too: replace them all now
            await sweep_pool(made[0])
            raise

    pool = AsyncConnectionPool(url, min_size=1, max_size=size, open=False, check=check,
                               kwargs=options)
    made.append(pool)
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


async def sweep_pool(pool: Any) -> None:
    """Check every idle connection of ``pool`` now (no backoff between them): the dead are
    discarded and replaced in the background, the live go back. Call it when a connection
    was found dropped, before trying again."""
    await pool.check()


def dropped(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection that failed or was dropped (so the statement may be
    tried again on a fresh one), not a refusal of the statement or its data, and not the
    pool's own timeout (which already waited)."""
    try:
        import psycopg
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover - depends on the install
        return False
    if isinstance(exc, PoolTimeout):
        return False
    if isinstance(exc, psycopg.errors.AdminShutdown | psycopg.errors.CrashShutdown |
                  psycopg.errors.CannotConnectNow):
        return True  # class 57P: the server ended the session
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return not getattr(exc, "sqlstate", None) or str(exc.sqlstate).startswith("08")
    return False


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
