"""Tool contracts: loading (with file:line errors), generation from signatures, pinning, checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.contracts.check import check_tool_contracts, export_tool_contracts
from hermes_fsm.contracts.tools import (
    Fallback,
    ToolContract,
    default_tool_contract_dir,
    dump_tool_contract,
    load_tool_contract,
    load_tool_contracts,
)
from hermes_fsm.demo.tools import DEMO_TOOLS, build_demo_registry
from hermes_fsm.errors import ContractCheckFailed, ContractError
from hermes_fsm.tools.registry import ToolRegistry

GOOD = """\
name: wipe
version: 2.1.0
description: Delete every reminder. Call it only when the user asks to delete all of them.
side_effects: destructive
timeout_s: 3
retry: {max_attempts: 3, backoff_s: 0.1}
permissions: [admin]
errors:
  BUSY: {retryable: true, description: the store is locked}
on_output_violation: {fallback: list_reminders}
input_schema: {type: object, properties: {confirm: {type: boolean}}, required: [confirm]}
output_schema: {type: object, properties: {deleted: {type: integer}}, required: [deleted]}
"""


def write(tmp_path: Path, text: str, name: str = "wipe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_complete_contract_loads_with_every_field(tmp_path: Path) -> None:
    contract = load_tool_contract(write(tmp_path, GOOD))
    assert (contract.name, contract.version, contract.side_effects) == ("wipe", "2.1.0",
                                                                       "destructive")
    assert contract.retry.max_attempts == 3
    assert contract.permissions == ("admin",)
    assert contract.error_is_retryable("BUSY") and not contract.error_is_retryable("NOPE")
    assert contract.on_output_violation == Fallback(fallback="list_reminders")
    assert contract.fallback == "list_reminders"


@pytest.mark.parametrize(("old", "new", "line", "field"), [
    ("version: 2.1.0", "version: '2.1'", 2, "version"),
    ("side_effects: destructive", "side_effects: nuke", 4, "side_effects"),
    ("timeout_s: 3", "timeout_s: -1", 5, "timeout_s"),
    ("retry: {max_attempts: 3, backoff_s: 0.1}", "retry: {max_attempts: 0}", 6,
     "retry.max_attempts"),
    ("  BUSY: {retryable: true, description: the store is locked}", "  BUSY: {retry: true}", 9,
     "errors.BUSY"),
    ("input_schema: {type: object,", "input_schema: {type: objekt,", 11, "input_schema"),
])
def test_a_malformed_contract_is_refused_with_file_line_and_field(
        tmp_path: Path, old: str, new: str, line: int, field: str) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ContractError) as caught:
        load_tool_contract(path)
    assert f"{path}:{line}: {field}" in str(caught.value)


def test_an_unknown_field_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "colour: blue\n")
    with pytest.raises(ContractError, match=r"wipe.yaml:13: colour: unknown field"):
        load_tool_contract(path)


def test_a_missing_required_field_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("description: Delete", "summary: Delete"))
    with pytest.raises(ContractError, match=r"description: this required field is missing"):
        load_tool_contract(path)


def test_broken_yaml_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("permissions: [admin]", "permissions: [admin"))
    with pytest.raises(ContractError, match=r"wipe.yaml:\d+: "):
        load_tool_contract(path)


def test_a_contract_file_must_be_named_after_its_tool(tmp_path: Path) -> None:
    write(tmp_path, GOOD, name="erase.yaml")
    with pytest.raises(ContractError, match=r"must be named wipe\.yaml"):
        load_tool_contracts(tmp_path)


def test_a_contract_is_generated_from_a_typed_signature() -> None:
    registry = ToolRegistry()

    @registry.tool(timeout_s=2, side_effects="write", permissions=["clerk"],
                   errors={"FULL": {"retryable": True}})
    async def book(room: str, nights: int = 1) -> dict[str, int]:
        """Book a room for some nights."""
        return {"nights": nights}

    contract = registry.get("book").contract
    assert contract is not None
    assert contract.description == "Book a room for some nights."
    assert contract.input_schema["required"] == ["room"]
    assert contract.input_schema["properties"]["nights"]["type"] == "integer"
    assert contract.output_schema == {"additionalProperties": {"type": "integer"},
                                      "type": "object"}
    assert (contract.timeout_s, contract.side_effects, contract.permissions) == (2.0, "write",
                                                                                 ("clerk",))
    assert contract.error_is_retryable("FULL")


def test_a_callable_binds_to_a_hand_written_contract(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    registry = ToolRegistry()

    @registry.tool(contract=path)
    def wipe(confirm: bool) -> dict[str, int]:
        return {"deleted": 3}

    tool = registry.get("wipe")
    assert tool.side_effects == "destructive"
    assert tool.description.startswith("Delete every reminder")
    assert registry.check_call("wipe", {"confirm": "yes"}) is not None


def test_exported_contracts_round_trip_and_pass_the_check(tmp_path: Path) -> None:
    registry = build_demo_registry()
    written = export_tool_contracts(registry, tmp_path)
    assert sorted(p.name for p in written) == [f"{n}.yaml" for n in DEMO_TOOLS]
    assert check_tool_contracts(registry, tmp_path) == len(DEMO_TOOLS)
    pinned = load_tool_contract(tmp_path / "inventory_lookup.yaml")
    assert dump_tool_contract(pinned) == (tmp_path / "inventory_lookup.yaml").read_text()


def test_the_repositorys_pinned_contracts_match_the_demo_tools() -> None:
    assert check_tool_contracts(build_demo_registry(), default_tool_contract_dir()) >= 4


def make_lookup(required: list[str], version: str) -> ToolRegistry:
    contract = ToolContract(name="lookup", version=version, description="Look a thing up.",
                            input_schema={"type": "object", "required": required,
                                          "properties": {"sku": {"type": "string"},
                                                         "site": {"type": "string"}}})
    registry = ToolRegistry()

    @registry.tool(contract=contract)
    def lookup(sku: str, site: str = "") -> dict[str, Any]:  # pragma: no cover - not called
        return {}

    return registry


def test_a_breaking_schema_change_without_a_major_bump_fails_the_check(tmp_path: Path) -> None:
    export_tool_contracts(make_lookup(["sku"], "1.0.0"), tmp_path)
    with pytest.raises(ContractCheckFailed, match=r"tool lookup: .*major"):
        check_tool_contracts(make_lookup(["sku", "site"], "1.1.0"), tmp_path)


def test_export_refuses_a_breaking_change_without_a_major_bump(tmp_path: Path) -> None:
    export_tool_contracts(make_lookup(["sku"], "1.0.0"), tmp_path)
    with pytest.raises(ContractCheckFailed, match="nothing was written"):
        export_tool_contracts(make_lookup(["sku", "site"], "1.0.1"), tmp_path)
    assert export_tool_contracts(make_lookup(["sku", "site"], "2.0.0"), tmp_path)


def test_a_pin_naming_no_local_tool_and_no_mcp_tool_fails_the_check(tmp_path: Path) -> None:
    registry = build_demo_registry()
    export_tool_contracts(registry, tmp_path)
    write(tmp_path, GOOD)
    with pytest.raises(ContractCheckFailed, match="no local tool named 'wipe'"):
        check_tool_contracts(registry, tmp_path)


APPROVAL = """\
name: send_email
version: 1.0.0
description: Send an e-mail on the user's behalf.
side_effects: write
approval: true
input_schema:
  type: object
  properties:
    to: {type: string, pattern: '^[^@]+@[^@]+$', examples: [li@example.com]}
  required: [to]
