"""Qdrant local mode on disk: one write is one SQLite transaction — all of it or none of it
on disk, and the store's memory never stays ahead of its file; the batched write path
(:class:`DirectWriter`) stores and holds exactly what qdrant-client's public API would."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory import HashingEmbedder, MemoryItem
from hermes_fsm.memory.qdrant_local import DirectWriter, one_transaction, persistence_of
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


def public_api_only(monkeypatch):
    """Writes go through qdrant-client's public API (what DirectWriter stands in for)."""
    monkeypatch.setattr(DirectWriter, "of", classmethod(lambda cls, *args: None))


async def test_a_public_api_write_failing_half_way_stores_nothing_and_a_retry_stores_all(
        store, monkeypatch):
    public_api_only(monkeypatch)
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


# --- the batched write path (DirectWriter) ---------------------------------------------


async def test_the_installed_qdrant_client_takes_the_batched_write_path(store):
    client = await store._open()
    assert DirectWriter.of(client, store.collection, store.dim) is not None, (
        "hermes_fsm.memory.qdrant_local.DirectWriter does not recognise the installed "
        "qdrant-client (version or LocalCollection layout changed): embedded memory writes "
        "fall back to the public API (correct, several times slower). Check the new "
        "version's LocalCollection._add_point/_update_point/set_payload and "
        "CollectionPersistence.persist against DirectWriter, then update VERIFIED_VERSIONS / "
        "COLLECTION_FIELDS")
    first = items("u1", 3)
    await store.put(first, vectors(first))
    assert DirectWriter.of(client, store.collection, store.dim) is not None


async def scenario(path: str) -> QdrantSemanticStore:
    """Every kind of write: new points, status changes (superseded, deleted: a null
    removes the key), a point replaced, writes after a reopen (vectors loaded from disk),
    a forgotten user's point written again. Returns the store, open."""
    store = QdrantSemanticStore(64, path=path)
    u1, u2 = items("u1", 6), items("u2", 3, start=100)
    await store.put(u1 + u2, vectors(u1 + u2))
    new = items("u1", 2, start=6)
    await store.write([Mark("u1", (u1[0].item_id, u1[1].item_id), "superseded",
                            new[0].item_id, T0 + timedelta(hours=1)),
                       Mark("u1", (u1[2].item_id,), "deleted", None, T0 + timedelta(hours=1)),
                       Mark("u1", (u2[0].item_id,), "deleted", None, T0)],  # not u1's
                      new, vectors(new))
    changed = replace(u1[3], value="a new value", confidence=0.5)
    await store.put([changed], vectors([changed]))
    await store.close()
    store = QdrantSemanticStore(64, path=path)
    later = items("u1", 3, start=8)
    await store.write([Mark("u1", (new[0].item_id,), "superseded", later[0].item_id,
                            T0 + timedelta(hours=2))], later, vectors(later))
    assert await store.delete_user("u2") == 3
    await store.put(u2[:1], vectors(u2[:1]))
    await store.write([Mark("u1", (u1[4].item_id,), "superseded", later[1].item_id,
                            T0 + timedelta(hours=3))], (), ())
    return store


def rows(path: str) -> list[tuple[str, bytes]]:
    file = Path(path) / "collection" / "hermes_memory" / "storage.sqlite"
    with sqlite3.connect(file) as db:
        return db.execute("SELECT id, point FROM points ORDER BY rowid").fetchall()


def memory_of(store: QdrantSemanticStore) -> dict[str, Any]:
    collection = store._client._client.collections[store.collection]
    n = len(collection.payload)
    return {"ids": dict(collection.ids), "ids_inv": list(collection.ids_inv),
            "payload": list(collection.payload),
            "deleted": (collection.deleted.dtype, collection.deleted.tolist()),
            "deleted_per_vector": {k: (v.dtype, v.tolist())
                                   for k, v in collection.deleted_per_vector.items()},
            "vectors": {k: (v.dtype, v[:n].tobytes()) for k, v in collection.vectors.items()}}


async def test_the_batched_path_stores_and_holds_exactly_what_the_public_api_does(
        tmp_path, monkeypatch):
    with monkeypatch.context() as patched:
        public_api_only(patched)
        public = await scenario(str(tmp_path / "public"))
    stored: list[int] = []
    store_rows = DirectWriter.store

    def counted(self: DirectWriter, prepared: Any) -> Any:
        stored.append(1)
        return store_rows(self, prepared)

    monkeypatch.setattr(DirectWriter, "store", counted)
    direct = await scenario(str(tmp_path / "direct"))
    assert len(stored) == 6  # every write but forget's went the batched way
    try:
        assert memory_of(direct) == memory_of(public)
        assert await direct.items("u1") == await public.items("u1")
        assert await direct.items("u2") == await public.items("u2")
    finally:
        await direct.close()
        await public.close()
    assert rows(str(tmp_path / "direct")) == rows(str(tmp_path / "public"))  # bit for bit


