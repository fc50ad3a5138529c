"""Exact times (seed 001 §6.3): expressions become ISO values with the zone's offset, or a
clarification; the executor refuses a tool call whose date-time is not exact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from hermes_fsm.brain.openai import OpenAIBrain
from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.config import HermesConfig, load_config
from hermes_fsm.contracts.formats import is_date, is_date_time
from hermes_fsm.conversation.times import TimeResolver, UnclearTime
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.errors import ConfigError
from hermes_fsm.sources import FixedClock
from hermes_fsm.testing import demo_orchestrator
from hermes_fsm.tools.executor import ToolExecutor

BASE = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # Tuesday, 10:00 in Shanghai
SHANGHAI = TimeResolver("Asia/Shanghai")


@pytest.mark.parametrize(("text", "iso"), [
    ("明天上午十点", "2026-12-02T10:00:00+08:00"),
    ("后天早上八点", "2026-12-03T08:00:00+08:00"),
    ("两小时后", "2026-12-01T12:00:00+08:00"),
    ("今天下午三点半", "2026-12-01T15:30:00+08:00"),
    ("tomorrow at 3pm", "2026-12-02T15:00:00+08:00"),
    ("tomorrow at 9", "2026-12-02T09:00:00+08:00"),  # a bare hour is that hour, not now
    ("in two hours", "2026-12-01T12:00:00+08:00"),
    ("at 5pm", "2026-12-01T17:00:00+08:00"),  # later today, not tomorrow
    ("friday at 10am", "2026-12-04T10:00:00+08:00"),
    ("2026-12-05 14:00", "2026-12-05T14:00:00+08:00"),
])
def test_an_instant_is_iso_with_the_zones_offset(text: str, iso: str) -> None:
    found = SHANGHAI.resolve(text, base=BASE)
    assert (found.grain, found.iso()) == ("minute", iso)


@pytest.mark.parametrize(("text", "first", "last"), [
    ("下周一", "2026-12-07", "2026-12-07"),
    ("明天", "2026-12-02", "2026-12-02"),
    ("next monday", "2026-12-07", "2026-12-07"),
    ("上个月", "2026-11-01", "2026-11-30"),
    ("last month", "2026-11-01", "2026-11-30"),
    ("Q3", "2026-07-01", "2026-09-30"),
    ("第三季度", "2026-07-01", "2026-09-30"),
    ("the third quarter", "2026-07-01", "2026-09-30"),
    ("去年Q4", "2025-10-01", "2025-12-31"),
    ("this week", "2026-11-30", "2026-12-06"),
    ("本月", "2026-12-01", "2026-12-31"),
    ("next year", "2027-01-01", "2027-12-31"),
])
def test_days_and_spans_give_their_first_and_last_day(text: str, first: str, last: str) -> None:
    found = SHANGHAI.resolve(text, base=BASE)
    assert (found.first_day(), found.last_day()) == (first, last)


@pytest.mark.parametrize("text", ["later", "下午", "稍后", "明天下午", "someday", "", "blah"])
def test_what_names_no_exact_time_is_unclear_never_guessed(text: str) -> None:
    with pytest.raises(UnclearTime) as caught:
        SHANGHAI.resolve(text, base=BASE)
    assert "ask the user" in str(caught.value)


def test_the_zone_decides_the_day_and_the_offset() -> None:
    late = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # 01:00 on 12-02 in Shanghai
    assert SHANGHAI.resolve("明天上午十点", base=late).iso() == "2026-12-03T10:00:00+08:00"
    assert TimeResolver("UTC").resolve("tomorrow at 10am", base=late).iso() == \
        "2026-12-02T10:00:00+00:00"
    new_york = TimeResolver("America/New_York").resolve("tomorrow at 3pm", base=late)
    assert new_york.iso() == "2026-12-02T15:00:00-05:00"


def test_the_base_time_comes_from_the_injected_clock() -> None:
    resolver = TimeResolver("Asia/Shanghai", clock=FixedClock(BASE, step=timedelta(0)))
    assert resolver.resolve("tomorrow at 3pm").iso() == "2026-12-02T15:00:00+08:00"
    assert resolver.today().isoformat() == "2026-12-01"


def test_a_comparison_with_last_month_means_the_same_day_a_month_back() -> None:
    day = SHANGHAI.reference_day("上个月", base=datetime(2026, 3, 31, 2, tzinfo=UTC))
    assert day.first_day() == "2026-02-28"  # clamped to the month's last day
    assert SHANGHAI.reference_day("last week", base=BASE).first_day() == "2026-11-24"


def test_a_fixed_offset_zone_works_too() -> None:
    resolver = TimeResolver(timezone(timedelta(hours=5, minutes=30)))
    assert resolver.resolve("tomorrow at 9am", base=BASE).iso() == "2026-12-02T09:00:00+05:30"


def test_an_unknown_zone_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        TimeResolver("Mars/Olympus")
    with pytest.raises(ValueError, match="Mars/Olympus"):
        HermesConfig(timezone="Mars/Olympus")
    with pytest.raises(ConfigError, match="HERMES_TIMEZONE='Mars/Olympus'"):
        load_config(environ={"HERMES_TIMEZONE": "Mars/Olympus"})
    assert load_config(environ={"HERMES_TIMEZONE": "Asia/Tokyo"}).timezone == "Asia/Tokyo"
    assert HermesConfig().timezone is None  # the machine's local zone


@pytest.mark.parametrize(("value", "ok"), [
    ("2026-12-02T10:00:00+08:00", True), ("2026-12-02T10:00:00Z", True),
    ("2026-12-02T10:00:00.5+08:00", True), ("2026-12-02T10:00:00", False),
    ("2026-12-02 10:00:00+08:00", False), ("2026-13-02T10:00:00+08:00", False),
    ("tomorrow at 3pm", False), ("明天上午十点", False),
])
def test_a_date_time_needs_its_offset(value: str, ok: bool) -> None:
    assert is_date_time(value) is ok


def test_a_date_is_a_real_calendar_date() -> None:
    assert is_date("2026-09-30") and not is_date("2026-09-31") and not is_date("Q3")


@pytest.mark.parametrize("due", ["tomorrow at 3pm", "2026-12-02T15:00:00", "明天下午三点"])
async def test_the_executor_refuses_a_due_time_that_is_not_exact(due: str) -> None:
    registry = build_demo_registry()
    [result] = await ToolExecutor(registry).execute(
        [("c1", "create_reminder", {"text": "call Bob", "due": due})], caller="alice")
    assert result["success"] is False and result["error_code"] == "VALIDATION_FAILED"
    assert "date-time" in result["message"]
    assert registry.check_call("create_reminder", {"text": "x", "due": due}) is not None


async def test_the_executor_takes_an_exact_due_time() -> None:
    registry = build_demo_registry()
    [result] = await ToolExecutor(registry).execute(
        [("c1", "create_reminder", {"text": "call Bob", "due": "2026-12-02T15:00:00+08:00"})],
        caller="alice")
    assert result["success"] is True
    assert result["output"]["due"] == "2026-12-02T15:00:00+08:00"


async def test_a_date_argument_is_checked_as_a_date() -> None:
    registry = build_demo_registry()
    [bad, good] = await ToolExecutor(registry).execute(
        [("c1", "sales_report", {"start": "Q3", "end": "2026-09-30"}),
         ("c2", "price_lookup", {"sku": "IP15-128", "on": "2026-11-01"})], caller="alice")
    assert bad["error_code"] == "VALIDATION_FAILED" and "'Q3' is not a 'date'" in bad["message"]
    assert good["success"] is True


async def test_the_turns_clock_is_the_base_of_the_brains_times() -> None:
    brain = RulesBrain(timezone="Asia/Shanghai")  # its own clock is the wall clock
    orchestrator = demo_orchestrator(brain=brain, clock=FixedClock(BASE))
    result = await orchestrator.run_turn("s", "remind me to call Bob tomorrow at 3pm",
                                         user_id="alice")
    [started] = [e for e in result.events if e.kind == "tool_call_started"]
    assert started.arguments == {"text": "call Bob", "due": "2026-12-02T15:00:00+08:00"}


def test_a_model_is_told_the_turns_time_in_the_configured_zone() -> None:
    brain = OpenAIBrain("http://127.0.0.1:9/v1", "m", timezone="Asia/Shanghai")
    request = BrainRequest(state="PLANNING", contract_name="plan", schema={"type": "object"},
                           text="remind me tomorrow at 3pm", user_id="u", now=BASE)
    system = brain._body(request, stream=False)["messages"][0]["content"]
    assert "Now: 2026-12-01T10:00:00+08:00 (Tuesday, timezone Asia/Shanghai)" in system
    assert "never words like 'tomorrow'" in system


@pytest.mark.parametrize(("text", "day"), [
    ("a month ago", "2026-05-12"), ("一个月前", "2026-05-12"), ("两周前", "2026-05-29"),
    ("3 days ago", "2026-06-09"), ("十天前", "2026-06-02"), ("a year ago", "2025-06-12"),
    ("two weeks ago", "2026-05-29"), ("三个月之前", "2026-03-12")])
def test_a_time_counted_back_is_that_day_not_a_month(text: str, day: str) -> None:
    """Both parsers read "a month ago" as a month; counted back from 2026-06-12 it is one
    day, and a comparison ("比一个月前") compares with it."""
    resolver = TimeResolver("UTC")
    base = datetime(2026, 6, 12, 8, 0, tzinfo=UTC)
    found = resolver.resolve(text, base=base)
    assert (found.grain, found.first_day()) == ("day", day)
    assert resolver.reference_day(text, base=base).first_day() == day


def test_a_month_counted_back_keeps_the_day_within_the_shorter_month() -> None:
    base = datetime(2026, 3, 31, 8, 0, tzinfo=UTC)
    assert TimeResolver("UTC").resolve("一个月前", base=base).first_day() == "2026-02-28"
