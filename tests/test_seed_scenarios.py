"""The seeds' own scenarios as golden dialogues, on embedded defaults (rules brain, the demo
tools, the demo MCP server over stdio), a fixed clock and ``timezone: Asia/Shanghai``.

Each test runs the dialogue live and checks the exact tool calls and the facts of each
answer; its recording is committed under ``tests/recordings/seeds/`` and replayed
against today's contracts and graph (``HERMES_WRITE_RECORDINGS=1`` writes them anew).
Follow-ups, corrections, a pending task resumed and an approval run on the
conversation layer (the session's graph and tasks).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.config import HermesConfig, build_orchestrator
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.events.recording import load_recording, recording_text
from hermes_fsm.memory import InProcessMemory
from hermes_fsm.replay import Replayer
from hermes_fsm.sources import FixedClock, SequentialIds
from tests.conversation_support import cli_turns

RECORDINGS = Path(__file__).parent / "recordings" / "seeds"
BASE = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai, Tuesday 2026-12-01


def orchestrator(data_dir: Path) -> Orchestrator:
    """The embedded configuration, deterministic: fixed clock and ids, the demo calendar's
    today pinned to the clock's, memory in this process."""
    config = HermesConfig(timezone="Asia/Shanghai", sessions={"store": "memory"},
                          memory={"data_dir": str(data_dir)})
    demo = config.mcp_servers["demo"]
    config.mcp_servers["demo"] = demo.model_copy(
        update={"env": {**demo.env, "HERMES_DEMO_TODAY": "2026-12-01"}})
    return build_orchestrator(config, clock=FixedClock(BASE), ids=SequentialIds(),
                              memory=InProcessMemory())


async def dialogue(data_dir: Path, texts: Sequence[str], user: str = "alice",
                   name: str | None = None) -> list[dict[str, Any]]:
    """Run ``texts`` as turns of one session; per turn its status, calls and answer. With
    ``name``, the session's recording is written (HERMES_WRITE_RECORDINGS=1)."""
    turns = []
    async with orchestrator(data_dir) as orch:
        for text in texts:
            result = await orch.run_turn("seed", text, user_id=user)
            calls = [(e.tool, e.arguments) for e in result.events
                     if e.kind == "tool_call_started"]
            turns.append({"status": result.status, "calls": calls, "answer": result.answer})
        if name is not None and os.environ.get("HERMES_WRITE_RECORDINGS"):
            (RECORDINGS / f"{name}.jsonl").write_text(recording_text(orch, "seed"), "utf-8")
    return turns


async def replays_clean(name: str) -> None:
    recording = load_recording(RECORDINGS / f"{name}.jsonl")
    assert Replayer().validate(recording).ok
    assert (await Replayer().arerun(recording)).ok


# --- seed 001 §6: the reminder plus the day's calendar ----------------------------------


async def test_seed001_reminder_at_ten_tomorrow_and_tomorrows_calendar(tmp_path: Path) -> None:
    [turn] = await dialogue(tmp_path, ["明天上午十点提醒我带项目计划书，然后帮我看看日程安排"],
                            name="seed001_reminder_calendar")
    assert turn["status"] == "completed"
    assert turn["calls"] == [
        ("create_reminder", {"text": "带项目计划书", "due": "2026-12-02T10:00:00+08:00"}),
        ("demo.calendar_events", {"date": "2026-12-02"})]
    answer = turn["answer"]
    assert "2026-12-02T10:00:00+08:00" in answer and "带项目计划书" in answer
    assert "09:00–09:45 内部评审会" in answer and "14:00–15:00 供应商沟通" in answer
    kept = json.loads((tmp_path / "reminders" / "alice.json").read_text("utf-8"))
    assert kept == [{"id": "r1", "text": "带项目计划书", "due": "2026-12-02T10:00:00+08:00"}]
    await replays_clean("seed001_reminder_calendar")


async def test_seed001_english_reminder_gets_an_exact_due_time(tmp_path: Path) -> None:
    [turn] = await dialogue(tmp_path, ["remind me to call Wang Fang tomorrow at 3pm"])
    assert turn["calls"] == [
        ("create_reminder", {"text": "call Wang Fang", "due": "2026-12-02T15:00:00+08:00"})]
    assert turn["answer"] == ("Done: reminder r1 is set to call Wang Fang, due "
                              "2026-12-02T15:00:00+08:00.")


@pytest.mark.parametrize(("text", "unclear"), [
    ("remind me to stretch later", '"later"'),
    ("提醒我明天下午去银行", "“明天下午”"),
    ("稍后提醒我喝水", "“稍后”"),
])
async def test_an_unclear_time_is_asked_for_never_guessed(tmp_path: Path, text: str,
                                                         unclear: str) -> None:
    [turn] = await dialogue(tmp_path, [text])
    assert turn["calls"] == []  # no reminder with a guessed time
    assert unclear in turn["answer"]
    assert not (tmp_path / "reminders" / "alice.json").exists()


