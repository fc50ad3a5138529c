"""MCP servers as tool sources (stdio and streamable HTTP, both protocol eras): started,
handshaken, health-checked, restarted, drift-checked against pinned contracts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.tools.mcp.connection import MCPConnection
    from hermes_fsm.tools.mcp.servers import MCPServers

__all__ = ["MCPConnection", "MCPServers"]

__getattr__, __dir__ = lazy_face(__name__, {
    "MCPConnection": "hermes_fsm.tools.mcp.connection",
    "MCPServers": "hermes_fsm.tools.mcp.servers",
})
