"""Tools learn who they run for from the engine (hermes_fsm.tools.calling), never from a
model's arguments: inline, threaded and async tools alike, and two users never mix."""

from __future__ import annotations

import asyncio

from hermes_fsm.tools.calling import current_caller
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(description="Who am I (inline).", inline=True)
    def whoami_inline() -> dict[str, str | None]:
        return {"user": current_caller()}

    @tools.tool(description="Who am I (in a worker thread).")
    def whoami_thread() -> dict[str, str | None]:
        return {"user": current_caller()}

    @tools.tool(description="Who am I (async).")
    async def whoami_async() -> dict[str, str | None]:
        await asyncio.sleep(0.01)  # the other user's call runs meanwhile
        return {"user": current_caller()}

    return tools


async def test_every_kind_of_tool_sees_its_caller_and_only_during_the_call() -> None:
    executor = ToolExecutor(registry())
    calls: list[tuple[str, str, dict[str, object]]] = [(f"c{i}", name, {}) for i, name in
             enumerate(("whoami_inline", "whoami_thread", "whoami_async"))]
    alice, bob = await asyncio.gather(executor.execute(calls, caller="alice"),
                                      executor.execute(calls, caller="bob"))
    assert [r["output"]["user"] for r in alice] == ["alice"] * 3
    assert [r["output"]["user"] for r in bob] == ["bob"] * 3
    assert current_caller() is None
