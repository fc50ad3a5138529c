"""Canary versions through the real executor: a share of calls reaches the new version by
a stable hash, each routed call says which version ran, an error burst in the new version
rolls it back, ``share: 0`` in the configuration sends everything to the stable one, and
a write tool cannot be canaried unless allowed."""

from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.cli.tools import tool_record
from hermes_fsm.config.settings import HermesConfig, MCPServerConfig
from hermes_fsm.config.toolbox import Toolbox
from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.errors import ToolCallFailed, ToolError
from hermes_fsm.events.evidence import chain_text, evidence_chains
from hermes_fsm.tools.canary import Canary
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry

SKU = {
    "type": "object",
    "properties": {"sku": {"type": "string"}},
    "required": ["sku"],
    "additionalProperties": False,
}


def lookup_tools(broken: set[str] | None = None, side_effects: str = "read") -> ToolRegistry:
    """``lookup`` v1.0.0 and its new version ``lookup_v2`` v2.0.0, which fails for the
    SKUs in ``broken``."""
    broken = broken if broken is not None else set()
    reg = ToolRegistry()

    @reg.tool(
        contract=ToolContract(
            name="lookup",
            version="1.0.0",
            description="Stock.",
            side_effects=side_effects,
            input_schema=SKU,
        )
    )
    async def lookup(sku: str) -> dict[str, Any]:
        return {"sku": sku, "count": 1, "by": "v1"}

    @reg.tool(
        contract=ToolContract(
            name="lookup_v2",
            version="2.0.0",
            description="Stock.",
            side_effects=side_effects,
            input_schema=SKU,
        )
    )
    async def lookup_v2(sku: str) -> dict[str, Any]:
        if sku in broken or "*" in broken:
            raise ToolCallFailed("BACKEND", "the new stock backend failed", False)
        return {"sku": sku, "count": 1, "by": "v2"}

    return reg


def events() -> tuple[list[tuple[str, dict[str, Any]]], Any]:
    seen: list[tuple[str, dict[str, Any]]] = []

    def emit(kind: Any, **fields: Any) -> None:
        seen.append((kind.model_fields["kind"].default, fields))

    return seen, emit


async def run_calls(
    executor: ToolExecutor, n: int, emit: Any, prefix: str = "t"
) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        [envelope] = await executor.execute([(f"{prefix}{i}-s3-c0", "lookup", {"sku": "A1"})], emit)
        out.append(envelope)
    return out


def test_five_percent_of_2000_calls_reach_the_new_version_within_statistical_bounds() -> None:
    reg = lookup_tools()
    reg.add_canary(Canary("lookup", "lookup_v2", share=0.05))
    seen, emit = events()
    envelopes = asyncio.run(run_calls(ToolExecutor(reg), 2000, emit))
    by_v2 = sum(e["output"]["by"] == "v2" for e in envelopes)
    chosen = [f for k, f in seen if k == "tool_version_chosen"]
    assert len(chosen) == 2000  # every routed call records which version ran
    assert sum(f["candidate"] for f in chosen) == by_v2
    assert {f["version"] for f in chosen if f["candidate"]} == {"2.0.0"}
    assert {f["version"] for f in chosen if not f["candidate"]} == {"1.0.0"}
    sd = math.sqrt(2000 * 0.05 * 0.95)  # binomial: 100 ± 9.7
    assert abs(by_v2 - 100) < 4 * sd, by_v2
    # the envelope and the audit event keep the name the plan used
    assert {e["tool_name"] for e in envelopes} == {"lookup"}
    assert {f["tool"] for k, f in seen if k == "tool_call_finished"} == {"lookup"}


def test_the_same_request_always_reaches_the_same_version() -> None:
    canary = Canary("lookup", "lookup_v2", share=0.3)
    first = [canary.choose(canary.key("s1", f"t{i}-s3-c0", "u")).candidate for i in range(300)]
    again = [canary.choose(canary.key("s1", f"t{i}-s3-c0", "u")).candidate for i in range(300)]
    assert first == again
    by_user = Canary("lookup", "lookup_v2", share=0.5, by="user")
    picks = {by_user.choose(by_user.key(f"s{i}", f"c{i}", "alice")).candidate for i in range(50)}
    assert len(picks) == 1  # by user: every call of one user on one version


def test_an_error_burst_in_the_new_version_rolls_it_back_within_the_window() -> None:
    broken: set[str] = set()
    reg = lookup_tools(broken)
    canary = reg.add_canary(
        Canary("lookup", "lookup_v2", share=0.5, margin=0.2, window=20, min_calls=10)
    )
    seen, emit = events()
    executor = ToolExecutor(reg)
    healthy = asyncio.run(run_calls(executor, 100, emit, "a"))
    assert all(e["success"] for e in healthy) and canary.rolled_back is None
    broken.add("*")  # the new version starts failing every call
    burst = asyncio.run(run_calls(executor, 200, emit, "b"))
    rolled = [f for k, f in seen if k == "tool_canary_rolled_back"]
    assert len(rolled) == 1 and rolled[0]["candidate"] == "lookup_v2"
    failed_on_v2 = sum(not e["success"] for e in burst)
    # the window holds 20 outcomes: at most 20 failures of the new version before rollback
    assert 1 <= failed_on_v2 <= 20, failed_on_v2
    index = next(i for i, e in enumerate(burst) if e["call_id"] == rolled[0]["call_id"])
    assert all(e["success"] and e["output"]["by"] == "v1" for e in burst[index + 1 :])
    line = tool_record(reg, reg.get("lookup"))["canary"]["line"]
    assert "ROLLED BACK" in line and "lookup_v2 (2.0.0)" in line
    assert tool_record(reg, reg.get("lookup_v2"))["hidden"] == "the canary version of lookup"


