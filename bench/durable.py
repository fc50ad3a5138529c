#!/usr/bin/env python
"""Durable-turn benchmark: turns/s with PostgreSQL checkpointing, hermes-fsm vs LangGraph.

    .venv/bin/python bench/durable.py [--sessions S] [--turns N] [--lg-turns M]
                                      [--repeat R] [--url URL] [--quick] [--async-commit]

The workload is bench/engine_overhead.py's seven-state turn (its shared handlers and
strict contracts, imported), run against the same PostgreSQL database by:

* **hermes-fsm** with :class:`hermes_fsm.store.PostgresStore`: every step's events are
  appended (and committed, ``synchronous_commit`` as the server has it: on by default)
  before the next state starts — one round trip per step, fenced by the session's epoch
  and seq, events unique by (session, seq); the last step also writes the turn's messages
  and a checkpoint. Appends waiting at the same moment, from any sessions, are
  group-committed. Run twice: with the in-process lease, and with the Redis lease
  (``SET NX PX`` takes and compare-and-delete releases, batched) when Redis answers.
* **LangGraph** with ``langgraph-checkpoint-postgres`` (``AsyncPostgresSaver`` on a
  connection pool of the same size), its default durability (``async``: a checkpoint per
  step, written while the next step runs — a weaker guarantee than hermes-fsm's); with
  ``--lg-sync`` also ``durability="sync"`` (the checkpoint written before the next step).

``S`` sessions run concurrently (128 by default), each running its turns one after
another; turns/s = all turns ÷ wall time, after a warm-up turn per session. LangGraph is
timed over fewer turns per session (``--lg-turns``, it is ~30× slower): the same turn,
the same concurrency, fewer of them. Each engine gets its own schema (dropped
afterwards). With ``--repeat R`` the engines run R rounds, interleaved, and the table
shows each one's median (every round is printed). ``--async-commit`` adds rows with
``synchronous_commit=off`` for both (labelled: not durable on a crash of the server).

Also printed: PostgreSQL round trips per turn (statements, plus the connection pool's
checks, counted by the store; LangGraph's statements counted by a cursor subclass),
Redis round trips per turn, the mean group-commit size, and the load of the machine
(``/proc/loadavg``) before and after. No assertions: this prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata as md
import importlib.util
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_BENCH = Path(__file__).resolve().parent
# bench/ must not shadow the standard library (there is a bench/http.py): take it off the
# path and load the shared workload by file, under the name its graph refers to.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
if str(_BENCH.parent) not in sys.path:
    sys.path.insert(1, str(_BENCH.parent))
_spec = importlib.util.spec_from_file_location("engine_overhead", _BENCH / "engine_overhead.py")
assert _spec is not None and _spec.loader is not None
shared = importlib.util.module_from_spec(_spec)
sys.modules["engine_overhead"] = shared
_spec.loader.exec_module(shared)

PG_URL = os.environ.get("HERMES_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("HERMES_REDIS_URL", "redis://127.0.0.1:6379/0")
POOL = 8
EVENTS_PER_TURN = 22  # of this graph: turn started/finished, 7 exits, 7 entries, 6 outputs


@dataclass
class Figure:
    """One engine's run."""

    turns_per_s: float
    turns: int
    pg_round_trips: float | None = None  # per turn
    redis_round_trips: float | None = None  # per turn
    extra: dict[str, float] = field(default_factory=dict)


async def _drive(sessions: list[Any], turns_each: int, turn: Any) -> float:
    """Wall seconds for every session running ``turns_each`` turns, sessions concurrently."""

    async def one(session: Any) -> None:
        for _ in range(turns_each):
            await turn(session)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(s) for s in sessions))
    return time.perf_counter() - t0


def _with_options(url: str, options: str | None) -> str:
    """``url`` with libpq ``options`` (e.g. ``-c synchronous_commit=off``) added."""
    if not options:
        return url
    from urllib.parse import quote

    return f"{url}{'&' if '?' in url else '?'}options={quote(options)}"


# --- hermes-fsm ---------------------------------------------------------------------------


