"""The composition root: config/ picks the concrete backends, the engine takes its parts."""

from __future__ import annotations

from typing import Any

import pytest

from hermes_fsm import Orchestrator, StructlogSink, ToolRegistry
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.config import HermesConfig, build_orchestrator
from hermes_fsm.demo import tools as demo_tools
from hermes_fsm.memory import InProcessMemory, TieredMemory
from hermes_fsm.store import InMemoryStore, SQLiteStore
from hermes_fsm.store.lease import LocalLease
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator

DEMO_TOOLS = list(demo_tools.DEMO_TOOLS)


async def test_the_embedded_defaults_are_the_rules_brain_demo_tools_and_embedded_stores(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    orchestrator = build_orchestrator()

    services = orchestrator.services
    assert type(services.brain) is RulesBrain
    assert services.tools.names() == DEMO_TOOLS  # the MCP server's join when started
    assert orchestrator.mcp is not None and [c.name for c in orchestrator.mcp] == ["demo"]
    assert isinstance(services.memory, TieredMemory)
    assert not isinstance(services.memory, InProcessMemory)  # on disk, under the data dir
    assert isinstance(orchestrator.store, SQLiteStore)
    assert orchestrator.durable is not None and isinstance(orchestrator.durable.lease,
                                                           LocalLease)
    assert orchestrator.sinks == ()  # log.format: off
    await orchestrator.aclose()


def test_a_log_format_adds_the_structlog_sink() -> None:
    orchestrator = build_orchestrator(HermesConfig(mcp_servers={}, log={"format": "json"}),
                                      store=None, memory=InProcessMemory())
    assert [type(s) for s in orchestrator.sinks] == [StructlogSink]


def test_a_part_given_is_not_built_from_the_configuration() -> None:
    brain, tools, store = ScriptedBrain({}), ToolRegistry(), InMemoryStore()
    config = HermesConfig(mcp_servers={}, log={"format": "off"})
    orchestrator = build_orchestrator(config, brain=brain, tools=tools, store=store,
                                      memory=InProcessMemory())
    assert orchestrator.services.brain is brain and orchestrator.services.tools is tools
    assert orchestrator.store is store and orchestrator.mcp is None
    assert orchestrator.sinks == ()


def test_the_engine_takes_its_parts_and_picks_no_backend() -> None:
    with pytest.raises(TypeError, match="brain"):
        Orchestrator()  # type: ignore[call-arg]
    tools = ToolRegistry()
    orchestrator = Orchestrator(brain=ScriptedBrain({}), tools=tools)
    assert orchestrator.services.tools is tools and orchestrator.mcp is None
    assert type(orchestrator.services.memory) is InProcessMemory  # the in-process default
    assert orchestrator.store is None and orchestrator.durable is None
    assert orchestrator.sinks == ()


def test_the_demo_orchestrator_is_the_rules_brain_over_the_demo_tools() -> None:
    orchestrator = demo_orchestrator()
    assert type(orchestrator.services.brain) is RulesBrain
    assert orchestrator.services.tools.names() == DEMO_TOOLS
    assert orchestrator.store is None and orchestrator.mcp is None


def test_the_engine_imports_no_backend_no_configuration_and_has_no_import_loop() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("hermes_fsm")
    engine = sorted(m for m in graph.modules if m.startswith("hermes_fsm.engine"))
    picked = ("hermes_fsm.config", "hermes_fsm.demo", "hermes_fsm.brain.rules",
              "hermes_fsm.brain.openai", "hermes_fsm.store.sqlite", "hermes_fsm.store.postgres")
    for module in engine:
        imported = graph.find_modules_directly_imported_by(module)
        assert not [m for m in imported if m.startswith(picked)], module
    loops = [(a, b) for a in engine for b in engine
             if a < b and graph.chain_exists(a, b) and graph.chain_exists(b, a)]
    assert loops == []
