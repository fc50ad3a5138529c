"""A child process for the crash and race tests: runs turns on durable sessions.

    python -m tests.durable_child '<json settings>'

Settings: ``pg_url``, ``schema``, ``redis_url``, ``prefix``, ``sessions`` (ids),
``turns`` (new turns per session), ``mode`` (``crash``: resume every session, run the
turns, report each state entered on stdout; ``race``: wait for ``go`` on stdin, run turns
refusing busy sessions, print one JSON line per outcome), ``seed``.

The ``transfer`` tool is not idempotent; each real execution is recorded in
``<schema>.executions`` (committed before the tool returns), so "executed twice" is
checkable from outside.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from typing import Any

import psycopg

from hermes_fsm import Orchestrator
from hermes_fsm.errors import SessionBusy
from hermes_fsm.store.lease import RedisLease
from hermes_fsm.store.postgres import PostgresStore
from hermes_fsm.testing import ScriptedBrain
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import PLAN_EMPTY, happy_script

PLAN = {"tool_calls": [
    {"tool_name": "transfer", "arguments": {"amount": 5}, "reasoning_trace": "pay"},
    {"tool_name": "lookup", "arguments": {"account": "a"}, "reasoning_trace": "check"}]}


def plan_once_a_turn(request: Any) -> dict[str, Any]:
    """Every turn plans ``transfer`` at its first PLANNING, nothing at the second (a
    resumed turn has its earlier plan back among its outputs). A fixed script would not
    do: ScriptedBrain repeats its last entry, so only the first turn would pay."""
    return PLAN_EMPTY if "plan" in request.outputs else PLAN


def script() -> dict[str, list[Any]]:
    return happy_script(plan=[plan_once_a_turn],
                        response=[{"text": "done", "evidence": []}])


def tools(settings: dict[str, Any]) -> ToolRegistry:
    registry = ToolRegistry()
    conninfo, table = settings["pg_url"], f'"{settings["schema"]}".executions'

    @registry.tool(side_effects="write", description="Move money (not idempotent).")
    async def transfer(amount: int) -> dict[str, Any]:
        call = CURRENT_CALL["transfer"]  # set by the sink just before; read before any await
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            await conn.execute(f"INSERT INTO {table} (call_id) VALUES (%s)", (call,))
        await asyncio.sleep(0.002)
        return {"moved": amount}

    @registry.tool(description="Read a balance.")
    async def lookup(account: str) -> dict[str, Any]:
        await asyncio.sleep(0.001)
        return {"balance": 10}

    return registry


CURRENT_CALL: dict[str, str] = {}


class Reporter:
    """A sink: one stdout line per state entered (the parent kills on a chosen state), and
    the call id of each tool call about to run (the executions table records it)."""

    def emit(self, event: Any) -> None:
        if event.kind == "state_entered":
            sys.stdout.write(f"state {event.state}\n")
            sys.stdout.flush()
        elif event.kind == "tool_call_started":
            CURRENT_CALL[event.tool] = f"{event.session_id}/{event.call_id}"


async def main(settings: dict[str, Any]) -> None:
    store = PostgresStore(settings["pg_url"], schema=settings["schema"], pool_size=4)
    lease = RedisLease(settings["redis_url"], prefix=settings["prefix"], ttl_s=0.6)
    race = settings["mode"] == "race"
    orchestrator = Orchestrator(
        brain=ScriptedBrain(script(), delay_s=0.001 if race else 0.0),
        tools=tools(settings), store=store, lease=lease,
        sinks=[] if race else [Reporter()], busy_policy="refuse" if race else "queue")
    try:
        if race:
            await race_turns(orchestrator, settings)
        else:
            for sid in settings["sessions"]:
                await orchestrator.resume(sid) if await store.get(sid) else None
            await asyncio.gather(*(session_turns(orchestrator, sid, settings["turns"])
                                   for sid in settings["sessions"]))
            sys.stdout.write("done\n")
            sys.stdout.flush()
    finally:
        await orchestrator.aclose()


async def session_turns(orchestrator: Orchestrator, sid: str, turns: int) -> None:
    for i in range(turns):
        result = await orchestrator.run_turn(sid, f"pay {i}", user_id="u1")
        assert result.path[-1] == "IDLE", result.path


async def race_turns(orchestrator: Orchestrator, settings: dict[str, Any]) -> None:
    sys.stdin.readline()  # "go": both processes start together
    rng = random.Random(settings["seed"])

    async def one(sid: str, i: int) -> None:
        await asyncio.sleep(rng.random() * 0.01)
        try:
            result = await orchestrator.run_turn(sid, f"race {i}", user_id="u1")
        except SessionBusy as exc:
            print(json.dumps({"refused": sid, "message": str(exc)}), flush=True)
            return
        print(json.dumps({"accepted": sid, "turn_id": result.turn_id,
                          "status": result.status}), flush=True)

    await asyncio.gather(*(one(rng.choice(settings["sessions"]), i)
                           for i in range(settings["turns"])))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