async def hermes(url: str, sessions: int, turns_each: int, redis: bool) -> Figure:
    from hermes_fsm import Orchestrator, ToolRegistry
    from hermes_fsm.store import PostgresStore
    from hermes_fsm.testing import ScriptedBrain

    graph = shared._hermes_orchestrator().graph
    store = PostgresStore(url, schema=f"bench_hermes_{uuid.uuid4().hex[:8]}", pool_size=POOL)
    lease: Any = None
    if redis:
        from hermes_fsm.store.lease import RedisLease

        lease = RedisLease(REDIS_URL, prefix=f"bench:{uuid.uuid4().hex}:")
    orchestrator = Orchestrator(graph, brain=ScriptedBrain({}), tools=ToolRegistry(),
                                store=store, lease=lease)
    try:
        await store.open()

        async def turn(session_id: str) -> None:
            result = await orchestrator.run_turn(session_id, "what is the weather?")
            if result.status != "completed":
                raise RuntimeError(f"hermes turn did not complete: {result.status}")

        ids = [f"s{i}" for i in range(sessions)]
        await _drive(ids, 1, turn)  # warm-up: creates the sessions
        trips, leases = store.round_trips, getattr(lease, "round_trips", 0)
        appends = (store._appends.batches, store._appends.items)
        claims = store._claims.items
        seconds = await _drive(ids, turns_each, turn)
        n = sessions * turns_each
        stored = await store.events_after("s0")
        expected = (turns_each + 1) * EVENTS_PER_TURN
        if len(stored) != expected:
            raise RuntimeError(f"hermes stored {len(stored)} events for s0, not {expected}")
        batches = store._appends.batches - appends[0]
        return Figure(n / seconds, n, (store.round_trips - trips) / n,
                      (lease.round_trips - leases) / n if lease is not None else None,
                      {"writes a turn waits for (claim + step appends)":
                       (store._appends.items - appends[1] + store._claims.items - claims) / n,
                       "appends per group commit": (store._appends.items - appends[1]) / batches})
    finally:
        await store.drop_schema()
        await orchestrator.aclose()


# --- LangGraph --------------------------------------------------------------------------------


async def langgraph(url: str, sessions: int, turns_each: int,
                    durability: str | None = None) -> Figure:
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    sent = [0]

    class CountingCursor(psycopg.AsyncCursor[Any]):  # statements LangGraph sends
        async def execute(self, *args: Any, **kwargs: Any) -> Any:
            sent[0] += 1
            return await super().execute(*args, **kwargs)

        async def executemany(self, *args: Any, **kwargs: Any) -> None:
            sent[0] += 1  # one pipeline
            await super().executemany(*args, **kwargs)

    schema = f"bench_langgraph_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    pool = AsyncConnectionPool(url, min_size=1, max_size=POOL, open=False, kwargs={
        "autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
        "cursor_factory": CountingCursor, "options": f"-c search_path={schema}"})
    await pool.open(wait=True)
    try:
        allowed = [(m.__module__, m.__name__) for m in (*shared.CONTRACTS.values(),
                                                        shared.ToolCall)]
        saver = AsyncPostgresSaver(pool, serde=JsonPlusSerializer(
            allowed_msgpack_modules=allowed))
        await saver.setup()
        graph = shared._make_langgraph()
        graph = graph.builder.compile(checkpointer=saver)
        inp = {"user_text": "what's the weather?"}

        async def turn(config: dict[str, Any]) -> None:
            await graph.ainvoke(inp, config, durability=durability)

        configs = [{"configurable": {"thread_id": f"s{i}"}} for i in range(sessions)]
        await _drive(configs, 1, turn)
        before = sent[0]
        seconds = await _drive(configs, turns_each, turn)
        n = sessions * turns_each
        trips = (sent[0] - before) / n
        state = await graph.aget_state(configs[0])
        if "memory_commit" not in state.values:
            raise RuntimeError("langgraph turn did not reach memory_commit")
        return Figure(n / seconds, n, trips)
    finally:
        await pool.close()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# --- running -----------------------------------------------------------------------------------


def _redis_up() -> bool:
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(REDIS_URL)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 6379),
                                      timeout=1):
            return True
    except OSError:
        return False


def _version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "?"


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


async def _setting(url: str, name: str) -> str:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute(f"SHOW {name}")).fetchone()
    return str(row[0]) if row else "?"


