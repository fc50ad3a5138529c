"""The fast paths a default CLI turn spends its time in, before and after, in one sitting:
the SQLite store's per-step appends, the experience log's past-outcomes query, and the
context builder's fitting of a request to the token budget.

    .venv/bin/python bench/fast_paths.py                     # this tree only, ~1 min
    git worktree add /tmp/before <commit>                    # the tree to compare with
    .venv/bin/python bench/fast_paths.py --compare /tmp/before --rounds 3

Each section runs in a child process per tree (``--compare``: the other tree first on the
child's path), rounds interleaved, best of the rounds printed, with the load average.
The SQLite section also prints, for this tree, what each store setting does to an append:
journal mode, synchronous, the statement cache, one INSERT per event instead of
executemany. Figures only: no assertions.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/http.py would shadow
# the standard library's `http` (which httpx imports): drop it.
_HERE = _Path(__file__).resolve().parent
_sys.path[:] = [p for p in _sys.path if _Path(p or ".").resolve() != _HERE]

import argparse
import asyncio
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# --- the SQLite store's appends ---------------------------------------------------------


def _turn_events() -> list[dict[str, Any]]:
    """A demo turn's events as the durable layer appends them (field dicts)."""
    from hermes_fsm.testing import demo_orchestrator

    result = asyncio.run(demo_orchestrator().run_turn("x", "How many A1001 are left in the east?"))
    return [dict(e) for e in result.events.data]


async def _appends(
    path: Path, sessions: int, prior_turns: int, setting: str, events: list[dict[str, Any]]
) -> dict[str, float]:
    from hermes_fsm.store import SQLiteStore
    from hermes_fsm.store.protocol import Append, Checkpoint, Message

    steps = [events[i : i + 4] for i in range(0, len(events), 4)]  # ~7 writes, as a turn does
    store = SQLiteStore(path)
    await store.open()
    db = store._conn()  # the bench sets what the store would; never done in the library
    if setting == "delete+full":
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("PRAGMA synchronous=FULL")
    elif setting == "wal+full":
        db.execute("PRAGMA synchronous=FULL")
    elif setting == "no statement cache":
        store._db = db2 = sqlite3.connect(store.path, isolation_level=None, cached_statements=0)
        db2.execute("PRAGMA synchronous=NORMAL")
    now = datetime.now(UTC)
    step_s = final_s = 0.0
    steps_n = finals_n = 0

    async def turn(sid: str, record: Any, seq: int, n: int) -> int:
        nonlocal step_s, final_s, steps_n, finals_n
        for k, step in enumerate(steps):
            batch = [{**e, "session_id": sid, "seq": seq + i + 1} for i, e in enumerate(step)]
            last = k == len(steps) - 1
            messages = checkpoint = None
            if last:
                messages = [
                    Message(f"{sid}-m{n}-{r}", sid, "u1", r, "How many A1001?", now)
                    for r in ("user", "assistant")
                ]
                checkpoint = Checkpoint(
                    sid, seq + len(step), "IDLE", {"history": [], "summary": ""}
                )
            append = Append(
                sid, record.epoch, seq, "IDLE" if last else "S", batch, messages or (), checkpoint
            )
            if setting == "insert per event" and not last:
                t0 = time.perf_counter()
                await _insert_per_event(store, append)
                step_s += time.perf_counter() - t0
                steps_n += 1
            else:
                t0 = time.perf_counter()
                await store.append(append)
                dt = time.perf_counter() - t0
                if last:
                    final_s, finals_n = final_s + dt, finals_n + 1
                else:
                    step_s, steps_n = step_s + dt, steps_n + 1
            seq += len(step)
        return seq

    for s in range(sessions):
        sid = f"s{s}"
        record = await store.claim(sid, "u1", "IDLE")
        seq = 0
        for n in range(1 + (prior_turns if s == 0 else 0)):
            seq = await turn(sid, record, seq, n)
    await store.close()
    return {"step_us": step_s / steps_n * 1e6, "final_us": final_s / finals_n * 1e6}


