"""Memory benchmark: the bilingual recall eval per embedder, the embedded engines (Qdrant
Edge, the old qdrant-client local mode, the in-memory tier), commit throughput, and the
first turn of a CLI process.

    .venv/bin/python bench/memory.py                      # every section, 10k items
    .venv/bin/python bench/memory.py --only eval          # one row per embedder
    .venv/bin/python bench/memory.py --only dev           # the dev split (tune here)
    .venv/bin/python bench/memory.py --only engines --items 100000 [--old-items 10000]
    .venv/bin/python bench/memory.py --only engines --items 100000 --users 1 --optimize
    .venv/bin/python bench/memory.py --only calibrate     # similarity percentiles
    .venv/bin/python bench/memory.py --only commits [--sessions 200 --turns 10 --updates 3]
    .venv/bin/python bench/memory.py --only first-turn [--store-items 10000]

eval: tests/memory/bilingual_eval.py (240 queries: en, zh, zh→en, en→zh; direct and
paraphrase; supersessions; near-miss distractors) through ``TieredMemory`` on the
embedded default (a Qdrant Edge shard in a temporary directory) with each embedder's
calibrated policy: recall@5 and recall@1 per slice, queries with nothing recalled,
superseded values returned (must be 0), ms per query (embedding included).

engines: each engine is filled with ``--items`` items spread over ``--users`` users
(recall asks for a user holding 1/users of them; ``--users 1``: one user holds all, the
worst case for a filtered search), hashing vectors (512 dims, computed before timing),
through ``put`` in batches of 1,000 (commit throughput in batches: items/s by the wall
clock and per CPU-second), closed, then opened cold in a fresh process which measures the
open, the RSS it added (the engine's code imported before), and 200 recalls
(``TieredMemory.recall``: embed, filtered top-k, scoring). The old local mode fills at a
few hundred items/s: it gets ``--old-items``. ``--optimize``: Edge's ``optimize()`` (the
HNSW build of ``hermes-fsm memory optimize``) runs after the fill, timed, before the cold
open.

commits: ``TieredMemory.apply`` from many concurrent sessions (two per user), each turn
committing ``--updates`` updates (one supersedes) and one tool outcome; group commit
batches the commits waiting at the same moment. first-turn: the wall and CPU time of a
whole ``hermes-fsm run`` process on a store of ``--store-items`` items, per embedder.
Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/http.py would shadow
# the standard library's `http` (which httpx, langgraph and others import): drop it.
_HERE = _Path(__file__).resolve().parent
_sys.path[:] = [p for p in _sys.path if _Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in _sys.path:  # the eval data and runner live under tests/
    _sys.path.insert(1, str(_HERE.parent))

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.memory import HashingEmbedder, InProcessMemory, MemoryItem, TieredMemory
from hermes_fsm.memory.edge_semantic import EdgeSemanticStore
from hermes_fsm.memory.embedders import Embedder
from hermes_fsm.memory.experience import Experience
from hermes_fsm.memory.items import item_text
from hermes_fsm.memory.recall import RecallPolicy
from hermes_fsm.memory.semantic import InProcessSemanticStore
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog
from hermes_fsm.memory.working import InProcessWorkingMemory

NOW = datetime(2026, 3, 1, tzinfo=UTC)
WORDS = ("east west north south warehouse stock order email phone coffee tea city berlin "
         "paris meeting morning evening project audit invoice payment card music jazz dog "
         "cat 仓库 库存 邮件 电话 咖啡 城市 会议 项目 付款 音乐").split()
ROOT = Path(__file__).resolve().parent.parent


def text(n: int) -> str:
    return " ".join(WORDS[(n * p) % len(WORDS)] for p in (1, 7, 13, 29)) + f" item{n}"


def rss_mb() -> float:
    """This process's resident set, MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# --- eval -------------------------------------------------------------------------------

