"""Executor overhead per tool call: local tools and MCP tools over stdio.

Run on demand (never in CI, no timed assertions)::

    .venv/bin/python bench/tool_overhead.py [--local-calls 20000] [--mcp-calls 300]

Local (CPU time of this process): one call of a sync tool through ``ToolExecutor.execute``
(argument check, permission and breaker checks, timeout-free sync call, output check,
truncation check, start/finish events to a no-op emitter, and — the ``executor+events`` row
— to a real turn's ``TurnContext.emit``, contexts built outside the timed loop, 20 calls
each) against calling the function directly; the tool is ``inline`` (called on the event
loop), the ``async def`` row the same lookup written as an ``async def`` that never
awaits (stepped eagerly: no time limit is armed for it), and the ``thread`` row is the sync
tool run as sync tools are by default, in a worker thread.
MCP: ``calendar_query`` on the bundled stdio demo server through
the executor and ``MCPConnection`` against a bare ``mcp.Client.call_tool`` to the same
server script, in the same run, alternating call by call. Targets: ≤ 20 µs added to a local
call (issue 19: ≤ 10 µs for the call with a turn's events), ≤ 10% added to an MCP round trip.
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
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from hermes_fsm.config.settings import MCPServerConfig
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.registry import ToolRegistry

SCRIPT = str(Path(__file__).resolve().parents[1] / "hermes_fsm" / "demo" / "calendar.py")
ARGS = {"query": "A1001", "warehouse": "east"}


def lookup(sku: str, warehouse: str | None = None) -> dict[str, Any]:
    """Look up stock."""
    return {"sku": sku, "warehouse": warehouse, "quantity": 342}


async def lookup_async(sku: str, warehouse: str | None = None) -> dict[str, Any]:
    """Look up stock (an ``async def`` that never awaits: no time limit needs arming)."""
    return {"sku": sku, "warehouse": warehouse, "quantity": 342}


def noop(kind: Any, **fields: Any) -> None:
    return None


class TurnEvents:
    """A real turn's ``emit`` (:meth:`TurnContext.emit`: fill the event's fields, keep them on
    the turn's log; no sinks). A new turn context every ``calls_per_turn`` calls, built
    outside the timed loop, so the log grows as a turn's does, not without bound."""

    def __init__(self, registry: ToolRegistry, executor: ToolExecutor,
                 calls_per_turn: int = 20) -> None:
        from hermes_fsm.engine.session import Session
        from hermes_fsm.engine.turn import EventSinks, Services, TurnContext
        from hermes_fsm.sources import SystemClock

        services = Services(brain=None, tools=registry, executor=executor,  # type: ignore[arg-type]
                            memory=None, clock=SystemClock())  # type: ignore[arg-type]
        self._new = lambda: TurnContext(Session("s", "alice", "IDLE"), "t", "alice", "x",
                                        services, EventSinks())
        self.calls_per_turn = calls_per_turn

    def emitters(self, n: int) -> list[Any]:
        """The ``emit`` of each of ``n`` calls (a turn context per ``calls_per_turn``)."""
        out: list[Any] = []
        while len(out) < n:
            emit = self._new().emit
            out.extend([emit] * self.calls_per_turn)
        return out[:n]


async def per_call_us(run: Any, n: int, clock: Any = time.perf_counter) -> float:
    started = clock()
    for _ in range(n):
        await run()
    return (clock() - started) / n * 1e6


def cpu_us(run: Any, n: int) -> Any:
    """µs of this process's CPU per call (local calls: what waiting for a CPU on a busy
    machine adds to the wall time is not the executor's)."""
    return per_call_us(run, n, time.process_time)


