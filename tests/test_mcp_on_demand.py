"""MCP servers started on demand: a server whose catalog is pinned waits, ``idle``, until a
call of one of its tools starts it (what ``hermes-fsm run`` and ``chat`` do)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.config.settings import MCPServerConfig
from hermes_fsm.contracts.tools import ToolContract, default_tool_contract_dir, load_tool_contract
from hermes_fsm.errors import MCPServerError, ToolCallFailed
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.servers import MCPServers
from hermes_fsm.tools.registry import ToolRegistry

BOUND = 60.0
CALENDAR = str(Path(__file__).resolve().parents[1] / "hermes_fsm" / "demo" / "calendar.py")
TOOLS = ["calendar_query", "calendar_events"]


def pins() -> dict[str, ToolContract]:
    directory = default_tool_contract_dir()
    return {f"demo.{t}": load_tool_contract(directory / f"demo.{t}.yaml") for t in TOOLS}


def servers(registry: ToolRegistry, pinned: dict[str, Any], *args: str,
            **options: Any) -> MCPServers:
    config = MCPServerConfig(transport="stdio", command="python",
                             args=list(args) or [CALENDAR], **options)
    return MCPServers({"demo": config}, registry, pinned, on_demand=True)


async def test_a_pinned_server_waits_idle_with_its_tools_until_the_first_call_starts_it(
) -> None:
    registry = ToolRegistry()
    mcp = servers(registry, pins(), enabled_tools=TOOLS)
    await mcp.start()
    try:
        assert mcp["demo"].status == "idle"
        assert sorted(registry.names()) == ["demo.calendar_events", "demo.calendar_query"]
        tool = registry.get("demo.calendar_query")
        assert tool.contract == pins()["demo.calendar_query"]
        assert registry.unavailable(tool) is None  # callable: the call starts the server
        async with asyncio.timeout(BOUND):
            [envelope] = await ToolExecutor(registry).execute(
                [("c1", "demo.calendar_query", {"query": "A1001", "warehouse": "east"})])
        assert envelope["success"], envelope
        assert envelope["output"]["events"][0]["date"] == "2026-12-03"
        info = mcp.info()[0]  # read afresh: the call changed it
        assert info["status"] == "ready" and info["protocol_version"] is not None
    finally:
        await mcp.aclose()
    assert registry.names() == []


async def test_a_server_whose_catalog_is_not_pinned_starts_at_once() -> None:
    registry = ToolRegistry()
    mcp = servers(registry, pins())  # no enabled_tools: only the server knows its tools
    async with asyncio.timeout(BOUND):
        await mcp.start()
    try:
        assert mcp["demo"].status == "ready"
        assert "demo.server_pid" in registry.names()
    finally:
        await mcp.aclose()


async def test_without_on_demand_a_pinned_server_starts_at_boot_as_before() -> None:
    registry = ToolRegistry()
    config = MCPServerConfig(transport="stdio", command="python", args=[CALENDAR],
                             enabled_tools=TOOLS)
    mcp = MCPServers({"demo": config}, registry, pins())
    async with asyncio.timeout(BOUND):
        await mcp.start()
    try:
        assert mcp["demo"].status == "ready"
    finally:
        await mcp.aclose()


async def test_a_first_call_to_a_server_that_cannot_start_fails_at_once_saying_why() -> None:
    registry = ToolRegistry()
    mcp = servers(registry, pins(), "-c", "import sys; print('no API key', file=sys.stderr); "
                  "sys.exit(3)", enabled_tools=TOOLS, tool_timeout_s=30.0)
    await mcp.start()
    try:
        assert mcp["demo"].status == "idle"
        started = asyncio.get_running_loop().time()
        with pytest.raises(MCPServerError, match="no API key"):
            async with asyncio.timeout(BOUND):
                await mcp["demo"].call("calendar_query", {"query": "A1001"})
        assert asyncio.get_running_loop().time() - started < 25  # not the 30 s call timeout
        assert mcp["demo"].status in ("failed", "restarting")
    finally:
        await mcp.aclose()


async def test_a_first_call_to_a_tool_whose_schema_drifted_from_its_pin_is_refused() -> None:
    pinned = pins()
    stale = pinned["demo.calendar_query"]
    schema = {**stale.input_schema, "required": ["query", "warehouse"]}
    pinned["demo.calendar_query"] = stale.model_copy(update={"input_schema": schema})
    registry = ToolRegistry()
    mcp = servers(registry, pinned, enabled_tools=TOOLS)
    await mcp.start()
    try:
        with pytest.raises(ToolCallFailed, match="drifted from its pinned contract") as failed:
            async with asyncio.timeout(BOUND):
                await mcp["demo"].call("calendar_query", {"query": "A1001", "warehouse": "e"})
        assert not failed.value.retryable
        assert "demo.calendar_query" not in registry.names()
        assert "demo.calendar_events" in registry.names()
    finally:
        await mcp.aclose()

