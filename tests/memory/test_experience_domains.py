"""The experience layer stays in a session's memory domain (seed 003 §5), as the semantic
layer does: a domain's session sees the entries the user's other sessions of that domain
committed, never another domain's — through the orchestrator, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.memory import (
    HashingEmbedder,
    InProcessSemanticStore,
    InProcessWorkingMemory,
    TieredMemory,
)
from tests.memory.conftest import DIM, dispose, make_experience
from tests.test_memory_walk import SeeingBrain

FIRST = "How many A1001 are left in the east?"
SECOND = "And how many A1001 in the west?"


@pytest.fixture(params=["sqlite_file", "postgres"])
async def memory(request: Any, tmp_path: Any) -> AsyncIterator[TieredMemory]:
    tiers = TieredMemory(working=InProcessWorkingMemory(), semantic=InProcessSemanticStore(DIM),
                         experience=await make_experience(request.param, tmp_path),
                         embedder=HashingEmbedder(DIM))
    yield tiers
    await tiers.background.drain()
    await dispose(tiers.experience)


async def test_a_domain_session_recalls_the_domains_entries_of_other_sessions_only(
        memory: TieredMemory) -> None:
    """User ``u`` looks A1001 up in a ``credit_card`` session; her next ``credit_card``
    session is shown that call in PLANNING's past outcomes (and the walk keys it by the
    entity), a ``wealth`` session is not, nor is another user."""
    brain = SeeingBrain()
    orchestrator = build_orchestrator(memory=memory, brain=brain)
    try:
        await orchestrator.run_turn("s1", FIRST, user_id="u", domain="credit_card")
        (entry,) = [e for e in await memory.experience.entries("u") if e.kind == "tool_call"]
        assert entry.domain == "credit_card" and entry.session_id == "s1"
        # another session of the same domain is shown the call
        await orchestrator.run_turn("s2", SECOND, user_id="u", domain="credit_card")
        assert "'warehouse': 'east'" in brain.memory["PLANNING"], brain.memory["PLANNING"]
        walked = await memory.walk("u", SECOND, session_id="s2", entities=["A1001"],
                                   domain="credit_card")
        assert walked.keyed_by == ("a1001",) and entry in walked.experience
        # a session of another domain is not
        await orchestrator.run_turn("s3", SECOND, user_id="u", domain="wealth")
        assert "'warehouse': 'east'" not in brain.memory["PLANNING"]
        walked = await memory.walk("u", SECOND, entities=["A1001"], domain="wealth")
        assert walked.experience and entry not in walked.experience  # its own turn's only
        assert {e.domain for e in walked.experience} == {"wealth"}
        # nor another user, in the same domain
        stranger = await memory.walk("v", SECOND, entities=["A1001"], domain="credit_card")
        assert stranger.experience == []
    finally:
        await orchestrator.aclose()


async def test_a_shared_domain_also_sees_entries_of_no_domain(memory: TieredMemory) -> None:
    """``memory.shared_domains``: the semantic layer's rule — a shared domain sees the
    user's entries of no domain too, a strict one does not, and neither sees another's."""
    memory.shared_domains = frozenset({"wealth"})
    orchestrator = build_orchestrator(memory=memory)
    try:
        await orchestrator.run_turn("general", FIRST, user_id="u")  # no domain
        await orchestrator.run_turn("loans", FIRST.replace("east", "north"), user_id="u",
                                    domain="loans")
        by_domain = {e.domain: e.entry_id for e in await memory.experience.entries("u")
                     if e.kind == "tool_call"}
        assert set(by_domain) == {None, "loans"}

        async def seen(domain: str | None) -> set[str]:
            walked = await memory.walk("u", SECOND, entities=["A1001"], domain=domain)
            return {e.entry_id for e in walked.experience}

        assert await seen("wealth") == {by_domain[None]}
        assert await seen("credit_card") == set()
        assert await seen("loans") == {by_domain["loans"]}
        assert await seen(None) == set(by_domain.values())  # no domain: unrestricted
    finally:
        await orchestrator.aclose()
