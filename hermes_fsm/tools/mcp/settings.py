"""How one MCP server is started or reached: the ``mcp_servers:`` entries of the
configuration (:class:`~hermes_fsm.config.settings.HermesConfig` reads them)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MCPPromptUse", "MCPServerConfig"]


class MCPPromptUse(BaseModel):
    """When a turn uses one of the server's prompts: its intent is one of ``intents``
    (``*``: every intent); ``arguments`` maps each prompt argument to an intent parameter."""

    model_config = ConfigDict(extra="forbid")

    intents: list[str] = Field(min_length=1)
    arguments: dict[str, str] = {}


class MCPServerConfig(BaseModel):
    """One MCP server, started (``stdio``) or connected to (``http``, streamable HTTP) at boot.

    ``command: python`` runs the interpreter hermes-fsm runs on. ``enabled_tools`` is an
    allow-list of the server's tool names (``None``: all of them). The server's tools are
    registered as ``<server>.<tool>``. ``resources: true`` adds a read tool
    ``<server>.read_resource`` (argument ``uri``, one of the server's resources), so a plan
    can read one into the turn's facts. ``prompts`` names the server's prompt templates a
    turn loads when its intent matches (:class:`MCPPromptUse`).
    """

    model_config = ConfigDict(extra="forbid")

    transport: Literal["stdio", "http"]
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    enabled_tools: list[str] | None = None
    resources: bool = False
    prompts: dict[str, MCPPromptUse] = {}
    mode: Literal["auto", "legacy"] = "auto"
    connect_timeout_s: float = Field(default=30.0, gt=0)
    tool_timeout_s: float = Field(default=30.0, gt=0)
    health_interval_s: float = Field(default=15.0, gt=0)
    restart_backoff_s: float = Field(default=0.5, ge=0)
    max_restart_backoff_s: float = Field(default=30.0, ge=0)

    @model_validator(mode="after")
    def _transport_fields(self) -> MCPServerConfig:
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs `command` (and usually `args`)")
        if self.transport == "http" and not self.url:
            raise ValueError("an http server needs `url` (e.g. http://127.0.0.1:8931/mcp)")
        return self
