"""The composition root: an orchestrator as a configuration says.

This is the one place that picks concrete backends: the engine takes its parts
(:class:`~hermes_fsm.engine.orchestrator.Orchestrator`), and :func:`build_orchestrator`
chooses them from a :class:`~hermes_fsm.config.settings.HermesConfig`:

=========== =============================================== ================================
part        embedded default (no configuration)             configured by
=========== =============================================== ================================
brain       the offline rules brain                         ``brain:`` (``kind: openai``,
                                                            ``rules_file``)
tools       the demo tools and the demo MCP server          ``mcp_servers:``, ``tools:``,
            (stdio), with permissions and the breaker       ``permissions:``
memory      three tiers: in-process working memory,         ``memory:`` (Redis, Qdrant,
            Qdrant local mode and SQLite on disk            PostgreSQL URLs)
store       SQLite under the data directory                 ``sessions:``,
                                                            ``HERMES_POSTGRES_URL``
lease       in-process                                      ``sessions:``,
                                                            ``HERMES_REDIS_URL``
sinks       none (``log.format: off``)                      ``log.format`` (``console``,
                                                            ``json``: structlog)
tool calls  in this process                                 ``bus:``, ``HERMES_BUS_URL``
                                                            (:mod:`~hermes_fsm.config.bus`)
=========== =============================================== ================================

>>> from hermes_fsm.config import HermesConfig
>>> orchestrator = build_orchestrator(HermesConfig(mcp_servers={}, sessions={"store": "memory"}))
>>> type(orchestrator.services.brain).__name__, orchestrator.services.tools.names()[:3]
('RulesBrain', ['contact_lookup', 'create_reminder', 'inventory_lookup'])
"""

from __future__ import annotations

from typing import Any

from hermes_fsm.brain.brain_set import BrainSet
from hermes_fsm.brain.protocol import Brain
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.config.budgets import apply_budgets, apply_state_brains
from hermes_fsm.config.memory import build_memory
from hermes_fsm.config.secrets import register_config_secrets
from hermes_fsm.config.settings import BrainConfig, HermesConfig
from hermes_fsm.config.store import build_lease, build_store
from hermes_fsm.config.telemetry import configure_telemetry
from hermes_fsm.config.toolbox import Toolbox
from hermes_fsm.conversation.graph import ConversationPolicy
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.errors import ConfigError
from hermes_fsm.events.sinks import StructlogSink
from hermes_fsm.graph.loader import default_graph_path, load_graph

__all__ = ["STORE_EVENT_LOG_TURNS", "build_brain", "build_orchestrator",
           "store_reading_orchestrator"]


def build_brain(config: HermesConfig) -> Brain:
    """The brain of the configuration: OpenAI-compatible (``brain.kind: openai``), else the
    rules brain (with ``brain.rules_file``'s rules, else the bundled ones); with ``brains:``
    a :class:`~hermes_fsm.brain.brain_set.BrainSet` of the default and the named ones.

    Raises:
        ConfigError: the rules file is malformed, or the OpenAI brain is misconfigured.
    """
    default = _one_brain(config.brain, config.timezone)
    if not config.brains:
        return default
    return BrainSet(default, {name: _one_brain(b, config.timezone)
                              for name, b in config.brains.items()})


def _one_brain(config: BrainConfig, timezone: str | None) -> Brain:
    if config.kind == "openai":
        # httpx (and its CLI's rich and click) only for a configuration that names a model
        # server: the embedded rules brain's process does without (issue 19)
        from hermes_fsm.brain.openai import OpenAIBrain

        return OpenAIBrain.from_config(config, timezone=timezone)
    if config.rules_file is not None:
        return RulesBrain.from_file(config.rules_file, timezone=timezone)
    return RulesBrain(timezone=timezone)


def _check_state_brains(orchestrator: Orchestrator, config: HermesConfig) -> None:
    """Every ``brain:`` of the graph's states names a configured brain (or ``rules``)."""
    known = {"rules", *config.brains}
    for spec in orchestrator.graph.states.values():
        for wanted in (spec.brain, spec.fallback_brain):
            if wanted is not None and wanted not in known:
                where = f"{orchestrator.graph.path}:{spec.line}" if spec.line else \
                    orchestrator.graph.path
                raise ConfigError(f"{where}: state {spec.name} asks for brain {wanted!r}, "
                                  f"which the configuration ({config.source}) does not "
                                  f"define (brains: {', '.join(sorted(known))}); add it "
                                  "under `brains:`")


