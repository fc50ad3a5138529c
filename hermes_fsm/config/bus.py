"""The execution bus a configuration asks for (see ``BusConfig``), both sides of it.

- the orchestrator's side, :func:`attach_bus`: the configured local tools of the registry
  go over the bus (the executor and the engine do not change);
- the worker's side, :func:`build_worker`: ``hermes-fsm worker`` serving a tool group
  with a sandbox pool, fenced by the session store's effects journal;
- MCP servers the configuration gives the bus (``bus.mcp_servers``): the workers of
  ``bus.group`` start them and serve their tools, the orchestrator does not start them
  and calls their tools over the bus (:mod:`hermes_fsm.tools.bus.mcp`).

``bus.kind: none`` (the default) builds nothing: tools run in the orchestrator's process
as they always did.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_fsm.config.store import build_store
from hermes_fsm.config.telemetry import configure_telemetry
from hermes_fsm.contracts.tools import default_tool_contract_dir, load_tool_contracts
from hermes_fsm.errors import ConfigError
from hermes_fsm.tools.bus.child import load_registry
from hermes_fsm.tools.bus.inprocess import InProcessBus
from hermes_fsm.tools.bus.mcp import (
    RemoteMCPServer,
    RoutedRunner,
    catalog,
    mcp_specs,
    server_states,
)
from hermes_fsm.tools.bus.messages import ExecuteRequest, Reply
from hermes_fsm.tools.bus.protocol import Bus, WorkerInfo
from hermes_fsm.tools.bus.remote import serve_over_bus
from hermes_fsm.tools.bus.sandbox import SandboxLimits, SandboxPool
from hermes_fsm.tools.bus.worker import ToolSpec, Worker, specs_of
from hermes_fsm.tools.mcp.servers import MCPServers
from hermes_fsm.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from hermes_fsm.config.settings import HermesConfig

__all__ = ["EmbeddedWorkerBus", "WorkerSetup", "add_bus_mcp_servers", "attach_bus",
           "build_bus", "build_worker", "load_tool_registry", "sandbox_limits"]


def load_tool_registry(config: HermesConfig) -> ToolRegistry:
    """The local tools ``bus.registry`` names (both sides load the same ones).

    Raises:
        ConfigError: it cannot be imported or is not a tool registry.
    """
    target = config.bus.registry
    try:
        registry = load_registry(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"bus.registry {target!r} cannot be loaded ({exc}); give "
                          "'package.module:attribute' of a ToolRegistry (or a function "
                          "returning one) importable by the orchestrator and the workers"
                          ) from None
    if not isinstance(registry, ToolRegistry):
        raise ConfigError(f"bus.registry {target!r} is a {type(registry).__name__}, not a "
                          "ToolRegistry (or a function returning one)")
    return registry


def sandbox_limits(config: HermesConfig) -> SandboxLimits:
    """The sandbox limits of ``bus.sandbox``."""
    s = config.bus.sandbox
    return SandboxLimits(cpu_s=s.cpu_s,
                         as_bytes=s.memory_mb * 1024 * 1024 if s.memory_mb else None,
                         nofile=s.open_files, nproc=s.processes, user=s.user,
                         env=tuple(s.env))


def build_bus(config: HermesConfig) -> Bus | None:
    """The transport of ``bus.kind`` (``None`` for ``none``).

    Raises:
        ConfigError: ``kind: redis`` without a URL (``bus.url``, ``HERMES_BUS_URL`` or
            ``memory.redis_url``).
    """
    b = config.bus
    if b.kind == "none":
        return None
    if b.kind == "inprocess":
        return EmbeddedWorkerBus(config, visibility_timeout_s=b.visibility_timeout_s,
                                 max_deliveries=b.max_deliveries)
    url = b.url or config.memory.redis_url
    if not url:
        raise ConfigError("bus.kind is redis but no Redis URL is set; set HERMES_BUS_URL "
                          "(or bus.url, or memory.redis_url in the config file)")
    from hermes_fsm.tools.bus.redis_streams import RedisStreamsBus

    return RedisStreamsBus(url, prefix=b.prefix, visibility_timeout_s=b.visibility_timeout_s,
                           max_deliveries=b.max_deliveries)


def _check_mcp_servers(config: HermesConfig) -> None:
    b = config.bus
    if not b.mcp_servers:
        return
    if b.kind == "none":
        raise ConfigError(f"bus.mcp_servers ({', '.join(b.mcp_servers)}) are run by the "
                          "bus's workers: set bus.kind to inprocess (a worker in this "
                          "process) or redis (`hermes-fsm worker` processes; HERMES_BUS_URL)")
    unknown = sorted(set(b.mcp_servers) - set(config.mcp_servers))
    if unknown:
        raise ConfigError(f"bus.mcp_servers names {', '.join(unknown)}, not in mcp_servers "
                          f"(configured: {', '.join(sorted(config.mcp_servers)) or 'none'}); "
                          "list the names of mcp_servers entries the workers should run")


def attach_bus(config: HermesConfig, registry: ToolRegistry,
               mcp: MCPServers | None = None) -> Bus | None:
    """Send the configured local tools of ``registry`` over the configured bus; returns
    the bus (``None`` when ``bus.kind`` is ``none``: nothing changes). The MCP servers of
    ``bus.mcp_servers`` join ``mcp`` as stand-ins whose tools the workers serve.

    Raises:
        ConfigError: ``bus.tools`` names a tool the registry lacks; ``bus.mcp_servers``
            names a server not configured, or the bus is not Redis.
    """
    bus = build_bus(config)
    if bus is None:
        return None
    _check_mcp_servers(config)
    if mcp is not None:
        add_bus_mcp_servers(config, bus, mcp)
    names = config.bus.tools
    if names is not None:
        unknown = sorted(set(names) - set(registry.names()))
        if unknown:
            raise ConfigError(f"bus.tools names {', '.join(unknown)}, not in the registry "
                              f"{config.bus.registry!r}; known: {', '.join(registry.names())}")
    serve_over_bus(registry, bus, config.bus.group, names)
    return bus


def add_bus_mcp_servers(config: HermesConfig, bus: Bus, mcp: MCPServers, *,
                        connect_timeout_s: float | None = None) -> None:
    """Add to ``mcp`` a :class:`RemoteMCPServer` for each server of ``bus.mcp_servers``
    (its tools go to ``mcp``'s registry). ``connect_timeout_s``: how long each one's start
    waits for a worker (default: the server's own, at most 10 s; 0 reads the heartbeats
    once, as ``hermes-fsm mcp list`` does)."""
    for name in config.bus.mcp_servers:
        server = config.mcp_servers[name]
        wait = min(server.connect_timeout_s, 10.0) if connect_timeout_s is None \
            else connect_timeout_s
        mcp.add(RemoteMCPServer(name, server.transport, bus, config.bus.group, mcp.registry,
                                refresh_s=config.bus.heartbeat_s, connect_timeout_s=wait))


class EmbeddedWorkerBus(InProcessBus):
    """The in-process bus with its own sandboxed worker, started at the first call or the
    first look at the workers (``bus.kind: inprocess``): tools run contained without
    Redis or a worker process. The MCP servers of ``bus.mcp_servers`` are this worker's,
    served over the bus exactly as ``hermes-fsm worker`` serves them on Redis."""

    def __init__(self, config: HermesConfig, **options: Any) -> None:
        super().__init__(**options)
        self.config = config
        self._worker: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.setup: WorkerSetup | None = None

    def _ensure_worker(self) -> None:
        if self._worker is not None and not self._worker.done():
            return
        b = self.config.bus
        registry = load_tool_registry(self.config)
        pool = SandboxPool(b.registry, size=b.concurrency, limits=sandbox_limits(self.config))
        local = specs_of(registry, b.tools)
        runner, servers = _runner(self.config, pool, b.group)
        worker = Worker(self, b.group, local, runner, concurrency=b.concurrency,
                        heartbeat_s=b.heartbeat_s, on_event=self.on_event)
        self.setup = WorkerSetup(worker, self, pool, None, servers, local, owns_bus=False)
        self._stop = asyncio.Event()
        self._worker = asyncio.get_running_loop().create_task(self.setup.run(self._stop))

    async def call(self, request: ExecuteRequest, group: str) -> Reply:
        """Start the worker if it is not running, then see :meth:`InProcessBus.call`."""
        self._ensure_worker()
        return await super().call(request, group)

    async def workers(self) -> list[WorkerInfo]:
        """Start the worker if it is not running (its MCP servers' tools are learnt from
        its heartbeat), then see :meth:`InProcessBus.workers`."""
        self._ensure_worker()
        return await super().workers()

    async def aclose(self) -> None:
        """Stop the worker, its sandbox pool and its MCP servers."""
        self._stop.set()
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)


@dataclass(slots=True)
class WorkerSetup:
    """A worker with what it runs on: the bus, its sandbox pool, its fence store, and the
    MCP servers it runs (``mcp``, with the registry their tools are in)."""

    worker: Worker
    bus: Bus
    pool: SandboxPool
    fence: Any
    mcp: MCPServers | None = None
    local: dict[str, ToolSpec] | None = None
    owns_bus: bool = True
    """Close the bus when done (not for the in-process bus, whose worker this is)."""

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Open the fence (if any), start the pool and the MCP servers, serve until
        ``stop``; then release all."""
        if self.fence is not None:
            await self.fence.open()
        sync: asyncio.Task[None] | None = None
        try:
            await self.pool.start()
            if self.mcp is not None:
                await self.mcp.start()
                self.sync_tools()
                sync = asyncio.get_running_loop().create_task(self._sync_tools())
            await self.worker.run(stop)
        finally:
            if sync is not None:
                sync.cancel()
            if self.mcp is not None:
                await self.mcp.aclose()
            await self.pool.aclose()
            if self.owns_bus:
                await self.bus.aclose()
            if self.fence is not None:
                await self.fence.close()

    def sync_tools(self) -> None:
        """Serve what the MCP servers list now, beside the local tools."""
        if self.mcp is None:
            return
        registry = self.mcp.registry
        worker = self.worker
        worker.tools = {**(self.local or {}), **mcp_specs(registry)}
        worker.info.tools = sorted(worker.tools)
        worker.info.catalog = catalog(registry)
        worker.info.mcp_servers = server_states(self.mcp)

    async def _sync_tools(self) -> None:
        while True:  # a server restarted, or its tools changed (list_changed)
            await asyncio.sleep(self.worker.heartbeat_s)
            self.sync_tools()


def _runner(config: HermesConfig, pool: SandboxPool, group: str
            ) -> tuple[Any, MCPServers | None]:
    """What a worker of ``group`` runs calls with: the sandbox ``pool``, or — for the
    group that runs ``bus.mcp_servers`` — a :class:`RoutedRunner` sending the MCP tools
    to those servers (returned too, not started)."""
    b = config.bus
    if not (b.mcp_servers and group == b.group):
        return pool, None
    directory = config.tools.contracts_dir or default_tool_contract_dir()
    pinned = {n: c for n, c in load_tool_contracts(directory).items() if "." in n}
    servers = MCPServers({n: config.mcp_servers[n] for n in b.mcp_servers},
                         ToolRegistry(), pinned)
    return RoutedRunner(pool, servers.registry), servers


def build_worker(config: HermesConfig, *, group: str | None = None,
                 concurrency: int | None = None, worker_id: str | None = None) -> WorkerSetup:
    """``hermes-fsm worker``: serve ``group`` (default ``bus.group``) with ``concurrency``
    sandboxed calls at once, fenced by the configured session store's effects journal.

    Raises:
        ConfigError: no Redis bus is configured, or the registry cannot be loaded.
    """
    configure_telemetry(config)
    b = config.bus
    if b.kind != "redis":
        raise ConfigError("a worker serves a Redis bus: set HERMES_BUS_URL (or bus: {kind: "
                          "redis} in the config file) — with bus.kind "
                          f"{b.kind!r} the orchestrator runs its tools itself")
    _check_mcp_servers(config)
    bus = build_bus(config)
    assert bus is not None
    registry = load_tool_registry(config)
    size = concurrency or b.concurrency
    pool = SandboxPool(b.registry, size=size, limits=sandbox_limits(config))
    fence = build_store(config)
    group = group or b.group
    local = specs_of(registry, b.tools)
    runner, servers = _runner(config, pool, group)
    worker = Worker(bus, group, local, runner, fence=fence, concurrency=size,
                    heartbeat_s=b.heartbeat_s, worker_id=worker_id)
    return WorkerSetup(worker, bus, pool, fence, servers, local)
