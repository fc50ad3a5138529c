"""The configured MCP servers, started together (at boot, or on demand) and stopped together.

>>> from hermes_fsm.tools.registry import ToolRegistry
>>> servers = MCPServers({}, ToolRegistry())
>>> servers.info()
[]
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.errors import UsageError
from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.mcp.settings import MCPServerConfig
from hermes_fsm.tools.registry import ToolRegistry

__all__ = ["MCPServers"]


class MCPServers:
    """Every configured MCP server as a tool source of one registry.

    Args:
        configs: server configurations by name.
        registry: where their tools are registered (as ``<server>.<tool>``).
        pinned: pinned tool contracts by full tool name; a server tool whose advertised
            schema drifted from its pin is refused at connect time.
        on_demand: :meth:`start` leaves each server whose catalog is pinned ``idle``, its
            tools registered from the pins, until a call of one of them starts it
            (:meth:`MCPConnection.start_on_demand`); the others start at once. The
            ``hermes-fsm run`` and ``chat`` commands set it: a turn that calls no MCP tool
            does not start a server, nor import the SDK.
    """

    def __init__(self, configs: Mapping[str, MCPServerConfig], registry: ToolRegistry,
                 pinned: Mapping[str, ToolContract] | None = None,
                 on_demand: bool = False) -> None:
        self.registry = registry
        self.on_demand = on_demand
        self._connections = {name: MCPConnection(name, config, registry, pinned)
                             for name, config in configs.items()}

    async def start(self) -> None:
        """Start (or connect to) every server concurrently; return when each is ready or failed.

        A server that cannot be reached does not stop the others: its tools stay absent
        and :meth:`info` says why. With :attr:`on_demand`, a server whose catalog is
        pinned is left ``idle`` instead (its first call starts it).
        """
        await asyncio.gather(*(c.start() for c in self._connections.values()
                               if not (self.on_demand and c.start_on_demand())))

    async def aclose(self) -> None:
        """Stop every server and unregister their tools."""
        await asyncio.gather(*(c.aclose() for c in self._connections.values()))

    def add(self, connection: Any) -> None:
        """Add a server started elsewhere, by anything with :class:`MCPConnection`'s
        lifecycle (``start``, ``aclose``, ``info``; the execution bus's stand-in for a
        server its workers run, :class:`~hermes_fsm.tools.bus.mcp.RemoteMCPServer`)."""
        self._connections[connection.name] = connection

    def __getitem__(self, name: str) -> MCPConnection:
        try:
            return self._connections[name]
        except KeyError:
            known = ", ".join(sorted(self._connections)) or "none"
            raise UsageError(f"no MCP server named {name!r}; configured: {known}") from None

    def __iter__(self) -> Iterator[MCPConnection]:
        return iter(self._connections.values())

    def __len__(self) -> int:
        return len(self._connections)

    def info(self) -> list[dict[str, Any]]:
        """One status record per server: status, protocol version, counts, last error."""
        return [c.info() for c in self._connections.values()]