async def _insert_per_event(store: Any, batch: Any) -> None:
    """An append with one INSERT per event (what executemany replaces)."""
    from hermes_fsm._internal.json_safe import dumps

    db = store._conn()
    db.execute("BEGIN IMMEDIATE")
    db.execute(
        "UPDATE hermes_sessions SET state = ?, seq = ?, updated_at = ? WHERE "
        "session_id = ? AND epoch = ? AND seq = ?",
        (
            batch.state,
            batch.last_seq,
            datetime.now(UTC).isoformat(),
            batch.session_id,
            batch.epoch,
            batch.prev_seq,
        ),
    )
    for e in batch.events:
        db.execute(
            "INSERT INTO hermes_events (session_id, seq, turn_id, kind, body) "
            "VALUES (?, ?, ?, ?, ?)",
            (batch.session_id, e["seq"], e["turn_id"], e["kind"], dumps(e).decode()),
        )
    db.execute("COMMIT")


def section_sqlite(setting: str, long_session: bool = True) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        events = _turn_events()
        fresh = asyncio.run(_appends(Path(tmp) / "a.db", 150, 0, setting, events))
        figures = {"step µs": fresh["step_us"], "last step µs": fresh["final_us"]}
        if long_session:
            long = asyncio.run(_appends(Path(tmp) / "b.db", 1, 1500, setting, events))
            figures["last step µs, 1,500-turn session"] = long["final_us"]
    return figures


# --- past outcomes ------------------------------------------------------------------------


def section_outcomes() -> dict[str, float]:
    from hermes_fsm.memory.experience import Experience
    from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog

    rng = random.Random(7)
    words = (
        "stock price east west north south A1001 B2002 C3003 warehouse how many left "
        "sales report calendar meeting tomorrow"
    ).split()
    now = datetime.now(UTC)

    def outcome(i: int, user: str, at: datetime) -> Experience:
        return Experience(f"e{i}", "tool_call", user, "s", "t", at, ok=i % 7 != 0,
                          tool="inventory_lookup",
                          request=" ".join(rng.choice(words) for _ in range(6)),
                          arguments={"sku": "A1001"})

    async def run(path: Path) -> dict[str, float]:
        log = SQLiteExperienceLog(path)
        entries = [outcome(i, "u1" if i % 4 == 0 else f"u{i % 50}", now - timedelta(seconds=i))
                   for i in range(20_000)]
        for k in range(0, len(entries), 2000):
            await log.record(entries[k : k + 2000])
        question = "how many A1001 in the east"
        for _ in range(10):
            await log.similar_outcomes("u1", question, 3)
        n = 200
        t0 = time.perf_counter()
        for _ in range(n):
            await log.similar_outcomes("u1", question, 3)
        again = (time.perf_counter() - t0) / n * 1e6
        # a turn's: one more outcome of the user recorded before each call (untimed)
        spent = 0.0
        for i in range(n):
            await log.record([outcome(20_000 + i, "u1", now + timedelta(seconds=i))])
            t0 = time.perf_counter()
            await log.similar_outcomes("u1", question, 3)
            spent += time.perf_counter() - t0
        await log.close()
        # a process's first call (another log on the file, opened untimed)
        first = []
        for _ in range(20):
            fresh = SQLiteExperienceLog(path)
            await fresh.count("u1")
            t0 = time.perf_counter()
            await fresh.similar_outcomes("u1", question, 3)
            first.append(time.perf_counter() - t0)
            await fresh.close()
        return {
            "similar_outcomes µs (5,000 of the user's 20,000 calls)": again,
            "  the same, one new outcome of the user before each call": spent / n * 1e6,
            "  the same, a process's first call": sorted(first)[len(first) // 2] * 1e6,
        }

    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(run(Path(tmp) / "e.db"))


# --- the context builder -------------------------------------------------------------------


def section_context() -> dict[str, float]:
    from hermes_fsm.brain.protocol import BrainRequest
    from hermes_fsm.contracts.states import Intent
    from hermes_fsm.demo.tools import build_demo_registry
    from hermes_fsm.engine.context import ContextBuilder, ContextConfig
    from hermes_fsm.graph.loader import default_graph_path, load_graph

    graph = load_graph(default_graph_path())
    tools = tuple(build_demo_registry().describe())
    history = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"How many A{1000 + i} are left in the east warehouse today?",
        }
        for i in range(18)
    ]
    memory = "\n".join(f"- [2026-11-{10 + i}] prefers the east warehouse ({i})" for i in range(6))
    fitter = ContextBuilder(ContextConfig())
    now = datetime(2026, 12, 1, 10, tzinfo=UTC)
    intent = Intent(intent_type="query_inventory", parameters={"sku": "A1001"}, confidence=0.9)
    requests = []
    for name in ("INTENT", "PLANNING", "RESPONSE", "MEMORY_COMMIT"):
        spec = graph.states[name]
        assert spec.contract is not None
        requests.append(
            BrainRequest(
                state=name,
                contract_name=spec.contract.contract_name,
                schema=spec.contract.model_json_schema(),
                text="And in the west?",
                user_id="u1",
                outputs={} if name == "INTENT" else {"intent": intent},
                tools=tools,
                memory=memory,
                history=tuple(history),
                now=now,
            )
        )
    n = 2000
    t0 = time.perf_counter()
    for i in range(n):
        for request in requests:  # a turn's four requests; the clock moves a second a turn
            fitter.compose(request if i % 2 else _later(request, i), history, "")
    return {
        "fit µs a request (4 states, 18 messages, 6 memory lines, demo tools)": (
            time.perf_counter() - t0
        )
        / (n * len(requests))
        * 1e6
    }


