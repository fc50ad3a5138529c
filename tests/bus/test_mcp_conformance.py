"""MCP servers served by a worker over the bus, the same on the in-process bus and on real
Redis: the worker runs the server, the orchestrator's stand-in learns its tools from the
worker's heartbeat and calls them over the bus, and says which worker serves it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from hermes_fsm.config import HermesConfig
from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.config.bus import EmbeddedWorkerBus, WorkerSetup
from hermes_fsm.tools.bus.mcp import RemoteMCPServer, RoutedRunner
from hermes_fsm.tools.bus.sandbox import SandboxPool
from hermes_fsm.tools.bus.worker import Worker, specs_of
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.servers import MCPServers
from hermes_fsm.tools.mcp.settings import MCPServerConfig
from hermes_fsm.tools.registry import ToolRegistry
from tests.bus.tools import registry as local_tools

DEMO = MCPServerConfig(transport="stdio", command="python",
                       args=["-m", "hermes_fsm.demo.mcp_server"])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _demo_servers() -> list[int]:
    """This process's children that are the default demo MCP server (demo/calendar.py)."""
    found = []
    for pid in _children(os.getpid()):
        try:
            if b"demo/calendar.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


async def test_a_workers_mcp_server_is_served_over_the_bus(bus: Any) -> None:
    servers = MCPServers({"demo": DEMO}, ToolRegistry())
    pool = SandboxPool("tests.bus.tools:registry", size=1)
    local = specs_of(local_tools)
    worker = Worker(bus, "default", local, RoutedRunner(pool, servers.registry),
                    concurrency=2, heartbeat_s=0.2, worker_id="w-conf")
    setup = WorkerSetup(worker, bus, pool, None, servers, local, owns_bus=False)
    stop = asyncio.Event()
    serving = asyncio.create_task(setup.run(stop))
    registry = ToolRegistry()
    stand_in = RemoteMCPServer("demo", "stdio", bus, "default", registry, refresh_s=0.2,
                               connect_timeout_s=60)
    try:
        await stand_in.start()
        assert stand_in.status == "ready", stand_in.info()
        assert "demo.server_pid" in registry.names()
        assert registry.get("demo.server_pid").source == "bus:default:mcp:demo"
        pid, day, local_call = await ToolExecutor(registry).execute([
            ("c1", "demo.server_pid", {}),
            ("c2", "demo.calendar_query", {"query": "restock"}),
            ("c3", "demo.no_such_tool", {}),
        ])
        info = stand_in.info()
    finally:
        await stand_in.aclose()
        stop.set()
        await serving
    assert pid["success"] and day["success"], (pid, day)
    assert int(pid["output"]["pid"]) != os.getpid()  # the server is a process of its own
    assert not local_call["success"]
    assert worker.served >= 2
    (by,) = info["served_by"]
    assert (by["worker_id"], by["status"]) == ("w-conf", "ready")
    assert info["group"] == "default" and info["workers"] == ["w-conf"]
    assert by["tools"] == info["tools"] > 0


async def test_bus_kind_inprocess_runs_the_mcp_servers_in_its_own_worker() -> None:
    config = HermesConfig(sessions={"store": "memory"}, log={"format": "off"},
                          bus={"kind": "inprocess", "heartbeat_s": 0.2,
                               "mcp_servers": ["demo"]})
    orchestrator = build_orchestrator(config)
    mcp = orchestrator.mcp
    assert mcp is not None
    (stand_in,) = list(mcp)
    assert isinstance(stand_in, RemoteMCPServer)  # the orchestrator starts no server
    bus = stand_in.bus
    assert isinstance(bus, EmbeddedWorkerBus)
    try:
        await orchestrator.start()
        assert await stand_in.wait_ready(60), stand_in.info()
        registry = orchestrator.services.tools
        assert registry.get("demo.calendar_query").source == "bus:default:mcp:demo"
        (day,) = await orchestrator.services.executor.execute(
            [("c1", "demo.calendar_query", {"query": "restock"})], caller="alice")
        assert day["success"], day
        servers = _demo_servers()
        assert servers  # the embedded worker's child, started by no MCP client here
        (by,) = stand_in.info()["served_by"]
        assert by["pid"] == os.getpid() and by["status"] == "ready"
    finally:
        await orchestrator.aclose()
        await bus.aclose()
    assert not set(servers) & set(_demo_servers())  # stopped with the bus
