"""``hermes-fsm tools list|show|call``: every tool (local and over the demo MCP server, a
real subprocess), one contract, one call through the executor pipeline as a given user."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from hermes_fsm.cli.main import main
from hermes_fsm.cli.tools import tool_record
from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.tools.registry import ToolRegistry


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERMES_CONFIG", raising=False)
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def test_list_shows_local_and_mcp_tools_with_their_contracts(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "tools", "list", "--json")
    assert code == 0
    tools = {t["name"]: t for t in json.loads(out)["tools"]}
    assert tools["demo.calendar_events"]["source"] == "mcp:demo"
    assert tools["demo.calendar_events"]["health"] == "ok"
    stock = tools["store_stock"]
    assert stock["source"] == "local" and stock["side_effects"] == "read"
    assert stock["preconditions"] == ["store_confirmed", "product_active"]
    assert tools["send_email"]["approval"] is True


def test_show_prints_one_contract_with_its_conditions(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "tools", "show", "store_stock")
    assert code == 0
    shown = json.loads(out)
    assert shown["preconditions"][0]["expr"].endswith("confidence >= 0.8")
    assert shown["registries"] == ["catalog", "stores"]


def test_call_runs_a_local_tool_as_the_user(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "tools", "call", "order_status", "--args",
                       '{"order_id": "ORD-87654321"}', "--user", "alice")
    assert code == 0 and json.loads(out)["status"] == "shipped"
    code, _, err = cli(capsys, "tools", "call", "order_status", "--args",
                       '{"order_id": "ORD-87654321"}', "--user", "bob")
    assert code == 1 and "NOT_FOUND" in err  # alice's order is not bob's


def test_call_runs_an_mcp_tool(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "tools", "call", "demo.calendar_events", "--args",
                         '{"date": "2026-12-02"}', "--user", "alice", "--json")
    assert code == 0, err
    envelope = json.loads(out)
    assert envelope["success"] is True and envelope["tool_name"] == "demo.calendar_events"


def test_call_refuses_bad_arguments_with_the_schema_error_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "tools", "call", "store_stock", "--args",
                       '{"sku": "IP15-128", "store": "SH"}')
    assert code == 1
    assert err.count("\n") == 1
    assert "VALIDATION_FAILED: arguments do not match the input schema" in err
    assert "(at store)" in err


def test_call_refused_by_a_precondition_says_what_to_confirm(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "tools", "call", "store_stock", "--args",
                       '{"sku": "IP15-128", "store": "sh_xh_002"}')
    assert code == 1 and "PRECONDITION_FAILED" in err and "徐汇滨江店" in err


@pytest.mark.parametrize(("argv", "said"), [
    (["tools", "call", "store_stock", "--args", "{nope"], "--args is not JSON"),
    (["tools", "call", "store_stock", "--args", "[1]"], "must be a JSON object"),
    (["tools", "call", "no_such_tool"], "no tool 'no_such_tool'"),
    (["tools", "show"], "needs a tool name"),
    (["tools", "list", "store_stock"], "takes no name"),
])
def test_usage_mistakes_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                     said: str) -> None:
    code, _, err = cli(capsys, *argv)
    assert code == 1 and said in err and err.count("\n") == 1


def test_a_tools_record_names_its_compensation() -> None:
    registry = ToolRegistry()
    contract = ToolContract.model_validate({
        "name": "create_return", "version": "1.0.0", "description": "Create a return.",
        "side_effects": "write", "input_schema": {"type": "object"},
        "compensation": {"status": "query_return_status", "compensate": "cancel_return"}})
    registry.tool(contract=contract)(lambda: {})
    record = tool_record(registry, registry.get("create_return"))
    assert record["compensation"] == {"status": "query_return_status",
                                      "compensate": "cancel_return"}
    assert record["idempotent"] is False and record["health"] == "ok"
