"""Backends for the memory conformance suites: every implementation of every tier.

Real services are the ones on this machine (``.ci/run`` starts them): PostgreSQL at
``HERMES_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``) and
Redis at ``HERMES_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). Each test gets
its own PostgreSQL schema and Redis key prefix, removed afterwards. A Qdrant server is
used when ``HERMES_QDRANT_URL`` is set (none can be installed here).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

import pytest

from hermes_fsm.memory import (
    HashingEmbedder,
    InProcessSemanticStore,
    InProcessWorkingMemory,
    TieredMemory,
)
from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog

PG_URL = os.environ.get("HERMES_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("HERMES_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
QDRANT_URL = os.environ.get("HERMES_QDRANT_URL")
DIM = 256


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1",
                                       parsed.port or default_port), timeout=1):
            return True
    except OSError:
        return False


def need(url: str, port: int, what: str) -> None:
    """Skip (locally) or fail (in CI) when a service is down."""
    if not _reachable(url, port):
        message = f"{what} is not reachable at {url}; start it (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


async def redis_connections_named(name: str, settle_s: float = 1.0) -> int:
    """How many connections named ``name`` Redis still lists (``CLIENT LIST``), waiting up to
    ``settle_s`` for them to go: the server sees a closed socket within a few ms."""
    import asyncio

    import redis.asyncio as aioredis

    admin = aioredis.Redis.from_url(REDIS_URL)
    try:
        for _ in range(max(1, int(settle_s / 0.02))):
            left = sum(c.get("name") == name for c in await admin.client_list())
            if not left:
                break
            await asyncio.sleep(0.02)
        return left
    finally:
        await admin.aclose()


async def make_working(kind: str) -> Any:
    if kind == "redis":
        need(REDIS_URL, 6379, "Redis")
        from hermes_fsm.memory.redis_working import RedisWorkingMemory

        return RedisWorkingMemory(REDIS_URL, prefix=f"hermes-test:{uuid.uuid4().hex}")
    return InProcessWorkingMemory()


async def make_semantic(kind: str, tmp_path: Any, dim: int = DIM) -> Any:
    if kind == "edge":
        return EdgeSemanticStore(dim, tmp_path / "edge")
    if kind == "qdrant_memory":
        return QdrantSemanticStore(dim, path=":memory:")
    if kind == "qdrant_local":
        return QdrantSemanticStore(dim, path=str(tmp_path / "qdrant"))
    if kind == "qdrant_server":
        if not QDRANT_URL:
            pytest.skip("no Qdrant server: set HERMES_QDRANT_URL to run against one")
        return QdrantSemanticStore(dim, url=QDRANT_URL,
                                   collection=f"hermes_test_{uuid.uuid4().hex[:10]}")
    return InProcessSemanticStore(dim)


async def make_experience(kind: str, tmp_path: Any) -> Any:
    if kind == "postgres":
        need(PG_URL, 5432, "PostgreSQL")
        from hermes_fsm.memory.postgres_experience import PostgresExperienceLog

        return PostgresExperienceLog(PG_URL, schema=f"hermes_test_{uuid.uuid4().hex[:10]}",
                                     embedder=HashingEmbedder(DIM))
    if kind == "sqlite_file":
        return SQLiteExperienceLog(tmp_path / "experience.sqlite", HashingEmbedder(DIM))
    return SQLiteExperienceLog(":memory:", HashingEmbedder(DIM))


async def dispose(store: Any) -> None:
    """Remove what a test left in a real service, then close."""
    if hasattr(store, "drop_schema"):
        await store.drop_schema()
    if hasattr(store, "keys") and hasattr(store, "prefix"):
        client = store._redis()
        async for key in client.scan_iter(match=f"{store.prefix}:*"):
            await client.delete(key)
    if isinstance(store, QdrantSemanticStore) and not store.local and store._client:
        await store._client.delete_collection(store.collection)
    await store.close()


@pytest.fixture(params=["in_process", "redis"])
async def working(request: Any) -> AsyncIterator[Any]:
    store = await make_working(request.param)
    yield store
    await dispose(store)


@pytest.fixture(params=["in_process", "edge", "qdrant_memory", "qdrant_local", "qdrant_server"])
async def semantic(request: Any, tmp_path: Any) -> AsyncIterator[Any]:
    store = await make_semantic(request.param, tmp_path)
    yield store
    await dispose(store)


@pytest.fixture(params=["sqlite_memory", "sqlite_file", "postgres"])
async def experience(request: Any, tmp_path: Any) -> AsyncIterator[Any]:
    store = await make_experience(request.param, tmp_path)
    yield store
    await dispose(store)


TIERS = {
    "in_process": ("in_process", "in_process", "sqlite_memory"),
    "embedded": ("in_process", "edge", "sqlite_file"),
    "qdrant_local": ("in_process", "qdrant_local", "sqlite_file"),
    "services": ("redis", "qdrant_memory", "postgres"),
}


@pytest.fixture(params=list(TIERS))
async def memory(request: Any, tmp_path: Any) -> AsyncIterator[TieredMemory]:
    """A TieredMemory per combination: in-process, embedded default, real services."""
    w, s, e = TIERS[request.param]
    tiers = TieredMemory(working=await make_working(w), semantic=await make_semantic(s, tmp_path),
                         experience=await make_experience(e, tmp_path),
                         embedder=HashingEmbedder(DIM))
    yield tiers
    await tiers.background.drain()
    for store in (tiers.working, tiers.semantic, tiers.experience):
        await dispose(store)
