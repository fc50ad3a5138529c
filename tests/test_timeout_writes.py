"""A write that is not idempotent is never made again after a timeout, whatever its retry
policy says: its outcome is unknown, so repeating it could act twice. Its status tool (when
the contract names one) is asked instead. An idempotent write and a read are retried."""

from __future__ import annotations

import asyncio
from typing import Any

from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry

ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}
RETRY = {"max_attempts": 3, "backoff_s": 0.0}


async def no_sleep(_: float) -> None:
    return None


def hanging_write(
    made: list[str],
    *,
    idempotent: bool | None = None,
    side_effects: str = "write",
    status: bool = False,
    raises: bool = False,
) -> ToolRegistry:
    reg = ToolRegistry()
    spec: dict[str, Any] = {
        "name": "create_return",
        "version": "1.0.0",
        "description": "Create a return.",
        "side_effects": side_effects,
        "timeout_s": 0.05,
        "retry": RETRY,
        "input_schema": ORDER,
    }
    if idempotent is not None:
        spec["idempotent"] = idempotent
    if status:
        spec["compensation"] = {
            "status": "query_return_status",
            "compensate": "cancel_return",
            "done": "output.status == 'created'",
            "arguments": {"order_id": "args.order_id"},
        }

    @reg.tool(contract=ToolContract.model_validate(spec))
    async def create_return(order_id: str) -> dict[str, Any]:
        made.append(order_id)  # the effect happens, then the answer never comes
        if raises:  # a server-side timeout, declared retryable by the client
            raise ToolCallFailed("TIMEOUT", "the server timed out", True)
        await asyncio.sleep(10)
        return {"order_id": order_id, "status": "created"}

    @reg.tool(
        contract=ToolContract(
            name="query_return_status", version="1.0.0", description="Status.", input_schema=ORDER
        )
    )
    async def query_return_status(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "status": "created" if order_id in made else "none"}

    @reg.tool(
        contract=ToolContract(
            name="cancel_return",
            version="1.0.0",
            description="Cancel.",
            side_effects="write",
            idempotent=True,
            input_schema=ORDER,
        )
    )
    async def cancel_return(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "status": "cancelled"}

    return reg


def run(reg: ToolRegistry) -> tuple[dict[str, Any], list[str]]:
    kinds: list[str] = []

    def emit(kind: Any, **fields: Any) -> None:
        kinds.append(kind.model_fields["kind"].default)

    [envelope] = asyncio.run(
        ToolExecutor(reg, sleep=no_sleep).execute(
            [("c1", "create_return", {"order_id": "ORD-1"})], emit
        )
    )
    return envelope, kinds


def test_a_write_that_timed_out_is_not_made_again() -> None:
    made: list[str] = []
    envelope, kinds = run(hanging_write(made))
    assert made == ["ORD-1"]  # once, though the policy allows three attempts
    assert envelope["error_code"] == "TIMEOUT" and envelope["retryable"] is False
    assert "not idempotent" in envelope["message"]
    assert "tool_call_retried" not in kinds


def test_a_declared_retryable_timeout_of_a_write_is_not_retried_either() -> None:
    made: list[str] = []
    envelope, _ = run(hanging_write(made, raises=True))
    assert made == ["ORD-1"] and envelope["retryable"] is False


def test_a_write_with_a_status_tool_is_checked_not_repeated() -> None:
    made: list[str] = []
    envelope, kinds = run(hanging_write(made, status=True))
    assert made == ["ORD-1"]
    assert envelope["success"] and envelope["output"]["status"] == "created"  # status said so
    assert kinds.count("tool_call_started") == 2  # the write and its status query


def test_an_idempotent_write_and_a_read_are_still_retried() -> None:
    made: list[str] = []
    envelope, kinds = run(hanging_write(made, idempotent=True))
    assert made == ["ORD-1"] * 3 and envelope["error_code"] == "TIMEOUT"
    assert kinds.count("tool_call_retried") == 2
    read: list[str] = []
    run(hanging_write(read, side_effects="read"))
    assert read == ["ORD-1"] * 3
