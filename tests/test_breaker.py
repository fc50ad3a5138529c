"""Circuit breakers fed by the experience log: a tool that keeps failing in any session or
process (as the shared log records it) trips the breaker everywhere, and planning sees it."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.config.toolbox import Toolbox
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory import HashingEmbedder
from hermes_fsm.memory.experience import Experience, ToolHealth
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog
from hermes_fsm.sources import FixedClock, SequentialIds
from hermes_fsm.tools.breaker import ExperienceBreaker, WindowBreaker
from hermes_fsm.tools.executor import ToolExecutor
from tests.memory.conftest import PG_URL, need

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ASK = "How many A1001 are left in the east warehouse?"
WINDOW = timedelta(minutes=10)


def failures(n: int, tool: str = "inventory_lookup", at: datetime = T0) -> list[Experience]:
    """``n`` failed calls of ``tool`` in the minute before ``at``, as another process logs them."""
    return [Experience(entry_id=f"other-{uuid.uuid4().hex}:c{i}", kind="tool_call",
                       user_id=f"someone-{i}", session_id=f"elsewhere-{i}", turn_id=f"t{i}",
                       at=at - timedelta(seconds=60 - i), ok=False, tool=tool,
                       error_code="TIMEOUT", detail="warehouse system down")
            for i in range(n)]


def config(tmp_path: Any, kind: str, schema: str) -> HermesConfig:
    memory: dict[str, Any] = {"data_dir": str(tmp_path)}
    if kind == "postgres":
        memory.update(postgres_url=PG_URL, postgres_schema=schema)
    return HermesConfig.model_validate({
        "mcp_servers": {}, "sessions": {"store": "memory"}, "memory": memory,
        "tools": {"breaker": {"experience": {"window_s": WINDOW.total_seconds(),
                                             "min_calls": 3, "failure_rate": 0.5,
                                             "refresh_s": 0}}}})


async def other_process_log(tmp_path: Any, kind: str, schema: str) -> Any:
    """A second log instance on the same database: what another process writes through."""
    if kind == "postgres":
        need(PG_URL, 5432, "PostgreSQL")
        from hermes_fsm.memory.postgres_experience import PostgresExperienceLog

        return PostgresExperienceLog(PG_URL, schema=schema, embedder=HashingEmbedder())
    return SQLiteExperienceLog(tmp_path / "experience.sqlite", HashingEmbedder())


def called(result: Any) -> list[str]:
    return [e.tool for e in result.events if e.kind == "tool_call_started"]


@pytest.fixture(params=["sqlite", "postgres"])
async def shared_log(request: Any, tmp_path: Any) -> Any:
    schema = f"hermes_test_{uuid.uuid4().hex[:10]}"
    log = await other_process_log(tmp_path, request.param, schema)
    yield log, config(tmp_path, request.param, schema)
    if hasattr(log, "drop_schema"):
        await log.drop_schema()
    await log.close()


async def test_a_tool_failing_in_another_process_is_open_for_a_fresh_orchestrator_until_the_window_passes(  # noqa: E501
        shared_log):
    log, cfg = shared_log
    await log.record(failures(4))
    clock = FixedClock(start=T0)
    orchestrator = build_orchestrator(cfg, clock=clock, ids=SequentialIds())
    try:
        breaker = orchestrator.services.tools.breaker
        assert isinstance(breaker, ExperienceBreaker)
        result = await orchestrator.run_turn("s1", ASK, user_id="u1")
        assert called(result) == []  # planning was not offered the tool
        assert "not available" in (result.answer or "")
        why = breaker.problem("inventory_lookup") or ""
        assert "4 of its 4 calls" in why and "experience log" in why
        assert "inventory_lookup" not in [d.name for d in orchestrator.services.tools.describe()]

        clock.advance(WINDOW)  # the failures leave the window: the breaker closes
        result = await orchestrator.run_turn("s1", ASK, user_id="u1")
        assert called(result) == ["inventory_lookup"]
        assert breaker.problem("inventory_lookup") is None
    finally:
        await orchestrator.aclose()


async def test_below_the_minimum_sample_count_nothing_trips(shared_log):
    log, cfg = shared_log
    await log.record(failures(2))  # min_calls is 3
    orchestrator = build_orchestrator(cfg, clock=FixedClock(start=T0),
                                      ids=SequentialIds())
    try:
        result = await orchestrator.run_turn("s1", ASK, user_id="u1")
        assert called(result) == ["inventory_lookup"]
        assert not orchestrator.services.tools.breaker.any_open()
    finally:
        await orchestrator.aclose()


async def test_the_executor_refuses_a_tripped_tool_even_without_planning(tmp_path):
    log = SQLiteExperienceLog(tmp_path / "experience.sqlite", HashingEmbedder())
    await log.record(failures(3))
    box = Toolbox.from_config(config(tmp_path, "sqlite", ""), outcomes=log,
                              clock=FixedClock(start=T0))
    try:
        (envelope,) = await ToolExecutor(box.registry).execute(
            [("c1", "inventory_lookup", {"sku": "A1001"})])
        assert envelope["error_code"] == "CIRCUIT_OPEN"
        assert "experience log" in envelope["message"]
    finally:
        await log.close()


# --- the breaker itself, over a fake log --------------------------------------------------

class FakeLog:
    """``failure_rates`` from a dict; counts reads; can be made to fail."""

    def __init__(self, rates: dict[str, ToolHealth]) -> None:
        self.rates, self.down = rates, False
        self.reads: list[Any] = []

    async def failure_rates(self, window: timedelta, now: datetime) -> dict[str, ToolHealth]:
        await asyncio.sleep(0)  # a real log answers later: other turns run meanwhile
        if self.down:
            raise MemoryStoreError("PostgreSQL experience log: read failed (test)")
        self.reads.append((window, now))
        return dict(self.rates)


def breaker_over(log: FakeLog, **options: Any) -> tuple[ExperienceBreaker, FixedClock]:
    clock = FixedClock(start=T0, step=timedelta(0))
    options = {"window": WINDOW, "min_calls": 4, "failure_rate": 0.5, "refresh_s": 5.0,
               **options}
    return ExperienceBreaker(log, clock=clock, **options), clock


async def test_it_opens_at_the_threshold_and_min_calls_only():
    log = FakeLog({"half": ToolHealth("half", 4, 2), "under": ToolHealth("under", 4, 1),
                   "few": ToolHealth("few", 3, 3)})
    breaker, _ = breaker_over(log)
    await breaker.refresh()
    assert breaker.any_open()
    assert breaker.problem("half") is not None
    assert breaker.problem("under") is None and breaker.problem("few") is None
    assert log.reads == [(WINDOW, T0)]


async def test_it_reads_the_log_at_most_once_per_refresh_interval():
    log = FakeLog({})
    breaker, clock = breaker_over(log)
    await breaker.refresh()
    log.rates = {"flaky": ToolHealth("flaky", 10, 10)}
    clock.advance(timedelta(seconds=4))
    await breaker.refresh()
    assert len(log.reads) == 1 and breaker.problem("flaky") is None
    clock.advance(timedelta(seconds=1))
    await breaker.refresh()
    assert len(log.reads) == 2 and breaker.problem("flaky") is not None


async def test_turns_refreshing_at_the_same_moment_read_the_log_once():
    log = FakeLog({"flaky": ToolHealth("flaky", 10, 10)})
    breaker, _ = breaker_over(log)
    await asyncio.gather(*(breaker.refresh() for _ in range(5)))
    assert len(log.reads) == 1


async def test_a_log_that_cannot_be_read_keeps_what_was_known_and_says_why():
    log = FakeLog({"flaky": ToolHealth("flaky", 10, 10)})
    breaker, clock = breaker_over(log, refresh_s=0)
    await breaker.refresh()
    log.down = True
    clock.advance(timedelta(minutes=1))
    await breaker.refresh()
    assert breaker.problem("flaky") is not None
    assert "read failed" in (breaker.error or "")
    log.down, log.rates = False, {}
    await breaker.refresh()
    assert breaker.problem("flaky") is None and breaker.error is None


async def test_outcomes_of_this_process_still_trip_it_before_they_are_logged():
    breaker, _ = breaker_over(FakeLog({}), local=WindowBreaker(window=3, min_calls=3))
    for _ in range(3):
        breaker.record("flaky", False)
    await breaker.refresh()
    assert "3 of the last 3 calls failed" in (breaker.problem("flaky") or "")


def test_the_toolbox_reads_the_log_unless_configured_off(tmp_path):
    log = SQLiteExperienceLog(":memory:")
    on = config(tmp_path, "sqlite", "")
    breaker = Toolbox.from_config(on, outcomes=log).registry.breaker
    assert isinstance(breaker, ExperienceBreaker) and breaker.outcomes is log
    assert (breaker.window, breaker.min_calls, breaker.refresh_s) == (WINDOW, 3, 0)
    off = on.model_copy(deep=True)
    off.tools.breaker.experience.enabled = False
    assert isinstance(Toolbox.from_config(off, outcomes=log).registry.breaker, WindowBreaker)
    assert isinstance(Toolbox.from_config(on).registry.breaker, WindowBreaker)