async def test_the_answer_to_when_exactly_resumes_the_reminder_with_an_exact_time(
        tmp_path: Path) -> None:
    turns = await dialogue(tmp_path, ["提醒我明天下午去银行", "明天下午三点"])
    assert turns[0]["status"] == "awaiting_input" and turns[0]["calls"] == []
    assert turns[1]["calls"] == [
        ("create_reminder", {"text": "去银行", "due": "2026-12-02T15:00:00+08:00"})]


async def test_answers_that_stay_unclear_are_asked_again_then_the_task_stops(
        tmp_path: Path) -> None:
    turns = await dialogue(tmp_path, ["remind me to stretch later", "soon", "whenever",
                                      "no idea"])
    assert [t["status"] for t in turns] == ["awaiting_input"] * 3 + ["completed"]
    assert all(t["calls"] == [] for t in turns)  # never a guessed time
    assert '"soon" is not a valid time' in turns[1]["answer"]
    assert "second answer that does not fit" in turns[2]["answer"]
    assert "stopped this request" in turns[3]["answer"]
    assert not (tmp_path / "reminders" / "alice.json").exists()


# --- seed 002: stock by store, corrections, the price now and a month ago ---------------


async def test_seed002_iphone_stock_in_the_hangzhou_xihu_store(tmp_path: Path) -> None:
    [turn] = await dialogue(tmp_path, ["帮我查iPhone 15在杭州西湖区门店的库存"],
                            name="seed002_store_stock")
    assert turn["calls"] == [("store_stock", {"sku": "IP15-128", "store": "hz_xh_001"})]
    assert turn["answer"] == "杭州西湖区门店(hz_xh_001)的 iPhone 15 128GB 还有 8 台库存。"
    await replays_clean("seed002_store_stock")


async def test_seed002_each_turn_said_in_full_gets_its_exact_call(tmp_path: Path) -> None:
    """The sequence with every turn naming its product and store: what works without
    the conversation graph."""
    turns = await dialogue(tmp_path, [
        "iPhone 15 在杭州西湖区的库存", "iPhone 15 在上海徐汇区的库存",
        "iPhone 15 在深圳南山区的库存", "iPhone 15 Pro 在深圳南山区的库存",
        "iPhone 15 Pro 现在多少钱", "iPhone 15 Pro 比上个月涨了吗"])
    assert [t["calls"] for t in turns] == [
        [("store_stock", {"sku": "IP15-128", "store": "hz_xh_001"})],
        [("store_stock", {"sku": "IP15-128", "store": "sh_xh_001"})],
        [("store_stock", {"sku": "IP15-128", "store": "sz_ns_001"})],
        [("store_stock", {"sku": "IP15P-256", "store": "sz_ns_001"})],
        [("price_lookup", {"sku": "IP15P-256"})],
        [("price_lookup", {"sku": "IP15P-256", "on": "2026-11-01"})]]
    answers = [t["answer"] for t in turns]
    assert "8 台" in answers[0] and "15 台" in answers[1]
    assert "0 台" in answers[2] and "2026-12-04" in answers[2]  # restock in 3 days
    assert "5 台" in answers[3] and "8499 元" in answers[4]
    assert "8499" in answers[5] and "8299" in answers[5] and "涨了" in answers[5]


async def test_seed002_the_whole_sequence_with_follow_ups(tmp_path: Path) -> None:
    turns = await dialogue(tmp_path, [
        "iPhone 15 在杭州西湖区的库存", "那上海徐汇区呢", "不对,深圳南山区",
        "等等,是 iPhone 15 Pro", "现在多少钱", "比上个月涨了吗"])
    assert [t["calls"] for t in turns] == [
        [("store_stock", {"sku": "IP15-128", "store": "hz_xh_001"})],
        [("store_stock", {"sku": "IP15-128", "store": "sh_xh_001"})],
        [("store_stock", {"sku": "IP15-128", "store": "sz_ns_001"})],
        [("store_stock", {"sku": "IP15P-256", "store": "sz_ns_001"})],
        [("price_lookup", {"sku": "IP15P-256"})],
        [("price_lookup", {"sku": "IP15P-256", "on": "2026-11-01"})]]
    answers = [t["answer"] for t in turns]  # the figures of retail.yaml
    assert "8 台" in answers[0] and "15 台" in answers[1]
    assert "0 台" in answers[2] and "2026-12-04" in answers[2]
    assert "5 台" in answers[3] and "8499 元" in answers[4]
    assert "8299" in answers[5] and "涨了" in answers[5]


