"""`contracts export|check`: committed schemas match models; unbumped changes are caught."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from hermes_fsm.contracts import ContractRegistry
from hermes_fsm.contracts.base import Contract
from hermes_fsm.contracts.check import check_contracts, default_contract_dir, export_contracts
from hermes_fsm.contracts.states import STATE_CONTRACTS, Intent
from hermes_fsm.errors import ContractCheckFailed, ContractError

REPO_SCHEMAS = Path(__file__).resolve().parents[1] / "contracts" / "states"


def intent_variant(version: str, **fields: Any) -> type[Contract]:
    """A stand-in for the Intent contract with other fields and version."""
    namespace: dict[str, Any] = {"contract_name": "intent", "contract_version": version,
                                 "__annotations__": {}}
    for name, (annotation, default) in fields.items():
        namespace["__annotations__"][name] = annotation
        namespace[name] = default
    return type("Intent", (Contract,), namespace)


def registry_with(intent: type[Contract]) -> ContractRegistry:
    return ContractRegistry([c for c in STATE_CONTRACTS if c is not Intent] + [intent])


@pytest.fixture
def schemas(tmp_path: Path) -> Path:
    target = tmp_path / "states"
    shutil.copytree(REPO_SCHEMAS, target)
    return target


BASE_FIELDS: dict[str, Any] = {  # the fields of today's Intent, as they are declared
    name: (info.annotation, info) for name, info in Intent.model_fields.items()}


def test_the_committed_schemas_match_the_models():
    assert default_contract_dir() == REPO_SCHEMAS
    assert check_contracts(ContractRegistry(STATE_CONTRACTS), REPO_SCHEMAS) == 15


def test_a_breaking_change_without_a_major_bump_fails_the_check(schemas):
    narrowed = intent_variant("2.0.0", **{**BASE_FIELDS,
                                          "confidence": (float, Field(ge=0.5, le=1.0))})
    with pytest.raises(ContractCheckFailed) as caught:
        check_contracts(registry_with(narrowed), schemas)
    (problem,) = caught.value.problems
    assert problem.startswith("intent")
    assert "major" in problem and "3.0.0" in problem


def test_a_removed_field_with_only_a_minor_bump_fails_the_check(schemas):
    fields = {k: v for k, v in BASE_FIELDS.items() if k != "needs_tools"}
    with pytest.raises(ContractCheckFailed, match="major"):
        check_contracts(registry_with(intent_variant("2.1.0", **fields)), schemas)


def test_a_field_made_required_without_a_major_bump_fails_the_check(schemas):
    fields = {**BASE_FIELDS, "needs_tools": (bool, Field(description="now required"))}
    with pytest.raises(ContractCheckFailed, match="major"):
        check_contracts(registry_with(intent_variant("2.0.1", **fields)), schemas)


def test_export_refuses_an_unbumped_breaking_change_and_writes_nothing(schemas):
    before = (schemas / "intent.json").read_text()
    narrowed = intent_variant("2.0.0", **{**BASE_FIELDS, "parameters": (dict[str, str], ...)})
    with pytest.raises(ContractCheckFailed, match="nothing was written"):
        export_contracts(registry_with(narrowed), schemas)
    assert (schemas / "intent.json").read_text() == before


def test_a_bumped_breaking_change_exports_and_then_checks_clean(schemas):
    narrowed = intent_variant("3.0.0", **{**BASE_FIELDS,
                                          "confidence": (float, Field(ge=0.5, le=1.0))})
    registry = registry_with(narrowed)
    with pytest.raises(ContractCheckFailed, match=r"run 'hermes-fsm contracts export'"):
        check_contracts(registry, schemas)
    assert export_contracts(registry, schemas) == [schemas / "intent.json"]
    assert check_contracts(registry, schemas) == 15
    assert '"version": "3.0.0"' in (schemas / "intent.json").read_text()


def test_a_widening_change_needs_a_minor_bump(schemas):
    widened = {**BASE_FIELDS, "note": (str | None, None)}
    with pytest.raises(ContractCheckFailed, match="minor"):
        check_contracts(registry_with(intent_variant("2.0.0", **widened)), schemas)
    export_contracts(registry_with(intent_variant("2.1.0", **widened)), schemas)
    assert check_contracts(registry_with(intent_variant("2.1.0", **widened)), schemas) == 15


def test_export_with_force_writes_an_unbumped_breaking_change(schemas):
    narrowed = intent_variant("2.0.0", **{k: v for k, v in BASE_FIELDS.items()
                                          if k != "needs_tools"})
    assert export_contracts(registry_with(narrowed), schemas, force=True) == [
        schemas / "intent.json"]


def test_a_missing_schema_fails_the_check(schemas):
    (schemas / "plan.json").unlink()
    with pytest.raises(ContractCheckFailed, match="plan: no exported schema"):
        check_contracts(ContractRegistry(STATE_CONTRACTS), schemas)


def test_a_schema_without_a_contract_fails_the_check(schemas):
    (schemas / "ghost.json").write_text('{"name": "ghost", "version": "2.0.0", "schema": {}}')
    with pytest.raises(ContractCheckFailed, match="no contract named 'ghost'"):
        check_contracts(ContractRegistry(STATE_CONTRACTS), schemas)


@pytest.mark.parametrize("content", ["{not json", '{"name": "intent"}', "[]"])
def test_a_corrupt_schema_file_is_a_clear_error(schemas, content):
    (schemas / "intent.json").write_text(content)
    changed = intent_variant("2.0.1", **{**BASE_FIELDS, "note": (str | None, None)})
    with pytest.raises(ContractError, match=r"intent\.json"):
        check_contracts(registry_with(changed), schemas)


def test_contract_versions_must_be_semver():
    with pytest.raises(ContractError, match=r"MAJOR\.MINOR\.PATCH"):
        ContractRegistry([intent_variant("2.0", **BASE_FIELDS)])


def test_two_classes_cannot_claim_the_same_contract_version():
    with pytest.raises(ContractError, match="registered twice"):
        ContractRegistry([Intent, intent_variant("2.0.0", **BASE_FIELDS)])


def test_references_resolve_to_the_newest_matching_version():
    newer = intent_variant("2.2.0", **BASE_FIELDS)
    registry = ContractRegistry([Intent, newer])
    assert registry.get("intent@2") is newer
    assert registry.get("intent@2.0") is Intent
    assert registry.get("intent") is newer
    with pytest.raises(ContractError, match="no version matching '3'"):
        registry.get("intent@3")
    with pytest.raises(ContractError, match="unknown contract 'nope@1'"):
        registry.get("nope@1")