async def bench_local(n: int, quiet: bool = False) -> dict[str, float]:
    """Median µs per call of each row (``direct``, ``executor``, ``executor+events``,
    ``async def``, ``thread``); printed unless ``quiet``."""
    registry = ToolRegistry()
    registry.tool(inline=True)(lookup)
    registry.tool("lookup_in_thread")(lookup)
    registry.tool(inline=True)(lookup_async)
    executor = ToolExecutor(registry)
    calls = [("c1", "lookup", {"sku": "A1001", "warehouse": "east"})]
    args = calls[0][2]
    threaded = [("c1", "lookup_in_thread", args)]
    asynchronous = [("c1", "lookup_async", args)]

    async def direct() -> None:
        lookup(**args)

    async def through_executor() -> None:
        await executor.execute(calls, noop, "alice")

    turns = TurnEvents(registry, executor)
    emitters: list[Any] = []

    async def with_events() -> None:
        await executor.execute(calls, emitters.pop(), "alice")

    async def in_thread() -> None:
        await executor.execute(threaded, noop, "alice")

    async def async_tool() -> None:
        await executor.execute(asynchronous, noop, "alice")

    rounds: dict[str, list[float]] = {"direct": [], "executor": [], "executor+events": [],
                                      "async def": [], "thread": []}
    for _ in range(5):
        rounds["direct"].append(await cpu_us(direct, n))
        rounds["executor"].append(await cpu_us(through_executor, n))
        emitters[:] = turns.emitters(n)  # built before the timed loop
        rounds["executor+events"].append(await cpu_us(with_events, n))
        rounds["async def"].append(await cpu_us(async_tool, n))
        rounds["thread"].append(await per_call_us(in_thread, n))  # wall: two threads work
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    if quiet:
        return medians
    base = medians["direct"]
    print(f"local tool, {n} calls x 5 rounds (median µs per call; CPU, the thread row wall):")
    for name, value in medians.items():
        extra = "" if name == "direct" else f"   overhead {value - base:6.2f} µs"
        print(f"  {name:<16} {value:8.2f} µs{extra}")
    return medians


async def bench_mcp(n: int) -> None:
    from mcp import Client, StdioServerParameters

    registry = ToolRegistry()
    connection = MCPConnection("demo", MCPServerConfig(
        transport="stdio", command="python", args=[SCRIPT]), registry)
    await connection.start()
    executor = ToolExecutor(registry)
    calls = [("c1", "demo.calendar_query", ARGS)]
    params = StdioServerParameters(command=sys.executable, args=[SCRIPT])
    try:
        async with Client(params, cache=None) as client:
            # A host lists tools before calling them; once listed, the bare client checks
            # each structured result against the tool's output schema (jsonschema). Our path
            # does the same check in the executor (against the contract, compiled with
            # fastjsonschema, so the violation policy applies): both paths check outputs.
            await client.list_tools()

            async def bare() -> None:
                await client.call_tool("calendar_query", ARGS)

            async def through_executor() -> None:
                (envelope,) = await executor.execute(calls, noop, "alice")
                assert envelope["success"], envelope

            await per_call_us(bare, 20)  # warm both paths
            await per_call_us(through_executor, 20)
            bare_times, executor_times = [], []
            for _ in range(n):  # alternate call by call: load drift hits both paths alike
                bare_times.append(await per_call_us(bare, 1))
                executor_times.append(await per_call_us(through_executor, 1))
    finally:
        await connection.aclose()
    base, ours = statistics.median(bare_times), statistics.median(executor_times)
    print(f"MCP tool over stdio (demo calendar), {n} alternating calls (median µs per call):")
    print(f"  bare Client.call_tool {base:10.1f} µs")
    print(f"  executor + MCPConnection {ours:7.1f} µs   overhead {ours - base:7.1f} µs "
          f"({(ours - base) / base * 100:+.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local-calls", type=int, default=20_000)
    parser.add_argument("--mcp-calls", type=int, default=300, help="0: skip MCP")
    args = parser.parse_args()
    asyncio.run(bench_local(args.local_calls))
    if args.mcp_calls > 0:
        asyncio.run(bench_mcp(args.mcp_calls))


if __name__ == "__main__":
    main()
