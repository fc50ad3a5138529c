"""The tools a configuration describes, assembled: registry, executor and MCP servers.

>>> from hermes_fsm.config.settings import HermesConfig
>>> box = Toolbox.from_config(HermesConfig(mcp_servers={}))
>>> box.registry.names()  # doctest: +NORMALIZE_WHITESPACE
['contact_lookup', 'create_reminder', 'inventory_lookup', 'list_reminders', 'order_status',
 'price_lookup', 'sales_report', 'send_email', 'store_stock']
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hermes_fsm.config.local_tools import configured_registry
from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.contracts.tools import default_tool_contract_dir, load_tool_contracts
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.memory.settings import default_data_dir
from hermes_fsm.sources import Clock
from hermes_fsm.tools.breaker import CircuitBreaker, ExperienceBreaker, WindowBreaker
from hermes_fsm.tools.canary import Canary
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.servers import MCPServers
from hermes_fsm.tools.permissions import Caller, Permissions
from hermes_fsm.tools.registry import ToolRegistry
from hermes_fsm.tools.toolsets import Toolset, Toolsets

__all__ = ["Toolbox"]


@dataclass(slots=True)
class Toolbox:
    """A registry with its executor and the MCP servers feeding it."""

    registry: ToolRegistry
    executor: ToolExecutor
    mcp: MCPServers

    @classmethod
    def from_config(cls, config: HermesConfig, registry: ToolRegistry | None = None, *,
                    outcomes: Any = None, clock: Clock | None = None,
                    **executor_options: Any) -> Toolbox:
        """Local demo tools (unless ``registry`` is given), permissions, breaker, MCP servers.

        With ``outcomes`` (the memory's experience log) the breaker also reads the log's
        failure rates (``tools.breaker.experience``), on ``clock``: the clock the log's
        entries are stamped with.

        Raises:
            ContractError: a pinned tool contract is malformed.
        """
        if registry is None:  # the configured tools (the demo ones without any); the demo's
            # "today" and due times in the configured timezone
            registry = configured_registry(
                config.tools.local, config.tools.demo, config.source,
                demo_factory=lambda: build_demo_registry(
                    clock=clock, timezone=config.timezone,
                    data_dir=config.memory.data_dir or default_data_dir()))
        perms = config.permissions
        registry.permissions = Permissions(
            {uid: Caller(uid, tuple(u.roles), tuple(u.grants)) for uid, u in perms.users.items()},
            tuple(perms.default_roles))
        b = config.tools.breaker
        breaker: CircuitBreaker = WindowBreaker(
            window=b.window, min_calls=b.min_calls, failure_rate=b.failure_rate,
            cooldown_s=b.cooldown_s)
        if outcomes is not None and b.experience.enabled:
            e = b.experience
            breaker = ExperienceBreaker(
                outcomes, local=breaker, window=timedelta(seconds=e.window_s),
                min_calls=e.min_calls, failure_rate=e.failure_rate, refresh_s=e.refresh_s,
                clock=clock)
        registry.breaker = breaker
        for name, canary in config.tools.canaries.items():  # new versions, a share each
            registry.add_canary(Canary(name, **canary.model_dump()))
        if config.tools.canaries and hasattr(outcomes, "version_outcomes"):
            registry.canary_log = outcomes  # each version's error rate, across processes
        for exposed, hidden in config.tools.prefer.items():  # a local/MCP overlap: one shows
            registry.prefer(exposed, hidden)
        if config.tools.toolsets:  # planning sees the scenario's tools, not every tool
            registry.toolsets = Toolsets(
                {n: Toolset(n, tuple(t.tools), tuple(t.intents), tuple(t.resources))
                 for n, t in config.tools.toolsets.items()}, config.tools.always)
        pinned: dict[str, Any] = {}
        if config.mcp_servers:
            directory = config.tools.contracts_dir or default_tool_contract_dir()
            pinned = {n: c for n, c in load_tool_contracts(directory).items() if "." in n}
        executor = ToolExecutor(registry, max_result_chars=config.tools.max_result_chars,
                                **executor_options)
        servers = dict(config.mcp_servers)
        if config.bus.kind != "none":  # those the bus's workers run (hermes_fsm.tools.bus.mcp)
            servers = {n: c for n, c in servers.items() if n not in config.bus.mcp_servers}
        demo = servers.get("demo")
        if demo is not None and config.timezone and "HERMES_TIMEZONE" not in demo.env:
            # the bundled calendar counts its days in the configured zone too
            servers["demo"] = demo.model_copy(
                update={"env": {**demo.env, "HERMES_TIMEZONE": config.timezone}})
        return cls(registry, executor, MCPServers(servers, registry, pinned))
