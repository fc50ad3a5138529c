"""The demo retail domain (hermes_fsm/data/retail.yaml) through the real executor: stores
and their registry confidence, prices on a date, the caller's orders, durable reminders,
reports, the outbox, and each user's calendar over the demo MCP server."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.config import HermesConfig
from hermes_fsm.config.toolbox import Toolbox
from hermes_fsm.contracts.tools import default_tool_contract_dir, load_tool_contracts
from hermes_fsm.demo.retail import RetailData
from hermes_fsm.demo.tools import DEMO_TOOLS, build_demo_registry
from hermes_fsm.sources import FixedClock
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry

TODAY = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # 2026-12-01 in Shanghai


def registry(data_dir: Path | None = None) -> ToolRegistry:
    return build_demo_registry(clock=FixedClock(TODAY, step=timedelta(0)),
                               timezone="Asia/Shanghai", data_dir=data_dir)


async def call(reg: ToolRegistry, tool: str, args: dict[str, Any], caller: str = "alice"
               ) -> dict[str, Any]:
    [result] = await ToolExecutor(reg).execute([("c1", tool, args)], caller=caller)
    return result


def test_the_dataset_ships_in_the_package_and_keeps_its_values() -> None:
    retail = RetailData.default()
    assert retail.product("苹果15 pro")["sku"] == "IP15P-256"  # type: ignore[index]
    assert retail.product("iPhone 15")["sku"] == "IP15-128"  # type: ignore[index]
    assert retail.store("深圳市南山区")["id"] == "sz_ns_001"  # type: ignore[index]
    assert retail.doc["warehouse_stock"]["A1001"]["east"] == 342
    assert retail.doc["order_id_pattern"] == r"^ORD-\d{8}$"


def test_every_demo_tool_has_a_pinned_contract_and_email_needs_approval() -> None:
    pinned = load_tool_contracts(default_tool_contract_dir())
    assert set(DEMO_TOOLS) <= set(pinned)
    assert pinned["send_email"].approval is True
    assert not any(c.approval for n, c in pinned.items() if n != "send_email")
    assert pinned["order_status"].input_schema["properties"]["order_id"]["pattern"] == \
        r"^ORD-\d{8}$"
    assert pinned["create_reminder"].input_schema["properties"]["due"]["format"] == "date-time"


async def test_store_stock_with_a_restock_date() -> None:
    out = (await call(registry(), "store_stock", {"sku": "IP15-128", "store": "sz_ns_001"}))
    assert out["output"]["units"] == 0 and out["output"]["restock_date"] == "2026-12-04"


async def test_a_store_below_the_confidence_floor_is_refused_with_what_to_do() -> None:
    out = await call(registry(), "store_stock", {"sku": "IP15-128", "store": "sh_xh_002"})
    assert out["error_code"] == "PRECONDITION_FAILED" and out["retryable"] is False
    assert "confidence 0.45 only; please confirm the store's full name" in out["message"]


async def test_an_unknown_store_id_is_refused_by_its_format_before_the_call() -> None:
    out = await call(registry(), "store_stock", {"sku": "IP15-128", "store": "杭州西湖区"})
    assert out["error_code"] == "VALIDATION_FAILED"


async def test_the_price_now_and_on_a_date() -> None:
    reg = registry()
    now = (await call(reg, "price_lookup", {"sku": "IP15P-256"}))["output"]
    assert now == {"sku": "IP15P-256", "name": "iPhone 15 Pro 256GB",
                   "name_zh": "iPhone 15 Pro 256GB", "currency": "CNY", "date": "2026-12-01",
                   "price": 8499}
    then = (await call(reg, "price_lookup", {"sku": "IP15P-256", "on": "2026-11-01"}))["output"]
    assert (then["then_price"], then["change"], then["trend"]) == (8299, 200, "up")


async def test_an_order_is_its_users_only() -> None:
    reg = registry()
    mine = await call(reg, "order_status", {"order_id": "ORD-87654321"}, caller="alice")
    assert mine["output"]["tracking"] == "SF1234567890"
    assert mine["output"]["shipped_date"] == "2026-11-29"
    theirs = await call(reg, "order_status", {"order_id": "ORD-87654321"}, caller="bob")
    assert theirs["error_code"] == "NOT_FOUND" and "SF" not in theirs["message"]
    bad = await call(reg, "order_status", {"order_id": "ORD-1234"}, caller="alice")
    assert bad["error_code"] == "VALIDATION_FAILED" and "ORD-" in bad["message"]


async def test_the_order_tool_takes_no_user_argument() -> None:
    out = await call(registry(), "order_status",
                     {"order_id": "ORD-55550001", "user": "bob"}, caller="alice")
    assert out["error_code"] == "VALIDATION_FAILED"  # a model cannot name the user


async def test_reminders_are_kept_per_user_in_the_data_dir(tmp_path: Path) -> None:
    due = "2026-12-02T10:00:00+08:00"
    await call(registry(tmp_path), "create_reminder", {"text": "带项目计划书", "due": due})
    await call(registry(tmp_path), "create_reminder", {"text": "call Bob", "due": due},
               caller="bob")
    fresh = registry(tmp_path)  # another process, as far as the tools can tell
    alices = (await call(fresh, "list_reminders", {}))["output"]
    assert alices == {"reminders": [{"id": "r1", "text": "带项目计划书", "due": due}],
                      "total": 1}
    assert (await call(fresh, "list_reminders", {}, caller="bob"))["output"]["total"] == 1
    assert json.loads((tmp_path / "reminders" / "alice.json").read_text())[0]["due"] == due


async def test_a_sales_report_is_written_and_quoted(tmp_path: Path) -> None:
    out = (await call(registry(tmp_path), "sales_report",
                      {"start": "2026-07-01", "end": "2026-09-30", "format": "csv"}))["output"]
    assert out["months"] == ["2026-07", "2026-08", "2026-09"] and out["total"] == 1885
    rows = list(csv.reader(Path(out["path"]).read_text().splitlines()))
    assert rows[0] == ["month", "A1001", "A1002", "IP15-128", "IP15P-256"]
    assert rows[-1] == ["total", "1200", "370", "215", "100"]
    assert Path(out["path"]).parent == tmp_path / "reports"
    none = await call(registry(tmp_path), "sales_report",
                      {"start": "2025-01-01", "end": "2025-03-31"})
    assert none["error_code"] == "NOT_FOUND"


async def test_the_outbox_keeps_the_mail_and_an_address_is_checked(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    sent = await call(reg, "send_email", {"to": "li.na@example.com", "subject": "Q3",
                                          "body": "见附件"})
    assert sent["output"]["status"] == "queued"
    kept = json.loads((tmp_path / "outbox" / "alice.json").read_text())
    assert kept[0]["to"] == "li.na@example.com"
    bad = await call(reg, "send_email", {"to": "李总监", "subject": "Q3", "body": ""})
    assert bad["error_code"] == "VALIDATION_FAILED"


async def test_contacts_by_chinese_or_english_name() -> None:
    reg = registry()
    assert (await call(reg, "contact_lookup", {"name": "Director Li"}))["output"]["email"] == \
        "li.na@example.com"
    assert (await call(reg, "contact_lookup", {"name": "赵六"}))["error_code"] == "NOT_FOUND"


@pytest.mark.parametrize(("user", "titles"), [
    ("alice", ["Internal review", "Supplier call"]), ("bob", ["1:1"]), ("carol", [])])
async def test_each_user_sees_their_own_calendar_over_mcp(tmp_path: Path, user: str,
                                                         titles: list[str]) -> None:
    config = HermesConfig(timezone="Asia/Shanghai", memory={"data_dir": str(tmp_path)})
    demo = config.mcp_servers["demo"]
    config.mcp_servers["demo"] = demo.model_copy(
        update={"env": {"HERMES_DEMO_TODAY": "2026-12-01"}})
    box = Toolbox.from_config(config)
    await box.mcp.start()
    try:
        [day] = await box.executor.execute(
            [("c1", "demo.calendar_events", {"date": "2026-12-02"})], caller=user)
        [shared] = await box.executor.execute(
            [("c2", "demo.calendar_events", {"date": "2026-12-03"})], caller=user)
        [bad] = await box.executor.execute(
            [("c3", "demo.calendar_events", {"date": "tomorrow"})], caller=user)
    finally:
        await box.mcp.aclose()
    assert [e["title_en"] for e in day["output"]["events"]] == titles
    assert [e["title_en"] for e in shared["output"]["events"]] == \
        ["Restock A1001 (Wireless mouse)"]  # the shared event: everyone sees it
    assert bad["error_code"] == "VALIDATION_FAILED"


async def test_the_sdk_demo_server_serves_the_callers_day_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp
    from mcp import types

    from hermes_fsm.demo.mcp_server import build_server

    monkeypatch.setenv("HERMES_DEMO_TODAY", "2026-12-01")
    async with mcp.Client(build_server()) as client:
        days = {}
        for user in ("alice", "bob"):
            request = types.CallToolRequest(params=types.CallToolRequestParams(
                name="calendar_events", arguments={"date": "2026-12-02"},
                _meta={"hermes-fsm/user": user}))
            result = await client.session.send_request(request, types.CallToolResult)
            days[user] = [e["title_en"] for e in result.structured_content["events"]]
    assert days == {"alice": ["Internal review", "Supplier call"], "bob": ["1:1"]}