async def test_a_store_the_registry_is_unsure_of_is_refused_with_the_reason(
        tmp_path: Path) -> None:
    [turn] = await dialogue(tmp_path, ["iPhone 15 在徐汇滨江店的库存"])
    assert turn["calls"] == [("store_stock", {"sku": "IP15-128", "store": "sh_xh_002"})]
    assert "置信度仅0.45" in turn["answer"] and "徐汇滨江店" in turn["answer"]  # seed 002 §2.2


# --- seed 003: the order that has not shipped, the Q3 report to Director Li -------------


async def test_seed003_an_order_without_its_number_is_asked_for(tmp_path: Path) -> None:
    turns = await dialogue(tmp_path, ["我的订单还没发货，急！", "ORD-12345678"],
                           name="seed003_order")
    assert turns[0]["calls"] == []
    assert turns[0]["answer"] == "请问您的订单号是多少?格式类似 ORD-12345678。"
    assert turns[1]["calls"] == [("order_status", {"order_id": "ORD-12345678"})]
    assert "2026-12-03" in turns[1]["answer"]  # promised: two days from today
    await replays_clean("seed003_order")


async def test_seed003_the_order_number_resumes_the_pending_task(tmp_path: Path) -> None:
    turns = await dialogue(tmp_path, ["我的订单还没发货，急！", "ORD-12345678"])
    assert turns[0]["status"] == "awaiting_input"
    assert "还没有发货" in turns[1]["answer"] and "2026-12-03" in turns[1]["answer"]


async def test_another_users_order_is_no_such_order(tmp_path: Path) -> None:
    [turn] = await dialogue(tmp_path, ["我的订单 ORD-55550001 到哪了"], user="alice")
    assert turn["calls"] == [("order_status", {"order_id": "ORD-55550001"})]
    assert "no order ORD-55550001" in turn["answer"] and "JD" not in turn["answer"]
    [bobs] = await dialogue(tmp_path, ["where is my order ORD-55550001?"], user="bob")
    assert "delivered on 2026-11-26" in bobs["answer"]


async def test_seed003_q3_sales_for_director_li(tmp_path: Path) -> None:
    [turn] = await dialogue(tmp_path, ["把 Q3 的销售数据发给李总监"], name="seed003_q3_report")
    assert turn["status"] == "awaiting_approval"  # the e-mail waits for a yes
    assert turn["calls"] == [
        ("sales_report", {"start": "2026-07-01", "end": "2026-09-30", "format": "markdown"}),
        ("contact_lookup", {"name": "李总监"})]
    answer = turn["answer"]
    assert "共售出 1885 件" in answer and "A1001 1200 件" in answer
    assert "li.na@example.com" in answer
    report = tmp_path / "reports" / "sales_2026-07-01_2026-09-30.md"
    assert "| **total** | **1200** | **370** | **215** | **100** |" in report.read_text()
    await replays_clean("seed003_q3_report")


async def test_seed003_q3_report_is_sent_after_approval(tmp_path: Path) -> None:
    turns = await dialogue(tmp_path, ["把 Q3 的销售数据发给李总监", "确认"])
    assert turns[0]["status"] == "awaiting_approval"
    report = str(tmp_path / "reports" / "sales_2026-07-01_2026-09-30.md")
    # the e-mail a second round planned from the first round's outputs, listed for approval
    assert 'to="li.na@example.com"' in turns[0]["answer"] and report in turns[0]["answer"]
    assert [name for name, _ in turns[0]["calls"]] == ["sales_report", "contact_lookup"]
    assert turns[1]["status"] == "completed"
    assert turns[1]["calls"] == [("send_email", {
        "to": "li.na@example.com", "subject": "Sales report 2026-07-01 – 2026-09-30",
        "body": "Sales report 2026-07-01 – 2026-09-30, attached. / 销售数据见附件。",
        "attachment": report})]
    [mail] = json.loads((tmp_path / "outbox" / "alice.json").read_text("utf-8"))
    assert mail["to"] == "li.na@example.com" and mail["attachment"] == report


# --- as separate `hermes-fsm run` processes on one session -------------------------------


def test_seed_scenarios_through_the_cli_on_one_session(tmp_path: Path) -> None:
    reminder, order, number = cli_turns(tmp_path, "seed-cli", [
        "明天上午十点提醒我带项目计划书，然后帮我看看日程安排", "我的订单还没发货，急！",
        "ORD-12345678"])
    assert "T10:00:00+08:00 提醒你带项目计划书" in reminder  # tomorrow's date: the wall clock
    assert "09:00–09:45 内部评审会" in reminder and "14:00–15:00 供应商沟通" in reminder
    assert order == "请问您的订单号是多少?格式类似 ORD-12345678。"
    assert "还没有发货" in number  # the session's language, from the stored history
    kept = json.loads((tmp_path / "reminders" / "alice.json").read_text("utf-8"))
    assert kept[0]["due"].endswith("T10:00:00+08:00")
