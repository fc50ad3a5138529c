"""MCP servers as tool sources (stdio and streamable HTTP, both protocol eras): started,
handshaken, health-checked, restarted, drift-checked against pinned contracts."""

from __future__ import annotations

from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.mcp.servers import MCPServers

__all__ = ["MCPConnection", "MCPServers"]
