"""``hermes-fsm memory optimize``: Edge's optimizers build the HNSW index of the embedded
store off the turn path; what a search finds is the same before and after."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from datetime import UTC, datetime

import numpy as np

from hermes_fsm.cli.main import main
from hermes_fsm.config.memory import build_memory
from hermes_fsm.memory import MemoryItem
from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
from hermes_fsm.memory.settings import EmbedderConfig, MemoryConfig

NOW = datetime(2026, 3, 1, tzinfo=UTC)
N = 6000  # 512-dim vectors: above Qdrant's default indexing threshold (10 MB)
HASHING = EmbedderConfig(kind="hashing")


def test_memory_optimize_indexes_the_store_and_search_finds_the_same(tmp_path,
                                                                     monkeypatch) -> None:
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((N, 512)).astype(np.float32)
    batch = [MemoryItem("u1", f"fact.{i}", f"fact {i}", "fact", 0.8, "active", NOW, NOW,
                        "user_message", f"t{i}", item_id=str(uuid.UUID(int=i + 1)))
             for i in range(N)]
    query = (vectors[42] + 0.01 * rng.standard_normal(512)).tolist()

    async def fill_and_search() -> tuple[list[str], dict[str, int]]:
        memory = build_memory(MemoryConfig(data_dir=tmp_path, embedder=HASHING))
        store = memory.semantic
        assert isinstance(store, EdgeSemanticStore)
        for start in range(0, N, 1000):
            await store.put(batch[start:start + 1000], vectors[start:start + 1000].tolist())
        found = [i.item_id for i in await store.search("u1", query, 5)]
        status = await store.index_status()
        await memory.close()
        return found, status

    async def search_again() -> list[str]:
        memory = build_memory(MemoryConfig(data_dir=tmp_path, embedder=HASHING))
        try:
            return [i.item_id for i in await memory.semantic.search("u1", query, 5)]
        finally:
            await memory.close()

    before, status = asyncio.run(fill_and_search())
    assert status["points"] == N and status["indexed"] == 0
    out = io.StringIO()
    assert main(["memory", "optimize", "--json"], out=out) == 0
    report = json.loads(out.getvalue())
    assert report["before"]["indexed"] == 0
    assert report["after"]["indexed"] == N and report["changed"] is True
    assert before[0] == batch[42].item_id
    assert asyncio.run(search_again())[0] == before[0]


def test_memory_optimize_takes_no_user(capsys) -> None:
    assert main(["memory", "optimize", "--user", "u1"]) == 1
    assert "works on the whole store" in capsys.readouterr().err
