"""The rules brain on the retail domain: what a user would type, in English and Chinese, and
the exact calls it plans (times exact, products and stores canonical), or what it asks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.contracts.states import Intent, Plan, Response, ResultReport
from hermes_fsm.replay import offline_catalog
from hermes_fsm.sources import FixedClock

BASE = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # Tuesday 10:00 in Shanghai
BRAIN = RulesBrain(timezone="Asia/Shanghai", clock=FixedClock(BASE, step=timedelta(0)))
CATALOG = offline_catalog()  # the demo tools and the pinned MCP ones (demo.calendar_events)
Q3 = {"start": "2026-07-01", "end": "2026-09-30", "format": "markdown"}
NOVEMBER = {"start": "2026-11-01", "end": "2026-11-30", "format": "markdown"}


async def planned(text: str) -> list[tuple[str, dict[str, Any]]]:
    def request(contract: str, outputs: dict[str, Any]) -> BrainRequest:
        return BrainRequest(state=contract.upper(), contract_name=contract, schema={},
                            text=text, user_id="alice", outputs=outputs,
                            tools=CATALOG.describe(), now=BASE)

    intent = Intent.validate_output(await BRAIN.decide(request("intent", {})))
    plan = Plan.validate_output(await BRAIN.decide(request("plan", {"intent": intent})),
                                {"tool_catalog": CATALOG})
    return [(c.tool_name, c.arguments) for c in plan.tool_calls]  # type: ignore[attr-defined]


async def answer_without_tools(text: str) -> str:
    request = BrainRequest(state="INTENT", contract_name="intent", schema={}, text=text,
                           user_id="alice", now=BASE)
    intent = Intent.validate_output(await BRAIN.decide(request))
    response = await BRAIN.decide(BrainRequest(
        state="RESPONSE", contract_name="response", schema={}, text=text, user_id="alice",
        outputs={"intent": intent}, tools=CATALOG.describe(), now=BASE))
    return Response.validate_output(response).text  # type: ignore[attr-defined,no-any-return]


STOCK = [
    ("帮我查iPhone 15在杭州西湖区门店的库存", "IP15-128", "hz_xh_001"),
    ("iPhone 15 在杭州市西湖区还有货吗", "IP15-128", "hz_xh_001"),
    ("苹果15 上海徐汇区门店有多少台", "IP15-128", "sh_xh_001"),
    ("深圳南山区的iPhone 15 Pro还有货吗", "IP15P-256", "sz_ns_001"),
    ("iphone15 pro 浦东有货吗", "IP15P-256", "sh_pd_001"),
    ("How many iPhone 15 does the Hangzhou Xihu store have?", "IP15-128", "hz_xh_001"),
    ("Is the iPhone 15 Pro in stock at the Shanghai Pudong store?", "IP15P-256", "sh_pd_001"),
    ("iphone 15 stock in xuhui", "IP15-128", "sh_xh_001"),
    ("any iPhone 15 Pro left in Shenzhen?", "IP15P-256", "sz_ns_001"),
    ("iPhone 15 在徐汇滨江店的库存", "IP15-128", "sh_xh_002"),
]


@pytest.mark.parametrize(("text", "sku", "store"), STOCK)
async def test_stock_by_store(text: str, sku: str, store: str) -> None:
    assert await planned(text) == [("store_stock", {"sku": sku, "store": store})]


@pytest.mark.parametrize(("text", "args"), [
    ("iPhone 15 Pro 现在多少钱", {"sku": "IP15P-256"}),
    ("鼠标多少钱", {"sku": "A1001"}),
    ("What's the price of the iPhone 15 now?", {"sku": "IP15-128"}),
    ("how much is the mechanical keyboard", {"sku": "A1002"}),
    ("iPhone 15 比上个月涨了吗", {"sku": "IP15-128", "on": "2026-11-01"}),
    ("Is the iPhone 15 Pro more expensive than last month?",
     {"sku": "IP15P-256", "on": "2026-11-01"}),
    ("has the keyboard price gone down since last week?", {"sku": "A1002", "on": "2026-11-24"}),
])
async def test_prices_now_and_then(text: str, args: dict[str, str]) -> None:
    assert await planned(text) == [("price_lookup", args)]


@pytest.mark.parametrize(("text", "order_id"), [
    ("我的订单 ORD-87654321 到哪了", "ORD-87654321"),
    ("订单ORD-12345678发货了吗", "ORD-12345678"),
    ("Where is my order ORD-87654321?", "ORD-87654321"),
    ("has ord-12345678 shipped yet", "ORD-12345678"),
])
async def test_order_status_with_its_number(text: str, order_id: str) -> None:
    assert await planned(text) == [("order_status", {"order_id": order_id})]


@pytest.mark.parametrize(("text", "asked"), [
    ("我的订单还没发货，急！", "请问您的订单号是多少?格式类似 ORD-12345678。"),
    ("My order hasn't shipped yet!", "What is your order number? It looks like ORD-12345678."),
    ("我的订单 ORD-123 怎么还没到", "请问您的订单号是多少?格式类似 ORD-12345678。"),
])
async def test_an_order_without_a_valid_number_is_asked_for(text: str, asked: str) -> None:
    assert await planned(text) == []
    assert await answer_without_tools(text) == asked


@pytest.mark.parametrize(("text", "calls"), [
    ("remind me to call Wang Fang tomorrow at 3pm",
     [("create_reminder", {"text": "call Wang Fang", "due": "2026-12-02T15:00:00+08:00"})]),
    ("remind me in two hours to check the oven",
     [("create_reminder", {"text": "check the oven", "due": "2026-12-01T12:00:00+08:00"})]),
    ("remind me to send the invoice next monday at 9am",
     [("create_reminder", {"text": "send the invoice", "due": "2026-12-07T09:00:00+08:00"})]),
    ("后天早上八点提醒我去机场",
     [("create_reminder", {"text": "去机场", "due": "2026-12-03T08:00:00+08:00"})]),
    ("提醒我下周一上午九点开周会",
     [("create_reminder", {"text": "开周会", "due": "2026-12-07T09:00:00+08:00"})]),
    ("明天上午十点提醒我带项目计划书，然后帮我看看日程安排",
     [("create_reminder", {"text": "带项目计划书", "due": "2026-12-02T10:00:00+08:00"}),
      ("demo.calendar_events", {"date": "2026-12-02"})]),
    ("Remind me to bring the project plan at 10am tomorrow and show me my calendar",
     [("create_reminder", {"text": "bring the project plan",
                           "due": "2026-12-02T10:00:00+08:00"}),
      ("demo.calendar_events", {"date": "2026-12-02"})]),
])
async def test_reminders_get_exact_due_times(text: str, calls: list[Any]) -> None:
    assert await planned(text) == calls


@pytest.mark.parametrize(("text", "asked"), [
    ("提醒我八点开会", "“八点”不是一个确切的时间"),  # 10:00 now: tonight, or tomorrow?
    ("remind me yesterday at 3pm to call Bob", 'I can\'t pin "yesterday at 3pm" down'),
])
async def test_a_due_time_already_past_is_asked_for(text: str, asked: str) -> None:
    assert await planned(text) == []
    assert (await answer_without_tools(text)).startswith(asked)


@pytest.mark.parametrize(("text", "date"), [
    ("帮我看看明天的日程", "2026-12-02"), ("后天有什么安排", "2026-12-03"),
    ("What's on my schedule tomorrow?", "2026-12-02"), ("show my calendar", "2026-12-01"),
    ("下周一的日程", "2026-12-07"), ("any meetings on friday?", "2026-12-04"),
])
async def test_the_calendar_of_a_day(text: str, date: str) -> None:
    assert await planned(text) == [("demo.calendar_events", {"date": date})]


@pytest.mark.parametrize(("text", "calls"), [
    ("把 Q3 的销售数据发给李总监",
     [("sales_report", Q3),
      ("contact_lookup", {"name": "李总监"})]),
    ("Send the Q3 sales report to Director Li",
     [("sales_report", Q3),
      ("contact_lookup", {"name": "李总监"})]),
    ("上个月的销售数据", [("sales_report", NOVEMBER)]),
    ("sales for last month", [("sales_report", NOVEMBER)]),
    ("第三季度销量", [("sales_report", Q3)]),
])
async def test_sales_reports_for_a_period(text: str, calls: list[Any]) -> None:
    assert await planned(text) == calls


@pytest.mark.parametrize(("text", "name"), [
    ("王芳的邮箱是多少", "王芳"), ("What's Director Li's email?", "李总监"),
    ("contact details for Manager Zhang", "张经理"),
])
async def test_contacts(text: str, name: str) -> None:
    assert await planned(text) == [("contact_lookup", {"name": name})]


@pytest.mark.parametrize(("text", "asked"), [
    ("销售数据发给李总监", "要哪段时间的销售数据?"),
    ("iPhone 15 还有货吗", "请问是哪家门店?"),
    ("is the iPhone 15 in stock?", "Which store do you mean?"),
])
async def test_a_missing_slot_is_asked_for(text: str, asked: str) -> None:
    assert await planned(text) == []
    assert (await answer_without_tools(text)).startswith(asked)


async def test_the_warehouse_question_of_the_readme_still_plans_inventory_lookup() -> None:
    calls = await planned("How many A1001 are left in the east warehouse?")
    assert calls[0] == ("inventory_lookup", {"sku": "A1001", "warehouse": "east"})


async def test_the_email_waits_for_the_address_and_the_report_then_is_planned() -> None:
    """Round one plans the report and the contact; the e-mail takes their outputs, so it is
    planned in a later round (when the engine plans again), with the exact address."""
    text = "把 Q3 的销售数据发给李总监"
    first = await planned(text)
    assert [name for name, _ in first] == ["sales_report", "contact_lookup"]
    intent = Intent.validate_output(await BRAIN.decide(BrainRequest(
        state="INTENT", contract_name="intent", schema={}, text=text, user_id="alice",
        now=BASE)))
    outputs = {"sales_report": {"path": "/data/reports/sales_2026-07-01_2026-09-30.md"},
               "contact_lookup": {"name": "李总监", "email": "li.na@example.com"}}
    report = ResultReport.validate_output({"facts": [
        {"id": f"fact-c{n}", "source": f"c{n}", "content": {"tool": tool, "output": output}}
        for n, (tool, output) in enumerate(outputs.items())],
        "violations": [], "needs_more_tools": True})
    plan = Plan.validate_output(await BRAIN.decide(BrainRequest(
        state="PLANNING", contract_name="plan", schema={}, text=text, user_id="alice",
        outputs={"intent": intent, "result_report": report}, tools=CATALOG.describe(),
        now=BASE)), {"tool_catalog": CATALOG})
    assert [(c.tool_name, c.arguments) for c in plan.tool_calls] == [  # type: ignore[attr-defined]
        ("send_email", {"to": "li.na@example.com",
                        "subject": "Sales report 2026-07-01 – 2026-09-30",
                        "body": "Sales report 2026-07-01 – 2026-09-30, attached. / "
                                "销售数据见附件。",
                        "attachment": "/data/reports/sales_2026-07-01_2026-09-30.md"})]
