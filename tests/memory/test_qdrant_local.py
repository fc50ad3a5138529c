"""Qdrant local mode (on disk and ``":memory:"``), written through qdrant-client's public
API: a write survives a reopen; a write refused by qdrant stores nothing; a write cut short
leaves the store's index agreeing with what qdrant holds, and doing it again converges."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory import HashingEmbedder, MemoryItem
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


@pytest.fixture(params=["disk", ":memory:"])
async def store(request: pytest.FixtureRequest,
                tmp_path: Path) -> AsyncIterator[QdrantSemanticStore]:
    path = str(tmp_path / "qdrant") if request.param == "disk" else ":memory:"
    store = QdrantSemanticStore(64, path=path)
    yield store
    await store.close()


async def held(store: QdrantSemanticStore, user: str) -> dict[str, str]:
    """Item id -> status of ``user``'s points as qdrant holds them (not the store's index)."""
    from qdrant_client import models

    client = await store._open()
    points, _ = await client.scroll(store.collection, limit=1000, with_payload=True,
                                    scroll_filter=models.Filter(must=[models.FieldCondition(
                                        key="user_id", match=models.MatchValue(value=user))]))
    return {str(p.id): p.payload["status"] for p in points if p.payload is not None}


async def indexed(store: QdrantSemanticStore, user: str) -> dict[str, str]:
    """Item id -> status of ``user``'s items as the store answers reads (its index)."""
    return {i.item_id: i.status for i in await store.items(user)}


async def test_status_changes_and_new_items_of_one_write_survive_a_reopen(
        tmp_path: Path) -> None:
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


async def test_a_batch_with_a_point_id_qdrant_refuses_is_refused_whole(
        store: QdrantSemanticStore) -> None:
    kept = items("u1", 2)
    await store.put(kept, vectors(kept))
    batch = items("u1", 3, start=2)
    batch[1] = replace(batch[1], item_id="not-a-uuid")
    with pytest.raises(MemoryStoreError, match="write failed"):
        await store.write([Mark("u1", (kept[0].item_id,), "superseded", batch[0].item_id,
                                T0)], batch, vectors(batch))
    expected = {i.item_id: "active" for i in kept}  # the status change was not stored either
    assert await held(store, "u1") == expected
    assert await indexed(store, "u1") == expected
    if store.path != ":memory:":
        await store.close()  # and on disk: reopened, the same
        assert await indexed(store, "u1") == expected


@pytest.mark.parametrize(("cut", "raised"), [
    (OSError("database or disk is full"), MemoryStoreError),
    (asyncio.CancelledError(), asyncio.CancelledError)], ids=["fails", "cancelled"])
async def test_a_write_cut_short_leaves_the_index_agreeing_with_qdrant_and_a_retry_converges(
        store: QdrantSemanticStore, monkeypatch: pytest.MonkeyPatch, cut: BaseException,
        raised: type[BaseException]) -> None:
    kept = items("u1", 3)
    await store.put(kept, vectors(kept))
    client = await store._open()
    real = client.batch_update_points

    async def status_changes_then_cut(collection: str, operations: list[Any],
                                      **kwargs: Any) -> None:
        await real(collection, operations[:-1], **kwargs)  # stored; the new points are not
        raise cut

    monkeypatch.setattr(client, "batch_update_points", status_changes_then_cut)
    batch = items("u1", 2, start=3)
    marks = [Mark("u1", (kept[0].item_id,), "superseded", batch[0].item_id, T0)]
    with pytest.raises(raised):
        await store.write(marks, batch, vectors(batch))
    monkeypatch.undo()
    cut_short = {kept[0].item_id: "superseded", kept[1].item_id: "active",
                 kept[2].item_id: "active"}
    assert await held(store, "u1") == cut_short
    assert await indexed(store, "u1") == cut_short  # re-read: not what it held before
    await store.write(marks, batch, vectors(batch))  # the retry
    done = {**cut_short, batch[0].item_id: "active", batch[1].item_id: "active"}
    assert await held(store, "u1") == done
    assert await indexed(store, "u1") == done
    assert await store.count("u1") == 5


