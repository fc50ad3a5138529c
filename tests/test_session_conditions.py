"""Contract conditions over what the session knows: ``conversation`` (the conversation
graph's active entities, latest by type) and ``memory`` (the user's active memory items by
key). The engine gives them only to the calls whose conditions read them; a key the
session lacks fails closed; a bad expression is still refused at load."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.contracts.tools import ToolContract, parse_tool_contract
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.call_facts import conversation_facts
from hermes_fsm.errors import ContractError
from hermes_fsm.memory.tiered import InProcessMemory
from hermes_fsm.testing import ScriptedBrain, capture_events, demo_orchestrator
from hermes_fsm.tools.calling import calling_with_facts
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import PLAN_EMPTY, happy_script

ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}
SKU = {
    "type": "object",
    "properties": {"sku": {"type": "string"}},
    "required": ["sku"],
    "additionalProperties": False,
}
NOT_BLOCKED = {
    "name": "returns_allowed",
    "expr": "!('returns.blocked' in memory) || memory['returns.blocked'].value != true",
    "message": {"en": "returns are blocked for this user", "zh": "该用户的退货已被冻结"},
    "confirm": {"en": "ask an operator", "zh": "请联系人工客服"},
}
PRODUCT_SURE = {
    "name": "product_confirmed",
    "expr": "conversation.latest.Product.canonical == args.sku && "
    "conversation.latest.Product.confidence >= 0.8",
    "message": "the product was not confirmed in the conversation",
}


def reserve_tools(made: list[str]) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(
        contract=ToolContract.model_validate(
            {
                "name": "create_return",
                "version": "1.0.0",
                "description": "Create a return.",
                "side_effects": "write",
                "input_schema": ORDER,
                "preconditions": [NOT_BLOCKED],
            }
        )
    )
    async def create_return(order_id: str) -> dict[str, Any]:
        made.append(order_id)
        return {"order_id": order_id, "status": "created"}

    @reg.tool(
        contract=ToolContract.model_validate(
            {
                "name": "reserve",
                "version": "1.0.0",
                "description": "Reserve a product.",
                "side_effects": "write",
                "input_schema": SKU,
                "preconditions": [PRODUCT_SURE],
            }
        )
    )
    async def reserve(sku: str) -> dict[str, Any]:
        made.append(sku)
        return {"sku": sku, "reserved": True}

    return reg


def product(canonical: str, confidence: float) -> dict[str, Any]:
    node = {
        "id": "e1",
        "type": "Product",
        "value": canonical,
        "canonical": canonical,
        "confidence": confidence,
        "version": 1,
    }
    return {"entities": [node], "latest": {"Product": node}}


@pytest.mark.parametrize(
    ("conversation", "runs"),
    [
        (product("A1001", 0.95), True),
        (product("A1001", 0.45), False),  # the user's mention is not sure enough
        (product("B2002", 0.95), False),  # the plan names another product than the user's
        (None, False),  # nothing in the conversation: fails closed
    ],
)
def test_a_precondition_over_the_conversation_graph(
    conversation: dict[str, Any] | None, runs: bool
) -> None:
    made: list[str] = []
    executor = ToolExecutor(reserve_tools(made))
    facts = {"conversation": conversation} if conversation is not None else {}
    with calling_with_facts(facts):
        [out] = asyncio.run(executor.execute([("c1", "reserve", {"sku": "A1001"})]))
    assert out["success"] is runs and (made == ["A1001"]) is runs
    if not runs:
        assert out["error_code"] == "PRECONDITION_FAILED"
        assert out["details"]["condition"] == "product_confirmed"


async def remembered_block(user: str) -> InProcessMemory:
    memory = InProcessMemory()
    await memory.apply(
        user,
        "t0",
        [
            MemoryUpdate(
                key="returns.blocked",
                update_type="create",
                value=True,
                memory_type="fact",
                evidence_source="user_message",
            )
        ],
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    return memory


def return_turn_brain() -> ScriptedBrain:
    plan = {
        "tool_calls": [
            {
                "tool_name": "create_return",
                "arguments": {"order_id": "ORD-1"},
                "reasoning_trace": "the user wants to return ORD-1",
            }
        ]
    }
    return ScriptedBrain(
        happy_script(plan=[plan, PLAN_EMPTY], response=[{"text": "ok", "evidence": []}])
    )


@pytest.mark.parametrize(("user", "runs"), [("alice", False), ("bob", True)])
async def test_a_precondition_over_the_users_memory_through_the_engine(
    user: str, runs: bool
) -> None:
    made: list[str] = []
    memory = await remembered_block("alice")  # alice's returns are blocked; bob's are not
    orchestrator = demo_orchestrator(
        tools=reserve_tools(made), brain=return_turn_brain(), memory=memory
    )
    with capture_events(orchestrator) as seen:
        await orchestrator.run_turn(f"s-{user}", "I want to return ORD-1", user_id=user)
    [finished] = [e for e in seen.events if e.kind == "tool_call_finished"]
    assert finished.ok is runs and (made == ["ORD-1"]) is runs
    if not runs:
        assert finished.error is not None
        assert finished.error["error_code"] == "PRECONDITION_FAILED"
        assert finished.error["details"]["message_zh"] == "该用户的退货已被冻结"


async def test_the_conversation_graph_of_a_real_turn_is_what_conditions_see() -> None:
    orchestrator = demo_orchestrator(tools=build_demo_registry())
    await orchestrator.run_turn("s1", "How many A1001 are left?")
    facts = conversation_facts(orchestrator.session("s1").conversation)
    product_node = facts["latest"]["Product"]
    assert product_node["canonical"] == "A1001" and product_node in facts["entities"]
    assert 0.0 < product_node["confidence"] <= 1.0


def test_session_expressions_compile_and_bad_ones_are_still_refused_at_load() -> None:
    head = "name: w\nversion: 1.0.0\ndescription: w\ninput_schema: {type: object}\n"
    ok = parse_tool_contract(
        head + 'preconditions:\n  - expr: "has(conversation.latest.Store)'
        ' && conversation.latest.Store.confidence >= 0.8"\n',
        "w.yaml",
    )
    assert ok.compiled_preconditions[0].roots == {"conversation"}
    with pytest.raises(
        ContractError,
        match=r"^w.yaml:6: preconditions\.0\.expr: .* is not "
        r"boolean",
    ):
        parse_tool_contract(
            head + "preconditions:\n  - expr: size(conversation.entities)\n", "w.yaml"
        )
    with pytest.raises(ContractError, match=r"unknown variable 'session'"):
        parse_tool_contract(head + "preconditions:\n  - expr: session.x > 1\n", "w.yaml")
