"""A memory commit retried in the background reports its outcome late (``memory_write``
or a final ``memory_commit_failed``): that late event belongs to the session, in order —
never a seq inside another turn's range, never lost from the store, never a seq gap that
fails the running turn (see hermes_fsm.engine.memory_handlers)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.events.sinks import ListSink
from hermes_fsm.memory import BackgroundCommits, InProcessMemory
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from tests.store.conftest import dispose_store, make_store
from tests.support import INTENT_CHAT, graph_with, happy_script

COMMIT = {"memory_updates": [{"key": "preference.contact", "update_type": "create",
                              "value": "email", "evidence_source": "user_message"}]}


class GatedMemory(InProcessMemory):
    """The first commit fails; its background retry waits for ``land`` (set while the
    next turn runs), then succeeds."""

    def __init__(self) -> None:
        super().__init__()
        self.background = BackgroundCommits(attempts=2, delay_s=0.0)
        self.land = asyncio.Event()
        self.landed = asyncio.Event()
        self.calls = 0

    async def apply(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise MemoryStoreError("experience log: connection lost (test)")
        if self.calls == 2:  # the background retry
            await self.land.wait()
            try:
                return await super().apply(*args, **kwargs)
            finally:
                self.landed.set()
        return await super().apply(*args, **kwargs)


class LandingBrain(ScriptedBrain):
    """In the second turn, lets the background retry land while the turn is running."""

    def __init__(self, memory: GatedMemory) -> None:
        super().__init__(happy_script(intent=[INTENT_CHAT], memory_commit=[COMMIT]))
        self.memory, self.turns = memory, 0

    async def decide(self, request: Any) -> Any:
        if request.state == "INTENT":
            self.turns += 1
            if self.turns == 2:
                self.memory.land.set()
                await asyncio.wait_for(self.memory.landed.wait(), 5)
                await asyncio.sleep(0.01)  # the late event is out now
        return await super().decide(request)


async def two_turns(orchestrator: Any) -> tuple[Any, Any]:
    async with asyncio.timeout(20):
        first = await orchestrator.run_turn("s1", "I prefer email", user_id="u1")
        second = await orchestrator.run_turn("s1", "and again", user_id="u1")
        await orchestrator.services.memory.background.drain()
    return first, second


def assert_late_write_in_order(events: list[Any], first: Any, second: Any) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    kinds = [(e["kind"], e["turn_id"]) for e in events]
    late = [i for i, e in enumerate(events) if e["kind"] == "memory_write"
            and e["turn_id"] == first.turn_id]
    assert len(late) == 1, kinds  # the late memory_write of the first turn, stored once
    second_range = [i for i, e in enumerate(events) if e["turn_id"] == second.turn_id]
    assert second_range == list(range(second_range[0], second_range[-1] + 1)), kinds
    assert not second_range[0] < late[0] < second_range[-1], "inside the next turn's range"


async def test_without_a_store_a_late_event_lands_after_the_running_turn():
    memory = GatedMemory()
    orchestrator = demo_orchestrator(graph_with(), brain=LandingBrain(memory), memory=memory)
    sink = ListSink()
    orchestrator.add_sink(sink)
    first, second = await two_turns(orchestrator)
    assert second.status == "completed"
    events = [e.model_dump() for e in orchestrator.session("s1", "u1").events]
    assert_late_write_in_order(events, first, second)
    # the second turn's own events are contiguous, and the sinks saw the late one once
    assert [e.seq for e in second.events] == list(range(second.events[0].seq,
                                                        second.events[0].seq
                                                        + len(second.events)))
    assert [e.seq for e in sink.events] == sorted(e.seq for e in sink.events)
    assert len([e for e in sink.events if e.kind == "memory_write"]) == 2


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_with_a_store_a_late_event_is_stored_in_order_and_fails_no_turn(kind, tmp_path):
    store = await make_store(kind, tmp_path)
    try:
        memory = GatedMemory()
        orchestrator = demo_orchestrator(graph_with(), brain=LandingBrain(memory),
                                         memory=memory, store=store)
        first, second = await two_turns(orchestrator)
        assert second.status == "completed"
        stored = await store.events_after("s1")
        assert_late_write_in_order(stored, first, second)
        record = await store.get("s1")
        assert record is not None and record.seq == stored[-1]["seq"]
        third = await orchestrator.run_turn("s1", "once more", user_id="u1")
        assert third.status == "completed"
        stored = await store.events_after("s1")
        assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    finally:
        await dispose_store(store)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_late_event_landing_between_turns_is_stored_by_the_next_turn_or_at_close(
        kind, tmp_path):
    store = await make_store(kind, tmp_path)
    try:
        memory = GatedMemory()
        brain = ScriptedBrain(happy_script(intent=[INTENT_CHAT], memory_commit=[COMMIT]))
        orchestrator = demo_orchestrator(graph_with(), brain=brain, memory=memory, store=store)
        first = await orchestrator.run_turn("s1", "I prefer email", user_id="u1")
        memory.land.set()
        await asyncio.wait_for(memory.background.drain(), 5)  # landed while idle
        second = await orchestrator.run_turn("s1", "and again", user_id="u1")
        stored = await store.events_after("s1")
        assert_late_write_in_order(stored, first, second)

        memory.calls = 0  # once more, and this time no turn follows: close stores it
        memory.land.clear()
        memory.landed.clear()
        third = await orchestrator.run_turn("s1", "email again", user_id="u1")
        memory.land.set()
        await orchestrator.aclose()
        stored = await store.events_after("s1")
        assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
        assert stored[-1]["kind"] == "memory_write" and stored[-1]["turn_id"] == third.turn_id
    finally:
        await dispose_store(store)


async def test_a_session_rebuilt_from_the_store_has_its_late_event_where_the_cached_one_had_it(
        tmp_path):
    store = await make_store("sqlite", tmp_path)
    try:
        memory = GatedMemory()
        orchestrator = demo_orchestrator(graph_with(), brain=LandingBrain(memory),
                                         memory=memory, store=store, event_log_turns=2)
        first, second = await two_turns(orchestrator)
        assert second.status == "completed"
        cached = orchestrator.sessions()["s1"]
        before = ([e.model_dump(mode="json") for e in cached.events], cached.dropped)
        assert [e.turn_id for e in cached.events][-1] == first.turn_id  # the late entry
        assert cached.dropped[0] == 1  # the window of 2 entries: turn 2 and the late one
        orchestrator.session_cache.discard("s1")  # what an eviction does
        assert await orchestrator.resume("s1") is None  # rebuilt from the store
        rebuilt = orchestrator.sessions()["s1"]
        assert ([e.model_dump(mode="json") for e in rebuilt.events], rebuilt.dropped) == before
    finally:
        await dispose_store(store)
