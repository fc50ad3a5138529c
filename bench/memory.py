"""Memory benchmark: recall latency at 10k and 100k items per user, commit throughput.

    .venv/bin/python bench/memory.py [--sizes 10000,100000] [--commits 2000]

Recall: ``TieredMemory.recall`` (embed the query, nearest items, decay, threshold, top 5)
on the semantic store with N items of one user (hashing embedder, 512 dims):
- embedded: Qdrant local mode (the store is filled through ``:memory:`` — filling N
  points on disk costs one fsync'd SQLite commit per point in qdrant-client, ~50/s here —
  recall reads the same in-memory index either way);
- server: Qdrant at ``HERMES_QDRANT_URL``, when set.
Commit: ``apply`` of 10-update commits (each update a new key) on in-process tiers, the
embedded default on disk (Qdrant local mode + SQLite), and Redis + PostgreSQL (+ Qdrant
in-process). Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/http.py would shadow
# the standard library's `http` (which httpx, langgraph and others import): drop it.
_HERE = _Path(__file__).resolve().parent
_sys.path[:] = [p for p in _sys.path if _Path(p or ".").resolve() != _HERE]

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta

from hermes_fsm.memory import HashingEmbedder, InProcessMemory, MemoryItem, TieredMemory
from hermes_fsm.memory.items import item_text
from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog
from hermes_fsm.memory.working import InProcessWorkingMemory
from hermes_fsm.state_contracts import MemoryUpdate

NOW = datetime(2026, 3, 1, tzinfo=UTC)
WORDS = ("east west north south warehouse stock order email phone coffee tea city berlin "
         "paris meeting morning evening project audit invoice payment card music jazz dog "
         "cat 仓库 库存 邮件 电话 咖啡 城市 会议 项目 付款 音乐").split()


def text(n: int) -> str:
    return " ".join(WORDS[(n * p) % len(WORDS)] for p in (1, 7, 13, 29)) + f" item{n}"


async def fill(store: QdrantSemanticStore, embedder: HashingEmbedder, n: int) -> None:
    batch = 2000
    for start in range(0, n, batch):
        items = [MemoryItem("bench-user", f"fact.{i}", text(i), "fact", 0.8, "active",
                            NOW - timedelta(days=i % 300), NOW, "user_message", f"t{i}",
                            item_id=str(uuid.UUID(int=i + 1)))
                 for i in range(start, min(n, start + batch))]
        vectors = embedder.embed([item_text(i.key, i.value) for i in items])
        await store.put(items, vectors)


async def recall_latency(memory: TieredMemory, runs: int = 200) -> tuple[float, float]:
    times = []
    for r in range(runs):
        t = time.perf_counter()
        await memory.recall("bench-user", text(r * 31 + 5), 5, now=NOW)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


async def bench_recall(sizes: list[int]) -> None:
    embedder = HashingEmbedder()
    targets = [("embedded (Qdrant local mode)", {"path": ":memory:"})]
    if os.environ.get("HERMES_QDRANT_URL"):
        targets.append(("server " + os.environ["HERMES_QDRANT_URL"],
                        {"url": os.environ["HERMES_QDRANT_URL"],
                         "collection": f"hermes_bench_{uuid.uuid4().hex[:8]}"}))
    for label, where in targets:
        for n in sizes:
            store = QdrantSemanticStore(embedder.dim, **where)  # type: ignore[arg-type]
            t = time.perf_counter()
            await fill(store, embedder, n)
            filled = time.perf_counter() - t
            memory = TieredMemory(working=InProcessWorkingMemory(), semantic=store,
                                  experience=SQLiteExperienceLog(), embedder=embedder)
            p50, p99 = await recall_latency(memory)
            print(f"recall {label:<32} {n:>7} items/user: p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"
                  f"   (filled in {filled:.1f} s)")
            if not store.local:
                await store._client.delete_collection(store.collection)
            await store.close()


async def commits(memory: TieredMemory, total: int, per_commit: int = 10) -> float:
    t = time.perf_counter()
    for c in range(total // per_commit):
        updates = [MemoryUpdate(key=f"fact.{c}.{u}", update_type="create", value=text(c + u),
                                evidence="user_message") for u in range(per_commit)]
        await memory.apply("bench-user", f"turn-{c}", updates, NOW, session_id="s1",
                           text=text(c))
    return total / (time.perf_counter() - t)


async def bench_commits(total: int) -> None:
    embedder = HashingEmbedder()
    rate = await commits(InProcessMemory(), total)
    print(f"commit in-process tiers                        {rate:8.0f} updates/s ({total})")
    with tempfile.TemporaryDirectory() as tmp:
        disk = TieredMemory(working=InProcessWorkingMemory(),
                            semantic=QdrantSemanticStore(embedder.dim, path=f"{tmp}/qdrant"),
                            experience=SQLiteExperienceLog(f"{tmp}/exp.sqlite"),
                            embedder=embedder)
        small = min(total, 200)
        rate = await commits(disk, small)
        print(f"commit embedded default on disk (Qdrant local)  {rate:8.0f} updates/s ({small})")
        await disk.close()
    try:
        from hermes_fsm.memory.postgres_experience import PostgresExperienceLog
        from hermes_fsm.memory.redis_working import RedisWorkingMemory

        pg = PostgresExperienceLog(os.environ.get("HERMES_POSTGRES_URL",
                                                  "postgresql://postgres@127.0.0.1:5432/test"),
                                   schema=f"hermes_bench_{uuid.uuid4().hex[:8]}")
        redis = RedisWorkingMemory(os.environ.get("HERMES_REDIS_URL", "redis://127.0.0.1:6379/0"),
                                   prefix=f"hermes-bench:{uuid.uuid4().hex}")
        services = TieredMemory(working=redis, experience=pg, embedder=embedder,
                                semantic=QdrantSemanticStore(embedder.dim, path=":memory:"))
        rate = await commits(services, total)
        print(f"commit Redis + PostgreSQL (+ Qdrant in-process) {rate:8.0f} updates/s ({total})")
        await redis.forget("bench-user")
        await pg.drop_schema()
        await services.close()
    except Exception as exc:  # a missing service: say so, keep the other figures
        print(f"commit Redis + PostgreSQL: skipped ({type(exc).__name__}: {exc})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--commits", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(bench_recall([int(s) for s in args.sizes.split(",")]))
    asyncio.run(bench_commits(args.commits))


if __name__ == "__main__":
    main()