def _later(request: Any, i: int) -> Any:
    from dataclasses import replace

    return replace(request, now=request.now + timedelta(seconds=i))


# --- driver ---------------------------------------------------------------------------------

SECTIONS = {
    "sqlite": lambda: section_sqlite("wal+normal"),
    "outcomes": section_outcomes,
    "context": section_context,
}
SETTINGS = ("delete+full", "wal+full", "wal+normal", "no statement cache", "insert per event")


def _child(tree: Path, section: str) -> dict[str, float] | str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", section],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=False,
    )
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=Path, help="another checkout: the 'before' figures")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--sections",
        default="sqlite,outcomes,context,settings",
        help="settings: the SQLite settings table (this tree, fresh sessions)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import hermes_fsm

        name, _, setting = args.child.partition(":")
        figures = section_sqlite(setting, False) if setting else SECTIONS[name]()
        figures["(tree)"] = str(Path(hermes_fsm.__file__).parent.parent)  # type: ignore[assignment]
        print(json.dumps(figures))
        return
    trees = ([("before", args.compare.resolve())] if args.compare else []) + [("after", ROOT)]
    print(f"fast paths; python {sys.version.split()[0]}; load average {_load()} (2 cores shared)")
    for section in [s for s in args.sections.split(",") if s != "settings"]:
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.rounds):
            for label, tree in trees:
                figures = _child(tree, section)
                if isinstance(figures, str):
                    print(f"  {section} ({label}): failed: {figures}")
                    continue
                where = figures.pop("(tree)")
                if Path(str(where)).resolve() != tree:
                    print(f"  {section} ({label}): imported hermes_fsm from {where}, not {tree}")
                mine = best.setdefault(label, {})
                for key, value in figures.items():
                    mine[key] = min(value, mine.get(key, value))
        print(f"\n{section} (best of {args.rounds}; load average {_load()})")
        keys = list(next(iter(best.values()), {}))
        for key in keys:
            row = "  ".join(
                f"{label} {best[label][key]:>9,.1f}"
                for label, _ in trees
                if label in best and key in best[label]
            )
            ratio = ""
            if "before" in best and "after" in best and best["after"].get(key):
                ratio = f"  ({best['before'][key] / best['after'][key]:.2f}× faster)"
            print(f"  {key:<62} {row}{ratio}")
    if "settings" in args.sections:
        print(f"\nSQLite store settings, this tree (best of {args.rounds}; load average {_load()})")
        best_s: dict[str, dict[str, float]] = {}
        for _ in range(args.rounds):
            for setting in SETTINGS:
                figures = _child(ROOT, f"sqlite:{setting}")
                if isinstance(figures, str):
                    print(f"  {setting}: failed: {figures}")
                    continue
                figures.pop("(tree)")
                mine = best_s.setdefault(setting, {})
                for key, value in figures.items():
                    mine[key] = min(value, mine.get(key, value))
        for setting, figures in best_s.items():
            print(f"  {setting:<20} " + "  ".join(f"{k} {v:,.1f}" for k, v in figures.items()))
    print(f"\nload average after: {_load()}")


if __name__ == "__main__":
    main()