async def test_a_store_written_by_the_batched_path_reads_back_with_a_plain_client(tmp_path):
    from qdrant_client import QdrantClient

    path = str(tmp_path / "direct")
    store = await scenario(path)
    expected = {i.item_id: i for u in ("u1", "u2") for i in await store.items(u)}
    await store.close()
    plain = QdrantClient(path=path)
    try:
        points, _ = plain.scroll("hermes_memory", limit=100, with_payload=True,
                                 with_vectors=True)
    finally:
        plain.close()
    assert {str(p.id) for p in points} == set(expected)
    for p in points:
        assert p.payload is not None
        assert MemoryItem.from_payload(p.payload) == expected[str(p.id)]
        item = expected[str(p.id)]
        want = np.asarray(EMBED.embed([str(item.value)])[0], dtype=np.float32)
        vector: Any = p.vector  # one unnamed vector per point
        assert np.allclose(vector, want / np.linalg.norm(want), atol=1e-6)


async def test_a_batched_write_failing_half_way_stores_nothing_and_a_retry_stores_all(store):
    kept = items("u1", 3)
    await store.put(kept, vectors(kept))
    client = await store._open()
    connection = persistence_of(client, store.collection).storage
    connection.execute("CREATE TEMP TRIGGER disk_full BEFORE INSERT ON points "
                       "WHEN (SELECT count(*) FROM points) >= 5 "
                       "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    batch = items("u1", 5, start=3)
    newer = items("u1", 1, start=8)
    with pytest.raises(MemoryStoreError, match="nothing of it was stored"):
        await store.write([Mark("u1", (kept[0].item_id,), "superseded", newer[0].item_id,
                                T0)], batch + newer, vectors(batch + newer))
    assert {i.item_id: i.status for i in await store.items("u1")} == {
        i.item_id: "active" for i in kept}
    assert await store.count("u1") == 3
    assert len(rows_now(connection)) == 3
    connection.execute("DROP TRIGGER disk_full")
    await store.write([Mark("u1", (kept[0].item_id,), "superseded", newer[0].item_id, T0)],
                      batch + newer, vectors(batch + newer))
    assert await store.count("u1") == 9
    assert len(rows_now(connection)) == 9
    assert (await store.get("u1", [kept[0].item_id]))[0].status == "superseded"


def rows_now(connection: sqlite3.Connection) -> list[tuple[str]]:
    return connection.execute("SELECT id FROM points").fetchall()


async def test_a_collection_of_another_layout_is_written_through_the_public_api(store):
    client = await store._open()
    collection = client._client.collections[store.collection]
    collection.something_new = []  # a later qdrant-client keeping more per point
    assert DirectWriter.of(client, store.collection, store.dim) is None
    batch = items("u1", 4)
    await store.put(batch, vectors(batch))
    assert await store.count("u1") == 4
    assert {i.item_id for i in await store.items("u1")} == {i.item_id for i in batch}


async def test_a_cancelled_writer_still_ends_its_write_before_the_next_one(store):
    await store._open()
    batch = items("u1", 50)
    writing = asyncio.ensure_future(store.put(batch, vectors(batch)))
    for _ in range(3):  # into the write (maybe into its commit, in SQLite's thread)
        await asyncio.sleep(0)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    more = items("u1", 2, start=50)
    await store.put(more, vectors(more))
    held = {i.item_id for i in await store.items("u1")}
    assert await store.count("u1") == len(held)  # the file and the index agree
    assert held in ({i.item_id for i in more}, {i.item_id for i in batch + more})
    await store.close()  # reopened: the file holds what the index held
    assert {i.item_id for i in await store.items("u1")} == held


async def test_a_batch_with_a_point_id_qdrant_refuses_is_refused_whole(store):
    from dataclasses import replace as with_fields

    kept = items("u1", 2)
    await store.put(kept, vectors(kept))
    batch = items("u1", 3, start=2)
    batch[1] = with_fields(batch[1], item_id="not-a-uuid")
    with pytest.raises(MemoryStoreError, match=r"write refused .*nothing of it was stored"):
        await store.put(batch, vectors(batch))
    assert await store.count("u1") == 2
    await store.close()  # and on disk: reopened, the same
    assert await store.count("u1") == 2


async def test_a_write_stored_but_not_applied_in_memory_reloads_and_its_retry_adds_nothing(
        store, monkeypatch):
    kept = items("u1", 2)
    await store.put(kept, vectors(kept))
    batch = items("u1", 3, start=2)

    def broken(self, prepared):
        raise RuntimeError("applying failed (test)")

    with monkeypatch.context() as patched:
        patched.setattr(DirectWriter, "apply", broken)
        with pytest.raises(MemoryStoreError, match="stored, but applying it in memory failed"):
            await store.put(batch, vectors(batch))
    assert store._client is None  # dropped: the next use reloads the file
    assert await store.count("u1") == 5  # the file held the write
    await store.put(batch, vectors(batch))  # the commit's retry
    assert await store.count("u1") == 5
    assert {i.item_id for i in await store.items("u1")} == {i.item_id for i in kept + batch}
