"""Compensation of write tools through the real executor: a write of unknown outcome asks
its status tool, then compensates; a plan with a failed call undoes its completed writes in
reverse (a saga), journalled so a resumed run never compensates twice; a compensation
that fails itself says so and leaves the executor usable. Effects are counted in the
service's own store: local tools, and the SDK demo MCP server's returns service (a real
stdio subprocess)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.config.settings import MCPServerConfig
from hermes_fsm.contracts.tools import ToolContract, parse_tool_contract
from hermes_fsm.engine.durable import EffectsJournal
from hermes_fsm.errors import ContractError, ToolCallFailed
from hermes_fsm.store.memory import InMemoryStore
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.registry import ToolRegistry

ORDER = {"type": "object", "properties": {"order_id": {"type": "string"}},
         "required": ["order_id"], "additionalProperties": False}


class ReturnService:
    """A returns service with its own store: what was created, cancelled, and when."""

    def __init__(self) -> None:
        self.returns: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []
        self.hang: set[str] = set()  # create_return records the return, then hangs
        self.fail: set[str] = set()  # create_return refuses
        self.cancel_fails = False


def registry(service: ReturnService, *, status: bool = True) -> ToolRegistry:
    reg = ToolRegistry()
    compensation: dict[str, Any] = {"compensate": "cancel_return",
                                    "arguments": {"order_id": "args.order_id"}}
    if status:
        compensation.update(status="query_return_status", done="output.status == 'created'")
    write = ToolContract.model_validate({
        "name": "create_return", "version": "1.0.0", "description": "Create a return.",
        "side_effects": "write", "timeout_s": 0.2, "input_schema": ORDER,
        "compensation": compensation})

    @reg.tool(contract=write)
    async def create_return(order_id: str) -> dict[str, Any]:
        if order_id in service.fail:
            raise ToolCallFailed("REFUSED", f"order {order_id} cannot be returned", False)
        service.returns[order_id] = "created"
        service.log.append(("create", order_id))
        if order_id in service.hang:
            service.returns[order_id] = "pending"  # half done: neither there nor gone
            await asyncio.sleep(10)
        return {"order_id": order_id, "status": "created"}

    @reg.tool(contract=ToolContract(name="query_return_status", version="1.0.0",
                                    description="The return's status.", input_schema=ORDER))
    async def query_return_status(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "status": service.returns.get(order_id, "none")}

    @reg.tool(contract=ToolContract(name="cancel_return", version="1.0.0",
                                    description="Cancel a return.", side_effects="write",
                                    idempotent=True, input_schema=ORDER))
    async def cancel_return(order_id: str) -> dict[str, Any]:
        if service.cancel_fails:
            raise ToolCallFailed("DOWN", "the returns service is down", False)
        service.returns.pop(order_id, None)
        service.log.append(("cancel", order_id))
        return {"order_id": order_id, "status": "cancelled"}

    return reg


def recorder() -> tuple[list[tuple[str, dict[str, Any]]], Any]:
    events: list[tuple[str, dict[str, Any]]] = []
    return events, lambda kind, **fields: events.append((kind.__name__, fields))


async def test_a_timed_out_write_asks_its_status_then_compensates() -> None:
    service = ReturnService()
    service.hang.add("ORD-1")
    events, emit = recorder()
    [out] = await ToolExecutor(registry(service)).execute(
        [("c1", "create_return", {"order_id": "ORD-1"})], emit)
    assert out["error_code"] == "TIMEOUT"
    assert "query_return_status says it did not happen" in out["message"]
    assert "compensated by cancel_return (c1-undo)" in out["message"]
    assert service.log == [("create", "ORD-1"), ("cancel", "ORD-1")]
    assert "ORD-1" not in service.returns
    finished = [f["call_id"] for kind, f in events if kind == "ToolCallFinished"]
    assert finished == ["c1", "c1-status", "c1-undo"]  # each step is an event


async def test_a_write_the_status_confirms_succeeds_with_the_status() -> None:
    service = ReturnService()
    service.hang.add("ORD-1")
    reg = registry(service)
    # the write lands, then the answer is lost: the status says it is there
    reg.get("create_return").fn = _lands_then_hangs(service)
    [out] = await ToolExecutor(reg).execute([("c1", "create_return", {"order_id": "ORD-1"})])
    assert out["success"] is True and out["output"]["status"] == "created"
    assert service.log == [("create", "ORD-1")]  # nothing undone


def _lands_then_hangs(service: ReturnService) -> Any:
    async def create_return(order_id: str) -> dict[str, Any]:
        service.returns[order_id] = "created"
        service.log.append(("create", order_id))
        await asyncio.sleep(10)
        return {}  # pragma: no cover - cut by the timeout
    return create_return


async def test_without_a_status_tool_an_unknown_outcome_is_compensated() -> None:
    service = ReturnService()
    service.hang.add("ORD-1")
    [out] = await ToolExecutor(registry(service, status=False)).execute(
        [("c1", "create_return", {"order_id": "ORD-1"})])
    assert out["error_code"] == "TIMEOUT" and "compensated by cancel_return" in out["message"]
    assert service.log == [("create", "ORD-1"), ("cancel", "ORD-1")]


async def test_a_plan_whose_third_call_fails_undoes_the_first_two_in_reverse() -> None:
    service = ReturnService()
    service.fail.add("ORD-3")
    calls = [(f"c{i}", "create_return", {"order_id": f"ORD-{i}"}) for i in (1, 2, 3)]
    out = await ToolExecutor(registry(service)).execute(calls)
    assert [o.get("error_code") for o in out] == ["COMPENSATED", "COMPENSATED", "REFUSED"]
    assert "because call c3 (create_return) of the same plan failed" in out[0]["message"]
    creates = sorted(x for x in service.log if x[0] == "create")
    assert creates == [("create", "ORD-1"), ("create", "ORD-2")]
    assert [x for x in service.log if x[0] == "cancel"] == [("cancel", "ORD-2"),
                                                            ("cancel", "ORD-1")]
    assert service.returns == {}


async def test_a_resumed_saga_never_compensates_twice() -> None:
    service = ReturnService()
    service.fail.add("ORD-3")
    store = InMemoryStore()
    journal = EffectsJournal(store, "s1")
    calls = [(f"c{i}", "create_return", {"order_id": f"ORD-{i}"}) for i in (1, 2, 3)]
    first = await ToolExecutor(registry(service)).execute(calls, journal=journal)
    again = await ToolExecutor(registry(service)).execute(calls, journal=journal)  # resumed
    assert [o.get("error_code") for o in again] == [o.get("error_code") for o in first]
    assert [x for x in service.log if x[0] == "cancel"] == [("cancel", "ORD-2"),
                                                            ("cancel", "ORD-1")]
    assert len([x for x in service.log if x[0] == "create"]) == 2  # and no write twice


async def test_a_failing_compensation_is_reported_and_the_executor_goes_on() -> None:
    service = ReturnService()
    service.hang.add("ORD-1")
    service.cancel_fails = True
    events, emit = recorder()
    executor = ToolExecutor(registry(service))
    [out] = await executor.execute([("c1", "create_return", {"order_id": "ORD-1"})], emit)
    assert out["error_code"] == "COMPENSATION_FAILED"
    assert "an operator must check it" in out["message"] and "DOWN" in out["message"]
    undo = [f for kind, f in events if kind == "ToolCallFinished" and f["call_id"] == "c1-undo"]
    assert undo[0]["ok"] is False
    service.cancel_fails = False
    [later] = await executor.execute([("c2", "create_return", {"order_id": "ORD-2"})])
    assert later["success"] is True  # the session stays usable


def test_a_compensation_with_a_bad_expression_is_refused_at_load_with_its_line() -> None:
    text = ("name: w\nversion: 1.0.0\ndescription: w\ninput_schema: {type: object}\n"
            "compensation:\n  compensate: undo\n  arguments:\n    order_id: order.id\n")
    with pytest.raises(ContractError, match=r"^w.yaml:8: compensation\.arguments\.order_id: "
                                            r"unknown variable 'order'"):
        parse_tool_contract(text, "w.yaml")


# --- on a real MCP server: the SDK demo server's returns service over stdio -------------

async def _mcp_returns(timeout_s: float = 1.0, *, store: str | None = None,
                       attempts: int = 1) -> tuple[Any, ToolRegistry]:
    """The SDK demo server over stdio, its create_return pinned with a compensation (and
    timing out after ``timeout_s``: short for the hanging write, long where a slow answer
    on a loaded machine must not read as a timeout; its store in the file ``store``, when
    given, so it outlives a crash of the server)."""
    env = {"HERMES_DEMO_RETURNS_STORE": store} if store else {}
    config = MCPServerConfig(transport="stdio", command=sys.executable,
                             args=["-m", "hermes_fsm.demo.mcp_server"], tool_timeout_s=timeout_s,
                             env=env)
    probe = MCPConnection("demo", config, ToolRegistry())
    async with asyncio.timeout(60):
        await probe.start()
    contract = probe.registry.get("demo.create_return").contract
    await probe.aclose()
    assert contract is not None
    doc = contract.to_document()
    doc["retry"] = {"max_attempts": attempts}  # a write's timeout is checked, not repeated
    doc["compensation"] = {"status": "demo.query_return_status",
                           "done": "output.status == 'created'",
                           "compensate": "demo.cancel_return",
                           "arguments": {"order_id": "args.order_id"}}
    pinned = {"demo.create_return": ToolContract.model_validate(doc)}
    registry = ToolRegistry()
    connection = MCPConnection("demo", config, registry, pinned)
    async with asyncio.timeout(60):
        await connection.start()
    return connection, registry


async def _effects(executor: ToolExecutor) -> list[list[str]]:
    [out] = await executor.execute([("fx", "demo.return_effects", {})])
    return list(out["output"]["effects"])


async def test_on_mcp_a_hanging_write_is_status_checked_then_compensated() -> None:
    connection, registry = await _mcp_returns()
    executor = ToolExecutor(registry)
    try:
        await executor.execute([("f", "demo.set_return_fault",
                                 {"order_id": "ORD-1", "fault": "hang"})])
        [out] = await executor.execute([("c1", "demo.create_return", {"order_id": "ORD-1"})])
        effects = await _effects(executor)
    finally:
        await connection.aclose()
    assert out["error_code"] == "TIMEOUT", out
    assert "compensated by demo.cancel_return" in out["message"]
    assert effects == [["create", "ORD-1"], ["cancel", "ORD-1"]]


async def test_on_mcp_a_server_dying_mid_write_is_an_unknown_outcome_never_a_repeat(
        tmp_path: Path) -> None:
    # the server acts, then dies before answering: the request was sent, so the outcome is
    # unknown (not a retryable SERVER_UNAVAILABLE, which a retry policy would repeat and
    # create the return twice); the status tool, asked once the server is back, finds it
    connection, registry = await _mcp_returns(timeout_s=20.0, store=str(tmp_path / "r.json"),
                                              attempts=3)
    executor = ToolExecutor(registry)
    kinds: list[str] = []

    def emit(kind: Any, **fields: Any) -> None:
        kinds.append(kind.model_fields["kind"].default)

    try:
        await executor.execute([("f", "demo.set_return_fault",
                                 {"order_id": "ORD-1", "fault": "die"})])
        async with asyncio.timeout(60):
            [out] = await executor.execute(
                [("c1", "demo.create_return", {"order_id": "ORD-1"})], emit)
            assert await connection.wait_ready(30)
            effects = await _effects(executor)
    finally:
        await connection.aclose()
    assert effects == [["create", "ORD-1"]], effects  # once, though 3 attempts are allowed
    assert "tool_call_retried" not in kinds
    assert out["success"], out  # the status tool confirmed it: created
    assert out["output"]["status"] == "created"


async def test_on_mcp_a_three_call_plan_whose_third_fails_undoes_two_in_reverse() -> None:
    connection, registry = await _mcp_returns(timeout_s=20.0)
    executor = ToolExecutor(registry)
    try:
        await executor.execute([("f", "demo.set_return_fault",
                                 {"order_id": "ORD-3", "fault": "fail"})])
        out = await executor.execute([(f"c{i}", "demo.create_return", {"order_id": f"ORD-{i}"})
                                      for i in (1, 2, 3)])
        effects = await _effects(executor)
    finally:
        await connection.aclose()
    assert [o["error_code"] for o in out][:2] == ["COMPENSATED", "COMPENSATED"]
    assert not out[2]["success"]
    assert sorted(e for e in effects if e[0] == "create") == [["create", "ORD-1"],
                                                              ["create", "ORD-2"]]
    assert [e for e in effects if e[0] == "cancel"] == [["cancel", "ORD-2"], ["cancel", "ORD-1"]]
