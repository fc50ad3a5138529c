"""MCP resources and prompts in use, on the demo MCP server (a real stdio subprocess): a
plan reads the stock-policy resource through ``demo.read_resource`` and its text becomes a
fact the answer cites; the 退货申请 prompt loads into the brain's requests when the turn's
intent matches, with its argument from the intent; ``mcp list`` shows both; a prompt the
server lacks, or a server that cannot give it, leaves a problem or an event and the turn
goes on."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_fsm.cli.console import format_event
from hermes_fsm.cli.main import main
from hermes_fsm.config.settings import HermesConfig, MCPServerConfig
from hermes_fsm.config.toolbox import Toolbox
from hermes_fsm.demo.calendar import STOCK_POLICY
from hermes_fsm.testing import ScriptedBrain, capture_events, demo_orchestrator
from tests.support import MEMORY_NONE, PLAN_EMPTY, happy_script

CALENDAR_SCRIPT = str(Path(__file__).resolve().parents[1] / "hermes_fsm" / "demo" / "calendar.py")
SDK_SERVER = ["-m", "hermes_fsm.demo.mcp_server"]
PROMPTS = {"return_request": {"intents": ["order_status"], "arguments": {"order_id": "order_id"}}}


def demo_config(args: list[str] | None = None, **server: Any) -> HermesConfig:
    return HermesConfig(
        mcp_servers={
            "demo": MCPServerConfig(
                transport="stdio",
                command=sys.executable,
                args=args or [CALENDAR_SCRIPT],
                enabled_tools=["calendar_query"],
                **server,
            )
        }
    )


async def started(config: HermesConfig) -> Toolbox:
    box = Toolbox.from_config(config)
    async with asyncio.timeout(60):
        await box.mcp.start()
    return box


@pytest.mark.parametrize("args", [None, SDK_SERVER], ids=["stdlib-server", "sdk-server"])
async def test_a_plan_reads_a_resource_and_an_unknown_uri_is_refused(
    args: list[str] | None,
) -> None:
    box = await started(demo_config(args, resources=True))
    try:
        [policy] = await box.executor.execute(
            [("c1", "demo.read_resource", {"uri": "demo://stock-policy"})]
        )
        [bad] = await box.executor.execute(
            [("c2", "demo.read_resource", {"uri": "demo://nothing"})]
        )
    finally:
        await box.mcp.aclose()
    assert policy["success"] and policy["output"]["text"] == STOCK_POLICY
    assert bad["error_code"] == "VALIDATION_FAILED" and "demo://stock-policy" in bad["message"]


async def test_without_resources_configured_no_read_tool_is_registered() -> None:
    box = await started(demo_config())
    try:
        assert "demo.read_resource" not in box.registry.names()
        assert box.registry.prompts == {}
    finally:
        await box.mcp.aclose()


async def test_the_resource_becomes_a_fact_the_answer_cites() -> None:
    box = await started(demo_config(resources=True))
    plan = {
        "tool_calls": [
            {
                "tool_name": "demo.read_resource",
                "arguments": {"uri": "demo://stock-policy"},
                "reasoning_trace": "the user asks about the stock policy",
            }
        ]
    }

    def answer(request: Any) -> dict[str, Any]:
        facts = list(request.outputs["result_report"].facts)
        return {"text": facts[0].content["output"]["text"][:40], "evidence": [facts[0].id]}

    brain = ScriptedBrain(happy_script(plan=[plan, PLAN_EMPTY], response=[answer]))
    orchestrator = demo_orchestrator(tools=box.registry, executor=box.executor, brain=brain)
    try:
        with capture_events(orchestrator) as seen:
            result = await orchestrator.run_turn("s1", "What is the stock policy?")
    finally:
        await box.mcp.aclose()
    assert result.status == "completed"
    assert result.answer == STOCK_POLICY[:40]
    [finished] = [e for e in seen.events if e.kind == "tool_call_finished"]
    assert finished.tool == "demo.read_resource" and finished.source == "mcp:demo"


@pytest.mark.parametrize("args", [None, SDK_SERVER], ids=["stdlib-server", "sdk-server"])
async def test_the_return_prompt_loads_when_the_intent_matches(args: list[str] | None) -> None:
    box = await started(demo_config(args, prompts=PROMPTS))
    intent = {
        "intent_type": "order_status",
        "parameters": {"order_id": "ORD-12345678"},
        "confidence": 0.9,
        "needs_tools": True,
    }
    plan = {
        "tool_calls": [
            {
                "tool_name": "order_status",
                "arguments": {"order_id": "ORD-12345678"},
                "reasoning_trace": "order question",
            }
        ]
    }
    brain = ScriptedBrain(
        happy_script(intent=[intent], plan=[plan, PLAN_EMPTY], memory_commit=[MEMORY_NONE])
    )
    orchestrator = demo_orchestrator(tools=box.registry, executor=box.executor, brain=brain)
    try:
        with capture_events(orchestrator) as seen:
            await orchestrator.run_turn("s1", "I want to return order ORD-12345678")
    finally:
        await box.mcp.aclose()
    [intent_request] = brain.requests_for("intent")
    assert "退货申请" not in intent_request.memory  # the intent is not known yet
    [plan_request, *_] = brain.requests_for("plan")
    assert "退货申请" in plan_request.memory and "ORD-12345678" in plan_request.memory
    assert "退货申请" in brain.requests_for("response")[0].memory
    loaded = [e for e in seen.events if e.kind == "prompt_loaded"]
    assert {e.state for e in loaded} == {"PLANNING", "RESPONSE"}
    assert all(
        e.prompt == "demo.return_request"
        and e.error is None
        and e.tokens > 0
        and e.arguments == {"order_id": "ORD-12345678"}
        for e in loaded
    )


async def test_another_intent_does_not_load_the_prompt_and_the_rules_brain_turn_runs() -> None:
    box = await started(demo_config(prompts=PROMPTS))
    orchestrator = demo_orchestrator(tools=box.registry, executor=box.executor)
    try:
        with capture_events(orchestrator) as seen:
            stock = await orchestrator.run_turn("s1", "How many A1001 are left?")
            order = await orchestrator.run_turn("s2", "Where is order ORD-10000001?")
    finally:
        await box.mcp.aclose()
    assert stock.status == order.status == "completed"
    loaded = [e for e in seen.events if e.kind == "prompt_loaded"]
    assert loaded and {e.turn_id for e in loaded} == {order.turn_id}


async def test_a_prompt_that_cannot_be_had_leaves_an_event_and_the_turn_goes_on() -> None:
    box = await started(demo_config(prompts=PROMPTS))
    prompt = box.registry.prompts["demo.return_request"]
    await box.mcp.aclose()  # the server is gone: the prompt cannot be fetched
    box.registry.prompts["demo.return_request"] = prompt
    orchestrator = demo_orchestrator(tools=box.registry)
    with capture_events(orchestrator) as seen:
        result = await orchestrator.run_turn("s1", "Where is order ORD-10000001?")
    assert result.status == "completed"
    loaded = [e for e in seen.events if e.kind == "prompt_loaded"]
    assert loaded and all(e.error and "MCPServerError" in e.error for e in loaded)


async def test_a_configured_prompt_the_server_lacks_is_a_problem() -> None:
    box = await started(demo_config(prompts={"nope": {"intents": ["*"]}}))
    try:
        [problem] = box.mcp["demo"].problems
    finally:
        await box.mcp.aclose()
    assert "'nope'" in problem and "return_request" in problem


def test_mcp_list_shows_the_resources_and_prompts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "hermes.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "mcp_servers": {
                    "demo": {
                        "transport": "stdio",
                        "command": "python",
                        "args": [CALENDAR_SCRIPT],
                        "resources": True,
                        "prompts": PROMPTS,
                    }
                }
            }
        )
    )
    assert main(["mcp", "list", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "resources: demo://calendar, demo://stock-policy" in out
    assert "prompts: plan_my_day, return_request (used by intent)" in out
    assert "demo.read_resource" in out
    assert main(["mcp", "list", "--json", "--config", str(config)]) == 0
    [server] = json.loads(capsys.readouterr().out)["servers"]
    assert server["prompts_used"] == ["return_request"]


async def test_a_scenarios_resource_is_read_into_its_requests() -> None:
    toolsets = {
        "retail": {
            "tools": ["inventory_lookup"],
            "intents": ["inventory_query"],
            "resources": ["demo://stock-policy", "demo://missing"],
        }
    }
    config = HermesConfig(
        mcp_servers=demo_config(resources=True).mcp_servers, tools={"toolsets": toolsets}
    )
    box = await started(config)
    brain = ScriptedBrain(happy_script())
    orchestrator = demo_orchestrator(tools=box.registry, executor=box.executor, brain=brain)
    try:
        with capture_events(orchestrator) as seen:
            await orchestrator.run_turn("s1", "How many A1001 are left?")
    finally:
        await box.mcp.aclose()
    [plan_request, *_] = brain.requests_for("plan")
    # a part of their own, not in the memory block
    assert STOCK_POLICY in plan_request.resources and STOCK_POLICY not in plan_request.memory
    assert STOCK_POLICY in brain.requests_for("response")[0].resources
    assert not brain.requests_for("intent")[0].resources
    built = {e.state: e for e in seen.events if e.kind == "context_built"}
    assert set(built["PLANNING"].resources) == {"demo://stock-policy"}  # what was read
    # the part is the block as sent: the resource and the block's header
    assert built["PLANNING"].parts["resources"] > built["PLANNING"].resources[
        "demo://stock-policy"] > 0
    assert built["INTENT"].parts["resources"] == 0 and not built["INTENT"].resources
    line = format_event(built["PLANNING"])
    assert line is not None and "resources demo://stock-policy (" in line
    read = [e for e in seen.events if e.kind == "resources_read"]
    assert {e.state for e in read} == {"PLANNING", "RESPONSE"}
    assert all(
        e.toolsets == ["retail"]
        and e.tokens["demo://stock-policy"] > 0
        and "demo://missing" in e.errors
        for e in read
    )
