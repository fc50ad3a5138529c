#!/usr/bin/env python
"""Durable-turn benchmark: turns/s with PostgreSQL checkpointing, hermes-fsm vs LangGraph.

    .venv/bin/python bench/durable.py [--turns N] [--sessions S] [--url URL] [--quick]

The workload is bench/engine_overhead.py's seven-state turn (its shared handlers and
strict contracts, imported), run against the same PostgreSQL database by:

* **hermes-fsm** with :class:`hermes_fsm.store.PostgresStore`: every step's events are
  appended (and committed) before the next state starts; the last step also writes the
  turn's messages and a checkpoint. Concurrent sessions' appends are group-committed.
  Leases are in-process (``LocalLease``); a row with the Redis lease is printed too
  when Redis answers.
* **LangGraph** with ``langgraph-checkpoint-postgres`` (``AsyncPostgresSaver`` on a
  connection pool of the same size), default durability: a checkpoint per step.

Each engine gets its own schema (dropped afterwards). ``S`` sessions run concurrently,
each running its turns one after another; turns/s = all turns ÷ wall time. A warm-up
round runs first. No assertions: this prints figures and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata as md
import importlib.util
import os
import sys
import time
import uuid
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


async def _drive(sessions: list[Any], turns_each: int, turn: Any) -> float:
    """Wall seconds for every session running ``turns_each`` turns, sessions concurrently."""

    async def one(session: Any) -> None:
        for _ in range(turns_each):
            await turn(session)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(s) for s in sessions))
    return time.perf_counter() - t0


# --- hermes-fsm ---------------------------------------------------------------------------


async def hermes(url: str, sessions: int, turns_each: int, redis: bool) -> float:
    from hermes_fsm import Orchestrator, ToolRegistry
    from hermes_fsm.store import PostgresStore
    from hermes_fsm.testing import ScriptedBrain

    graph = shared._hermes_orchestrator().graph
    store = PostgresStore(url, schema=f"bench_hermes_{uuid.uuid4().hex[:8]}", pool_size=POOL)
    lease = None
    if redis:
        from hermes_fsm.lease import RedisLease

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
        seconds = await _drive(ids, turns_each, turn)
        stored = await store.events_after("s0")
        expected = (turns_each + 1) * 22  # 22 events per turn of this graph
        if len(stored) != expected:
            raise RuntimeError(f"hermes stored {len(stored)} events for s0, not {expected}")
        return sessions * turns_each / seconds
    finally:
        await store.drop_schema()
        await orchestrator.aclose()


# --- LangGraph --------------------------------------------------------------------------------


async def langgraph(url: str, sessions: int, turns_each: int) -> float:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    schema = f"bench_langgraph_{uuid.uuid4().hex[:8]}"
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    pool = AsyncConnectionPool(url, min_size=1, max_size=POOL, open=False, kwargs={
        "autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
        "options": f"-c search_path={schema}"})
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
            await graph.ainvoke(inp, config)

        configs = [{"configurable": {"thread_id": f"s{i}"}} for i in range(sessions)]
        await _drive(configs, 1, turn)
        seconds = await _drive(configs, turns_each, turn)
        state = await graph.aget_state(configs[0])
        if "memory_commit" not in state.values:
            raise RuntimeError("langgraph turn did not reach memory_commit")
        return sessions * turns_each / seconds
    finally:
        await pool.close()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="turns per session (timed)")
    parser.add_argument("--sessions", type=int, default=100, help="concurrent sessions")
    parser.add_argument("--url", default=PG_URL)
    parser.add_argument("--quick", action="store_true", help="5 turns per session")
    args = parser.parse_args()
    turns = 5 if args.quick else args.turns
    print("== durable turns: 7-state turn, PostgreSQL checkpointing, same database ==")
    print(f"python {sys.version.split()[0]}; cpu_count={os.cpu_count()}; "
          f"{args.sessions} concurrent sessions x {turns} turns (after 1 warm-up turn each); "
          f"pool of {POOL} connections each")
    print(f"hermes-fsm {_version('hermes-fsm')}, psycopg {_version('psycopg')}; "
          f"langgraph {_version('langgraph')}, langgraph-checkpoint-postgres "
          f"{_version('langgraph-checkpoint-postgres')}")
    figures: dict[str, float] = {}
    figures["hermes-fsm + PostgresStore"] = asyncio.run(
        hermes(args.url, args.sessions, turns, redis=False))
    if _redis_up():
        figures["hermes-fsm + PostgresStore + RedisLease"] = asyncio.run(
            hermes(args.url, args.sessions, turns, redis=True))
    figures["LangGraph + AsyncPostgresSaver"] = asyncio.run(
        langgraph(args.url, args.sessions, turns))
    reference = figures["LangGraph + AsyncPostgresSaver"]
    print()
    print(f"| {'engine':<42} | {'turns/s':>9} | {'÷ LangGraph':>11} |")
    print(f"|{'-' * 44}|{'-' * 11}|{'-' * 13}|")
    for name, value in figures.items():
        print(f"| {name:<42} | {value:>9,.0f} | {value / reference:>10.2f}× |")
    print()
    print("hermes-fsm appends each step (one round trip, group-committed across sessions) "
          "before the next state; LangGraph writes a checkpoint per step (durability "
          "'async', its default).")


if __name__ == "__main__":
    main()
