"""Memory per live session: RSS and tracemalloc bytes at N live sessions after 1, 10 and 50
turns each, with a durable store (SQLite; PostgreSQL with --pg) and without one.

Each configuration runs in a fresh child process (RSS is the process's, measured from
/proc/self/statm after a gc, less what the process held before its first session). The
workload is bench/engine_overhead.py's seven-state turn (trivial handlers, pydantic-checked
outputs, ~22 events a turn), round-robin over the sessions: every session gets its 1st
turn, then every session its 2nd, … so all N are live at each figure.

    .venv/bin/python bench/session_memory.py                  # 10,000 sessions, ~5-10 min
    .venv/bin/python bench/session_memory.py --sessions 2000  # quicker
    .venv/bin/python bench/session_memory.py --pg --cache-mb 16 --window 2
    .venv/bin/python bench/session_memory.py --pg --only PostgreSQL --async-commit --no-trace \
        --concurrency 32

With ``--pg`` the PostgreSQL store runs in a schema of its own (``bench_mem_<random>``,
dropped at the end). ``--async-commit`` adds libpq ``options=-c synchronous_commit=off``
(labelled): the memory the process holds is the same, the turns do not wait for the
server's disk flush (about 4× the turns a second on a loaded machine). ``--concurrency K``
runs the turns of K sessions at once (their round trips to the store overlap; every turn
is done before each figure): about 20× the turns a second with PostgreSQL at load 12.
``BENCH_MEM_PROGRESS=FILE`` appends each figure to FILE as JSON as soon as it is taken.

Printed per configuration and turn count: RSS MiB (held by the sessions), KiB per session
(RSS ÷ N), tracemalloc KiB per session (a second child, with tracemalloc on, on N/10
sessions), and what the session cache holds (its own estimate, its bound, evictions).
``--idle N`` is the server's case instead: N sessions (default 100,000), one turn each,
left idle, on a durable store with what ``hermes-fsm serve`` runs by default (the session
cache bounded by ``--cache-mb``, no in-process event log); printed every N/10 sessions:
RSS held, what the cache holds by its own estimate, and its evictions; then the line
``serve`` prints at start (``session_bound``) — the bound the configuration implies.

No timing assertions: figures only. LangGraph's InMemorySaver is measured beside it when
the bench extra is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
MILESTONES = (1, 10, 50)
CONCURRENCY = 1  # turns of this many sessions at once (--concurrency), all done at each figure
PG_URL = os.environ.get("HERMES_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_url() -> str:
    """The PostgreSQL URL, with ``synchronous_commit=off`` when ``--async-commit`` asked."""
    if not os.environ.get("BENCH_PG_ASYNC_COMMIT"):
        return PG_URL
    from urllib.parse import quote

    return f"{PG_URL}{'&' if '?' in PG_URL else '?'}options={quote('-c synchronous_commit=off')}"


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _held(trace: bool) -> int:
    gc.collect()
    if trace:
        import tracemalloc

        return tracemalloc.get_traced_memory()[0]
    return _rss()


async def _hermes(
    mode: str, sessions: int, upto: int, cache_mb: float | None, window: int | None, trace: bool
) -> list[dict[str, Any]]:
    import engine_overhead as shared

    from hermes_fsm import Orchestrator, ToolRegistry
    from hermes_fsm.testing import ScriptedBrain

    graph = shared._hermes_orchestrator().graph
    store: Any = None
    if mode == "sqlite":
        from hermes_fsm.store import SQLiteStore

        store = SQLiteStore(Path(tempfile.mkdtemp(prefix="hermes-mem-")) / "s.db")
    elif mode == "pg":
        from hermes_fsm.store import PostgresStore

        store = PostgresStore(_pg_url(), schema=f"bench_mem_{uuid.uuid4().hex[:8]}")
    cache_bytes = None if cache_mb is None else int(cache_mb * 2**20)
    orchestrator = Orchestrator(
        graph,
        brain=ScriptedBrain({}),
        tools=ToolRegistry(),
        store=store,
        event_log_turns=window,
        session_cache_bytes=cache_bytes,
    )
    if store is not None:
        await store.open()
    ids = [f"s{i}" for i in range(sessions)]
    # one throwaway session first: imports, caches and the store's pages are not per session
    await orchestrator.run_turn("warm", "what is the weather?")
    orchestrator.session_cache.discard("warm")
    if trace:
        import tracemalloc

        tracemalloc.start()
    base = _held(trace)
    rows: list[dict[str, Any]] = []
    done = 0
    try:
        for milestone in (m for m in MILESTONES if m <= upto):
            started = time.perf_counter()
            for _ in range(milestone - done):
                for at in range(0, len(ids), CONCURRENCY):
                    results = await asyncio.gather(
                        *(
                            orchestrator.run_turn(sid, "what is the weather?")
                            for sid in ids[at : at + CONCURRENCY]
                        )
                    )
                    for result in results:
                        if result.status != "completed":
                            raise RuntimeError(f"turn did not complete: {result.status}")
            seconds = time.perf_counter() - started
            done = milestone
            held = _held(trace) - base
            rows.append(
                {
                    "turns": milestone,
                    "bytes": held,
                    "per_session": held / sessions,
                    "cache": orchestrator.session_cache.info(),
                    "turns_per_s": sessions
                    * (milestone - (rows[-1]["turns"] if rows else 0))
                    / seconds,
                }
            )
            if progress := os.environ.get("BENCH_MEM_PROGRESS"):  # a file: each row as it comes
                with open(progress, "a") as f:
                    f.write(json.dumps({"mode": mode, "sessions": sessions, **rows[-1]}) + "\n")
    finally:
        if mode == "pg":
            await store.drop_schema()
        await orchestrator.aclose()
    return rows


async def _idle(mode: str, sessions: int, cache_mb: float | None) -> dict[str, Any]:
    """N sessions, one turn each, over a store, with serve's defaults: RSS and the cache at
    every N/10 sessions, and the bound ``serve`` prints."""
    import engine_overhead as shared

    from hermes_fsm import Orchestrator, ToolRegistry
    from hermes_fsm.server.serve import SERVER_EVENT_LOG_TURNS, session_bound
    from hermes_fsm.testing import ScriptedBrain

    store: Any
    if mode == "pg":
        from hermes_fsm.store import PostgresStore

        store = PostgresStore(_pg_url(), schema=f"bench_idle_{uuid.uuid4().hex[:8]}")
    else:
        from hermes_fsm.store import SQLiteStore

        store = SQLiteStore(Path(tempfile.mkdtemp(prefix="hermes-idle-")) / "s.db")
    orchestrator = Orchestrator(
        shared._hermes_orchestrator().graph,
        brain=ScriptedBrain({}),
        tools=ToolRegistry(),
        store=store,
        event_log_turns=SERVER_EVENT_LOG_TURNS,
        session_cache_bytes=None if cache_mb is None else int(cache_mb * 2**20),
    )
    await store.open()
    await orchestrator.run_turn("warm", "what is the weather?")
    orchestrator.session_cache.discard("warm")
    base = _held(False)
    step = max(1, sessions // 10)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        for i in range(sessions):
            result = await orchestrator.run_turn(f"s{i}", "what is the weather?")
            if result.status != "completed":
                raise RuntimeError(f"turn did not complete: {result.status}")
            if (i + 1) % step == 0 or i + 1 == sessions:
                rows.append(
                    {
                        "sessions": i + 1,
                        "bytes": _held(False) - base,
                        "cache": orchestrator.session_cache.info(),
                        "turns_per_s": (i + 1) / (time.perf_counter() - started),
                    }
                )
        bound = session_bound(orchestrator)
    finally:
        if mode == "pg":
            await store.drop_schema()
        await orchestrator.aclose()
    return {"rows": rows, "bound": bound, "base": base}


def _run_idle(args: argparse.Namespace) -> None:
    mode = "pg" if args.pg else "sqlite"
    cmd = [sys.executable, __file__, "--child", f"idle-{mode}", "--sessions", str(args.idle)]
    cmd += ["--cache-mb", "none" if args.cache_mb is None else str(args.cache_mb)]
    off = " [sync off]" if args.pg and args.async_commit else ""
    print(
        f"idle sessions: {args.idle:,} sessions, one turn each, then idle; "
        f"{'PostgreSQL' if args.pg else 'SQLite'}{off} store, serve's defaults; "
        f"python {sys.version.split()[0]}; load average {_load()} (2 cores shared)",
        flush=True,
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print("failed:", (proc.stderr.strip().splitlines() or ["?"])[-1])
        return
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"RSS before the first session: {out['base'] / 2**20:.1f} MiB")
    print(
        f"{'sessions':>9} {'RSS held MiB':>13} {'cached':>8} {'cache est. MiB':>15} "
        f"{'RSS / est.':>10} {'evicted':>9} {'turns/s':>8}"
    )
    for row in out["rows"]:
        cache = row["cache"]
        ratio = row["bytes"] / cache["bytes"] if cache["bytes"] else float("nan")
        print(
            f"{row['sessions']:>9,} {row['bytes'] / 2**20:>13.1f} {cache['sessions']:>8,} "
            f"{cache['bytes'] / 2**20:>15.1f} {ratio:>10.2f} {cache['evicted']:>9,} "
            f"{row['turns_per_s']:>8,.0f}"
        )
    print(f"the bound, as serve prints it: {out['bound']}")
    print(f"load average after: {_load()}")


async def _langgraph(sessions: int, upto: int, trace: bool) -> list[dict[str, Any]]:
    import engine_overhead as shared

    graph = shared._make_langgraph()
    ids = [shared._lg_config(f"s{i}") for i in range(sessions)]
    turn = shared._lg_turn_fn(graph)
    await turn(shared._lg_config("warm"))
    if trace:
        import tracemalloc

        tracemalloc.start()
    base = _held(trace)
    rows: list[dict[str, Any]] = []
    done = 0
    for milestone in (m for m in MILESTONES if m <= upto):
        for _ in range(milestone - done):
            for sid in ids:
                await turn(sid)
        done = milestone
        held = _held(trace) - base
        rows.append(
            {
                "turns": milestone,
                "bytes": held,
                "per_session": held / sessions,
                "cache": None,
                "turns_per_s": None,
            }
        )
    return rows


def _child(args: argparse.Namespace) -> None:
    if args.child.startswith("idle-"):
        out = asyncio.run(_idle(args.child[5:], args.sessions, args.cache_mb))
        print(json.dumps(out))
        return
    if args.child == "langgraph":
        rows = asyncio.run(_langgraph(args.sessions, args.upto, args.trace))
    else:
        rows = asyncio.run(
            _hermes(args.child, args.sessions, args.upto, args.cache_mb, args.window, args.trace)
        )
    print(json.dumps(rows))


def _run_child(
    mode: str, sessions: int, upto: int, cache_mb: float | None, window: int | None, trace: bool
) -> list[dict[str, Any]] | str:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--sessions",
        str(sessions),
        "--upto",
        str(upto),
    ]
    cmd += ["--cache-mb", "none" if cache_mb is None else str(cache_mb)]
    cmd += ["--window", "none" if window is None else str(window)]
    cmd += ["--turns", ",".join(map(str, MILESTONES))]
    cmd += ["--concurrency", str(CONCURRENCY)]
    if trace:
        cmd.append("--trace")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    rows: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return rows


def _optional(value: str) -> float | None:
    return None if value == "none" else float(value)


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    global MILESTONES, CONCURRENCY
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument(
        "--cache-mb",
        type=_optional,
        default=64.0,
        help="the session cache bound with a store (default 64, the default "
        "of sessions.cache_mb; 'none': unbounded)",
    )
    parser.add_argument(
        "--window",
        type=_optional,
        default=1.0,
        help="event_log_turns of the windowed in-memory run (default 1)",
    )
    parser.add_argument("--pg", action="store_true", help="also PostgreSQL (HERMES_POSTGRES_URL)")
    parser.add_argument(
        "--async-commit",
        action="store_true",
        help="PostgreSQL with synchronous_commit=off (labelled; same memory, faster turns)",
    )
    parser.add_argument("--no-trace", action="store_true", help="skip the tracemalloc children")
    parser.add_argument("--turns", default="1,10,50", help="turn counts to measure at")
    parser.add_argument("--only", default="", help="run the configurations whose label has this")
    parser.add_argument(
        "--idle",
        type=int,
        default=0,
        help="the server's case: this many idle sessions (one turn each) on a store",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="run the turns of this many sessions at once (the store's round trips overlap; "
        "every turn is done at each figure)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--upto", type=int, default=10**9, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    CONCURRENCY = max(1, args.concurrency)
    if args.child:
        MILESTONES = tuple(int(t) for t in args.turns.split(","))
        args.window = None if args.window is None else int(args.window)
        _child(args)
        return
    if args.async_commit:
        os.environ["BENCH_PG_ASYNC_COMMIT"] = "1"  # the children read it
    if args.idle:
        _run_idle(args)
        return
    window = None if args.window is None else int(args.window)
    n = args.sessions
    MILESTONES = tuple(int(t) for t in args.turns.split(","))
    top = MILESTONES[-1]
    configs: list[tuple[str, str, float | None, int | None, int]] = [
        # what `serve` runs (server_orchestrator): the store has every event, the cache keeps none
        (
            "sqlite",
            f"SQLite, cache {args.cache_mb} MiB, log 0 turns (serve)",
            args.cache_mb,
            0,
            top,
        ),
        # the library's default: each cached session logs every turn it ran here
        ("sqlite", f"SQLite, cache {args.cache_mb} MiB, log every turn", args.cache_mb, None, top),
        ("memory", f"no store, event_log_turns={window}", None, window, top),
        # every turn kept and nothing evicted: ~3.5 KiB a turn; 50 turns × N would be GiBs
        ("memory", "no store, every turn kept (library default)", None, None, min(top, 10)),
    ]
    if args.pg:
        off = " [sync off]" if args.async_commit else ""
        configs.insert(
            2,
            (
                "pg",
                f"PostgreSQL{off}, cache {args.cache_mb} MiB, log 0 turns",
                args.cache_mb,
                0,
                top,
            ),
        )
    try:
        import langgraph  # noqa: F401

        configs.append(("langgraph", "LangGraph + InMemorySaver", None, None, 10))
    except ImportError:
        pass
    print(
        f"session memory: {n:,} live sessions; python {sys.version.split()[0]}; "
        f"load average {_load()} (2 cores shared)"
    )
    print(
        f"{'configuration':<46} {'turns':>5} {'RSS MiB':>8} {'KiB/sess':>9} "
        f"{'traced KiB/sess':>15} {'cache: est. MiB / bound, evicted':>34} {'turns/s':>8}"
    )
    for mode, label, cache_mb, win, upto in configs:
        if args.only not in label:
            continue
        rows = _run_child(mode, n, upto, cache_mb, win, False)
        traced = (
            [] if args.no_trace else _run_child(mode, max(100, n // 10), upto, cache_mb, win, True)
        )
        if isinstance(rows, str):
            print(f"{label:<46} failed: {rows}")
            continue
        for i, row in enumerate(rows):
            t = (
                f"{traced[i]['per_session'] / 1024:.2f}"
                if isinstance(traced, list) and i < len(traced)
                else "-"
            )
            cache = row["cache"]
            if cache is None:
                held = "-"
            else:
                bound = "none" if cache["max_bytes"] is None else f"{cache['max_bytes'] / 2**20:g}"
                held = f"{cache['bytes'] / 2**20:.1f} / {bound}, {cache['evicted']:,}"
            rate = "-" if row["turns_per_s"] is None else f"{row['turns_per_s']:,.0f}"
            print(
                f"{label if i == 0 else '':<46} {row['turns']:>5} "
                f"{row['bytes'] / 2**20:>8.1f} {row['per_session'] / 1024:>9.2f} {t:>15} "
                f"{held:>34} {rate:>8}"
            )
        if upto < top:
            print(f"{'':<46} {top:>5}   (not run: it grows with every turn)")
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
