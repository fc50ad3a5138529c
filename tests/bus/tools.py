"""Tools the bus tests serve: each child of a sandbox pool imports this registry."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.tools.registry import ToolRegistry


def build_registry() -> ToolRegistry:
    """A fresh registry of the test tools (a test that sends them over a bus replaces
    them in its registry: it takes its own, never the shared :data:`registry`)."""
    registry = ToolRegistry()


    @registry.tool(description="Do nothing.", inline=True)
    def noop() -> dict[str, Any]:
        return {"ok": True}


    @registry.tool(description="Sleep, blocking.", timeout_s=10.0)
    def nap(seconds: float) -> dict[str, Any]:
        time.sleep(seconds)
        return {"slept": seconds}


    @registry.tool(description="Sleep 2 s, blocking, under a 0.2 s timeout.", timeout_s=0.2)
    def stuck() -> dict[str, Any]:
        time.sleep(2.0)
        return {"slept": 2.0}


    @registry.tool(description="Append a line to a file (counts executions).",
                   side_effects="write", timeout_s=10.0)
    def mark(path: str, token: str, seconds: float = 0.0) -> dict[str, Any]:
        if seconds:
            time.sleep(seconds)
        with open(path, "a", encoding="utf-8") as out:
            out.write(token + "\n")
        return {"marked": token}


    @registry.tool(description="Append a line to a file; declared idempotent.",
                   side_effects="write", timeout_s=10.0)
    def mark_idem(path: str, token: str, seconds: float = 0.0) -> dict[str, Any]:
        result: dict[str, Any] = mark(path, token, seconds)
        return result


    _idem = registry.get("mark_idem")
    assert _idem.contract is not None
    _idem.contract = _idem.contract.model_copy(update={"idempotent": True})


    @registry.tool(description="Append a line to a file; only for callers holding 'ops'.",
                   side_effects="write", timeout_s=10.0, permissions=["ops"])
    def guarded(path: str, token: str) -> dict[str, Any]:
        result: dict[str, Any] = mark(path, token)
        return result


    @registry.tool(description="Fail with a code.", timeout_s=5.0)
    def fail(code: str, retryable: bool = False) -> dict[str, Any]:
        raise ToolCallFailed(code, f"failed with {code} on purpose", retryable)


    @registry.tool(description="Allocate megabytes.", timeout_s=10.0)
    def hog(megabytes: int) -> dict[str, Any]:
        block = bytearray(megabytes * 1024 * 1024)
        return {"allocated": len(block)}


    @registry.tool(description="Fork children that sleep, until stopped.", timeout_s=1.0)
    def forks(limit: int) -> dict[str, Any]:
        made = 0
        for _ in range(limit):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            made += 1
        time.sleep(30)
        return {"forked": made}


    @registry.tool(description="Leave a process in a session of its own, holding stdout.",
                   timeout_s=5.0)
    def linger(seconds: float) -> dict[str, Any]:
        pid = os.fork()
        if pid == 0:
            os.setsid()  # out of the child's process group: the group kill misses it
            time.sleep(seconds)
            os._exit(0)
        return {"pid": pid}

    @registry.tool(description="What the process sees.", timeout_s=5.0)
    def probe() -> dict[str, Any]:
        return {"cwd": os.getcwd(), "env": sorted(os.environ), "pid": os.getpid(),
                "home": os.environ.get("HOME"), "files": sorted(p.name for p in Path().iterdir())}


    @registry.tool(description="Burn CPU.", timeout_s=30.0)
    def spin(seconds: float) -> dict[str, Any]:
        end = time.process_time() + seconds
        n = 0
        while time.process_time() < end:
            n += 1
        return {"spun": n}


    def _pg_insert(dsn: str, table: str, token: str, seconds: float) -> dict[str, Any]:
        import psycopg

        if seconds:
            time.sleep(seconds)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"INSERT INTO {table} (token, pid) VALUES (%s, %s)",
                         (token, os.getpid()))
        return {"marked": token}


    @registry.tool(description="Insert a row per execution (non-idempotent).",
                   side_effects="write", timeout_s=10.0)
    def pg_mark(dsn: str, table: str, token: str, seconds: float = 0.0) -> dict[str, Any]:
        return _pg_insert(dsn, table, token, seconds)


    @registry.tool(description="Insert a row per execution; declared idempotent.",
                   side_effects="write", timeout_s=10.0)
    def pg_mark_idem(dsn: str, table: str, token: str, seconds: float = 0.0) -> dict[str, Any]:
        return _pg_insert(dsn, table, token, seconds)


    _pg_idem = registry.get("pg_mark_idem")
    assert _pg_idem.contract is not None
    _pg_idem.contract = _pg_idem.contract.model_copy(update={"idempotent": True})


    @registry.tool(description="Sleep 10 ms, blocking (bench/bus.py: long queues, long timeout).",
                   timeout_s=600.0)
    def tick() -> dict[str, Any]:
        time.sleep(0.01)
        return {"ticked": True}
    return registry


registry = build_registry()
"""The registry each sandbox child of the tests imports (``tests.bus.tools:registry``)."""
