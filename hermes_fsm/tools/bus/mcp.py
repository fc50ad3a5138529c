"""MCP servers run by tool workers, their tools served over the bus.

A configuration assigns MCP servers to the bus (``bus.mcp_servers``: names of
``mcp_servers`` entries, stdio commands or HTTP URLs). Then:

- **the worker** of the bus's group starts (or connects to) them itself, with the same
  client the orchestrator would use (:class:`~hermes_fsm.tools.mcp.servers.MCPServers`:
  handshake, health checks, restarts, pinned contracts), and serves their tools
  (``<server>.<tool>``) like its local ones: :class:`RoutedRunner` sends a call of an MCP
  tool to its server (the server is already a process of its own: no sandbox child) and
  every other call to the sandbox pool. Its heartbeat carries the tools' contracts
  (:func:`catalog`), and :func:`mcp_specs` keeps what it serves in step with the servers'
  listings (a restart, a ``list_changed``);
- **the orchestrator** does not start them. :class:`RemoteMCPServer` stands in for each
  one among the orchestrator's MCP servers: it reads the tools the live workers announce
  and registers stand-ins whose calls go over the bus
  (:class:`~hermes_fsm.tools.bus.remote.RemoteCall`), so the catalog, the permissions,
  the executor pipeline, readiness (``bus:<group>``) and ``mcp list`` see them as ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

from hermes_fsm.contracts.tools import BUILTIN_ERRORS, ToolContract
from hermes_fsm.errors import MCPServerError, ToolCallFailed
from hermes_fsm.tools.bus.protocol import Bus
from hermes_fsm.tools.bus.remote import RemoteCall
from hermes_fsm.tools.bus.sandbox import SandboxOutcome
from hermes_fsm.tools.bus.worker import Runner, ToolSpec
from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["RemoteMCPServer", "RoutedRunner", "catalog", "mcp_specs", "server_states"]


def mcp_specs(registry: ToolRegistry) -> dict[str, ToolSpec]:
    """The :class:`ToolSpec` of each MCP tool registered in ``registry`` now."""
    specs: dict[str, ToolSpec] = {}
    for tool in registry.tools():
        contract = tool.contract
        if not tool.source.startswith("mcp:") or contract is None:
            continue
        codes = {c for c, retry in BUILTIN_ERRORS.items() if retry}
        codes |= {c for c, e in contract.errors.items() if e.retryable}
        codes -= {c for c, e in contract.errors.items() if not e.retryable}
        specs[tool.name] = ToolSpec(
            tool.name,
            contract.is_idempotent,
            frozenset(codes),
            tuple(contract.permissions),
            tool.side_effects,
        )
    return specs


def catalog(registry: ToolRegistry) -> list[dict[str, Any]]:
    """The contracts of ``registry``'s MCP tools, as a heartbeat carries them."""
    return [
        {"name": t.name, "source": t.source, "contract": t.contract.model_dump(mode="json")}
        for t in registry.tools()
        if t.source.startswith("mcp:") and t.contract is not None
    ]


_STATE_FIELDS = ("name", "transport", "status", "tools", "protocol_version", "restarts",
                 "last_error")


def server_states(servers: Any) -> list[dict[str, Any]]:
    """What a worker's heartbeat says of the MCP servers it runs (``servers``: its
    :class:`~hermes_fsm.tools.mcp.servers.MCPServers`): each one's status line, short."""
    return [{k: record.get(k) for k in _STATE_FIELDS} for record in servers.info()]


