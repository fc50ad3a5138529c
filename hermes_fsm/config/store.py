"""The session store and lease a configuration asks for (see ``SessionsConfig``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_fsm.errors import ConfigError
from hermes_fsm.memory.settings import default_data_dir
from hermes_fsm.store.lease import LocalLease, RedisLease
from hermes_fsm.store.memory import InMemoryStore
from hermes_fsm.store.protocol import SessionStore
from hermes_fsm.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from hermes_fsm.config.settings import HermesConfig

__all__ = ["build_lease", "build_store"]


def build_store(config: HermesConfig) -> SessionStore:
    """PostgreSQL when a URL is configured (``HERMES_POSTGRES_URL``), else SQLite.

    Raises:
        ConfigError: ``sessions.store: postgres`` without a PostgreSQL URL.
    """
    kind = config.sessions.store
    url = config.memory.postgres_url
    if kind == "auto":
        kind = "postgres" if url else "sqlite"
    if kind == "memory":
        return InMemoryStore()
    if kind == "postgres":
        if not url:
            raise ConfigError("sessions.store is postgres but no PostgreSQL URL is set; set "
                              "HERMES_POSTGRES_URL (or memory.postgres_url in the config file)")
        from hermes_fsm.store.postgres import PostgresStore

        return PostgresStore(url, schema=config.sessions.pg_schema)
    path = config.sessions.sqlite_path
    if path is None:
        path = Path(config.memory.data_dir or default_data_dir()).expanduser() / "sessions.sqlite3"
    return SQLiteStore(path)


def build_lease(config: HermesConfig) -> Any:
    """A Redis lease when a URL is configured (``HERMES_REDIS_URL``), else in-process.

    Raises:
        ConfigError: ``sessions.lease: redis`` without a Redis URL.
    """
    kind = config.sessions.lease
    url = config.memory.redis_url
    if kind == "auto":
        kind = "redis" if url else "local"
    if kind == "local":
        return LocalLease()
    if not url:
        raise ConfigError("sessions.lease is redis but no Redis URL is set; set "
                          "HERMES_REDIS_URL (or memory.redis_url in the config file)")

    return RedisLease(url, ttl_s=config.sessions.lease_ttl_s)
