"""The engine's recall walks the memory layers in order (seed 002 §2.4): the session's
working memory, then the semantic items, then the experience log keyed by the entities
of the conversation graph — in the tiers' calls and in the recorded ``memory_recalled``."""

from __future__ import annotations

from typing import Any

from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.memory import InProcessMemory, TieredMemory

FIRST = "How many A1001 are left in the east?"
SECOND = "And how many A1001 in the west?"
READS = {"recent": "working", "search": "semantic", "active": "semantic",
         "entries": "experience", "similar_outcomes": "experience"}


class Spy:
    """A tier that logs which of its reads were awaited, in order."""

    def __init__(self, inner: Any, log: list[str]) -> None:
        self._inner, self._log = inner, log

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name not in READS:
            return value

        async def read(*args: Any, **kwargs: Any) -> Any:
            self._log.append(READS[name])
            return await value(*args, **kwargs)
        return read


class SeeingBrain(RulesBrain):
    """The rules brain, keeping the memory block each state's request was given."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: dict[str, str] = {}

    async def decide(self, request: Any) -> Any:
        self.memory[request.state] = request.memory
        return await super().decide(request)


def spied_memory(log: list[str]) -> TieredMemory:
    base = InProcessMemory()
    return TieredMemory(working=Spy(base.working, log), semantic=Spy(base.semantic, log),
                        experience=Spy(base.experience, log), embedder=base.embedder,
                        policy=base.policy)


async def test_the_turns_recall_walks_working_semantic_then_experience_by_entity() -> None:
    log: list[str] = []
    memory = spied_memory(log)
    brain = SeeingBrain()
    orchestrator = build_orchestrator(memory=memory, brain=brain)
    try:
        first = await orchestrator.run_turn("s1", FIRST, user_id="u1")
        calls = [e for e in first.events if e.kind == "tool_call_started"]
        assert calls, "the first turn looks the stock up"
        (entry,) = [e for e in await memory.experience.entries("u1")
                    if e.kind == "tool_call"]
        log.clear()
        second = await orchestrator.run_turn("s1", SECOND, user_id="u1")
        # the tiers were read one layer after the other, once each, at the turn's recall
        walked = [layer for n, layer in enumerate(log) if n == 0 or log[n - 1] != layer]
        assert walked == ["working", "semantic", "experience"]
        (recalled,) = [e for e in second.events if e.kind == "memory_recalled"]
        assert [layer["layer"] for layer in recalled.layers] == [
            "working", "semantic", "experience"]
        working, _, experience = recalled.layers
        assert working["found"] >= 2  # the first turn's messages, from working memory
        assert "a1001" in experience["keyed_by"]  # the conversation graph's entity
        assert experience["entries"][0] == entry.entry_id
        # the planning state's past outcomes are that layer: the entity's call is there
        assert "Past outcomes" in brain.memory["PLANNING"]
        assert "'warehouse': 'east'" in brain.memory["PLANNING"], brain.memory["PLANNING"]
    finally:
        await orchestrator.aclose()


async def test_a_turn_with_no_entity_yet_finds_no_keyed_experience() -> None:
    memory = spied_memory([])
    orchestrator = build_orchestrator(memory=memory)
    try:
        result = await orchestrator.run_turn("s2", FIRST, user_id="u2")
        assert [e for e in result.events if e.kind == "memory_recalled"] == []
        walked = await memory.walk("u2", SECOND, session_id="s2", entities=["A1001"])
        assert walked.order == ("working", "semantic", "experience")
        assert walked.keyed_by == ("a1001",) and walked.experience
        other = await memory.walk("u3", SECOND, session_id="s2", entities=["A1001"])
        assert other.experience == [] and other.working == []  # never another user's
    finally:
        await orchestrator.aclose()


async def test_the_similar_entries_are_not_searched_when_the_keyed_ones_fill_the_layer() -> None:
    """The experience layer is the keyed entries, then the similar ones, ``k`` in all: when
    ``k`` entries name an entity, the similarity search could add nothing and is not made;
    with fewer it fills the rest."""
    log: list[str] = []
    memory = spied_memory(log)
    orchestrator = build_orchestrator(memory=memory)
    try:
        for n in range(3):
            await orchestrator.run_turn(f"s{n}", FIRST, user_id="u4")
        log.clear()
        full = await memory.walk("u4", SECOND, session_id="s9", entities=["A1001"], k=3)
        assert len(full.experience) == 3 and full.keyed_by == ("a1001",)
        assert "experience" not in log  # keyed by `mentioning` (not spied): no search
        log.clear()
        part = await memory.walk("u4", SECOND, session_id="s9", entities=["A1001"], k=4)
        assert "experience" in log  # three keyed of four: the search fills the rest
        assert [e.entry_id for e in part.experience][:3] == [
            e.entry_id for e in full.experience]
    finally:
        await orchestrator.aclose()