class RoutedRunner:
    """A worker's runner: MCP tools to their servers, every other tool to ``local``.

    Args:
        local: the sandbox pool (or any runner) of the local tools.
        mcp: the registry the worker's MCP servers register their tools in.
    """

    def __init__(self, local: Runner, mcp: ToolRegistry) -> None:
        self.local, self.mcp = local, mcp

    async def run(self, tool: str, arguments: dict[str, Any], budget_s: float) -> SandboxOutcome:
        """One call under ``budget_s`` (the tool's share of the bus timeout)."""
        found = self.mcp.find(tool)
        if found is None:
            return await self.local.run(tool, arguments, budget_s)
        started = time.perf_counter()

        def took() -> float:
            return (time.perf_counter() - started) * 1000

        try:
            async with asyncio.timeout(budget_s):
                result = await found.fn(arguments)
        except TimeoutError:
            return SandboxOutcome(
                False,
                code="TIMEOUT",
                duration_ms=took(),
                message=f"{tool} did not answer within {budget_s:g}s",
            )
        except ToolCallFailed as exc:
            return SandboxOutcome(
                False,
                code=exc.code,
                message=exc.message,
                retryable=exc.retryable,
                duration_ms=took(),
            )
        except MCPServerError as exc:  # down or restarting: another try may find it up
            return SandboxOutcome(
                False,
                code="SERVER_UNAVAILABLE",
                message=str(exc),
                retryable=True,
                duration_ms=took(),
            )
        except Exception as exc:
            return SandboxOutcome(
                False,
                code="TOOL_EXCEPTION",
                duration_ms=took(),
                message=f"{type(exc).__name__}: {exc}",
            )
        return SandboxOutcome(True, output=result, duration_ms=took())


