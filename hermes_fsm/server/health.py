"""Readiness: is every backend the orchestrator depends on ready to serve turns?

Checked: each MCP server (ready, or why not), the brain (when it has an async ``check()``,
as the OpenAI-compatible brain does), memory (a bounded recall for a probe user), and
each tool group sent over the execution bus (a live worker serves each of its tools).
``sessions`` is informational (always ready): how many sessions the process caches, about
how many bytes they hold, the bound (``max_bytes``; ``null``: none) and how many were
evicted.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from hermes_fsm._internal.redact import redact
from hermes_fsm.brain.protocol import Brain
from hermes_fsm.memory import Memory
from hermes_fsm.tools.bus.remote import bus_readiness
from hermes_fsm.tools.mcp.servers import MCPServers

__all__ = ["ReadinessSource", "readiness"]

PROBE_USER = "hermes-readyz-probe"
"""The user id memory is probed with (it owns no data)."""


class _Backends(Protocol):
    @property
    def brain(self) -> Brain: ...
    @property
    def memory(self) -> Memory: ...


class ReadinessSource(Protocol):
    """What readiness checks of an orchestrator (one is): its MCP servers, brain, memory."""

    @property
    def mcp(self) -> MCPServers | None: ...
    @property
    def services(self) -> _Backends: ...


async def readiness(orchestrator: ReadinessSource,
                    timeout_s: float = 5.0) -> tuple[bool, dict[str, Any]]:
    """``(ready, checks)``: each check is ``{"ready": bool, ...details}``."""
    checks: dict[str, Any] = {}
    mcp = orchestrator.mcp
    servers = mcp.info() if mcp is not None else []
    for record in servers:
        checks[f"mcp:{record['name']}"] = {
            "ready": record["status"] == "ready", "status": record["status"],
            "tools": record["tools"], "last_error": record["last_error"]}
    brain = orchestrator.services.brain
    check = getattr(brain, "check", None)
    if check is not None:
        checks["brain"] = await _bounded(check(), timeout_s) | {"brain": brain.name}
    else:
        checks["brain"] = {"ready": True, "brain": brain.name}
    memory = orchestrator.services.memory
    checks["memory"] = await _bounded(_probe_memory(memory), timeout_s) | {
        "backend": type(memory).__name__}
    cache = getattr(orchestrator, "session_cache", None)
    if cache is not None:  # what the cached sessions hold, and their bound (informational)
        checks["sessions"] = {"ready": True, **cache.info()}
    tools = getattr(orchestrator.services, "tools", None)
    if tools is not None:  # tools sent to workers over the bus: a live worker for each
        checks.update(await bus_readiness(tools))
    return all(c["ready"] for c in checks.values()), checks


async def _probe_memory(memory: Memory) -> dict[str, Any]:
    await memory.recall(PROBE_USER, "readiness probe")
    return {"ready": True}


async def _bounded(coro: Any, timeout_s: float) -> dict[str, Any]:
    """Run a check; a failure or timeout is a not-ready result naming the error."""
    try:
        async with asyncio.timeout(timeout_s):
            result = await coro
    except TimeoutError:
        return {"ready": False, "error": f"no answer within {timeout_s}s"}
    except Exception as exc:  # reported in the readiness document, not raised
        return {"ready": False, "error": redact(f"{type(exc).__name__}: {exc}")}
    return dict(result) if isinstance(result, dict) else {"ready": bool(result)}
