"""Which handlers the engine awaits with no time limit armed: only an ``async def`` whose own
code cannot suspend (no ``await``, ``async for``, ``async with``); every other one is
stepped by hand and, if it suspends, runs under its state's limit."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from hermes_fsm import Orchestrator, ToolRegistry
from hermes_fsm.engine.orchestrator import _never_suspends
from hermes_fsm.graph.loader import parse_graph
from hermes_fsm.testing import ScriptedBrain


async def returns(ctx: Any) -> dict[str, Any]:
    return {"text": "done"}


async def awaits(ctx: Any) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"text": "done"}


async def awaits_only_sometimes(ctx: Any) -> dict[str, Any]:
    if ctx is None:
        await asyncio.sleep(0)
    return {"text": "done"}


async def _numbers() -> Any:
    yield 1


async def loops(ctx: Any) -> dict[str, Any]:
    return {"text": str([n async for n in _numbers()])}


async def enters(ctx: Any) -> dict[str, Any]:
    async with asyncio.Lock():
        return {"text": "done"}


def sync_handler(ctx: Any) -> dict[str, Any]:
    return {"text": "done"}


class Callable:
    async def __call__(self, ctx: Any) -> dict[str, Any]:
        return {"text": "done"}


@pytest.mark.parametrize(("handler", "never"), [
    (returns, True), (awaits, False), (awaits_only_sometimes, False), (loops, False),
    (enters, False), (sync_handler, False), (Callable(), False),
    (functools.partial(returns), False), (Callable().__call__, False)],
    ids=["returns", "awaits", "awaits_only_sometimes", "async_for", "async_with", "sync",
         "callable_object", "partial", "bound_method"])
def test_only_an_async_def_with_no_await_counts_as_never_suspending(handler: Any,
                                                                    never: bool) -> None:
    assert _never_suspends(handler) is never


async def sleeps_forever(ctx: Any) -> dict[str, Any]:
    await asyncio.sleep(3600)
    return {"text": "never"}


def _graph(handler: str) -> Any:
    return parse_graph(
        "name: steps\ninitial: IDLE\nstates:\n  IDLE: {}\n"
        f"  ANSWER: {{handler: {__name__}.{handler}, timeout_s: 0.05, "
        "retry: {max_attempts: 1}, on_failure: IDLE}\n"
        "transitions:\n  - {trigger: start, source: IDLE, dest: ANSWER}\n"
        "  - {source: ANSWER, dest: IDLE}\n", "steps.yaml")


@pytest.mark.parametrize("handler", ["returns", "awaits", "loops", "enters"])
async def test_every_kind_of_handler_gives_the_same_turn(handler: str) -> None:
    orchestrator = Orchestrator(_graph(handler), brain=ScriptedBrain({}), tools=ToolRegistry())
    result = await orchestrator.run_turn("s1", "hi")
    assert result.status == "completed" and result.path == ["IDLE", "ANSWER", "IDLE"]
    outputs = [e for e in result.events if e.kind == "state_output"]
    assert [e.output for e in outputs] == [{"text": "[1]" if handler == "loops" else "done"}]


async def test_a_handler_that_suspends_still_runs_under_its_state_limit() -> None:
    orchestrator = Orchestrator(_graph("sleeps_forever"), brain=ScriptedBrain({}),
                                tools=ToolRegistry())
    result = await asyncio.wait_for(orchestrator.run_turn("s1", "hi"), 10)
    assert result.status == "degraded"
    assert [e.kind for e in result.events if e.kind in ("timed_out", "route_taken")] == [
        "timed_out", "route_taken"]
