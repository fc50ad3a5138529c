"""Toolsets: with 30 registered tools a planning request carries only the scenario's tools
(≤ 8), for the rules brain and a model brain alike; ``tools_offered`` records which and how
many tool tokens that saved; a tool outside the scenario is still accepted when a plan
names it (on demand) and stays offered for the turn's next planning round; an intent no
toolset names gets every tool."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.config.toolbox import Toolbox
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.events.recording import parse_recording, recording_text
from hermes_fsm.replay import Replayer
from hermes_fsm.testing import ScriptedBrain, capture_events, demo_orchestrator
from hermes_fsm.tools.canary import Canary
from hermes_fsm.tools.registry import ToolRegistry
from hermes_fsm.tools.toolsets import Toolset, Toolsets
from tests.support import INTENT_TOOLS, PLAN_EMPTY, PLAN_LOOKUP, happy_script

RETAIL = ("inventory_lookup", "store_stock", "price_lookup", "order_status")
OFFICE = ("sales_report", "contact_lookup", "send_email", "create_reminder", "list_reminders")


def thirty_tools() -> ToolRegistry:
    """The demo's 9 tools and 21 more of other scenarios, each with a real schema."""
    reg = build_demo_registry()
    for i in range(30 - len(reg)):

        def filler(account_id: str, period: str = "month", limit: int = 10) -> dict[str, Any]:
            return {"account_id": account_id}

        filler.__name__ = f"crm_tool_{i:02d}"
        reg.tool(
            description=f"CRM operation {i}: looks up an account's history over a "
            "period and returns the matching records, newest first."
        )(filler)
    reg.toolsets = Toolsets(
        {
            "retail": Toolset("retail", RETAIL, ("inventory_query", "store_stock", "price_lookup")),
            "office": Toolset("office", OFFICE, ("sales_report", "create_reminder")),
            "crm": Toolset("crm", tuple(f"crm_tool_{i:02d}" for i in range(8)), ("crm_query",)),
        }
    )
    return reg


def offered(events: list[Any]) -> list[Any]:
    return [e for e in events if e.kind == "tools_offered"]


def test_the_rules_brain_plans_with_the_scenarios_tools_only() -> None:
    reg = thirty_tools()
    assert len(reg) == 30
    orchestrator = demo_orchestrator(tools=reg)
    with capture_events(orchestrator) as seen:
        result = asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left?"))
    assert result.status == "completed"
    [event] = offered(seen.events)
    assert event.intent == "inventory_query" and event.toolsets == ["retail"]
    assert sorted(event.offered) == sorted(RETAIL) and len(event.offered) <= 8
    assert event.left_out == 30 - len(RETAIL)
    assert (
        0 < event.tokens < event.tokens_all
        and event.tokens_saved == event.tokens_all - event.tokens
    )
    calls = [e.tool for e in seen.events if e.kind == "tool_call_finished"]
    assert calls == ["inventory_lookup"]


def test_a_model_brain_gets_at_most_eight_tool_schemas() -> None:
    brain = ScriptedBrain(happy_script())
    orchestrator = demo_orchestrator(tools=thirty_tools(), brain=brain)
    with capture_events(orchestrator) as seen:
        asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left?"))
    [first, *_] = brain.requests_for("plan")
    assert sorted(t.name for t in first.tools) == sorted(RETAIL)
    built = [e for e in seen.events if e.kind == "context_built" and e.state == "PLANNING"]
    [tools_event, *_] = offered(seen.events)
    assert built and built[0].parts["tools"] == tools_event.tokens  # what was sent
    # the saving is in the request's context_built event too
    assert built[0].tools_saved == tools_event.tokens_saved > 0
    others = [e for e in seen.events if e.kind == "context_built" and e.state != "PLANNING"]
    assert others and all(e.tools_saved == 0 for e in others)  # they carry no tools
    # the other states' requests carry no tool list to trim: no event for them
    assert {e.state for e in offered(seen.events)} == {"PLANNING"}


def test_a_tool_outside_the_scenario_is_accepted_on_demand_and_stays_offered() -> None:
    plan_other = {
        "tool_calls": [
            {
                "tool_name": "contact_lookup",
                "arguments": {"name": "Director Li"},
                "reasoning_trace": "who to tell",
            }
        ]
    }
    brain = ScriptedBrain(happy_script(plan=[plan_other, PLAN_EMPTY]))
    orchestrator = demo_orchestrator(tools=thirty_tools(), brain=brain)
    with capture_events(orchestrator) as seen:
        asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left?"))
    finished = [e for e in seen.events if e.kind == "tool_call_finished"]
    assert [(e.tool, e.ok) for e in finished] == [("contact_lookup", True)]
    [first, *_] = offered(seen.events)
    assert "contact_lookup" not in first.offered
    # named by the turn's plan: a later planning round of the turn is offered it
    toolsets = thirty_tools().toolsets
    assert toolsets is not None
    later = toolsets.select("inventory_query", ["contact_lookup"])
    assert later is not None and "contact_lookup" in later.tools


