"""Many sessions at once in one process: every turn completes, no event crosses sessions."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.demo.tools import inventory_data
from hermes_fsm.testing import demo_orchestrator


class InterleavingBrain:
    """The rules brain with a random await before each answer, so turns really interleave."""

    name = "interleaving-rules"

    def __init__(self, seed: int) -> None:
        self.inner = RulesBrain()
        self.random = random.Random(seed)

    async def decide(self, request: BrainRequest) -> Any:
        await asyncio.sleep(self.random.random() * 0.002)
        return await self.inner.decide(request)


async def test_a_thousand_concurrent_turns_on_a_thousand_sessions_stay_separate():
    orchestrator = demo_orchestrator(brain=InterleavingBrain(seed=7))
    items = inventory_data()["items"]
    warehouses = ["east", "north", "south", "west"]
    asks = []
    for i in range(1000):
        item, warehouse = items[i % len(items)], warehouses[(i // len(items)) % 4]
        asks.append((f"session-{i}", f"user-{i}", item["sku"], warehouse,
                     item["stock"][warehouse]))

    results = await asyncio.gather(*(
        orchestrator.run_turn(sid, f"How many {sku} are left in the {wh} warehouse?", user_id=uid)
        for sid, uid, sku, wh, _ in asks))

    assert len(orchestrator.sessions()) == 1000
    for (sid, uid, sku, _, expected), result in zip(asks, results, strict=True):
        assert result.session_id == sid
        assert result.status == "completed", (sid, result.status)
        assert result.path[0] == result.path[-1] == "IDLE"
        assert f" {expected} " in f" {result.answer} ", (sid, result.answer)
        session = orchestrator.session(sid, uid)
        assert session.state == "IDLE" and not session.busy
        assert {e.session_id for e in session.events} == {sid}
        assert {e.turn_id for e in session.events} == {result.turn_id}
        assert [e.seq for e in session.events] == list(range(1, len(session.events) + 1))
        calls = [e for e in session.events if e.kind == "tool_call_finished"]
        assert [c.output["sku"] for c in calls] == [sku]
