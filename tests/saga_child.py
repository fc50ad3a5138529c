"""A child process for the SIGKILL-mid-saga test: runs a three-call plan of returns on the
SDK demo MCP server (streamable HTTP, shared by every process) with an effects journal in a
SQLite file (shared too).

    python -m tests.saga_child '{"url": ..., "db": ..., "mode": "first" | "resume"}'

``first`` makes ORD-3's return fail (so the plan's two other writes are compensated) and
ORD-1's cancellation hang before it acts; it prints ``started <call_id>`` as each call
starts, so the test can kill it during the saga. ``resume`` lets ORD-1's cancellation
work again and runs the same plan on the same journal, then prints its envelopes as one
JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from hermes_fsm.config.settings import MCPServerConfig
from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.engine.durable import EffectsJournal
from hermes_fsm.store.sqlite import SQLiteStore
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.registry import ToolRegistry

CALLS = [(f"c{i}", "demo.create_return", {"order_id": f"ORD-{i}"}) for i in (1, 2, 3)]


async def connected(url: str) -> MCPConnection:
    """The demo server, its create_return pinned with a compensation and its cancel_return
    pinned idempotent (what its annotations say)."""
    config = MCPServerConfig(transport="http", url=url, tool_timeout_s=30.0)
    probe = MCPConnection("demo", config, ToolRegistry())
    await probe.start()
    write, undo = (
        probe.registry.get(n).contract for n in ("demo.create_return", "demo.cancel_return")
    )
    await probe.aclose()
    assert write is not None and undo is not None
    doc = write.to_document()
    doc["retry"] = {"max_attempts": 1}
    doc["compensation"] = {
        "status": "demo.query_return_status",
        "done": "output.status == 'created'",
        "compensate": "demo.cancel_return",
        "arguments": {"order_id": "args.order_id"},
    }
    pinned = {
        "demo.create_return": ToolContract.model_validate(doc),
        "demo.cancel_return": ToolContract.model_validate(
            {**undo.to_document(), "idempotent": True}
        ),
    }
    connection = MCPConnection("demo", config, ToolRegistry(), pinned)
    await connection.start()
    return connection


async def run(settings: dict[str, Any]) -> None:
    connection = await connected(settings["url"])
    executor = ToolExecutor(connection.registry)
    faults = (
        [("ORD-3", "fail"), ("ORD-1", "cancel_hang")]
        if settings["mode"] == "first"
        else [("ORD-1", "none")]
    )
    for order, fault in faults:
        await executor.execute(
            [("f", "demo.set_return_fault", {"order_id": order, "fault": fault})]
        )
    journal = EffectsJournal(SQLiteStore(settings["db"]), "saga-session")

    def emit(kind: Any, **fields: Any) -> None:
        if kind.__name__ == "ToolCallStarted":
            print(f"started {fields['call_id']}", flush=True)

    out = await executor.execute(CALLS, emit, journal=journal)
    print(json.dumps({"envelopes": out}, default=str), flush=True)
    await connection.aclose()


if __name__ == "__main__":
    asyncio.run(run(json.loads(sys.argv[1])))