slots:
  to: {entity: Contact, ask: '发给谁?', ask_en: 'Who should it go to?'}
"""


def test_approval_and_slots_load_and_round_trip(tmp_path: Path) -> None:
    contract = load_tool_contract(write(tmp_path, APPROVAL, "send_email.yaml"))
    assert contract.approval is True
    assert contract.slots["to"].entity == "Contact"
    assert contract.slots["to"].ask_en == "Who should it go to?"
    again = load_tool_contract(write(tmp_path, dump_tool_contract(contract), "send_email.yaml"))
    assert again == contract


def test_a_contract_without_approval_dumps_as_before() -> None:
    contract = ToolContract(name="t", version="1.0.0", description="d",
                            input_schema={"type": "object"})
    assert contract.approval is False and contract.slots == {}
    assert "approval" not in dump_tool_contract(contract)
    assert "slots" not in dump_tool_contract(contract)


def test_a_slot_that_is_no_input_is_refused_with_its_line(tmp_path: Path) -> None:
    text = APPROVAL.replace("  to: {entity", "  cc: {entity")
    with pytest.raises(ContractError, match=r"send_email.yaml:\d+: .*'cc' is not an input"):
        load_tool_contract(write(tmp_path, text, "send_email.yaml"))


def test_the_decorator_marks_a_tool_as_needing_approval() -> None:
    registry = ToolRegistry()

    @registry.tool(side_effects="write", approval=True)
    def wipe(confirm: bool) -> dict[str, int]:
        """Delete everything."""
        return {"deleted": 0}

    contract = registry.get("wipe").contract
    assert contract is not None and contract.approval is True