class RemoteMCPServer:
    """The orchestrator's stand-in for an MCP server that the workers of ``group`` run.

    It quacks like :class:`~hermes_fsm.tools.mcp.connection.MCPConnection` (``start``,
    ``aclose``, ``info``, ``availability``, ``wait_ready``): its tools are the ones live
    workers announce for it, read every ``refresh_s``, each a stand-in that calls the
    workers over ``bus``. ``status`` is ``ready`` while a live worker serves it.

    Args:
        name: the server's name (its tools are ``<name>.<tool>``).
        transport: how the workers reach it (for ``mcp list``).
        bus: the transport to the workers.
        group: the tool group whose workers run it.
        registry: the orchestrator's registry (stand-ins are registered there).
        refresh_s: how often the workers' announcements are read again.
        connect_timeout_s: how long :meth:`start` waits for a worker to announce it.
    """

    def __init__(
        self,
        name: str,
        transport: str,
        bus: Bus,
        group: str,
        registry: ToolRegistry,
        *,
        refresh_s: float = 2.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.name, self.transport, self.bus, self.group = name, transport, bus, group
        self.registry = registry
        self.refresh_s, self.connect_timeout_s = refresh_s, connect_timeout_s
        self.status = "stopped"
        self.last_error: str | None = None
        self.tool_names: list[str] = []
        self.workers: list[str] = []
        """The live workers that serve its tools now."""
        self.served_by: list[dict[str, Any]] = []
        """Each live worker of the group that runs it, from its heartbeat: ``worker_id``,
        ``host``, ``pid``, ``last_heartbeat``, ``in_flight``, ``concurrency`` and the
        server's ``status``, ``tools`` and ``last_error`` in that worker."""
        self._contracts: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()

    @property
    def source(self) -> str:
        """The ``source`` of the stand-ins in the registry."""
        return f"bus:{self.group}:mcp:{self.name}"

    async def start(self, wait: bool = True) -> None:
        """Read the workers' announcements now and every ``refresh_s``; with ``wait``,
        return once a worker announced the server, or after ``connect_timeout_s``."""
        if self._task is None:
            self.status = "starting"
            self._task = asyncio.create_task(self._watch(), name=f"bus-mcp-{self.name}")
        if wait:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.connect_timeout_s):
                    await self._ready.wait()
            await self._settled.wait()

    async def wait_ready(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a live worker serving it; ``True`` when there is."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._ready.wait()
        return self.status == "ready"

    async def aclose(self) -> None:
        """Stop watching and unregister the stand-ins (the workers' server runs on)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.registry.replace_source(self.source, ())
        self.tool_names, self._contracts = [], {}
        self.status = "stopped"

    def availability(self) -> str | None:
        """Why its tools cannot be called now (``None`` while a live worker serves it)."""
        if self.status == "ready":
            return None
        why = f": {self.last_error}" if self.last_error else ""
        return (
            f"MCP server {self.name!r} runs on the workers of bus group {self.group!r} "
            f"and none serves it now{why}; start one with `hermes-fsm worker`"
        )

    def info(self) -> dict[str, Any]:
        """The status line of ``hermes-fsm mcp list``."""
        return {
            "name": self.name,
            "transport": f"bus:{self.group} ({self.transport})",
            "status": self.status,
            "protocol_version": None,
            "server": None,
            "tools": len(self.tool_names),
            "resources": 0,
            "prompts": 0,
            "restarts": 0,
            "last_error": self.last_error,
            "problems": [],
            "group": self.group,
            "workers": list(self.workers),
            "served_by": [dict(w) for w in self.served_by],
        }

    async def _watch(self) -> None:
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the bus is away: keep the tools, say why, retry
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.status = "restarting" if self.tool_names else "failed"
                self._ready.clear()
            self._settled.set()
            await asyncio.sleep(self.refresh_s)

    async def refresh(self) -> None:
        """Read the live workers' heartbeats once; register what they serve."""
        prefix = f"{self.name}."
        contracts: dict[str, dict[str, Any]] = {}
        workers: list[str] = []
        served_by: list[dict[str, Any]] = []
        for worker in await self.bus.workers():
            if worker.group != self.group:
                continue
            mine = [e for e in worker.catalog if str(e.get("name", "")).startswith(prefix)]
            state = next((m for m in worker.mcp_servers if m.get("name") == self.name), None)
            if mine:
                workers.append(worker.worker_id)
            if mine or state is not None:  # it runs the server (up or not)
                state = state or {"status": "ready", "tools": len(mine), "last_error": None}
                served_by.append({
                    "worker_id": worker.worker_id, "host": worker.host, "pid": worker.pid,
                    "last_heartbeat": worker.last_heartbeat, "in_flight": worker.in_flight,
                    "concurrency": worker.concurrency, "status": state.get("status"),
                    "tools": state.get("tools", len(mine)),
                    "last_error": state.get("last_error")})
            for entry in mine:
                contracts.setdefault(str(entry["name"]), entry["contract"])
        self.workers, self.served_by = workers, served_by
        if workers and contracts != self._contracts:  # none: the last ones stay, unavailable
            self._register(contracts)
        if workers:
            self.status, self.last_error = "ready", None
            self._ready.set()
        else:
            self.status = "restarting" if self.tool_names else "starting"
            errors = [f"{w['worker_id']}: {w['last_error']}" for w in served_by
                      if w["last_error"]]
            self.last_error = (
                f"no live worker serves its tools ({'; '.join(errors)})" if errors
                else "no live worker announces it")
            self._ready.clear()

    def _register(self, contracts: Mapping[str, dict[str, Any]]) -> None:
        tools: list[Tool] = []
        for name, data in sorted(contracts.items()):
            try:
                contract = ToolContract.model_validate(data)
            except ValueError as exc:
                self.last_error = f"a worker announced {name} with a malformed contract: {exc}"
                continue
            base = Tool(
                contract.name,
                contract.description,
                _unused,
                contract.input_schema,
                contract=contract,
                source=self.source,
                pass_kwargs=False,
            )
            fn = RemoteCall(self.bus, self.group, base, self.registry)
            tools.append(
                Tool(
                    contract.name,
                    contract.description,
                    fn,
                    contract.input_schema,
                    contract=contract,
                    source=self.source,
                    own_timeout=True,
                    available=self.availability,
                )
            )
        self.registry.replace_source(self.source, tools)
        self.tool_names = [t.name for t in tools]
        self._contracts = dict(contracts)


def _unused(**_arguments: Any) -> Any:  # pragma: no cover - the stand-in's base is a record
    raise AssertionError("the base tool of a bus stand-in is never called")