HERMES = "hermes-fsm + PostgresStore"
HERMES_REDIS = "hermes-fsm + PostgresStore + RedisLease"
LANGGRAPH = "LangGraph + AsyncPostgresSaver"
LANGGRAPH_SYNC = "LangGraph + AsyncPostgresSaver, durability='sync'"
OFF = " [synchronous_commit=off]"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sessions", type=int, default=128, help="concurrent sessions")
    parser.add_argument("--turns", type=int, default=20,
                        help="timed turns per session, hermes-fsm")
    parser.add_argument("--lg-turns", type=int, default=3,
                        help="timed turns per session, LangGraph")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (median shown)")
    parser.add_argument("--url", default=PG_URL)
    parser.add_argument("--quick", action="store_true", help="5 turns per session, 1 for "
                        "LangGraph")
    parser.add_argument("--async-commit", action="store_true",
                        help="also run both with synchronous_commit=off (labelled)")
    parser.add_argument("--lg-sync", action="store_true",
                        help="also run LangGraph with durability='sync' (each step's "
                        "checkpoint written before the next step, like hermes-fsm)")
    args = parser.parse_args()
    turns, lg_turns = (5, 1) if args.quick else (args.turns, args.lg_turns)
    redis = _redis_up()
    sync_commit = asyncio.run(_setting(args.url, "synchronous_commit"))
    print("== durable turns: 7-state turn, PostgreSQL checkpointing, same database ==")
    print(f"python {sys.version.split()[0]}; cpu_count={os.cpu_count()}; load {_load()} "
          f"(1/5/15 min) before")
    print(f"hermes-fsm {_version('hermes-fsm')}, psycopg {_version('psycopg')}; "
          f"langgraph {_version('langgraph')}, langgraph-checkpoint-postgres "
          f"{_version('langgraph-checkpoint-postgres')}; PostgreSQL synchronous_commit="
          f"{sync_commit}; Redis {'up' if redis else 'not answering: no RedisLease row'}")
    print(f"workload: {args.sessions} concurrent sessions, each running turns back to back "
          f"(one warm-up turn, then {turns} timed for hermes-fsm, {lg_turns} for LangGraph); "
          f"a turn = 6 handler states + back to IDLE, {EVENTS_PER_TURN} events; connection "
          f"pools of {POOL}")
    runs: list[tuple[str, Any]] = [
        (HERMES, lambda url: hermes(url, args.sessions, turns, redis=False))]
    if redis:
        runs.append((HERMES_REDIS, lambda url: hermes(url, args.sessions, turns, redis=True)))
    runs.append((LANGGRAPH, lambda url: langgraph(url, args.sessions, lg_turns)))
    if args.lg_sync:
        runs.append((LANGGRAPH_SYNC,
                     lambda url: langgraph(url, args.sessions, lg_turns, durability="sync")))
    urls = [("", args.url)]
    if args.async_commit:
        urls.append((OFF, _with_options(args.url, "-c synchronous_commit=off")))
    figures: dict[str, list[Figure]] = {}
    for round_ in range(1, args.repeat + 1):
        for suffix, url in urls:
            for name, run in runs:
                figure = asyncio.run(run(url))
                figures.setdefault(name + suffix, []).append(figure)
                print(f"  round {round_}: {name + suffix}: {figure.turns_per_s:,.1f} turns/s "
                      f"({figure.turns} turns; load {_load()})", flush=True)
    print()
    print(f"| {'engine':<66} | {'turns/s':>8} | {'÷ LangGraph':>11} | {'PG trips/turn':>13} "
          f"| {'Redis trips/turn':>16} |")
    print(f"|{'-' * 68}|{'-' * 10}|{'-' * 13}|{'-' * 15}|{'-' * 18}|")
    for name, rounds in figures.items():
        value = statistics.median(f.turns_per_s for f in rounds)
        reference = statistics.median(f.turns_per_s for f in figures[
            LANGGRAPH + (OFF if name.endswith(OFF) else "")])
        pg = statistics.median(f.pg_round_trips or 0.0 for f in rounds)
        leases = [f.redis_round_trips for f in rounds if f.redis_round_trips is not None]
        redis_cell = f"{statistics.median(leases):.3f}" if leases else "-"
        print(f"| {name:<66} | {value:>8,.0f} | {value / reference:>10.1f}× | {pg:>13.3f} "
              f"| {redis_cell:>16} |")
    for name, rounds in figures.items():
        for key in rounds[0].extra:
            print(f"{name}: {key} {statistics.median(f.extra[key] for f in rounds):.1f}")
    print()
    print(f"load {_load()} after. hermes-fsm appends each step (one round trip, group-committed "
          "across sessions) before the next state; LangGraph writes a checkpoint per step "
          "(durability 'async', its default: the next step does not wait for it). PG trips "
          "for LangGraph: statements sent (its pool has no connection check).")


if __name__ == "__main__":
    main()
