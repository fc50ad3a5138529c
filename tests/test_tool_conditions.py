"""Preconditions and postconditions of tool contracts (CEL): checked at load with file and
line, evaluated in the executor (a failed precondition never runs the tool; a failed
postcondition is an output violation), and the demo's answers in English and Chinese."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.config import HermesConfig, build_orchestrator
from hermes_fsm.config.settings import MCPServerConfig
from hermes_fsm.contracts.tools import (
    ToolContract,
    default_tool_contract_dir,
    load_tool_contract,
    parse_tool_contract,
)
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.errors import ContractError
from hermes_fsm.memory import InProcessMemory
from hermes_fsm.sources import FixedClock, SequentialIds
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.registry import ToolRegistry

BASE = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai

HEAD = """\
name: probe
version: 1.0.0
description: A probe.
registries:
  stores: {type: object, properties: {confidence: {type: number}, name: {type: string}}}
input_schema:
  type: object
  properties: {store: {type: string}, n: {type: integer}}
output_schema: {type: object, properties: {units: {type: integer}}}
"""


@pytest.mark.parametrize(("body", "line", "reason"), [
    ("preconditions:\n  - expr: 'args.store +'\n", 11, "does not compile"),
    ("preconditions:\n  - expr: \"shop == 'x'\"\n", 11, "unknown variable 'shop'"),
    ("preconditions:\n  - expr: \"args.stor == 'x'\"\n", 11, "reads 'stor'"),
    ("preconditions:\n  - expr: 'size(args.store)'\n", 11, "is not boolean"),
    ("preconditions:\n  - expr: 'registries.shops[args.store].confidence > 0.5'\n", 11,
     "registries.shops is not a registry"),
    ("preconditions:\n  - expr: 'output.units > 0'\n", 11, "unknown variable 'output'"),
    ("postconditions:\n  - expr: 'output.count >= 0'\n", 11, "reads 'count'"),
    ("preconditions:\n  - expr: 'true'\n    message: 'bad {nope}'\n", 12,
     "unknown variable 'nope'"),
])
def test_a_bad_condition_is_refused_at_load_with_file_line_and_reason(
        body: str, line: int, reason: str) -> None:
    with pytest.raises(ContractError) as caught:
        parse_tool_contract(HEAD + body, "probe.yaml")
    assert f"probe.yaml:{line}:" in str(caught.value)
    assert reason in str(caught.value)


def test_good_conditions_compile_once_at_load_and_round_trip() -> None:
    contract = parse_tool_contract(HEAD + (
        "preconditions:\n  - name: sure\n    expr: 'registries.stores[args.store].confidence"
        " >= 0.8'\n    message: {en: 'only {registries.stores[args.store].confidence}'}\n"
        "postconditions:\n  - expr: 'output.units >= 0'\n"), "probe.yaml")
    assert [c.condition.label for c in contract.compiled_preconditions] == ["sure"]
    again = ToolContract.model_validate(contract.to_document())
    assert again.to_document() == contract.to_document()


def probe_registry(output: Any) -> ToolRegistry:
    registry = ToolRegistry()
    registry.provide_registry("stores", {"s1": {"confidence": 0.9, "name": "One"},
                                         "s2": {"confidence": 0.3, "name": "Two"}})
    contract = parse_tool_contract(HEAD + (
        "preconditions:\n  - name: sure\n    expr: '!(args.store in registries.stores) ||"
        " registries.stores[args.store].confidence >= 0.8'\n"
        "    message: {en: 'store {args.store} at {registries.stores[args.store].confidence}',"
        " zh: '门店 {args.store} 置信度 {registries.stores[args.store].confidence}'}\n"
        "    confirm: {en: 'confirm {registries.stores[args.store].name}', zh: '请确认'}\n"
        "postconditions:\n  - {name: counted, expr: 'output.units >= 0', message: 'negative'}\n"
        "on_output_violation: fail\n"), "probe.yaml")
    calls: list[dict[str, Any]] = []

    @registry.tool(contract=contract, inline=True)
    def probe(store: str = "", n: int = 0) -> Any:
        calls.append({"store": store})
        return output

    registry.calls = calls  # type: ignore[attr-defined]
    return registry


async def test_a_failed_precondition_never_runs_the_tool_and_says_what_to_confirm() -> None:
    registry = probe_registry({"units": 1})
    events: list[Any] = []
    [out] = await ToolExecutor(registry).execute(
        [("c1", "probe", {"store": "s2"})], lambda kind, **f: events.append((kind, f)))
    assert registry.calls == []  # type: ignore[attr-defined]
    assert out["error_code"] == "PRECONDITION_FAILED" and out["retryable"] is False
    assert out["message"] == "store s2 at 0.3; confirm Two"
    assert out["details"]["condition"] == "sure"
    assert out["details"]["message_zh"] == "门店 s2 置信度 0.3"
    finished = [f for kind, f in events if kind.__name__ == "ToolCallFinished"]
    assert finished[0]["error"]["details"]["confirm_zh"] == "请确认"


async def test_a_precondition_that_holds_lets_the_call_run() -> None:
    registry = probe_registry({"units": 1})
    [ok] = await ToolExecutor(registry).execute([("c1", "probe", {"store": "s1"})])
    [unknown] = await ToolExecutor(registry).execute([("c2", "probe", {"store": "zz"})])
    assert ok["success"] and unknown["success"]
    assert len(registry.calls) == 2  # type: ignore[attr-defined]


async def test_a_failed_postcondition_is_an_output_violation() -> None:
    registry = probe_registry({"units": -2})
    [out] = await ToolExecutor(registry).execute([("c1", "probe", {"store": "s1"})])
    assert out["error_code"] == "OUTPUT_VIOLATION"
    assert "postcondition 'counted' does not hold: negative" in out["message"]


async def test_a_condition_that_cannot_be_evaluated_refuses_the_call() -> None:
    registry = ToolRegistry()
    contract = parse_tool_contract(HEAD + (
        "preconditions:\n  - expr: 'registries.stores[args.store].confidence >= 0.8'\n"),
        "probe.yaml")

    @registry.tool(contract=contract, inline=True)
    def probe(store: str = "", n: int = 0) -> Any:  # pragma: no cover - never called
        raise AssertionError("called")

    [out] = await ToolExecutor(registry).execute([("c1", "probe", {"store": "nowhere"})])
    assert out["error_code"] == "PRECONDITION_FAILED"
    assert "could not be evaluated" in out["message"]


def demo_registry() -> ToolRegistry:
    return build_demo_registry(clock=FixedClock(BASE, step=timedelta(0)),
                               timezone="Asia/Shanghai")


async def test_the_demo_store_below_the_confidence_floor_is_a_precondition() -> None:
    [out] = await ToolExecutor(demo_registry()).execute(
        [("c1", "store_stock", {"sku": "IP15-128", "store": "sh_xh_002"})])
    assert out["error_code"] == "PRECONDITION_FAILED"
    assert out["details"]["message_zh"] == "门店ID sh_xh_002 在门店库中置信度仅0.45"
    assert out["details"]["confirm_zh"] == "建议确认门店全称(徐汇滨江店)"


@pytest.mark.parametrize("tool", ["store_stock", "price_lookup", "inventory_lookup"])
async def test_the_discontinued_a0999_is_refused_by_every_sku_tool(tool: str) -> None:
    args: dict[str, Any] = {"sku": "A0999"}
    if tool == "store_stock":
        args["store"] = "sh_xh_001"
    [out] = await ToolExecutor(demo_registry()).execute([("c1", tool, args)])
    assert out["error_code"] == "PRECONDITION_FAILED"
    assert out["details"]["condition"] == "product_active"
    assert "discontinued" in out["message"]


def orchestrator() -> Any:
    config = HermesConfig(timezone="Asia/Shanghai", sessions={"store": "memory"},
                          mcp_servers={})
    return build_orchestrator(config, clock=FixedClock(BASE), ids=SequentialIds(),
                              memory=InProcessMemory())


@pytest.mark.parametrize(("text", "wanted"), [
    ("iPhone 15 在徐汇滨江店的库存",
     "门店ID sh_xh_002 在门店库中置信度仅0.45,建议确认门店全称(徐汇滨江店)"),
    ("How many iPhone 15 does the xuhui riverside store have?",
     "store sh_xh_002 is in the registry with confidence 0.45 only; please confirm the "
     "store's full name (徐汇滨江店)"),
])
async def test_the_answer_asks_to_confirm_the_store_and_the_tool_never_runs(
        tmp_path: Path, text: str, wanted: str) -> None:
    async with orchestrator() as orch:
        result = await orch.run_turn("s", text, user_id="alice")
    finished = [e for e in result.events if e.kind == "tool_call_finished"]
    assert [e.tool for e in finished] == ["store_stock"]
    assert finished[0].error["error_code"] == "PRECONDITION_FAILED"
    assert finished[0].attempts == 0  # refused before the call: nothing was attempted
    assert wanted in result.answer


@pytest.mark.parametrize(("text", "wanted"), [
    ("有线鼠标多少钱", "商品 A0999 已停产,请改问在售的商品"),
    ("How much is the wired mouse?", "product A0999 is discontinued"),
])
async def test_the_answer_says_a0999_is_discontinued(text: str, wanted: str) -> None:
    async with orchestrator() as orch:
        result = await orch.run_turn("s", text, user_id="alice")
    assert wanted in result.answer


async def test_a_pinned_mcp_contract_with_a_precondition_governs_the_mcp_tool() -> None:
    """Over the demo MCP server (a real stdio subprocess): the pinned contract's
    precondition, over a registry the local provider supplies, refuses the call before it
    reaches the server; a call it allows reaches the server."""
    pinned = load_tool_contract(default_tool_contract_dir() / "demo.calendar_query.yaml")
    doc = pinned.to_document()
    doc["registries"] = {"warehouses": {"type": "object",
                                        "properties": {"open": {"type": "boolean"}}}}
    doc["preconditions"] = [{
        "name": "warehouse_open",
        "expr": "!has(args.warehouse) || !(args.warehouse in registries.warehouses) || "
                "registries.warehouses[args.warehouse].open",
        "message": "warehouse {args.warehouse} is closed for stocktaking"}]
    guarded = ToolContract.model_validate(doc)
    registry = ToolRegistry()
    registry.provide_registry("warehouses", {"east": {"open": True}, "north": {"open": False}})
    script = str(Path(__file__).resolve().parents[1] / "hermes_fsm" / "demo" / "calendar.py")
    config = MCPServerConfig(transport="stdio", command="python", args=[script])
    connection = MCPConnection("demo", config, registry, {"demo.calendar_query": guarded})
    async with asyncio.timeout(60):
        await connection.start()
    try:
        executor = ToolExecutor(registry)
        [refused] = await executor.execute(
            [("c1", "demo.calendar_query", {"query": "restock", "warehouse": "north"})])
        [allowed] = await executor.execute(
            [("c2", "demo.calendar_query", {"query": "restock", "warehouse": "east"})])
    finally:
        await connection.aclose()
    assert refused["error_code"] == "PRECONDITION_FAILED"
    assert refused["message"] == "warehouse north is closed for stocktaking"
    assert allowed["success"] is True, allowed
