"""EXECUTE_ACK: sent on its own once a call has run a while, with the answer for a quick one
(one round trip fewer), always ahead of the answer; a worker's slot is free once its tool
ran — on both buses."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from hermes_fsm.tools.bus.messages import decode
from hermes_fsm.tools.bus.sandbox import InlineRunner
from tests.bus.conftest import request, running
from tests.bus.tools import registry


def _record(bus: Any) -> list[tuple[str, float]]:
    """The kinds of the replies this process's bus receives, in order, with times."""
    seen: list[tuple[str, float]] = []
    deliver = bus.waiters.deliver

    def recording(raw: bytes | None, where: str) -> str | None:
        seen.append((decode(raw).kind, time.monotonic()))
        refused: str | None = deliver(raw, where)
        return refused

    bus.waiters.deliver = recording
    return seen


async def test_a_quick_call_carries_its_ack_ahead_of_its_answer(bus):
    seen = _record(bus)
    async with running(bus) as worker:
        assert worker.ack_after_s > 0
        reply = await bus.call(request("noop"), "default")
    assert reply.kind == "EXECUTE_RESULT"
    assert [kind for kind, _at in seen] == ["EXECUTE_ACK", "EXECUTE_RESULT"]
    assert not worker._acks  # nothing left waiting to be sent


async def test_a_slow_call_is_acked_while_it_runs(bus):
    seen = _record(bus)
    async with running(bus) as worker:
        reply = await bus.call(request("nap", seconds=0.5), "default")
    assert reply.kind == "EXECUTE_RESULT"
    (ack, ack_at), (result, result_at) = seen
    assert (ack, result) == ("EXECUTE_ACK", "EXECUTE_RESULT")
    assert result_at - ack_at > 0.2  # the ack came early, not with the answer
    assert not worker._acks


async def test_ack_after_zero_acks_at_once(bus):
    seen = _record(bus)
    async with running(bus, ack_after_s=0.0):
        reply = await bus.call(request("nap", seconds=0.3), "default")
    assert reply.kind == "EXECUTE_RESULT"
    assert [kind for kind, _at in seen] == ["EXECUTE_ACK", "EXECUTE_RESULT"]
    assert seen[1][1] - seen[0][1] > 0.15


async def test_an_unknown_tools_error_carries_its_ack_too(bus):
    """Answered without a run: the ack goes with the error; nothing is left pending."""
    seen = _record(bus)
    unknown = request("noop").model_copy(update={"tool_name": "nope"})
    async with running(bus) as worker:
        reply = await bus.call(unknown, "default")
    assert reply.kind == "EXECUTE_ERROR" and reply.error_code == "UNKNOWN_TOOL"
    assert [kind for kind, _at in seen] == ["EXECUTE_ACK", "EXECUTE_ERROR"]
    assert not worker._acks


class _SlowJournal:
    """An effects journal whose writes of outcomes take a while (a PostgreSQL far away)."""

    def __init__(self) -> None:
        from hermes_fsm.store import InMemoryStore

        self.store = InMemoryStore()
        self.finished: list[float] = []

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Any:
        return await self.store.effect_begin(key, session_id, tool)

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        await asyncio.sleep(0.3)
        await self.store.effect_finish(key, outcome)
        self.finished.append(time.monotonic())


class _Timed:
    """A runner recording when each call ran."""

    def __init__(self) -> None:
        self.inner = InlineRunner(registry)
        self.runs: list[tuple[float, float]] = []

    async def run(self, tool: str, arguments: dict[str, Any], budget_s: float) -> Any:
        started = time.monotonic()
        outcome = await self.inner.run(tool, arguments, budget_s)
        self.runs.append((started, time.monotonic()))
        return outcome


async def test_a_slot_is_free_once_the_tool_ran_and_concurrency_holds(bus):
    journal, runner = _SlowJournal(), _Timed()
    async with running(bus, runner=runner, fence=journal, concurrency=1):
        replies = await asyncio.gather(*(bus.call(request("nap", seconds=0.05), "default")
                                         for _ in range(3)))
    assert [r.kind for r in replies] == ["EXECUTE_RESULT"] * 3
    runs = sorted(runner.runs)
    assert len(runs) == 3
    for (_s1, end1), (start2, _e2) in itertools.pairwise(runs):
        assert start2 >= end1  # one call at a time: concurrency 1 holds
    # the second call ran while the first one's outcome was still being journalled
    assert runs[1][0] < sorted(journal.finished)[0]


async def test_a_redis_that_lost_its_scripts_still_gets_answers_and_acks(bus, bus_kind):
    """The Redis bus answers and acks in one script (EVALSHA); a Redis restarted (its
    script cache empty) gets it loaded again, and no request is left pending."""
    if bus_kind != "redis":
        pytest.skip("the in-process bus runs no script (this test runs on Redis)")
    async with running(bus):
        first = await bus.call(request("noop"), "default")
        await bus.client.script_flush()
        second = await bus.call(request("noop"), "default")
        pending = await bus.client.xpending(f"{bus.prefix}:req:default", "workers")
    assert first.kind == second.kind == "EXECUTE_RESULT"
    assert pending["pending"] == 0