def build_orchestrator(config: HermesConfig | None = None, **overrides: Any) -> Orchestrator:
    """An orchestrator as the configuration says (the embedded defaults for ``None``).

    Keyword arguments are :class:`~hermes_fsm.engine.orchestrator.Orchestrator`'s and
    replace what the configuration would build (``brain=``, ``tools=``, ``store=`` …);
    nothing is built for a part given. The MCP servers start with the orchestrator
    (``async with build_orchestrator(config) as orchestrator:``); nothing is opened here.

    Raises:
        ConfigError: a part of the configuration cannot be built (see the part's builder).
    """
    config = config or HermesConfig()
    register_config_secrets(config)  # a configuration made in code, not loaded, too
    traced = configure_telemetry(config)  # telemetry.exporter none (default): nothing
    graph: Any = config.graph
    if (config.budgets.is_set() or config.state_brains or config.fallback_brains
            ) and "graph" not in overrides:
        graph = apply_budgets(load_graph(config.graph or default_graph_path()), config.budgets)
        graph = apply_state_brains(graph, config.state_brains, config.fallback_brains)
    kwargs: dict[str, Any] = {
        "graph": graph,
        "busy_policy": config.busy_policy,
        "history_window": config.history_window,
        "context": config.context,
        "conversation": ConversationPolicy(**config.conversation.model_dump()),
        "event_log_turns": config.sessions.event_log_turns,
        "session_cache_bytes": (None if config.sessions.cache_mb is None
                                else int(config.sessions.cache_mb * 1024 * 1024)),
    }
    if "brain" not in overrides:
        kwargs["brain"] = build_brain(config)
    if "memory" not in overrides:
        kwargs["memory"] = build_memory(config.memory)  # opens nothing until used
        kwargs["memory"].warm()  # the embedder's model loads meanwhile, in a thread
    bus = None
    if "tools" not in overrides:
        memory = overrides.get("memory", kwargs.get("memory"))
        # the breaker also reads the experience log: tools failing in any process trip it
        if config.bus.kind == "none":  # the default: no bus, none of its modules (issue 19)
            box = Toolbox.from_config(config, None, clock=overrides.get("clock"),
                                      outcomes=getattr(memory, "experience", None))
        else:
            from hermes_fsm.config.bus import attach_bus, load_tool_registry

            box = Toolbox.from_config(config, load_tool_registry(config),
                                      outcomes=getattr(memory, "experience", None),
                                      clock=overrides.get("clock"))
            bus = attach_bus(config, box.registry, box.mcp)
        kwargs.update(tools=box.registry, executor=box.executor, mcp_servers=box.mcp)
    if config.log.format != "off" and "sinks" not in overrides:
        kwargs["sinks"] = [StructlogSink()]
    if "store" not in overrides:  # SQLite embedded; PostgreSQL when HERMES_POSTGRES_URL
        kwargs["store"] = build_store(config)
        if "lease" not in overrides:  # in-process; Redis when HERMES_REDIS_URL
            kwargs["lease"] = build_lease(config)
    kwargs.update(overrides)
    if traced:  # spans of turns, states and brain calls (hermes_fsm.engine.tracing)
        from hermes_fsm.engine.tracing import TurnTracer, traced_brain

        kwargs["hooks"] = [*kwargs.get("hooks", ()), TurnTracer()]
        if "brain" in kwargs:
            kwargs["brain"] = traced_brain(kwargs["brain"])
    orchestrator = Orchestrator(**kwargs)
    if bus is not None:  # its connections, its reply reader (an embedded bus: its worker)
        orchestrator.close_with(bus)
    if "brain" not in overrides:
        _check_state_brains(orchestrator, config)
    return orchestrator


STORE_EVENT_LOG_TURNS = 0
"""``sessions.event_log_turns`` for a process that reads a session's events from the store
when it needs them (``serve``: view, replay, ``events?after=SEQ``; the CLI's ``run`` and
``chat``: nothing reads the in-process log). A cached session then keeps none of its log:
its memory stays flat in the number of turns (bench/session_memory.py), and a session
rebuilt from the store reads only the events after its checkpoint, not its whole history."""


def store_reading_orchestrator(config: HermesConfig, **overrides: Any) -> Orchestrator:
    """:func:`build_orchestrator`, with the event-log window :data:`STORE_EVENT_LOG_TURNS`
    unless ``sessions.event_log_turns`` is set in the configuration."""
    if "event_log_turns" not in config.sessions.model_fields_set:
        overrides.setdefault("event_log_turns", STORE_EVENT_LOG_TURNS)
    return build_orchestrator(config, **overrides)