def test_an_intent_no_toolset_names_gets_every_tool() -> None:
    intent = {**INTENT_TOOLS, "intent_type": "billing_dispute"}
    brain = ScriptedBrain(happy_script(intent=[intent], plan=[PLAN_LOOKUP, PLAN_EMPTY]))
    orchestrator = demo_orchestrator(tools=thirty_tools(), brain=brain)
    with capture_events(orchestrator) as seen:
        asyncio.run(orchestrator.run_turn("s1", "something else"))
    assert not offered(seen.events)
    assert len(brain.requests_for("plan")[0].tools) == 30


def test_toolsets_come_from_the_configuration() -> None:
    config = HermesConfig.model_validate(
        {
            "mcp_servers": {},
            "tools": {
                "toolsets": {"retail": {"tools": list(RETAIL), "intents": ["inventory_query"]}},
                "always": ["list_reminders"],
            },
        }
    )
    box = Toolbox.from_config(config)
    assert box.registry.toolsets is not None
    choice = box.registry.toolsets.select("inventory_query")
    assert choice is not None and choice.tools == {*RETAIL, "list_reminders"}
    assert box.registry.toolsets.unknown_tools(box.registry.names()) == []
    assert Toolsets({"x": Toolset("x", ("nope",), ("*",))}).unknown_tools(["a"]) == ["nope"]


async def test_of_an_overlapping_local_and_mcp_tool_only_the_configured_one_is_exposed() -> None:
    # the demo's local create_reminder and the SDK demo server's (over stdio) overlap
    config = HermesConfig.model_validate(
        {
            "mcp_servers": {
                "demo": {
                    "transport": "stdio",
                    "command": sys.executable,
                    "args": ["-m", "hermes_fsm.demo.mcp_server"],
                    "enabled_tools": ["create_reminder"],
                }
            },
            "tools": {"prefer": {"demo.create_reminder": "create_reminder"}},
        }
    )
    box = Toolbox.from_config(config)
    async with asyncio.timeout(60):
        await box.mcp.start()
    try:
        names = [d.name for d in box.registry.describe()]
        problem = box.registry.check_call("create_reminder", {"text": "x", "due": "y"})
    finally:
        await box.mcp.aclose()
    assert "demo.create_reminder" in names and "create_reminder" not in names
    assert problem is not None and "exposes instead (tools.prefer)" in problem


def test_a_recording_made_with_toolsets_and_a_canary_reruns_without_divergence() -> None:
    reg = thirty_tools()
    reg.add_canary(Canary("store_stock", "inventory_lookup", share=1.0))  # any read tool
    orchestrator = demo_orchestrator(tools=reg)
    asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left?"))
    recording = parse_recording(recording_text(orchestrator, "s1"), "<test>")
    assert "tools_offered" in {e.kind for e in recording.events}
    result = Replayer().rerun(recording, raise_on_failure=False)
    assert result.ok and result.divergences == []


def test_a_vague_follow_up_with_a_pending_task_gets_the_tasks_scenario_tools() -> None:
    from datetime import UTC, datetime, timedelta

    from hermes_fsm.conversation.graph import Task

    vague = {"intent_type": "follow_up", "parameters": {}, "confidence": 0.6,
             "needs_tools": True}
    brain = ScriptedBrain(happy_script(intent=[INTENT_TOOLS, vague],
                                       plan=[PLAN_LOOKUP, PLAN_EMPTY, PLAN_EMPTY]))
    orchestrator = demo_orchestrator(tools=thirty_tools(), brain=brain)
    asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left?"))
    # the office scenario's task waits for the user (an e-mail to approve, say)
    conversation = orchestrator.sessions()["s1"].conversation
    assert conversation is not None
    now = datetime.now(UTC)
    conversation.tasks.append(Task(
        id="task_9", kind="approval", intent_type="sales_report", parameters={},
        created_at=now.isoformat(), expires_at=(now + timedelta(days=1)).isoformat()))
    with capture_events(orchestrator) as seen:
        asyncio.run(orchestrator.run_turn("s1", "and what about that one?"))
    [event] = offered(seen.events)
    assert event.intent == "follow_up"  # no toolset serves it ...
    assert event.toolsets == ["office"] and event.pending_task == "task_9"  # ... the task's
    assert sorted(event.offered) == sorted(OFFICE)
    assert sorted(t.name for t in brain.requests_for("plan")[-1].tools) == sorted(OFFICE)
