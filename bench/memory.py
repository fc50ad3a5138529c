"""Memory benchmark: recall latency at 10k and 100k items per user, commit throughput.

    .venv/bin/python bench/memory.py [--sizes 10000,100000] [--sessions 200] [--turns 10]
                                     [--updates 3]

Recall: ``TieredMemory.recall`` (embed the query, nearest items, decay, threshold, top 5)
on the semantic store with N items of one user (hashing embedder, 512 dims):
- embedded: Qdrant local mode, filled through ``":memory:"`` (recall reads the store's
  in-memory index, which is the same on disk; filling 100k points on disk would only
  cost time and a file of hundreds of MB);
- server: Qdrant at ``HERMES_QDRANT_URL``, when set.

Commit: ``TieredMemory.apply`` from many concurrent sessions, two per user, each turn
committing ``--updates`` memory updates (one of them modifies the key its previous turn
set, superseding an item) and one tool outcome, the way MEMORY_COMMIT does; and the same
turns from one session, one after another. Commits waiting at the same moment are
written together (group commit). Tiers: in-process; the embedded default on disk (Qdrant
local mode + SQLite, in a temporary directory); Redis + PostgreSQL (+ Qdrant local mode
in memory). Stores are opened before timing. Figures are printed; nothing is asserted.
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
import gc
import os
import statistics
import tempfile
import time
import uuid
import warnings
from datetime import UTC, datetime, timedelta

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.memory import HashingEmbedder, InProcessMemory, MemoryItem, TieredMemory
from hermes_fsm.memory.experience import Experience
from hermes_fsm.memory.items import item_text
from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog
from hermes_fsm.memory.working import InProcessWorkingMemory

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
    # qdrant-client warns that local mode is not meant for over 20,000 points: known, and
    # recall reads this store's own index
    warnings.filterwarnings("ignore", message="Local mode is not recommended")
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


Turn = tuple[str, list[MemoryUpdate], list[Experience]]


def session_turns(user: str, session: str, turns: int, per_turn: int) -> list[Turn]:
    """One session's turns, built before timing (what MEMORY_COMMIT hands to ``apply``):
    each has ``per_turn`` updates (one modifies the key the previous turn set, so it
    supersedes an item) and one tool outcome."""
    out = []
    for t in range(turns):
        turn = f"{session}-t{t}"
        updates = [MemoryUpdate(key=f"fact.{session}.{t}.{u}", update_type="create",
                                value=text(t + u), evidence_source="user_message")
                   for u in range(per_turn - 1)]
        updates.append(MemoryUpdate(key=f"preference.{session}", value=text(t),
                                    update_type="modify" if t else "create",
                                    evidence_source="user_message"))
        call = Experience(entry_id=f"{turn}:c1", kind="tool_call", user_id=user,
                          session_id=session, turn_id=turn, at=NOW, tool="inventory_lookup",
                          request=text(t), arguments={"sku": f"A{t}"}, duration_ms=3.0)
        out.append((turn, updates, [call]))
    return out


async def run_session(memory: TieredMemory, user: str, session: str,
                      turns: list[Turn]) -> None:
    for turn, updates, calls in turns:
        await memory.apply(user, turn, updates, NOW, session_id=session, text=calls[0].request,
                           answer="done", experiences=calls)


async def commits(memory: TieredMemory, sessions: int, turns: int, per_turn: int) -> str:
    """Updates/s of ``sessions`` concurrent sessions (two per user), ``turns`` each, by the
    wall clock and per CPU-second of this process (the machine may be shared).

    Stores are opened (and qdrant-client imported) by a first commit, not timed."""
    await run_session(memory, "bench-warmup", "warmup",
                      session_turns("bench-warmup", "warmup", 1, per_turn))
    work = [(f"bench-user-{s // 2}", f"s{s}") for s in range(sessions)]
    prepared = [session_turns(user, session, turns, per_turn) for user, session in work]
    group = memory._commits
    batches = getattr(group, "batches", 0)
    gc.collect()  # what earlier runs left is not this run's to collect
    t, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(run_session(memory, user, session, todo)
                           for (user, session), todo in zip(work, prepared, strict=True)))
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    updates = sessions * turns * per_turn
    batches = getattr(group, "batches", 0) - batches
    per_batch = f", {sessions * turns / batches:5.1f} commits/batch" if batches else ""
    return f"{updates / wall:7.0f} updates/s ({updates / cpu:6.0f} per CPU-second{per_batch})"


def embedded_on_disk(tmp: str, embedder: HashingEmbedder) -> TieredMemory:
    return TieredMemory(working=InProcessWorkingMemory(),
                        semantic=QdrantSemanticStore(embedder.dim, path=f"{tmp}/qdrant"),
                        experience=SQLiteExperienceLog(f"{tmp}/exp.sqlite", embedder),
                        embedder=embedder)


async def bench_commits(sessions: int, turns: int, per_turn: int) -> None:
    embedder = HashingEmbedder()
    total = sessions * turns * per_turn
    print(f"commit workload: {sessions} concurrent sessions ({sessions // 2} users, two "
          f"sessions each), {turns} turns each, {per_turn} updates + 1 tool outcome per turn "
          f"commit ({total} updates); 1 session = the same turns one after another")
    for label, concurrent in (("1 session", 1), (f"{sessions} sessions", sessions)):
        n = turns * sessions // concurrent
        rate = await commits(InProcessMemory(), concurrent, n, per_turn)
        print(f"commit in-process tiers              {label:>13}: {rate}")
        with tempfile.TemporaryDirectory() as tmp:
            disk = embedded_on_disk(tmp, embedder)
            rate = await commits(disk, concurrent, n, per_turn)
            print(f"commit embedded default on disk      {label:>13}: {rate}"
                  "   Qdrant local mode + SQLite")
            await disk.close()
    try:
        from hermes_fsm.memory.postgres_experience import PostgresExperienceLog
        from hermes_fsm.memory.redis_working import RedisWorkingMemory

        for label, concurrent in (("1 session", 1), (f"{sessions} sessions", sessions)):
            pg = PostgresExperienceLog(os.environ.get(
                "HERMES_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
                schema=f"hermes_bench_{uuid.uuid4().hex[:8]}")
            redis = RedisWorkingMemory(
                os.environ.get("HERMES_REDIS_URL", "redis://127.0.0.1:6379/0"),
                prefix=f"hermes-bench:{uuid.uuid4().hex}")
            services = TieredMemory(working=redis, experience=pg, embedder=embedder,
                                    semantic=QdrantSemanticStore(embedder.dim, path=":memory:"))
            rate = await commits(services, concurrent, turns * sessions // concurrent,
                                 per_turn)
            print(f"commit Redis + PostgreSQL            {label:>13}: {rate}"
                  "   + Qdrant local mode in memory")
            for s in range(sessions):
                await redis.forget(f"bench-user-{s // 2}")
            await pg.drop_schema()
            await services.close()
    except Exception as exc:  # a missing service: say so, keep the other figures
        print(f"commit Redis + PostgreSQL: skipped ({type(exc).__name__}: {exc})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="items per user for recall ('' to skip recall)")
    parser.add_argument("--sessions", type=int, default=200, help="concurrent sessions")
    parser.add_argument("--turns", type=int, default=10, help="turns per session")
    parser.add_argument("--updates", type=int, default=3, help="memory updates per turn")
    args = parser.parse_args()
    if args.sizes:
        asyncio.run(bench_recall([int(s) for s in args.sizes.split(",")]))
    asyncio.run(bench_commits(args.sessions, args.turns, args.updates))


if __name__ == "__main__":
    main()
