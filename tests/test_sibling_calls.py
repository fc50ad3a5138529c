"""A plan's calls run as a task group: when one raises (its effects-journal write fails),
its siblings are cancelled and awaited before the error goes on, so no event is emitted
after the failure — and a step's flush counts only the events it actually wrote."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from hermes_fsm.errors import StoreError
from hermes_fsm.events.model import ToolCallFinished, ToolCallStarted
from hermes_fsm.store.postgres import PostgresStore
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry
from tests.memory.conftest import PG_URL, need
from tests.support import PLAN_EMPTY, graph_with, happy_script

PLAN = {"tool_calls": [
    {"tool_name": "quick", "arguments": {}, "reasoning_trace": "first"},
    {"tool_name": "slow", "arguments": {}, "reasoning_trace": "second"}]}


class Probe:
    """What the slow sibling did: started, finished, or was cancelled."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.running = asyncio.Event()  # the slow call is under way
        self.started = self.finished = self.cancelled = False


def two_tools(probe: Probe) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(description="Answers at once.")
    async def quick() -> dict[str, Any]:
        await probe.running.wait()  # it fails while its sibling runs
        return {"ok": 1}

    @registry.tool(description="Answers when the gate opens.", timeout_s=30)
    async def slow() -> dict[str, Any]:
        probe.started = True
        probe.running.set()
        try:
            await probe.gate.wait()
        except asyncio.CancelledError:
            probe.cancelled = True
            raise
        probe.finished = True
        return {"ok": 2}

    return registry


class FailingJournal:
    """An effects journal whose write of the first call's outcome fails."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def begin(self, call_id: str, tool: str) -> None:
        return None

    async def finish(self, call_id: str, envelope: dict[str, Any]) -> None:
        if call_id == "c1":
            raise StoreError("journal write failed (test)")


async def test_a_failed_call_cancels_and_awaits_its_siblings_before_the_error_goes_on():
    probe = Probe()
    emitted: list[tuple[Any, dict[str, Any]]] = []
    executor = ToolExecutor(two_tools(probe))
    with pytest.raises(StoreError, match="journal write failed"):
        async with asyncio.timeout(10):
            await executor.execute([("c1", "quick", {}), ("c2", "slow", {})],
                                   lambda kind, **f: emitted.append((kind, f)),
                                   journal=FailingJournal(probe))
    assert probe.started and probe.cancelled and not probe.finished
    count = len(emitted)
    probe.gate.set()  # a survivor would finish now and emit
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(emitted) == count, "a sibling went on running after the plan failed"
    assert [(k, f["call_id"]) for k, f in emitted if k is ToolCallFinished] == []
    assert {f["call_id"] for k, f in emitted if k is ToolCallStarted} == {"c1", "c2"}


class JournalFailingStore(PostgresStore):
    """A real PostgreSQL store whose journal write of the ``quick`` call fails the way a
    dropped connection does (the backend is terminated under the statement), and whose
    next append waits a little after opening the slow call's gate (so that a surviving
    sibling would emit while the step is being written)."""

    probe: Probe
    armed = False

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        if key.endswith("-c1"):
            self.armed = True
            await self._fetch(f"journalling the outcome of call {key!r}",
                              "SELECT pg_terminate_backend(pg_backend_pid())", ())
        await super().effect_finish(key, outcome)

    async def append(self, batch: Any) -> None:
        if self.armed:
            self.armed = False
            self.probe.gate.set()
            await asyncio.sleep(0.05)
        await super().append(batch)


@pytest.fixture
async def pg_store() -> Any:
    need(PG_URL, 5432, "PostgreSQL")
    store = JournalFailingStore(PG_URL, schema=f"hermes_test_{uuid.uuid4().hex[:10]}")
    await store.open()
    yield store
    await store.drop_schema()
    await store.close()


async def test_a_journal_write_failing_for_one_of_two_calls_loses_no_event_on_postgres(pg_store):
    probe = Probe()
    pg_store.probe = probe
    brain = ScriptedBrain(happy_script(plan=[PLAN, PLAN_EMPTY],
                                       response=[{"text": "done", "evidence": []}]))
    orchestrator = demo_orchestrator(graph_with(), brain=brain, store=pg_store,
                                     tools=two_tools(probe))
    async with asyncio.timeout(20):
        result = await orchestrator.run_turn("s1", "do both", user_id="u1")
    assert result.path[-1] == "IDLE"
    failed = [e for e in result.events if e.kind == "handler_failed"]
    assert failed and failed[0].state == "EXECUTION" and "journalling" in failed[0].message
    assert probe.cancelled and not probe.finished
    stored = await pg_store.events_after("s1")
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    # every event the turn emitted is stored, in order, and nothing else
    assert [(e["seq"], e["kind"]) for e in stored] == [(e.seq, e.kind) for e in result.events]
    assert not [e for e in stored if e["kind"] == "tool_call_finished"]
    record = await pg_store.get("s1")
    assert record is not None and (record.state, record.seq) == ("IDLE", stored[-1]["seq"])
    again = await orchestrator.run_turn("s1", "again", user_id="u1")  # the session works on
    assert again.path[-1] == "IDLE"


async def test_an_event_emitted_while_a_step_is_written_is_not_counted_as_stored():
    from hermes_fsm.events.model import Retry
    from hermes_fsm.store import InMemoryStore

    class EmittingStore(InMemoryStore):
        """Something of the turn emits while its step is on the way to the store."""

        turn: Any = None

        async def append(self, batch: Any) -> None:
            if self.turn is not None:
                turn, self.turn = self.turn, None
                turn.emit(Retry, state="X", attempt=2, reason="error", delay_s=0.0)
            await asyncio.sleep(0)
            await super().append(batch)

    store = EmittingStore()
    orchestrator = demo_orchestrator(graph_with(), store=store)
    durable = orchestrator.durable
    assert durable is not None
    session, _ = await durable.load("s1", "u1")
    turn = orchestrator.new_turn(session, "hi", "u1")
    turn.emit(Retry, state="X", attempt=2, reason="error", delay_s=0.0)
    store.turn = turn
    await durable.flush(session, turn)
    assert turn.flushed == 1  # the one written, not the one emitted meanwhile
    await durable.flush(session, turn)
    stored = await store.events_after("s1")
    assert [e["seq"] for e in stored] == [1, 2] and turn.flushed == 2
