"""``contracts export|check`` for MCP tools: what the configured servers advertise, now.

The servers are started (or connected to) as at boot, without their pins, so the
contracts are the servers' own; they are stopped again before the command returns.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.errors import ContractCheckFailed
from hermes_fsm.tools.mcp.servers import MCPServers
from hermes_fsm.tools.registry import ToolRegistry

__all__ = ["advertised_contracts"]


def advertised_contracts(config: HermesConfig) -> tuple[list[ToolContract], list[str]]:
    """The contract of every tool of the configured MCP servers as advertised, and the
    names of the servers asked.

    Raises:
        ContractCheckFailed: a server did not become ready (its error, and what to do).
    """
    registry = ToolRegistry()
    servers = MCPServers(config.mcp_servers, registry)  # no pins: the servers' own schemas

    async def survey() -> tuple[list[ToolContract], list[dict[str, Any]]]:
        await servers.start()
        try:
            return [t.contract for t in registry.tools() if t.contract is not None], \
                servers.info()
        finally:
            await servers.aclose()

    contracts, info = asyncio.run(survey())
    failed = [f"MCP server {i['name']!r} is {i['status']}"
              f"{': ' + str(i['last_error']) if i['last_error'] else ''}; start it or fix "
              f"mcp_servers.{i['name']} in the configuration (or pass --no-mcp to skip the "
              "servers)" for i in info if i["status"] != "ready"]
    if failed:
        raise ContractCheckFailed(failed)
    return contracts, sorted(i["name"] for i in info)
