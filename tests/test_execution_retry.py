"""A retried EXECUTION runs the same planned calls under the same call ids, so the
effects journal answers for the calls that already ran: a non-idempotent call is never
made twice by a retry (issue 16, the fault campaign's second finding)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from hermes_fsm.contracts.retry import RetryPolicy
from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.store import InMemoryStore
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import PLAN_EMPTY, graph_with, happy_script

PLAN = {"tool_calls": [
    {"tool_name": "transfer", "arguments": {"ref": "r1", "amount": 5}, "reasoning_trace": "pay"},
    {"tool_name": "lookup", "arguments": {"ref": "r1"}, "reasoning_trace": "check"}]}


def tools(runs: Counter[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(side_effects="write", description="Move money (not idempotent).")
    async def transfer(ref: str, amount: int) -> dict[str, Any]:
        runs["transfer"] += 1
        return {"moved": amount}

    @registry.tool(description="Read a balance.")
    async def lookup(ref: str) -> dict[str, Any]:
        runs["lookup"] += 1
        return {"balance": 10}

    return registry


class StallingJournalStore(InMemoryStore):
    """The journal write of the ``lookup`` call's outcome hangs once (as behind a pool of
    dead connections): EXECUTION times out after ``transfer`` ran, and is retried."""

    stalled = False

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        if outcome.get("tool_name") == "lookup" and not self.stalled:
            self.stalled = True
            await asyncio.Event().wait()  # until the state's timeout cancels it
        await super().effect_finish(key, outcome)


async def test_a_retried_execution_does_not_run_a_non_idempotent_call_again():
    """Before: call ids carried the path length, which a retry grows, so the retry's
    transfer had a new idempotency key and ran a second time."""
    runs: Counter[str] = Counter()
    store = StallingJournalStore()
    brain = ScriptedBrain(happy_script(plan=[PLAN, PLAN_EMPTY],
                                       response=[{"text": "done", "evidence": []}]))
    graph = graph_with({"EXECUTION": {"timeout_s": 0.3}})
    orchestrator = demo_orchestrator(graph, brain=brain, store=store, tools=tools(runs))
    result = await orchestrator.run_turn("s1", "pay r1", user_id="u1")
    assert store.stalled and result.path.count("EXECUTION") == 2  # it was retried
    assert result.path[-1] == "IDLE"
    assert runs["transfer"] == 1
    started = [(e.call_id, e.tool) for e in result.events if e.kind == "tool_call_started"]
    transfer_ids = {call_id for call_id, tool in started if tool == "transfer"}
    assert len(transfer_ids) == 1 and len(started) == 4  # both attempts, the same ids
    finished = [e for e in result.events if e.kind == "tool_call_finished"
                and e.tool == "transfer"]
    assert finished[-1].ok and finished[-1].output == {"moved": 5}  # the recorded outcome


async def test_each_planning_round_gets_call_ids_of_its_own():
    """Stable across retries, distinct across rounds: a second plan's transfer is a new
    call and runs (its first round's lookup failed retryably, so RESULT planned again)."""
    runs: Counter[str] = Counter()
    registry = tools(runs)

    @registry.tool(description="Busy the first time.", retry=RetryPolicy(max_attempts=1))
    async def flaky(ref: str) -> dict[str, Any]:
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            raise ToolCallFailed("BUSY", "try again later", retryable=True)
        return {"balance": 10}

    first = {"tool_calls": [PLAN["tool_calls"][0],
                            {"tool_name": "flaky", "arguments": {"ref": "r1"},
                             "reasoning_trace": "check"}]}
    brain = ScriptedBrain(happy_script(plan=[first, PLAN, PLAN_EMPTY],
                                       response=[{"text": "done", "evidence": []}]))
    orchestrator = demo_orchestrator(graph_with(), brain=brain, store=InMemoryStore(),
                                     tools=registry)
    result = await orchestrator.run_turn("s1", "pay r1", user_id="u1")
    assert result.path.count("PLANNING") >= 2 and result.path[-1] == "IDLE"
    started = [e.call_id for e in result.events if e.kind == "tool_call_started"]
    assert len(started) == 4 and len(set(started)) == 4
    assert runs["transfer"] == 2  # one per round: two planned calls
