"""Moving an old embedded store to the current layout: ``data_dir/qdrant`` (qdrant-client
local mode, the embedded store before Qdrant Edge) into ``data_dir/edge``.

Every point of the old collection — any user, any status, its vector as stored — is
written to the Edge shard in batches (upserts by item id: a migration cut short and run
again converges), then the old directory is renamed ``qdrant.migrated`` (kept, not
deleted: removing it is the operator's call). ``hermes-fsm memory migrate`` runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_fsm.errors import UsageError
from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
from hermes_fsm.memory.items import MemoryItem

__all__ = ["migrate_qdrant_local"]

_BATCH = 1000


async def migrate_qdrant_local(
    data_dir: str | Path, edge: EdgeSemanticStore, *, collection: str = "hermes_memory"
) -> int:
    """Copy ``data_dir/qdrant`` into ``edge`` (which must hold nothing yet), then rename
    the old directory; returns how many items were moved.

    Raises:
        UsageError: there is no old store, or ``edge`` holds items already (nothing is
            changed either way).
    """
    from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore

    data_dir = Path(data_dir).expanduser()
    old_path = data_dir / "qdrant"
    if not (old_path / "collection").exists():
        raise UsageError(
            f"no old memory store at {old_path} (qdrant-client local mode): nothing to migrate"
        )
    if await _holds_items(edge):
        raise UsageError(
            f"{edge.name} holds items already: migrate into an empty store "
            "(move it aside first), or keep it and remove the old one"
        )
    old = QdrantSemanticStore(edge.dim, path=str(old_path), collection=collection)
    moved = 0
    try:
        client = await old._open()
        offset: Any = None
        while True:
            points, offset = await client.scroll(
                collection, limit=_BATCH, offset=offset, with_payload=True, with_vectors=True
            )
            if points:
                await edge.put(
                    [MemoryItem.from_payload(p.payload) for p in points], [p.vector for p in points]
                )
                moved += len(points)
            if offset is None:
                break
    finally:
        await old.close()
    old_path.rename(old_path.with_name("qdrant.migrated"))
    return moved


async def _holds_items(edge: EdgeSemanticStore) -> bool:
    if not (edge.path / "edge_config.json").exists():
        return False
    import qdrant_edge as qe

    shard = edge.open_now()
    return int(shard.count(qe.CountRequest(exact=True))) > 0