async def test_forget_cut_short_leaves_the_index_agreeing_with_qdrant(
        store: QdrantSemanticStore, monkeypatch: pytest.MonkeyPatch) -> None:
    mine, theirs = items("u1", 4), items("u2", 2, start=10)
    await store.put(mine + theirs, vectors(mine + theirs))
    client = await store._open()
    real = client.delete

    async def half_then_fail(collection: str, points_selector: Any, **kwargs: Any) -> None:
        points = points_selector.points
        await real(collection, points_selector=type(points_selector)(
            points=points[:2]), **kwargs)
        raise OSError("database or disk is full")

    monkeypatch.setattr(client, "delete", half_then_fail)
    with pytest.raises(MemoryStoreError, match="delete failed"):
        await store.delete_user("u1")
    monkeypatch.undo()
    assert len(await held(store, "u1")) == 2
    assert await indexed(store, "u1") == await held(store, "u1")
    assert await store.delete_user("u1") == 2  # again: what was left
    assert await store.count("u1") == 0
    assert await store.count("u2") == 2
    assert len(await indexed(store, "u2")) == 2


async def test_an_old_local_mode_store_migrates_into_qdrant_edge(tmp_path) -> None:
    """A data dir written by the old embedded store (qdrant-client local mode under
    ``data_dir/qdrant``) is moved into the Edge shard: every item of every user, with its
    status and vector; recall works on the new store; the old directory is kept renamed."""
    from datetime import UTC, datetime, timedelta

    from hermes_fsm.contracts.states import MemoryUpdate
    from hermes_fsm.errors import UsageError
    from hermes_fsm.memory import HashingEmbedder, InProcessWorkingMemory, TieredMemory
    from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
    from hermes_fsm.memory.migrate import migrate_qdrant_local
    from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore
    from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog

    embedder = HashingEmbedder(64)
    now = datetime(2026, 3, 1, tzinfo=UTC)

    def tiers(semantic: object) -> TieredMemory:
        return TieredMemory(working=InProcessWorkingMemory(), semantic=semantic,  # type: ignore[arg-type]
                            experience=SQLiteExperienceLog(), embedder=embedder)

    old = tiers(QdrantSemanticStore(64, path=str(tmp_path / "qdrant")))
    said = [("alice", "email", "Please contact me by email"),
            ("alice", "phone", "Actually call me on the phone"),
            ("bob", "wechat", "请用微信联系我")]
    for n, (user, value, text) in enumerate(said):
        await old.apply(user, f"turn-{n}", [MemoryUpdate(
            key="preference.contact_channel", update_type="create", value=value,
            evidence_source="user_message")], now + timedelta(hours=n), text=text)
    before = {u: await old.items(u) for u in ("alice", "bob")}
    await old.close()

    edge = EdgeSemanticStore(64, tmp_path / "edge", embedder=embedder.name)
    assert await migrate_qdrant_local(tmp_path, edge) == 3
    assert not (tmp_path / "qdrant").exists() and (tmp_path / "qdrant.migrated").exists()
    new = tiers(edge)
    try:
        for user, items in before.items():
            assert await new.items(user) == items  # statuses, times, texts: all kept
        (found, *_) = await new.recall("alice", "contact phone", now=now + timedelta(days=1))
        assert (found.value, found.status) == ("phone", "active")
        with pytest.raises(UsageError, match="no old memory store"):
            await migrate_qdrant_local(tmp_path, edge)
        (tmp_path / "qdrant.migrated").rename(tmp_path / "qdrant")
        with pytest.raises(UsageError, match="holds items already"):
            await migrate_qdrant_local(tmp_path, edge)
    finally:
        await new.close()
