"""A brain per state (issue 18): the graph's ``brain:``, configured ``brains:``, the brain
named in every ``brain_call`` event, and no tool silently dropped for a brain without a
window."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.brain.brain_set import BrainSet, choose_brain
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.cli.console import format_event
from hermes_fsm.cli.main import main
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.budgets import apply_state_brains
from hermes_fsm.config.settings import load_config
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.budget import ContextConfig
from hermes_fsm.errors import BrainError, ConfigError
from hermes_fsm.events.model import BrainCall, ContextBuilt
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.testing import ScriptedBrain
from tests.support import answer_from_facts

QUESTION = "How many A1001 are left in the east warehouse?"


def hybrid_graph(tmp_path: Path, brain: str = "rules") -> Path:
    """The bundled graph with INTENT and PLANNING on ``brain``."""
    text = default_graph_path().read_text(encoding="utf-8")
    for contract in ("contract: intent@2", "contract: plan@2"):  # INTENT's, PLANNING's
        assert contract in text
        text = text.replace(contract, f"{contract}\n    brain: {brain}", 1)
    path = tmp_path / "hybrid.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def writer() -> ScriptedBrain:
    """A 'model' that writes the answer and commits nothing."""
    return ScriptedBrain({"response": [answer_from_facts],
                          "memory_commit": [{"memory_updates": []}]})


def brains_by_state(events: Sequence[object]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for e in events:
        if isinstance(e, BrainCall):
            seen.setdefault(e.state, set()).add(e.brain)
    return seen


def test_the_graph_file_names_a_states_brain(tmp_path):
    graph = load_graph(hybrid_graph(tmp_path))
    assert graph.states["INTENT"].brain == "rules" and graph.states["PLANNING"].brain == "rules"
    assert graph.states["RESPONSE"].brain is None


async def test_intent_and_planning_on_rules_response_on_the_model(tmp_path):
    model = writer()
    orchestrator = Orchestrator(hybrid_graph(tmp_path), brain=BrainSet(model, {}),
                                tools=build_demo_registry())
    result = await orchestrator.run_turn(None, QUESTION, user_id="u")
    assert result.status == "completed", result.answer
    assert "342" in result.answer
    seen = brains_by_state(result.events)
    assert seen["INTENT"] == {"rules"} and seen["PLANNING"] == {"rules"}
    assert seen["RESPONSE"] == {"scripted"}
    assert {r.state for r in model.requests} == {"RESPONSE", "MEMORY_COMMIT"}


async def test_a_single_brain_still_runs_a_state_that_asks_for_rules(tmp_path):
    orchestrator = Orchestrator(hybrid_graph(tmp_path), brain=writer(),
                                tools=build_demo_registry())
    result = await orchestrator.run_turn(None, QUESTION, user_id="u")
    assert brains_by_state(result.events)["INTENT"] == {"rules"}


def test_choosing_an_unknown_brain_says_which_exist():
    with pytest.raises(BrainError, match=r"'big'.*rules"):
        BrainSet(RulesBrain(), {}).brain_for("big")
    with pytest.raises(BrainError, match="'big'"):
        choose_brain(RulesBrain(), "big")


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hermes.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_configuration_defines_several_brains_and_a_state_picks_one(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))
    graph = hybrid_graph(tmp_path, brain="small")
    config = _config(tmp_path, f"graph: {graph}\nmcp_servers: {{}}\n"
                               "brains: {small: {kind: rules}}\n")
    out = io.StringIO()
    assert main(["--config", str(config), "run", "--json", QUESTION], out=out) == 0
    lines = [line for line in out.getvalue().splitlines() if '"brain_call"' in line]
    assert lines and all('"brain":"rules"' in line for line in lines)
    orchestrator = build_orchestrator(load_config(config, environ={}), store=None)
    assert isinstance(orchestrator.services.brain, BrainSet)
    assert set(orchestrator.services.brain.brains) == {"small", "rules"}


def test_a_state_naming_an_unconfigured_brain_is_refused_with_its_line(tmp_path):
    graph = hybrid_graph(tmp_path, brain="big")
    config = load_config(_config(tmp_path, f"graph: {graph}\nmcp_servers: {{}}\n"), environ={})
    with pytest.raises(ConfigError) as caught:
        build_orchestrator(config, store=None)
    message = str(caught.value)
    assert f"{graph}:" in message and "'big'" in message and "brains:" in message


# --- no tool silently dropped -------------------------------------------------------------------

TIGHT = ContextConfig(caps={"tools": 10})


async def test_the_rules_brain_gets_every_tool_whatever_the_budget():
    orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry(), context=TIGHT)
    result = await orchestrator.run_turn(None, QUESTION, user_id="u")
    built = [e for e in result.events if isinstance(e, ContextBuilt) and e.state == "PLANNING"]
    assert built and all(not e.dropped_tools for e in built)
    assert "342" in result.answer


async def test_a_budget_that_drops_tools_for_a_model_names_them_in_the_event_and_console():
    intent = {"intent_type": "inventory_query", "parameters": {"sku": "A1001"},
              "confidence": 0.9, "needs_tools": True}
    script: dict[str, list[Any]] = {
        "intent": [intent], "plan": [{"tool_calls": []}], "response": [answer_from_facts],
        "memory_commit": [{"memory_updates": []}]}
    orchestrator = Orchestrator(brain=ScriptedBrain(script), tools=build_demo_registry(),
                                context=TIGHT)
    result = await orchestrator.run_turn(None, QUESTION, user_id="u")
    built = next(e for e in result.events if isinstance(e, ContextBuilt)
                 and e.state == "PLANNING")
    assert built.dropped_tools and built.dropped["tools"] == len(built.dropped_tools)
    line = format_event(built) or ""
    assert all(name in line for name in built.dropped_tools), line


def test_configuration_assigns_brains_to_states_of_the_bundled_graph(tmp_path):
    config = load_config(_config(tmp_path, "mcp_servers: {}\nstate_brains: {INTENT: rules, "
                                           "PLANNING: rules}\n"), environ={})
    graph = build_orchestrator(config, store=None).graph
    assert graph.states["INTENT"].brain == "rules" and graph.states["PLANNING"].brain == "rules"
    assert graph.states["RESPONSE"].brain is None


def test_state_brains_naming_no_state_is_refused(tmp_path):
    config = load_config(_config(tmp_path, "state_brains: {INTENTS: rules}\n"), environ={})
    with pytest.raises(ConfigError, match="INTENTS"):
        build_orchestrator(config, store=None)


async def test_a_fallback_brain_answers_the_last_attempt_after_refusals(tmp_path):
    model = ScriptedBrain({"response": [{"text": " ", "evidence": []}],  # always refused
                           "memory_commit": [{"memory_updates": []}]})
    config = load_config(_config(tmp_path, "mcp_servers: {}\nstate_brains: {INTENT: rules, "
                                           "PLANNING: rules}\nfallback_brains: {RESPONSE: "
                                           "rules}\n"), environ={})
    orchestrator = build_orchestrator(config, brain=BrainSet(model, {}), store=None,
                                      graph=apply_state_brains(
                                          load_graph(default_graph_path()),
                                          config.state_brains, config.fallback_brains))
    result = await orchestrator.run_turn(None, QUESTION, user_id="u")
    assert result.status == "completed" and "342" in result.answer
    calls = [e for e in result.events if isinstance(e, BrainCall) and e.state == "RESPONSE"]
    attempts = load_graph(default_graph_path()).states["RESPONSE"].retry.max_attempts
    assert [c.brain for c in calls] == ["scripted"] * (attempts - 1) + ["rules"]


async def test_without_a_refusal_the_fallback_brain_is_not_asked(tmp_path):
    graph = apply_state_brains(load_graph(hybrid_graph(tmp_path)), {}, {"RESPONSE": "rules"})
    orchestrator = Orchestrator(graph, brain=BrainSet(writer(), {}), tools=build_demo_registry())
    result = await orchestrator.run_turn(None, QUESTION, user_id="u")
    assert brains_by_state(result.events)["RESPONSE"] == {"scripted"}