def embedders() -> list[Embedder]:
    from hermes_fsm.memory.use_embedder import USEEmbedder, use_available

    out: list[Embedder] = [HashingEmbedder()]
    if use_available():
        out.append(USEEmbedder())
    try:
        from hermes_fsm.memory.onnx_embedder import MiniLMEmbedder, minilm_files

        minilm_files()
        out.append(MiniLMEmbedder())
    except Exception as exc:
        print(f"(MiniLM skipped: {exc})")
    return out


def on_edge(tmp: str) -> Any:
    def make(embedder: Embedder, policy: RecallPolicy | None) -> TieredMemory:
        folder = Path(tmp) / uuid.uuid4().hex
        return TieredMemory(
            working=InProcessWorkingMemory(),
            semantic=EdgeSemanticStore(embedder.dim, folder / "edge", embedder=embedder.name),
            experience=SQLiteExperienceLog(folder / "exp.sqlite", embedder),
            embedder=embedder, policy=policy)
    return make


async def bench_eval() -> None:
    from tests.memory.bilingual_eval import SLICES, evaluate

    print("eval: tests/data/memory_bilingual.json, 240 queries (60 per slice), through "
          "TieredMemory on Qdrant Edge, calibrated policy per embedder")
    cols = ["all", *SLICES, "direct", "paraphrase", "superseded"]
    print(f"{'embedder':<24} {'metric':<9}" + "".join(f"{c:>11}" for c in cols)
          + f"{'empty':>8}{'leaked':>8}{'ms/query':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for embedder in embedders():
            t = time.perf_counter()
            if hasattr(embedder, "load"):
                embedder.load()
            loaded = time.perf_counter() - t
            r = await evaluate(embedder, memory=on_edge(tmp))
            for metric in ("recall@5", "recall@1"):
                extra = (f"{r['empty']:>8.3f}{len(r['leaked']):>8}{r['ms_per_query']:>10.2f}"
                         if metric == "recall@5" else f"{'':>8}{'':>8}  load {loaded:.2f} s")
                print(f"{embedder.name:<24} {metric:<9}"
                      + "".join(f"{r[metric].get(c, float('nan')):>11.3f}" for c in cols)
                      + extra)


async def bench_dev() -> None:
    """The dev split (tests/data/memory_recall.jsonl: 25 other facts) where choices of the
    recall path are tried, so the held-out eval stays held out: each query asked of its
    own user and of the other language's user (cross-lingual), 200 + 200 queries."""
    from tests.memory.recall_eval import load_cases

    cases = load_cases()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    print("dev: tests/data/memory_recall.jsonl, each query asked of both languages' users, "
          "through TieredMemory (in-process), calibrated policy per embedder")
    for embedder in embedders():
        memory = InProcessMemory(embedder=embedder)
        expected: dict[tuple[str, str], Any] = {}
        for case in cases:
            if any(u == case["user"] for u, _ in expected):
                continue
            for n, m in enumerate(case["memories"]):  # later values supersede earlier ones
                await memory.apply(case["user"], f"turn-{n}", [MemoryUpdate(
                    key=m["key"], update_type="create", value=m["value"],
                    memory_type=m["type"], evidence_source="user_message")],
                    start + timedelta(hours=n), text=m["text"])
                expected[(case["user"], m["key"])] = m["value"]
        at1: dict[str, list[int]] = {}
        at5: dict[str, list[int]] = {}
        for case in cases:
            other = ("zh" if case["user"].startswith("en") else "en") + case["user"][2:]
            for user in (case["user"], other):
                key = case["expected"]["key"]
                want = (key, expected[(user, key)])
                found = [(i.key, i.value) for i in await memory.recall(
                    user, case["query"], 5, now=start + timedelta(days=1))]
                group = case["lang"] if user == case["user"] else f"{case['lang']}→{user[:2]}"
                for g in ("all", group):
                    at1.setdefault(g, []).append(int(found[:1] == [want]))
                    at5.setdefault(g, []).append(int(want in found))
        await memory.close()
        for metric, table in (("recall@1", at1), ("recall@5", at5)):
            print(f"{embedder.name:<24} {metric:<9}" + "".join(
                f"  {g} {sum(v) / len(v):.3f}" for g, v in table.items()))


async def bench_calibrate() -> None:
    import numpy as np

    from tests.memory import bilingual_eval as be

    print("calibrate: raw cosine of the expected item / of the best wrong item / of the best "
          "item for an off-topic query; percentiles 5 25 50 75 95")
    for embedder in embedders():
        memory = InProcessMemory(embedder=embedder, policy=RecallPolicy(
            threshold=-1e9, half_life_days={}, k=100, candidates=100, recency_band=0.0))
        cal = memory.calibration

        def raw(score: float, cal: Any = cal) -> float:
            return float(score * (cal.ceil - cal.floor) + cal.floor)
        await be.seed(memory)
        relevant, wrong, off = [], [], []
        for case in be.cases():
            found = await memory.recall(case["user"], case["query"], 100)
            want = (case["key"], case["expected"])
            relevant += [raw(i.score or 0.0) for i in found if (i.key, i.value) == want]
            wrong.append(max(raw(i.score or 0.0) for i in found if (i.key, i.value) != want))
        for query in be.load()["off_topic"]:
            for user in ("eval-en", "eval-zh"):
                off += [raw(i.score or 0.0) for i in await memory.recall(user, query, 1)]
        for label, values in (("relevant", relevant), ("best wrong", wrong),
                              ("off-topic", off)):
            pct = np.percentile(values, [5, 25, 50, 75, 95])
            print(f"{embedder.name:<24} {label:<11}" + "".join(f"{v:8.3f}" for v in pct))
        print(f"{embedder.name:<24} calibration floor {cal.floor} ceil {cal.ceil}")


# --- engines ----------------------------------------------------------------------------

USERS = 1000  # engines: items are spread over this many users (--users)


def bench_user(i: int) -> str:
    """The owner of item ``i``: ``bench-user`` (the one recalled) holds every USERS-th."""
    return "bench-user" if i % USERS == 0 else f"user-{i % USERS}"


def bench_items(n: int, start: int = 0) -> list[MemoryItem]:
    return [MemoryItem(bench_user(i), f"fact.{i}", text(i), "fact", 0.8, "active",
                       NOW - timedelta(days=i % 300), NOW, "user_message", f"t{i}",
                       item_id=str(uuid.UUID(int=i + 1)))
            for i in range(start, start + n)]


def make_store(engine: str, path: str, dim: int) -> Any:
    if engine == "edge":
        return EdgeSemanticStore(dim, Path(path) / "edge", embedder=f"hashing-{dim}")
    if engine == "qdrant-local":
        from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore

        return QdrantSemanticStore(dim, path=str(Path(path) / "qdrant"))
    return InProcessSemanticStore(dim)


async def fill(store: Any, embedder: HashingEmbedder, n: int, batch: int = 1000
               ) -> tuple[float, float]:
    """Put ``n`` items in batches; returns (items/s by the wall clock, per CPU-second)."""
    chunks = []
    for start in range(0, n, batch):
        items = bench_items(min(batch, n - start), start)
        chunks.append((items, embedder.embed([item_text(i.key, i.value) for i in items])))
    await store.put(*chunks[0])  # opens the store (not timed)
    gc.collect()
    t, cpu = time.perf_counter(), time.process_time()
    for items, vectors in chunks[1:]:
        await store.put(items, vectors)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    done = n - len(chunks[0][0])
    return done / wall if wall else 0.0, done / cpu if cpu else 0.0


async def recall_latency(memory: TieredMemory, runs: int = 200) -> tuple[float, float]:
    times = []
    for r in range(runs):
        t = time.perf_counter()
        await memory.recall("bench-user", text(r * 31 + 5), 5, now=NOW)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


async def child_open(engine: str, path: str, users: str) -> None:
    """In a fresh process: open cold (with the first recall), RSS added, recall p50/p99."""
    global USERS
    USERS = int(users)
    embedder = HashingEmbedder()
    if engine == "edge":  # the engine's own code is not the data's memory
        import qdrant_edge  # noqa: F401
    else:
        import qdrant_client  # noqa: F401
    before = rss_mb()
    store = make_store(engine, path, embedder.dim)
    memory = TieredMemory(working=InProcessWorkingMemory(), semantic=store,
                          experience=SQLiteExperienceLog(), embedder=embedder)
    t, cpu = time.perf_counter(), time.process_time()
    await memory.recall("bench-user", "warehouse stock", 5, now=NOW)
    opened, opened_cpu = time.perf_counter() - t, time.process_time() - cpu
    p50, p99 = await recall_latency(memory)
    print(json.dumps({"open_s": opened, "open_cpu_s": opened_cpu, "rss_mb": rss_mb() - before,
                      "p50_ms": p50, "p99_ms": p99}))
    await store.close()


async def bench_engines(items: int, old_items: int, optimize: bool = False) -> None:
    warnings.filterwarnings("ignore", message="Local mode is not recommended")
    embedder = HashingEmbedder()
    print(f"engines: items of {USERS} users (recall: a user with 1/{USERS} of them), hashing "
          f"vectors ({embedder.dim} dims), put in batches of 1,000; opened cold in a fresh "
          "process")
    print(f"{'engine':<28}{'items':>8}{'put items/s':>13}{'per CPU-s':>11}{'cold open s':>13}"
          f"{'open CPU s':>12}{'recall p50 ms':>15}{'p99 ms':>9}{'RSS MB':>9}{'MB/100k':>9}")
    for engine, n in (("edge", items), ("qdrant-local", old_items), ("in-memory", items)):
        if n <= 0:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            store = make_store(engine, tmp, embedder.dim)
            before = rss_mb()
            rate, per_cpu = await fill(store, embedder, n)
            if engine == "in-memory":
                memory = TieredMemory(working=InProcessWorkingMemory(), semantic=store,
                                      experience=SQLiteExperienceLog(), embedder=embedder)
                p50, p99 = await recall_latency(memory)
                got = {"open_s": float("nan"), "open_cpu_s": float("nan"),
                       "rss_mb": rss_mb() - before, "p50_ms": p50, "p99_ms": p99}
            else:
                if optimize and engine == "edge":  # maintenance, off any turn: timed apart
                    t, cpu = time.perf_counter(), time.process_time()
                    await store.optimize()
                    status = await store.index_status()
                    print(f"  Edge optimize() (HNSW build, blocking): "
                          f"{time.perf_counter() - t:.1f} s wall / "
                          f"{time.process_time() - cpu:.1f} s CPU; {status}")
                await store.close()
                done = subprocess.run(
                    [sys.executable, __file__, "--child-open", engine, tmp, str(USERS)],
                    capture_output=True, text=True, cwd=ROOT, check=False)
                if done.returncode:
                    print(f"{engine}: the cold open failed: {done.stderr[-500:]}")
                    continue
                got = json.loads(done.stdout.strip().splitlines()[-1])
            label = {"edge": "Qdrant Edge (embedded)", "qdrant-local": "qdrant-client local",
                     "in-memory": "in-memory tier"}[engine]
            print(f"{label:<28}{n:>8}{rate:>13.0f}{per_cpu:>11.0f}{got['open_s']:>13.2f}"
                  f"{got['open_cpu_s']:>12.2f}{got['p50_ms']:>15.2f}{got['p99_ms']:>9.2f}"
                  f"{got['rss_mb']:>9.0f}{got['rss_mb'] * 100_000 / n:>9.0f}")


# --- commits ----------------------------------------------------------------------------

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

    Stores are opened by a first commit, not timed."""
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


def embedded_on_disk(tmp: str, embedder: HashingEmbedder, engine: str) -> TieredMemory:
    return TieredMemory(working=InProcessWorkingMemory(),
                        semantic=make_store(engine, tmp, embedder.dim),
                        experience=SQLiteExperienceLog(f"{tmp}/exp.sqlite", embedder),
                        embedder=embedder)


async def bench_commits(sessions: int, turns: int, per_turn: int) -> None:
    warnings.filterwarnings("ignore", message="Local mode is not recommended")
    embedder = HashingEmbedder()
    total = sessions * turns * per_turn
    print(f"commit workload: {sessions} concurrent sessions ({sessions // 2} users, two "
          f"sessions each), {turns} turns each, {per_turn} updates + 1 tool outcome per turn "
          f"commit ({total} updates); 1 session = the same turns one after another")
    for label, concurrent in (("1 session", 1), (f"{sessions} sessions", sessions)):
        n = turns * sessions // concurrent
        rate = await commits(InProcessMemory(), concurrent, n, per_turn)
        print(f"commit in-process tiers              {label:>13}: {rate}")
        for engine, name in (("edge", "Qdrant Edge + SQLite"),
                             ("qdrant-local", "qdrant-client local mode + SQLite")):
            with tempfile.TemporaryDirectory() as tmp:
                disk = embedded_on_disk(tmp, embedder, engine)
                rate = await commits(disk, concurrent, n, per_turn)
                print(f"commit embedded on disk              {label:>13}: {rate}   {name}")
                await disk.close()


# --- first turn -------------------------------------------------------------------------

async def seed_store(data_dir: str, embedder_kind: str, n: int) -> None:
    from hermes_fsm.config.memory import build_memory
    from hermes_fsm.memory.settings import EmbedderConfig, MemoryConfig

    config = EmbedderConfig.model_validate({"kind": embedder_kind})
    memory = build_memory(MemoryConfig(data_dir=Path(data_dir), embedder=config))
    batch = 500
    for start in range(0, n, batch):
        items = [MemoryItem(f"user-{i % 100}", f"fact.{i}", text(i), "fact", 0.8, "active",
                            NOW, NOW, "user_message", f"t{i}", item_id=str(uuid.UUID(int=i + 1)))
                 for i in range(start, min(n, start + batch))]
        vectors = memory.embedder.embed([item_text(i.key, i.value) for i in items])
        await memory.semantic.put(items, vectors)
    await memory.close()
    if memory.embedder.name.startswith("use"):  # the weights' cache is made (as after a
        memory.embedder.load()                  # first run): the runs measure its use


def bench_first_turn(store_items: int, runs: int = 3) -> None:
    hermes = str(Path(sys.executable).with_name("hermes-fsm"))
    print(f"first turn: a whole `hermes-fsm run` process (a preference stated, so it recalls "
          f"and commits) on an embedded store of {store_items} items; median of {runs}")
    for kind in ("hashing", "use"):
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            asyncio.run(seed_store(tmp, kind, store_items))
            seeded = time.perf_counter() - t
            env = {**os.environ, "HERMES_DATA_DIR": tmp, "HERMES_EMBEDDER": kind}
            walls, cpus = [], []
            for r in range(runs):
                before = os.times()
                t = time.perf_counter()
                subprocess.run([hermes, "run", "--user", f"user-{r}", "我更喜欢用邮件接收通知"],
                               env=env, capture_output=True, check=True)
                walls.append(time.perf_counter() - t)
                after = os.times()
                cpus.append(after.children_user + after.children_system
                            - before.children_user - before.children_system)
            print(f"first turn {kind:<8}: wall {statistics.median(walls):5.2f} s  CPU "
                  f"{statistics.median(cpus):5.2f} s   (store seeded in {seeded:.1f} s)")
            parts = []
            for _ in range(runs):
                done = subprocess.run([sys.executable, __file__, "--child-memory-open", tmp,
                                       kind], capture_output=True, text=True, check=True)
                parts.append(json.loads(done.stdout.splitlines()[-1]))
            print(f"  of which memory ({kind}, fresh process, hermes_fsm imported before): "
                  + "  ".join(f"{name} {statistics.median(p[name][0] for p in parts):.3f} s "
                              f"(CPU {statistics.median(p[name][1] for p in parts):.3f})"
                              for name in parts[0]))


def child_memory_open(data_dir: str, kind: str) -> None:
    """In a fresh process: what the first turn pays for memory — the embedder's load, the
    store's open, the first recall (wall and CPU seconds each)."""
    from hermes_fsm.config.memory import build_memory
    from hermes_fsm.memory.settings import EmbedderConfig, MemoryConfig

    memory = build_memory(MemoryConfig(data_dir=Path(data_dir),
                                       embedder=EmbedderConfig.model_validate({"kind": kind})))
    out = {}

    def timed(name: str, call: Any) -> None:
        t, cpu = time.perf_counter(), time.process_time()
        call()
        out[name] = (time.perf_counter() - t, time.process_time() - cpu)
    timed("embedder load", getattr(memory.embedder, "load", lambda: None))
    timed("store open", memory.semantic.open_now)  # type: ignore[attr-defined]
    timed("first recall", lambda: asyncio.run(memory.recall("user-1", "邮件 email", 5)))
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["eval", "dev", "calibrate", "engines", "commits",
                                           "first-turn"], action="append",
                        help="run these sections (repeatable; default: all but calibrate)")
    parser.add_argument("--items", type=int, default=10_000, help="engines: items per store")
    parser.add_argument("--old-items", type=int, default=None,
                        help="engines: items for the old local mode (default: --items, at "
                        "most 10,000: it fills at a few hundred items/s)")
    parser.add_argument("--store-items", type=int, default=10_000, help="first-turn: items")
    parser.add_argument("--sessions", type=int, default=200, help="commits: sessions")
    parser.add_argument("--turns", type=int, default=10, help="commits: turns per session")
    parser.add_argument("--updates", type=int, default=3, help="commits: updates per turn")
    parser.add_argument("--users", type=int, default=1000,
                        help="engines: users the items are spread over (1: one user has all)")
    parser.add_argument("--optimize", action="store_true",
                        help="engines: run Edge's optimize() (builds HNSW) after the fill, "
                        "timed, before the cold open (what `hermes-fsm memory optimize` does)")
    parser.add_argument("--child-open", nargs=3, metavar=("ENGINE", "PATH", "USERS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--child-memory-open", nargs=2, metavar=("DATA_DIR", "KIND"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--seed-store", nargs=2, metavar=("DATA_DIR", "KIND"),
                        help="write --store-items items (users user-0 … user-99) into the "
                             "embedded store of DATA_DIR with embedder KIND, then exit "
                             "(bench/cli.py --store-items uses it)")
    args = parser.parse_args()
    if args.seed_store:
        asyncio.run(seed_store(args.seed_store[0], args.seed_store[1], args.store_items))
        return
    if args.child_memory_open:
        child_memory_open(*args.child_memory_open)
        return
    if args.child_open:
        asyncio.run(child_open(*args.child_open))
        return
    global USERS
    USERS = args.users
    sections = args.only or ["eval", "engines", "commits", "first-turn"]
    print(f"bench/memory.py {' '.join(sys.argv[1:])}  (load {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} CPUs)")
    if "eval" in sections:
        asyncio.run(bench_eval())
    if "dev" in sections:
        asyncio.run(bench_dev())
    if "calibrate" in sections:
        asyncio.run(bench_calibrate())
    if "engines" in sections:
        old = args.old_items if args.old_items is not None else min(args.items, 10_000)
        asyncio.run(bench_engines(args.items, old, args.optimize))
    if "commits" in sections:
        asyncio.run(bench_commits(args.sessions, args.turns, args.updates))
    if "first-turn" in sections:
        bench_first_turn(args.store_items)


if __name__ == "__main__":
    main()
