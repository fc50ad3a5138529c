"""Durable sessions in one process: per-step appends, resume, effects journal, fencing, busy.

Process death is simulated by cancelling a turn stuck in a state and starting a fresh
orchestrator on the same store (the crash test does it with real processes and SIGKILL).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.errors import SessionBusy, StaleWriter, UsageError
from hermes_fsm.events.model import EventList, ToolCallFinished
from hermes_fsm.store import InMemoryStore, SQLiteStore
from hermes_fsm.store.lease import LocalLease
from hermes_fsm.testing import HANG, ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import INTENT_TOOLS, MEMORY_NONE, PLAN_EMPTY, graph_with, happy_script

SEVEN = ["IDLE", "INTENT", "PLANNING", "EXECUTION", "RESULT", "RESPONSE", "MEMORY_COMMIT", "IDLE"]


class StoreWatchingBrain(ScriptedBrain):
    """A scripted brain that notes, at each call, what the store holds for the session."""

    def __init__(self, store: Any, script: dict[str, list[Any]]) -> None:
        super().__init__(script)
        self.store = store
        self.seen: list[tuple[str, str, int]] = []

    async def decide(self, request: Any) -> Any:
        record = await self.store.get("s1")
        self.seen.append((request.state, record.state, record.seq))
        return await super().decide(request)


def counting_tools(log: list[str], gate: asyncio.Event | None = None,
                   idempotent: bool = False) -> ToolRegistry:
    """``transfer`` (a write tool, counted per real execution) and ``lookup`` (read)."""
    registry = ToolRegistry()

    @registry.tool(side_effects="write", description="Move money.", timeout_s=30)
    async def transfer(amount: int) -> dict[str, Any]:
        log.append(f"transfer {amount}")
        if gate is not None:
            await gate.wait()
        return {"moved": amount}

    @registry.tool(description="Read a balance.")
    def lookup(account: str) -> dict[str, Any]:
        log.append(f"lookup {account}")
        return {"balance": 10}

    if idempotent:
        tool = registry.get("transfer")
        assert tool.contract is not None
        tool.contract = tool.contract.model_copy(update={"idempotent": True})
    return registry


def plan(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"tool_name": n, "arguments": a, "reasoning_trace": "x"}
                           for n, a in calls]}


def tool_script(*calls: tuple[str, dict[str, Any]], response: Any = None) -> dict[str, list[Any]]:
    return happy_script(plan=[plan(*calls), PLAN_EMPTY],
                        response=[response or {"text": "done", "evidence": []}])


async def stuck_turn(orchestrator: Orchestrator, text: str = "move it") -> None:
    """Start a turn, let it get stuck (a HANG or a gate), then kill it as a crash would."""
    task = asyncio.create_task(orchestrator.run_turn("s1", text, user_id="u1"))
    await asyncio.sleep(0.05)
    assert not task.done(), "the turn was meant to get stuck"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Any) -> Any:
    return InMemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")


async def test_the_default_orchestrator_keeps_sessions_in_process():
    orchestrator = demo_orchestrator()
    assert orchestrator.store is None
    with pytest.raises(UsageError, match="store"):
        await orchestrator.resume("s1")


async def test_each_step_is_stored_before_the_next_state_starts(store):
    brain = StoreWatchingBrain(store, happy_script())
    result = await demo_orchestrator(graph_with(), brain=brain, store=store).run_turn(
        "s1", "how many?", user_id="u1")
    assert result.path == SEVEN
    # when each brain state runs, the store already holds the step that entered it
    assert [(state, stored) for state, stored, _ in brain.seen] == [
        ("INTENT", "INTENT"), ("PLANNING", "PLANNING"), ("RESPONSE", "RESPONSE"),
        ("MEMORY_COMMIT", "MEMORY_COMMIT")]
    stored = await store.events_after("s1")
    assert [e["seq"] for e in stored] == list(range(1, len(result.events) + 1))
    assert [e["kind"] for e in stored] == [e.kind for e in result.events]


async def test_a_finished_turn_stores_its_messages_and_a_checkpoint(store):
    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    result = await orchestrator.run_turn("s1", "how many?", user_id="u1")
    messages = await store.messages("s1")
    assert [(m.role, m.content) for m in messages] == [("user", "how many?"),
                                                       ("assistant", result.answer)]
    checkpoint = await store.checkpoint("s1")
    assert checkpoint.seq == len(result.events) and checkpoint.state == "IDLE"
    assert checkpoint.data["history"][-1] == {"role": "assistant", "content": result.answer}


async def test_another_orchestrator_picks_the_session_up_with_its_history(store):
    first = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    await first.run_turn("s1", "how many?", user_id="u1")
    brain = ScriptedBrain(happy_script())
    second = demo_orchestrator(graph_with(), brain=brain, store=store)
    result = await second.run_turn("s1", "and now?", user_id="u1")
    assert brain.requests[0].history[0] == {"role": "user", "content": "how many?"}
    assert result.events[0].seq == (await store.checkpoint("s1")).seq - len(result.events) + 1


async def test_resume_finishes_an_interrupted_turn_from_its_last_stored_step(store):
    script = happy_script(response=[HANG])
    await stuck_turn(demo_orchestrator(graph_with(), brain=ScriptedBrain(script), store=store))
    assert (await store.get("s1")).state == "RESPONSE"
    brain = ScriptedBrain(happy_script())
    result = await demo_orchestrator(graph_with(), brain=brain, store=store).resume("s1")
    assert result is not None and result.status == "completed"
    assert result.path == SEVEN  # the whole turn's path, rebuilt from its events
    assert [r.state for r in brain.requests] == ["RESPONSE", "MEMORY_COMMIT"]
    assert "342" in result.answer  # the facts of the earlier states were rebuilt
    stored = await store.events_after("s1")
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert [e["kind"] for e in stored].count("turn_finished") == 1


async def test_a_retry_resumed_after_a_crash_tells_the_brain_why_it_was_retried(store):
    bad = {**INTENT_TOOLS, "confidence": 2.0}
    script = happy_script(intent=[bad, HANG])
    await stuck_turn(demo_orchestrator(graph_with(), brain=ScriptedBrain(script), store=store))
    brain = ScriptedBrain(happy_script())
    await demo_orchestrator(graph_with(), brain=brain, store=store).resume("s1")
    intent = brain.requests_for("INTENT")[0]
    assert intent.attempt == 2 and intent.repair is not None
    assert (intent.repair.reason, intent.repair.message) == (
        "violation", "the previous attempt ended before a restart (retry)")


async def test_resume_of_a_session_without_an_unfinished_turn_returns_none(store):
    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    await orchestrator.run_turn("s1", "how many?", user_id="u1")
    assert await orchestrator.resume("s1") is None


async def test_a_new_turn_on_an_interrupted_session_finishes_the_old_turn_first(store):
    await stuck_turn(demo_orchestrator(graph_with(), brain=ScriptedBrain(
        happy_script(response=[HANG])), store=store), "first")
    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    result = await orchestrator.run_turn("s1", "second", user_id="u1")
    stored = await store.events_after("s1")
    started = [e["text"] for e in stored if e["kind"] == "turn_started"]
    finished = [e["turn_id"] for e in stored if e["kind"] == "turn_finished"]
    assert started == ["first", "second"] and len(finished) == 2
    assert finished[-1] == result.turn_id
    assert [m.content for m in await store.messages("s1")][0::2] == ["first", "second"]


async def test_a_call_that_finished_before_a_crash_is_not_made_again(store):
    log: list[str] = []
    gate = asyncio.Event()  # transfer never finishes in the first process
    script = tool_script(("lookup", {"account": "a"}), ("transfer", {"amount": 5}))
    await stuck_turn(demo_orchestrator(graph_with(), brain=ScriptedBrain(script), store=store,
                                       tools=counting_tools(log, gate)))
    assert sorted(log) == ["lookup a", "transfer 5"]
    gate.set()
    result = await demo_orchestrator(graph_with(), brain=ScriptedBrain(script), store=store,
                                     tools=counting_tools(log)).resume("s1")
    assert sorted(log) == ["lookup a", "transfer 5"]  # nothing made twice
    assert result is not None
    finished = {e.tool: e for e in result.events if isinstance(e, ToolCallFinished)}
    assert finished["lookup"].ok and finished["lookup"].attempts == 0  # reused
    assert (finished["transfer"].error or {})["error_code"] == "OUTCOME_UNKNOWN"


async def test_an_idempotent_call_of_unknown_outcome_is_made_again(store):
    log: list[str] = []
    script = tool_script(("transfer", {"amount": 5}))
    await stuck_turn(demo_orchestrator(graph_with(), brain=ScriptedBrain(script), store=store,
                                       tools=counting_tools(log, asyncio.Event(), idempotent=True)))
    result = await demo_orchestrator(graph_with(), brain=ScriptedBrain(script), store=store,
                                     tools=counting_tools(log, idempotent=True)).resume("s1")
    assert log == ["transfer 5", "transfer 5"]
    assert result is not None
    finished = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert finished[0].ok and finished[0].output == {"moved": 5}


async def test_an_append_after_another_process_took_the_session_is_refused(store):
    release = asyncio.Event()

    async def slow_response(request: Any) -> Any:
        return {"text": "late", "evidence": []}

    class GatedBrain(ScriptedBrain):
        async def decide(self, request: Any) -> Any:
            if request.state == "RESPONSE":
                await release.wait()
            return await super().decide(request)

    first = demo_orchestrator(graph_with(), brain=GatedBrain(happy_script()), store=store)
    task = asyncio.create_task(first.run_turn("s1", "first", user_id="u1"))
    await asyncio.sleep(0.05)
    # another process (its own lease: it cannot see the first one's) takes the session
    second = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    await second.run_turn("s1", "second", user_id="u1")
    release.set()
    with pytest.raises(StaleWriter, match="append refused"):
        await task
    stored = await store.events_after("s1")
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert len({e["turn_id"] for e in stored if e["kind"] == "turn_finished"}) == 2


async def test_a_turn_on_a_busy_session_is_refused(store):
    lease = LocalLease()
    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(
        happy_script(intent=[HANG])), store=store, lease=lease)
    task = asyncio.create_task(orchestrator.run_turn("s1", "first", user_id="u1"))
    await asyncio.sleep(0.02)
    with pytest.raises(SessionBusy):
        await orchestrator.run_turn("s1", "second", user_id="u1")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_queued_turn_waits_for_the_running_one(store):
    brain = ScriptedBrain(happy_script(intent=[INTENT_TOOLS]), delay_s=0.005)
    orchestrator = demo_orchestrator(graph_with(), brain=brain, store=store, busy_policy="queue")
    first, second = await asyncio.gather(
        orchestrator.run_turn("s1", "first", user_id="u1"),
        orchestrator.run_turn("s1", "second", user_id="u1"))
    assert first.status == second.status == "completed"
    stored = await store.events_after("s1")
    turns = [e["turn_id"] for e in stored]
    assert turns == sorted(turns, key=turns.index)  # one turn's events, then the other's
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))


async def test_a_lease_needs_a_store():
    with pytest.raises(UsageError, match="store="):
        demo_orchestrator(lease=LocalLease())


async def test_memory_commit_is_rerun_on_resume_without_duplicating_writes(store):
    script = happy_script(memory_commit=[HANG])
    await stuck_turn(demo_orchestrator(graph_with(), brain=ScriptedBrain(script), store=store))
    done = ScriptedBrain(happy_script(memory_commit=[MEMORY_NONE]))
    result = await demo_orchestrator(graph_with(), brain=done, store=store).resume("s1")
    assert [r.state for r in done.requests] == ["MEMORY_COMMIT"]
    assert result is not None
    assert result.path[-2:] == ["MEMORY_COMMIT", "IDLE"]


async def test_a_step_s_events_are_serialized_once_for_the_store_and_the_session_log(store):
    from pydantic_core import to_json

    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store)
    result = await orchestrator.run_turn("s1", "how many?", user_id="u1")
    events = result.events
    assert isinstance(events, EventList)
    assert len(events._json) > 1  # one JSON array per step, kept
    expected = to_json(list(events.data), serialize_unknown=True)
    assert events.to_json() == expected  # joined, byte for byte what one pass would write
    log = orchestrator.sessions()["s1"]._log
    assert log is not None and log[-1][2] == expected
    assert to_json(await store.events_after("s1"), serialize_unknown=True) == expected


class StepWatcher:
    """A user's hook next to the durable one: what the store holds when each point runs."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.seen: list[tuple[str, Any]] = []

    async def pre_turn(self, *, turn: Any, resumed: bool, **future_kwargs: Any) -> None:
        self.seen.append(("pre_turn", (resumed, turn.journal is not None)))

    async def post_step(self, *, session: Any, turn: Any, **future_kwargs: Any) -> None:
        record = await self.store.get(session.session_id)
        self.seen.append(("post_step", (record.seq == session.seq, turn.path[-1])))

    async def post_turn(self, *, session: Any, **future_kwargs: Any) -> None:
        checkpoint = await self.store.checkpoint(session.session_id)
        self.seen.append(("post_turn", checkpoint.seq == session.seq))


async def test_a_durable_sessions_hook_runs_ahead_of_the_users_hooks(store):
    watcher = StepWatcher(store)
    orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store,
                                     hooks=[watcher])
    assert orchestrator.hooks.hooks == (orchestrator.durable, watcher)
    await orchestrator.run_turn("s1", "how many?", user_id="u1")
    # each point finds the step already stored, the journal given, the checkpoint written
    assert watcher.seen[0] == ("pre_turn", (False, True))
    assert [seen for point, (seen, _) in watcher.seen[1:-1]] == [True] * 6
    assert watcher.seen[-1] == ("post_turn", True)


async def test_a_resumed_turn_calls_pre_turn_with_resumed_and_goes_on_from_its_step(store):
    await stuck_turn(demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script(
        response=[HANG])), store=store))
    watcher = StepWatcher(store)
    result = await demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()), store=store,
                                     hooks=[watcher]).resume("s1")
    assert result is not None and result.path == SEVEN
    assert watcher.seen[0] == ("pre_turn", (True, True))
    assert [dest for point, (_, dest) in watcher.seen[1:-1]] == ["MEMORY_COMMIT"]
