"""A sync (non-async) tool runs off the event loop: its ``timeout_s`` holds, and the other
sessions of the process keep running while it blocks."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from hermes_fsm.events.model import ToolCallFinished
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import PLAN_EMPTY, graph_with, happy_script

BLOCK_S = 2.0


def blocking_registry(done: threading.Event) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(timeout_s=0.2, description="Blocks its thread for 2 s.")
    def stuck(account: str) -> dict[str, Any]:
        time.sleep(BLOCK_S)
        done.set()
        return {"account": account}

    @registry.tool(description="Answers at once.")
    def quick(account: str) -> dict[str, Any]:
        return {"thread": threading.current_thread().name, "account": account}

    return registry


async def test_a_blocking_sync_tool_times_out_on_time_and_another_turn_finishes_meanwhile():
    done = threading.Event()
    registry = blocking_registry(done)
    stuck_plan = {"tool_calls": [{"tool_name": "stuck", "arguments": {"account": "a"},
                                  "reasoning_trace": "x"}]}
    blocked = demo_orchestrator(graph_with(), tools=registry, brain=ScriptedBrain(
        happy_script(plan=[stuck_plan, PLAN_EMPTY], response=[{"text": "ok", "evidence": []}])))
    other = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()))
    stuck_turn = asyncio.create_task(blocked.run_turn("s1", "block", user_id="u1"))
    await asyncio.sleep(0.05)  # the stuck tool is running now
    other_result = await asyncio.wait_for(other.run_turn("s2", "how many?", user_id="u2"),
                                          BLOCK_S * 5)
    other_done = done.is_set()
    result = await asyncio.wait_for(stuck_turn, BLOCK_S * 5)
    returned_first = not done.is_set()
    assert other_result.path[-1] == "IDLE"
    assert not other_done, "the unrelated turn waited for the blocking tool"
    (finished,) = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert not finished.ok and finished.error is not None
    assert finished.error["error_code"] == "TIMEOUT"
    assert finished.duration_ms < BLOCK_S * 1000 / 2, finished.duration_ms
    assert result.path[-1] == "IDLE"
    assert returned_first, "the turn waited for the blocking thread"
    done.wait(BLOCK_S * 5)  # let the thread end before the test does


async def test_a_sync_tool_runs_in_a_worker_thread_with_its_result_and_errors():
    registry = blocking_registry(threading.Event())

    @registry.tool(description="Fails.")
    def broken(account: str) -> dict[str, Any]:
        raise RuntimeError(f"no account {account}")

    executor = ToolExecutor(registry)
    ok, failed = await executor.execute([("c1", "quick", {"account": "a"}),
                                         ("c2", "broken", {"account": "b"})])
    assert ok["success"] and ok["output"]["thread"] != threading.current_thread().name
    assert (failed["error_code"], failed["message"]) == ("TOOL_EXCEPTION",
                                                         "RuntimeError: no account b")


async def test_a_replay_answers_interleaved_calls_of_one_plan_in_the_recorded_order():
    from hermes_fsm.replay.fakes import ReplayExecutor, index_turn

    def ev(seq: int, kind: str, call: str, **more: Any) -> dict[str, Any]:
        return {"seq": seq, "kind": kind, "call_id": call, "tool": f"tool{call}",
                "arguments": {}, **more}

    finished = {"ok": True, "output": 1, "duration_ms": 1.0, "attempts": 1}
    recorded = [ev(1, "tool_call_started", "1"), ev(2, "tool_call_started", "2"),
                ev(3, "tool_call_finished", "2", **finished),
                ev(4, "tool_call_finished", "1", **finished)]
    executor = ReplayExecutor()
    executor.load(index_turn(recorded)[1])
    emitted: list[tuple[str, str]] = []
    results = await executor.execute([("1", "tool1", {}), ("2", "tool2", {})],
                                     lambda kind, **f: emitted.append((kind.__name__,
                                                                       f["call_id"])))
    assert [r["call_id"] for r in results] == ["1", "2"]
    assert emitted == [("ToolCallStarted", "1"), ("ToolCallStarted", "2"),
                       ("ToolCallFinished", "2"), ("ToolCallFinished", "1")]
