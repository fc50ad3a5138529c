"""Qdrant local mode on disk: one write is one SQLite transaction — all of it or none of it
on disk, and the store's memory never stays ahead of its file."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory import HashingEmbedder, MemoryItem
from hermes_fsm.memory.qdrant_local import one_transaction, persistence_of
from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore
from hermes_fsm.memory.semantic import Mark

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EMBED = HashingEmbedder(64)


def items(user: str, n: int, start: int = 0) -> list[MemoryItem]:
    return [MemoryItem(user, f"fact.{i}", f"value {i}", "fact", 0.9, "active",
                       T0 + timedelta(minutes=i), T0 + timedelta(minutes=i), "user_message",
                       f"turn-{i}", item_id=f"00000000-0000-0000-0000-{i:012d}")
            for i in range(start, start + n)]


def vectors(batch: list[MemoryItem]) -> list[list[float]]:
    return EMBED.embed([str(i.value) for i in batch])


@pytest.fixture
async def store(tmp_path):
    store = QdrantSemanticStore(64, path=str(tmp_path / "qdrant"))
    yield store
    await store.close()


async def statements(store: QdrantSemanticStore) -> list[str]:
    """Every SQL statement the collection's persistence runs from now on."""
    client = await store._open()
    persistence = persistence_of(client, store.collection)
    assert persistence is not None, (
        "qdrant-client's local persistence is not where hermes_fsm.memory.qdrant_local "
        "looks for it (collections[name].storage.storage): writes would commit per point")
    seen: list[str] = []
    persistence.storage.set_trace_callback(seen.append)
    return seen


async def test_the_installed_qdrant_client_writes_a_batch_in_one_transaction(store):
    client = await store._open()
    with one_transaction(client, store.collection) as batched:
        assert batched


async def test_one_write_of_many_points_commits_once(store):
    seen = await statements(store)
    first = items("u1", 20)
    await store.put(first, vectors(first))
    assert seen.count("COMMIT") == 1
    assert sum(s.startswith("INSERT OR REPLACE") for s in seen) == 20
    seen.clear()
    newer = items("u1", 5, start=20)
    await store.write([Mark("u1", tuple(i.item_id for i in first[:3]), "superseded",
                            newer[0].item_id, T0)], newer, vectors(newer))
    assert seen.count("COMMIT") == 1
    assert sum(s.startswith("INSERT OR REPLACE") for s in seen) == 8  # 3 marked + 5 new


async def test_status_changes_and_new_items_of_one_write_survive_a_reopen(tmp_path):
    path = str(tmp_path / "qdrant")
    store = QdrantSemanticStore(64, path=path)
    old = items("u1", 2)
    await store.put(old, vectors(old))
    new = items("u1", 1, start=2)
    await store.write([Mark("u1", (old[0].item_id,), "superseded", new[0].item_id, T0),
                       Mark("u2", (old[1].item_id,), "deleted", None, T0)],  # not u2's
                      new, vectors(new))
    await store.close()
    reopened = QdrantSemanticStore(64, path=path)
    try:
        by_id = {i.item_id: i for i in await reopened.items("u1")}
        assert (by_id[old[0].item_id].status, by_id[old[0].item_id].superseded_by) == (
            "superseded", new[0].item_id)
        assert by_id[old[1].item_id].status == "active"
        assert by_id[new[0].item_id].status == "active"
        assert await reopened.count("u1") == 3
    finally:
        await reopened.close()


async def test_a_write_failing_half_way_stores_nothing_and_a_retry_stores_all(store, tmp_path):
    kept = items("u1", 3)
    await store.put(kept, vectors(kept))
    client = await store._open()
    persistence = persistence_of(client, store.collection)
    real_persist, calls = persistence.persist, []

    def persist_then_fail(point):  # the disk fills up at the third point of the write
        calls.append(point.id)
        if len(calls) == 3:
            raise sqlite3.OperationalError("database or disk is full")
        real_persist(point)

    persistence.persist = persist_then_fail
    batch = items("u1", 5, start=3)
    with pytest.raises(MemoryStoreError, match="nothing of it was stored"):
        await store.put(batch, vectors(batch))
    assert len(calls) == 3  # two points were stored and applied in memory before the failure
    # the store dropped qdrant's copy (ahead of its file) and reads the file again
    assert {i.item_id for i in await store.items("u1")} == {i.item_id for i in kept}
    assert await store.count("u1") == 3
    await store.put(batch, vectors(batch))
    assert await store.count("u1") == 8
    assert len(await store.items("u1")) == 8


async def test_forget_deletes_a_users_points_in_one_transaction(store):
    mine, theirs = items("u1", 4), items("u2", 2, start=10)
    await store.put(mine + theirs, vectors(mine + theirs))
    seen = await statements(store)
    assert await store.delete_user("u1") == 4
    assert seen.count("COMMIT") == 1
    assert await store.count("u1") == 0
    assert await store.count("u2") == 2
