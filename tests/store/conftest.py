"""Session-store backends for the conformance suite: in-memory, SQLite, real PostgreSQL.

PostgreSQL is the one at ``HERMES_TEST_POSTGRES_URL`` (see tests/memory/conftest.py);
each test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hermes_fsm.store import InMemoryStore, SQLiteStore
from tests.memory.conftest import PG_URL, REDIS_URL, need

__all__ = ["PG_URL", "REDIS_URL", "make_store"]


async def make_store(kind: str, tmp_path: Any) -> Any:
    """A fresh, opened store of ``kind`` (``memory``, ``sqlite``, ``postgres``)."""
    if kind == "postgres":
        need(PG_URL, 5432, "PostgreSQL")
        from hermes_fsm.store import PostgresStore

        store: Any = PostgresStore(PG_URL, schema=f"hermes_test_{uuid.uuid4().hex[:10]}")
    elif kind == "sqlite":
        store = SQLiteStore(tmp_path / "sessions.sqlite3")
    else:
        store = InMemoryStore()
    await store.open()
    return store


async def dispose_store(store: Any) -> None:
    if hasattr(store, "drop_schema"):
        await store.drop_schema()
    await store.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: Any, tmp_path: Any) -> AsyncIterator[Any]:
    made = await make_store(request.param, tmp_path)
    yield made
    await dispose_store(made)