def test_share_zero_in_the_configuration_sends_every_call_to_the_stable_version() -> None:
    config = HermesConfig.model_validate(
        {
            "mcp_servers": {},
            "tools": {"canaries": {"lookup": {"candidate": "lookup_v2", "share": 0}}},
        }
    )
    box = Toolbox.from_config(config, lookup_tools({"*"}))
    seen, emit = events()
    envelopes = asyncio.run(run_calls(box.executor, 200, emit))
    assert all(e["success"] and e["output"]["by"] == "v1" for e in envelopes)
    assert not any(f["candidate"] for k, f in seen if k == "tool_version_chosen")


def test_the_new_version_is_not_offered_and_cannot_be_planned_by_its_own_name() -> None:
    reg = lookup_tools()
    assert [d.name for d in reg.describe()] == ["lookup", "lookup_v2"]
    reg.add_canary(Canary("lookup", "lookup_v2", share=0.5))
    assert [d.name for d in reg.describe()] == ["lookup"]
    problem = reg.check_call("lookup_v2", {"sku": "A1"})
    assert problem is not None and "canary version of 'lookup'" in problem


def test_a_write_tool_is_not_canaried_unless_allowed() -> None:
    reg = lookup_tools(side_effects="write")
    with pytest.raises(ToolError, match="not idempotent"):
        reg.add_canary(Canary("lookup", "lookup_v2", share=0.5))
    reg.add_canary(Canary("lookup", "lookup_v2", share=1.0, allow_writes=True))
    _, emit = events()
    [envelope] = asyncio.run(run_calls(ToolExecutor(reg), 1, emit))
    assert envelope["output"]["by"] == "v2"


def test_a_canary_of_a_tool_registered_later_waits_for_both_tools() -> None:
    reg = ToolRegistry()
    reg.add_canary(Canary("lookup", "lookup_v2", share=1.0))  # an MCP server not started yet
    seen, emit = events()
    [envelope] = asyncio.run(ToolExecutor(reg).execute([("c1", "lookup", {"sku": "A"})], emit))
    assert envelope["error_code"] == "UNKNOWN_TOOL"
    assert not [k for k, _ in seen if k == "tool_version_chosen"]


def test_explain_says_which_version_ran_a_call() -> None:
    reg = lookup_tools()
    reg.add_canary(Canary("lookup", "lookup_v2", share=1.0))
    raw: list[dict[str, Any]] = []
    seq = iter(range(1, 100))

    def emit(kind: Any, **fields: Any) -> None:
        raw.append(
            {
                "kind": kind.model_fields["kind"].default,
                "turn_id": "t1",
                "session_id": "s1",
                "seq": next(seq),
                **fields,
            }
        )

    raw.append(
        {
            "kind": "turn_started",
            "turn_id": "t1",
            "session_id": "s1",
            "seq": 0,
            "user_id": "u",
            "text": "stock of A1?",
        }
    )
    asyncio.run(ToolExecutor(reg).execute([("t1-s3-c0", "lookup", {"sku": "A1"})], emit))
    [chain] = evidence_chains(raw)
    assert chain["calls"][0]["version"] == {
        "runs": "lookup_v2",
        "version": "2.0.0",
        "candidate": True,
    }
    assert "ran on: lookup_v2 v2.0.0 (canary)" in chain_text(chain)


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not in"):
        Canary("lookup", "lookup_v2", share=1.5)
    with pytest.raises(ToolError, match="another registered tool"):
        lookup_tools().add_canary(Canary("lookup", "lookup", share=0.5))


async def test_the_new_version_may_be_an_mcp_tool() -> None:
    script = str(Path(__file__).resolve().parents[1] / "hermes_fsm" / "demo" / "calendar.py")
    config = HermesConfig(
        mcp_servers={
            "demo": MCPServerConfig(
                transport="stdio",
                command=sys.executable,
                args=[script],
                enabled_tools=["calendar_query"],
            )
        },
        tools={"canaries": {"calendar_query": {"candidate": "demo.calendar_query", "share": 1.0}}},
    )
    reg = ToolRegistry()

    @reg.tool(version="1.0.0")
    async def calendar_query(
        query: str, warehouse: str | None = None, limit: int = 3
    ) -> dict[str, Any]:
        """The old, local calendar: knows nothing."""
        return {"query": query, "events": []}

    box = Toolbox.from_config(config, reg)
    await box.mcp.start()
    seen, emit = events()
    try:
        [out] = await box.executor.execute([("c1", "calendar_query", {"query": "A1001"})], emit)
    finally:
        await box.mcp.aclose()
    assert out["success"] and out["output"]["events"][0]["date"] == "2026-12-03"
    [chosen] = [f for k, f in seen if k == "tool_version_chosen"]
    assert chosen["runs"] == "demo.calendar_query" and chosen["candidate"] is True
    [finished] = [f for k, f in seen if k == "tool_call_finished"]
    assert finished["source"] == "mcp:demo" and finished["tool"] == "calendar_query"
