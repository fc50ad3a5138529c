"""A child process for the conversation crash test: one turn on a durable session.

    python -m tests.conversation_child '<json settings>'

Settings: ``pg_url``, ``schema``, ``redis_url``, ``prefix``, ``session``, ``text``,
``hold`` (after the turn, print its result and wait to be killed). Prints one JSON line:
the turn's ``status``, ``answer``, ``path`` and tool ``calls``. Each real ``send_email``
is recorded in ``<schema>.sent`` (committed before the tool returns).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import psycopg

from hermes_fsm import Orchestrator
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.store.lease import RedisLease
from hermes_fsm.store.postgres import PostgresStore
from tests.conversation_support import slot_registry, slot_rules


async def main(settings: dict[str, Any]) -> None:
    table = f'"{settings["schema"]}".sent'

    def record(to: str) -> None:
        with psycopg.connect(settings["pg_url"], autocommit=True) as conn:
            conn.execute(f"INSERT INTO {table} (recipient) VALUES (%s)", (to,))

    store = PostgresStore(settings["pg_url"], schema=settings["schema"], pool_size=2)
    # a killed process may leave its lease behind (its release is sent in the background):
    # the next process queues for it until it expires (ttl_s) rather than being refused
    lease = RedisLease(settings["redis_url"], prefix=settings["prefix"], ttl_s=2)
    orchestrator = Orchestrator(brain=RulesBrain(slot_rules()), tools=slot_registry([], record),
                                store=store, lease=lease, busy_policy="queue")
    try:
        result = await orchestrator.run_turn(settings["session"], settings["text"], "alice")
        calls = [{"tool": e.tool, "args": e.arguments} for e in result.events
                 if e.kind == "tool_call_started"]
        print(json.dumps({"status": result.status, "answer": result.answer,
                          "path": result.path, "calls": calls}, ensure_ascii=False), flush=True)
        if settings.get("hold"):
            await asyncio.sleep(3600)  # killed here, between turns
    finally:
        await orchestrator.aclose()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
