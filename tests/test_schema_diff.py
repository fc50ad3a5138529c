"""Tests for hermes_fsm.contracts.schema_diff: breaking / widening / cosmetic schema changes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from hermes_fsm.contracts.schema_diff import (
    SchemaChange,
    bump_problem,
    diff_schemas,
    parse_version,
    required_bump,
)

STRICT = ConfigDict(extra="forbid", strict=True)


def kinds(changes: list[SchemaChange]) -> set[tuple[str, str, bool]]:
    """(path, kind, breaking) for every change that is not cosmetic."""
    return {(c.path, c.kind, c.breaking) for c in changes if c.bump != "patch"}


def obj(props: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), **extra}


# --- pydantic models -------------------------------------------------------------------


class ToolCall(BaseModel):
    model_config = STRICT
    tool_name: str = Field(min_length=1)
    args: dict[str, str] = {}


class Intent(BaseModel):
    model_config = STRICT
    confidence: float = Field(ge=0, le=1)
    intent_type: Literal["answer", "search", "clarify"]
    note: str | None = None
    tool_calls: list[ToolCall] = []


def intent_schema() -> dict[str, Any]:
    return Intent.model_json_schema()


def test_identical_pydantic_schemas_have_no_changes() -> None:
    assert diff_schemas(intent_schema(), intent_schema()) == []
    assert required_bump(diff_schemas(intent_schema(), intent_schema())) == "none"


def test_maximum_lowered_is_breaking_with_pointer_path() -> None:
    class New(Intent):
        confidence: float = Field(ge=0, le=0.9)

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert ("/properties/confidence/maximum", "bound_tightened", True) in kinds(changes)
    change = next(c for c in changes if c.kind == "bound_tightened")
    assert change.bump == "major"
    assert "1" in change.detail and "0.9" in change.detail


def test_minimum_raised_is_breaking() -> None:
    class New(Intent):
        confidence: float = Field(ge=0.5, le=1)

    assert kinds(diff_schemas(intent_schema(), New.model_json_schema())) == {
        ("/properties/confidence/minimum", "bound_tightened", True)}


def test_maximum_raised_is_widening() -> None:
    class New(Intent):
        confidence: float = Field(ge=0, le=2)

    assert kinds(diff_schemas(intent_schema(), New.model_json_schema())) == {
        ("/properties/confidence/maximum", "bound_loosened", False)}


def test_bound_removed_is_widening() -> None:
    class New(Intent):
        confidence: float = Field(le=1)

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/confidence/minimum", "bound_removed", False)}
    assert required_bump(changes) == "minor"


def test_bound_added_is_breaking() -> None:
    old = {"type": "number"}
    assert kinds(diff_schemas(old, {"type": "number", "maximum": 5})) == {
        ("/maximum", "bound_added", True)}


def test_inclusive_minimum_made_exclusive_is_breaking() -> None:
    class New(Intent):
        confidence: float = Field(gt=0, le=1)

    assert kinds(diff_schemas(intent_schema(), New.model_json_schema())) == {
        ("/properties/confidence/exclusiveMinimum", "bound_tightened", True)}


def test_exclusive_minimum_made_inclusive_is_widening() -> None:
    changes = diff_schemas({"exclusiveMinimum": 0}, {"minimum": 0})
    assert kinds(changes) == {("/minimum", "bound_loosened", False)}


def test_exclusive_maximum_lowered_is_breaking() -> None:
    changes = diff_schemas({"exclusiveMaximum": 10}, {"exclusiveMaximum": 9})
    assert kinds(changes) == {("/exclusiveMaximum", "bound_tightened", True)}


def test_maximum_replaced_by_lower_exclusive_maximum_is_breaking() -> None:
    changes = diff_schemas({"maximum": 10}, {"exclusiveMaximum": 10})
    assert kinds(changes) == {("/exclusiveMaximum", "bound_tightened", True)}


def test_draft4_boolean_exclusive_minimum_is_understood() -> None:
    changes = diff_schemas({"minimum": 0}, {"minimum": 0, "exclusiveMinimum": True})
    assert kinds(changes) == {("/minimum", "bound_tightened", True)}


def test_min_length_raised_is_breaking() -> None:
    class NewCall(ToolCall):
        tool_name: str = Field(min_length=3)

    changes = diff_schemas(ToolCall.model_json_schema(), NewCall.model_json_schema())
    assert kinds(changes) == {("/properties/tool_name/minLength", "bound_tightened", True)}


def test_max_length_added_is_breaking() -> None:
    changes = diff_schemas({"type": "string"}, {"type": "string", "maxLength": 8})
    assert kinds(changes) == {("/maxLength", "bound_added", True)}


def test_max_length_raised_is_widening() -> None:
    changes = diff_schemas({"maxLength": 8}, {"maxLength": 80})
    assert kinds(changes) == {("/maxLength", "bound_loosened", False)}


def test_max_items_lowered_is_breaking() -> None:
    class Old(BaseModel):
        model_config = STRICT
        tags: list[str] = Field(max_length=5)

    class New(BaseModel):
        model_config = STRICT
        tags: list[str] = Field(max_length=3)

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/tags/maxItems", "bound_tightened", True)}


def test_min_items_added_is_breaking() -> None:
    changes = diff_schemas({"type": "array"}, {"type": "array", "minItems": 1})
    assert kinds(changes) == {("/minItems", "bound_added", True)}


def test_max_properties_lowered_is_breaking() -> None:
    changes = diff_schemas({"maxProperties": 4}, {"maxProperties": 2})
    assert kinds(changes) == {("/maxProperties", "bound_tightened", True)}


def test_property_removed_under_extra_forbid_is_breaking() -> None:
    class New(BaseModel):
        model_config = STRICT
        confidence: float = Field(ge=0, le=1)
        intent_type: Literal["answer", "search", "clarify"]
        tool_calls: list[ToolCall] = []

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert ("/properties/note", "property_removed", True) in kinds(changes)
    assert required_bump(changes) == "major"


def test_property_removed_from_open_object_is_widening() -> None:
    old = obj({"a": {"type": "string"}, "b": {"type": "integer"}})
    new = obj({"a": {"type": "string"}})
    assert kinds(diff_schemas(old, new)) == {("/properties/b", "property_removed", False)}


def test_property_removed_when_additional_schema_rejects_old_values_is_breaking() -> None:
    old = obj({"b": {"type": "integer"}}, additionalProperties={"type": "string"})
    new = obj({}, additionalProperties={"type": "string"})
    assert kinds(diff_schemas(old, new)) == {("/properties/b", "property_removed", True)}


def test_property_removed_when_additional_schema_accepts_old_values_is_widening() -> None:
    old = obj({"b": {"type": "integer"}}, additionalProperties={"type": "number"})
    new = obj({}, additionalProperties={"type": "number"})
    assert kinds(diff_schemas(old, new)) == {("/properties/b", "property_removed", False)}


def test_optional_property_added_is_widening() -> None:
    class New(Intent):
        language: str = "en"

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/language", "property_added", False)}
    assert required_bump(changes) == "minor"


def test_required_property_added_is_breaking() -> None:
    class New(Intent):
        language: str

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/language", "required_property_added", True)}


def test_property_added_narrower_than_old_additional_properties_is_breaking() -> None:
    old = obj({}, additionalProperties={"type": "string"})
    new = obj({"x": {"type": "integer"}}, additionalProperties={"type": "string"})
    assert kinds(diff_schemas(old, new)) == {("/properties/x", "property_added", True)}


def test_optional_made_required_is_breaking() -> None:
    class New(Intent):
        note: str | None

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert ("/properties/note", "required_added", True) in kinds(changes)


def test_required_made_optional_is_widening() -> None:
    class New(Intent):
        confidence: float = Field(default=0.5, ge=0, le=1)

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/confidence", "required_removed", False)}


def test_required_without_properties_added_is_breaking() -> None:
    changes = diff_schemas({"type": "object"}, {"type": "object", "required": ["id"]})
    assert kinds(changes) == {("/properties/id", "required_added", True)}


def test_optional_made_non_nullable_removes_anyof_branch() -> None:
    class New(Intent):
        note: str = ""

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/note/anyOf/1", "branch_removed", True)}


def test_field_made_nullable_adds_anyof_branch() -> None:
    old = obj({"note": {"type": "string"}})
    new = obj({"note": {"anyOf": [{"type": "string"}, {"type": "null"}]}})
    assert kinds(diff_schemas(old, new)) == {("/properties/note/anyOf/1", "branch_added", False)}


def test_pydantic_field_made_optional_is_widening_without_title_noise() -> None:
    class Old(BaseModel):
        model_config = STRICT
        note: str

    class New(BaseModel):
        model_config = STRICT
        note: str | None = None

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert {(c.path, c.kind, c.bump) for c in changes} == {
        ("/title", "title_changed", "patch"),
        ("/properties/note/default", "default_changed", "patch"),
        ("/properties/note/anyOf/1", "branch_added", "minor"),
        ("/properties/note", "required_removed", "minor")}


def test_number_made_optional_integer_reports_narrowing_inside_branch() -> None:
    old = {"type": "number"}
    new = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert kinds(diff_schemas(old, new)) == {
        ("/anyOf/0/type", "type_narrowed", True), ("/anyOf/1", "branch_added", False)}


def test_anyof_branch_removed_is_breaking() -> None:
    old = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
    new = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert kinds(diff_schemas(old, new)) == {("/anyOf/1", "branch_removed", True)}


def test_anyof_branches_reordered_is_no_change() -> None:
    old = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    new = {"anyOf": [{"type": "null"}, {"type": "string"}]}
    assert diff_schemas(old, new) == []


def test_narrowing_inside_optional_reports_the_inner_keyword() -> None:
    class Old(BaseModel):
        model_config = STRICT
        note: str | None = Field(default=None, max_length=100)

    class New(BaseModel):
        model_config = STRICT
        note: str | None = Field(default=None, max_length=10)

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/note/anyOf/0/maxLength", "bound_tightened", True)}


def test_anyof_branch_type_changed_reports_removed_and_added_branches() -> None:
    old = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    new = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert kinds(diff_schemas(old, new)) == {
        ("/anyOf/0", "branch_removed", True), ("/anyOf/0", "branch_added", False)}


def test_empty_new_anyof_removes_every_branch() -> None:
    changes = diff_schemas({"anyOf": [{"type": "string"}]}, {"anyOf": []})
    assert kinds(changes) == {("/anyOf/0", "branch_removed", True)}


def test_discriminated_union_member_removed_is_breaking() -> None:
    class Answer(BaseModel):
        model_config = STRICT
        kind: Literal["answer"]
        text: str

    class Search(BaseModel):
        model_config = STRICT
        kind: Literal["search"]
        query: str

    class Old(BaseModel):
        model_config = STRICT
        step: Annotated[Answer | Search, Field(discriminator="kind")]

    class New(BaseModel):
        model_config = STRICT
        step: Annotated[Answer, Field(discriminator="kind")] | None = None

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert ("/properties/step/oneOf/1", "branch_removed", True) in kinds(changes)
    assert "Search" in next(c.detail for c in changes if c.kind == "branch_removed")


def test_discriminated_union_member_added_is_widening() -> None:
    class A(BaseModel):
        kind: Literal["a"]

    class B(BaseModel):
        kind: Literal["b"]

    old = {"oneOf": [{"$ref": "#/$defs/A"}], "$defs": {"A": A.model_json_schema()}}
    new = {"oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}],
           "$defs": {"A": A.model_json_schema(), "B": B.model_json_schema()}}
    assert kinds(diff_schemas(old, new)) == {("/oneOf/1", "branch_added", False)}


def test_nullable_type_list_narrowed_is_breaking() -> None:
    changes = diff_schemas({"type": ["string", "null"]}, {"type": "string"})
    assert kinds(changes) == {("/type", "type_narrowed", True)}


def test_nullable_type_list_widened_is_widening() -> None:
    changes = diff_schemas({"type": "string"}, {"type": ["string", "null"]})
    assert kinds(changes) == {("/type", "type_widened", False)}


def test_number_to_integer_is_breaking() -> None:
    class Old(BaseModel):
        model_config = STRICT
        score: float

    class New(BaseModel):
        model_config = STRICT
        score: int

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/score/type", "type_narrowed", True)}


def test_integer_to_number_is_widening() -> None:
    changes = diff_schemas({"type": "integer"}, {"type": "number"})
    assert kinds(changes) == {("/type", "type_widened", False)}


def test_unrelated_type_change_is_breaking() -> None:
    changes = diff_schemas({"type": "string"}, {"type": "integer"})
    assert kinds(changes) == {("/type", "type_changed", True)}


def test_type_added_is_breaking() -> None:
    assert kinds(diff_schemas({}, {"type": "string"})) == {("/type", "type_narrowed", True)}


def test_type_removed_is_widening() -> None:
    assert kinds(diff_schemas({"type": "string"}, {})) == {("/type", "type_widened", False)}


def test_literal_value_removed_is_breaking() -> None:
    class New(Intent):
        intent_type: Literal["answer", "search"]

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/intent_type/enum", "enum_narrowed", True)}
    assert "clarify" in next(c.detail for c in changes if c.kind == "enum_narrowed")


def test_literal_value_added_is_widening() -> None:
    class New(Intent):
        intent_type: Literal["answer", "search", "clarify", "refuse"]  # type: ignore[assignment]

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/intent_type/enum", "enum_widened", False)}


def test_literal_narrowed_to_single_value_is_breaking() -> None:
    class New(Intent):
        intent_type: Literal["answer"]

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/intent_type/const", "enum_narrowed", True)}


def test_const_changed_is_breaking() -> None:
    changes = diff_schemas({"const": "v1"}, {"const": "v2"})
    assert kinds(changes) == {("/const", "const_changed", True)}


def test_enum_reordered_is_no_change() -> None:
    assert diff_schemas({"enum": ["a", "b"]}, {"enum": ["b", "a"]}) == []


def test_enum_treats_one_and_one_point_zero_as_equal_but_not_true() -> None:
    assert diff_schemas({"enum": [1]}, {"enum": [1.0]}) == []
    assert kinds(diff_schemas({"enum": [1]}, {"enum": [True]})) == {
        ("/enum", "enum_narrowed", True)}


def test_enum_value_swapped_lists_removed_and_added_values() -> None:
    changes = diff_schemas({"enum": ["a", "b"]}, {"enum": ["a", "c"]})
    assert kinds(changes) == {("/enum", "enum_narrowed", True)}
    assert changes[0].detail == 'values removed: ["b"], added: ["c"]'


def test_enum_added_beside_const_intersects_the_values() -> None:
    changes = diff_schemas({"const": 1}, {"const": 1, "enum": ["a"]})
    assert kinds(changes) == {("/const", "const_changed", True)}
    assert changes[0].detail == "values removed: [1]"


def test_enum_added_is_breaking() -> None:
    changes = diff_schemas({"type": "string"}, {"type": "string", "enum": ["a"]})
    assert kinds(changes) == {("/enum", "enum_added", True)}


def test_enum_removed_is_widening() -> None:
    changes = diff_schemas({"type": "string", "enum": ["a"]}, {"type": "string"})
    assert kinds(changes) == {("/enum", "enum_removed", False)}


def test_pattern_added_is_breaking() -> None:
    class NewCall(ToolCall):
        tool_name: str = Field(min_length=1, pattern=r"^[a-z_]+$")

    changes = diff_schemas(ToolCall.model_json_schema(), NewCall.model_json_schema())
    assert kinds(changes) == {("/properties/tool_name/pattern", "pattern_added", True)}


def test_pattern_changed_is_breaking_even_if_looser() -> None:
    changes = diff_schemas({"pattern": "^[a-z]+$"}, {"pattern": "^[a-z0-9]+$"})
    assert kinds(changes) == {("/pattern", "pattern_changed", True)}


def test_pattern_removed_is_widening() -> None:
    assert kinds(diff_schemas({"pattern": "^a"}, {})) == {("/pattern", "pattern_removed", False)}


def test_format_added_is_breaking() -> None:
    changes = diff_schemas({"type": "string"}, {"type": "string", "format": "uri"})
    assert kinds(changes) == {("/format", "format_added", True)}


def test_format_changed_is_breaking() -> None:
    changes = diff_schemas({"format": "uri"}, {"format": "email"})
    assert kinds(changes) == {("/format", "format_changed", True)}


def test_format_removed_is_widening() -> None:
    assert kinds(diff_schemas({"format": "uri"}, {})) == {("/format", "format_removed", False)}


def test_multiple_of_added_is_breaking() -> None:
    changes = diff_schemas({}, {"multipleOf": 2})
    assert kinds(changes) == {("/multipleOf", "multiple_of_added", True)}


def test_multiple_of_changed_to_a_divisor_is_widening() -> None:
    changes = diff_schemas({"multipleOf": 0.5}, {"multipleOf": 0.25})
    assert kinds(changes) == {("/multipleOf", "multiple_of_loosened", False)}


def test_multiple_of_changed_to_a_non_divisor_is_breaking() -> None:
    changes = diff_schemas({"multipleOf": 2}, {"multipleOf": 3})
    assert kinds(changes) == {("/multipleOf", "multiple_of_changed", True)}


def test_multiple_of_removed_is_widening() -> None:
    changes = diff_schemas({"multipleOf": 2}, {})
    assert kinds(changes) == {("/multipleOf", "multiple_of_removed", False)}


def test_unique_items_added_is_breaking() -> None:
    class Old(BaseModel):
        tags: list[str]

    class New(BaseModel):
        tags: set[str]

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/tags/uniqueItems", "unique_items_added", True)}


def test_unique_items_removed_is_widening() -> None:
    changes = diff_schemas({"uniqueItems": True}, {"uniqueItems": False})
    assert kinds(changes) == {("/uniqueItems", "unique_items_removed", False)}


def test_additional_properties_closed_is_breaking() -> None:
    class Old(BaseModel):
        model_config = ConfigDict(extra="ignore")
        a: int

    class New(BaseModel):
        model_config = ConfigDict(extra="forbid")
        a: int

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {("/additionalProperties", "additional_properties_forbidden", True)}


def test_additional_properties_opened_is_widening() -> None:
    old = obj({"a": {"type": "integer"}}, additionalProperties=False)
    new = obj({"a": {"type": "integer"}}, additionalProperties=True)
    assert kinds(diff_schemas(old, new)) == {
        ("/additionalProperties", "additional_properties_allowed", False)}


def test_additional_properties_schema_narrowed_is_breaking() -> None:
    class Old(BaseModel):
        model_config = STRICT
        weights: dict[str, float]

    class New(BaseModel):
        model_config = STRICT
        weights: dict[str, int]

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {
        ("/properties/weights/additionalProperties/type", "type_narrowed", True)}


def test_additional_properties_schema_added_to_open_object_is_breaking() -> None:
    changes = diff_schemas({"type": "object"},
                           {"type": "object", "additionalProperties": {"type": "string"}})
    assert kinds(changes) == {("/additionalProperties/type", "type_narrowed", True)}


def test_items_schema_narrowed_is_breaking() -> None:
    changes = diff_schemas({"type": "array", "items": {"type": ["string", "integer"]}},
                           {"type": "array", "items": {"type": "string"}})
    assert kinds(changes) == {("/items/type", "type_narrowed", True)}


def test_items_forbidden_is_breaking() -> None:
    changes = diff_schemas({"type": "array", "items": {}}, {"type": "array", "items": False})
    assert kinds(changes) == {("/items", "schema_forbidden", True)}


def test_items_allowed_again_is_widening() -> None:
    changes = diff_schemas({"type": "array", "items": False}, {"type": "array"})
    assert kinds(changes) == {("/items", "schema_allowed", False)}


def test_tuple_position_narrowed_is_breaking() -> None:
    class Old(BaseModel):
        pair: tuple[int, str]

    class New(BaseModel):
        pair: tuple[int, int]

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/pair/prefixItems/1/type", "type_changed", True)}


def test_draft4_tuple_items_change_is_breaking() -> None:
    changes = diff_schemas({"items": [{"type": "string"}]}, {"items": [{"type": "integer"}]})
    assert kinds(changes) == {("/items", "keyword_changed", True)}


def test_nested_list_item_field_narrowed_reports_full_path() -> None:
    class NewCall(BaseModel):
        model_config = STRICT
        tool_name: str = Field(min_length=1, max_length=64)
        args: dict[str, str] = {}

    class New(Intent):
        tool_calls: list[NewCall] = []  # type: ignore[assignment]

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {
        ("/properties/tool_calls/items/properties/tool_name/maxLength", "bound_added", True)}


def test_nested_sub_model_field_removed_is_breaking() -> None:
    class NewCall(BaseModel):
        model_config = STRICT
        tool_name: str = Field(min_length=1)

    class New(Intent):
        tool_calls: list[NewCall] = []  # type: ignore[assignment]

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert ("/properties/tool_calls/items/properties/args", "property_removed", True) in kinds(
        changes)


def test_nested_sub_model_optional_field_added_is_widening() -> None:
    class NewCall(ToolCall):
        timeout_s: float | None = None

    class New(Intent):
        tool_calls: list[NewCall] = []  # type: ignore[assignment]

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert kinds(changes) == {
        ("/properties/tool_calls/items/properties/timeout_s", "property_added", False)}


def test_renamed_sub_model_is_only_cosmetic() -> None:
    class Call(ToolCall):
        pass

    class New(Intent):
        tool_calls: list[Call] = []  # type: ignore[assignment]

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert changes and required_bump(changes) == "patch"


def test_inlined_ref_is_equivalent_to_the_ref() -> None:
    old = {"properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}}
    new = {"properties": {"a": {"type": "string"}}}
    assert diff_schemas(old, new) == []


def test_ref_with_sibling_description_is_cosmetic() -> None:
    defs = {"A": {"type": "string"}}
    old = {"properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": defs}
    new = {"properties": {"a": {"$ref": "#/$defs/A", "description": "the a"}}, "$defs": defs}
    changes = diff_schemas(old, new)
    assert [(c.path, c.kind, c.bump) for c in changes] == [
        ("/properties/a/description", "description_changed", "patch")]


def test_single_entry_allof_is_unwrapped() -> None:
    defs = {"A": {"type": "string"}}
    old = {"properties": {"a": {"allOf": [{"$ref": "#/$defs/A"}]}}, "$defs": defs}
    new = {"properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": defs}
    assert diff_schemas(old, new) == []


def test_allof_entry_added_is_breaking() -> None:
    old = {"allOf": [{"type": "object"}, {"required": ["a"]}]}
    new = {"allOf": [{"type": "object"}, {"required": ["a"]}, {"required": ["b"]}]}
    assert kinds(diff_schemas(old, new)) == {("/allOf/2/properties/b", "required_added", True)}


def test_definitions_style_refs_are_resolved() -> None:
    old = {"properties": {"a": {"$ref": "#/definitions/A"}},
           "definitions": {"A": {"type": "integer"}}}
    new = {"properties": {"a": {"$ref": "#/definitions/A"}},
           "definitions": {"A": {"type": "integer", "maximum": 3}}}
    assert kinds(diff_schemas(old, new)) == {("/properties/a/maximum", "bound_added", True)}


class Node(BaseModel):
    model_config = STRICT
    value: int
    children: list[Node] = []


def test_recursive_pydantic_model_compares_and_terminates() -> None:
    assert diff_schemas(Node.model_json_schema(), Node.model_json_schema()) == []


def test_recursive_model_change_reported_once() -> None:
    class Node2(BaseModel):
        model_config = STRICT
        value: int = Field(ge=0)
        children: list[Node2] = []

    changes = diff_schemas(Node.model_json_schema(), Node2.model_json_schema())
    assert kinds(changes) == {("/properties/value/minimum", "bound_added", True)}


def test_mutually_recursive_refs_terminate() -> None:
    def schema(leaf_type: str) -> dict[str, Any]:
        return {"$ref": "#/$defs/A", "$defs": {
            "A": obj({"b": {"$ref": "#/$defs/B"}, "leaf": {"type": leaf_type}}),
            "B": obj({"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}})}}

    assert diff_schemas(schema("string"), schema("string")) == []
    assert kinds(diff_schemas(schema("number"), schema("integer"))) == {
        ("/properties/leaf/type", "type_narrowed", True)}


def test_ref_to_root_recursion_terminates() -> None:
    old = obj({"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "v": {"type": "string"}})
    new = obj({"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "v": {"type": "integer"}})
    assert kinds(diff_schemas(old, new)) == {("/properties/v/type", "type_changed", True)}


def test_self_nested_anyof_ref_terminates() -> None:
    schema = {"$ref": "#/$defs/A", "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"},
                                                          {"type": "null"}]}}}
    assert diff_schemas(schema, {"type": "null"}) == []


def test_change_in_shared_definition_is_reported_once_where_first_reached() -> None:
    class Old(BaseModel):
        model_config = STRICT
        first: ToolCall
        second: ToolCall

    class NewCall(ToolCall):
        tool_name: str = Field(min_length=2)

    class New(BaseModel):
        model_config = STRICT
        first: NewCall
        second: NewCall

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {("/properties/first/properties/tool_name/minLength",
                               "bound_tightened", True)}


def expression_schema(lit_max: float) -> dict[str, Any]:
    """A recursive discriminated union, like an expression tree."""

    class Lit(BaseModel):
        kind: Literal["lit"]
        value: float = Field(le=lit_max)

    class Add(BaseModel):
        kind: Literal["add"]
        left: Expr
        right: Expr

    class Neg(BaseModel):
        kind: Literal["neg"]
        arg: Expr | None = None

    Expr = Annotated[Lit | Add | Neg, Field(discriminator="kind")]

    class Program(BaseModel):
        body: list[Expr]
        main: Expr | None = None

    for model in (Add, Neg, Program):
        model.model_rebuild(_types_namespace={"Expr": Expr})
    return Program.model_json_schema()


def test_recursive_discriminated_union_is_compared_without_blowup() -> None:
    assert diff_schemas(expression_schema(10), expression_schema(10)) == []
    changes = diff_schemas(expression_schema(10), expression_schema(5))
    assert kinds(changes) == {
        ("/properties/body/items/oneOf/0/properties/value/maximum", "bound_tightened", True)}


def test_model_made_optional_keeps_pairing_and_reports_inner_narrowing() -> None:
    class Old(BaseModel):
        model_config = STRICT
        call: ToolCall

    class NarrowCall(ToolCall):
        tool_name: str = Field(min_length=5)

    class New(BaseModel):
        model_config = STRICT
        call: NarrowCall | None = None

    changes = diff_schemas(Old.model_json_schema(), New.model_json_schema())
    assert kinds(changes) == {
        ("/properties/call/anyOf/0/properties/tool_name/minLength", "bound_tightened", True),
        ("/properties/call/anyOf/1", "branch_added", False),
        ("/properties/call", "required_removed", False)}


def test_union_member_renamed_without_change_is_only_cosmetic() -> None:
    defs = {"A": obj({"x": {"type": "string"}}, title="A"),
            "B": obj({"y": {"type": "string"}}, title="B")}
    old = {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "$defs": defs}
    new = {"anyOf": [{"$ref": "#/$defs/B"}, {"$ref": "#/$defs/A2"}],
           "$defs": {"A2": {**defs["A"], "title": "A2"}, "B": defs["B"]}}
    changes = diff_schemas(old, new)
    assert [(c.path, c.kind) for c in changes] == [("/anyOf/1/title", "title_changed")]


def test_ref_branch_removed_is_not_paired_with_another_old_member() -> None:
    defs = {"A": obj({"x": {"type": "string"}}, additionalProperties=False),
            "B": obj({"y": {"type": "string"}}, additionalProperties=False)}
    old = {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "$defs": defs}
    new = {"anyOf": [{"$ref": "#/$defs/B"}], "$defs": defs}
    assert kinds(diff_schemas(old, new)) == {("/anyOf/0", "branch_removed", True)}


def test_duplicate_ref_branches_pair_one_to_one() -> None:
    schema = {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}],
              "$defs": {"A": {"type": "string"}}}
    assert diff_schemas(schema, {**schema}) == []


def test_title_and_description_changes_are_patch() -> None:
    class New(Intent):
        """Documented intent."""

        confidence: float = Field(ge=0, le=1, title="Conf", description="how sure")

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    assert {c.kind for c in changes} == {
        "title_changed", "description_changed"}
    assert all(c.bump == "patch" and not c.breaking for c in changes)
    assert required_bump(changes) == "patch"


def test_default_change_is_patch() -> None:
    changes = diff_schemas({"type": "integer", "default": 1}, {"type": "integer", "default": 2})
    assert [(c.path, c.kind, c.bump) for c in changes] == [("/default", "default_changed", "patch")]


def test_examples_added_is_patch() -> None:
    changes = diff_schemas({"type": "string"}, {"type": "string", "examples": ["hi"]})
    assert [(c.path, c.kind, c.bump) for c in changes] == [
        ("/examples", "examples_changed", "patch")]


def test_unsupported_keyword_added_is_breaking() -> None:
    changes = diff_schemas({"type": "string"}, {"type": "string", "not": {"const": ""}})
    assert kinds(changes) == {("/not", "keyword_changed", True)}


def test_unsupported_keyword_removed_is_still_breaking() -> None:
    changes = diff_schemas({"if": {"type": "string"}}, {})
    assert kinds(changes) == {("/if", "keyword_changed", True)}


def test_unused_defs_are_ignored() -> None:
    assert diff_schemas({"$defs": {"A": {"type": "string"}}}, {"$defs": {}}) == []


def test_path_segments_are_json_pointer_escaped() -> None:
    old = obj({"a/b~c": {"type": "string"}})
    new = obj({"a/b~c": {"type": "integer"}})
    assert kinds(diff_schemas(old, new)) == {("/properties/a~1b~0c/type", "type_changed", True)}


def test_change_breaking_flag_matches_bump() -> None:
    old, new = intent_schema(), Node.model_json_schema()
    changes = diff_schemas(old, new)
    assert changes
    assert all(c.breaking == (c.bump == "major") for c in changes)


# --- failure paths of diff_schemas -------------------------------------------------------


def test_non_mapping_schema_raises_type_error() -> None:
    with pytest.raises(TypeError, match="old schema must be a mapping"):
        diff_schemas([], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="new schema must be a mapping"):
        diff_schemas({}, "x")  # type: ignore[arg-type]


def test_unresolvable_ref_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"unresolvable \$ref '#/\$defs/Missing' at /items"):
        diff_schemas({"items": {"$ref": "#/$defs/Missing"}}, {"items": {}})


def test_remote_ref_raises_value_error() -> None:
    with pytest.raises(ValueError, match="only local references"):
        diff_schemas({"$ref": "https://example.com/s.json"}, {})


def test_ref_cycle_without_content_raises_value_error() -> None:
    schema = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"},
                                              "B": {"$ref": "#/$defs/A"}}}
    with pytest.raises(ValueError, match=r"\$ref cycle"):
        diff_schemas(schema, schema)


def test_malformed_sub_schema_raises_value_error() -> None:
    with pytest.raises(ValueError, match="must be an object or a boolean"):
        diff_schemas({"properties": {"a": 3}}, {"properties": {"a": {}}})


def test_malformed_anyof_raises_value_error() -> None:
    with pytest.raises(ValueError, match="anyOf must be a list"):
        diff_schemas({"anyOf": {"type": "string"}}, {})


# --- required_bump -------------------------------------------------------------------------


def change(bump: str, kind: str = "x", detail: str = "something", path: str = "/p") -> SchemaChange:
    return SchemaChange(path=path, kind=kind, breaking=bump == "major", detail=detail,
                        bump=bump)  # type: ignore[arg-type]


@pytest.mark.parametrize(("bumps", "expected"), [
    ([], "none"),
    (["patch"], "patch"),
    (["patch", "minor", "patch"], "minor"),
    (["minor", "major", "patch"], "major"),
])
def test_required_bump_is_the_largest_needed(bumps: list[str], expected: str) -> None:
    assert required_bump([change(b) for b in bumps]) == expected


# --- parse_version --------------------------------------------------------------------------


def test_parse_version_reads_major_minor_patch() -> None:
    assert parse_version("10.2.0") == (10, 2, 0)
    assert parse_version("0.0.0") == (0, 0, 0)


@pytest.mark.parametrize("text", [
    "", "1", "1.2", "1.2.3.4", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-rc1",
    "1.2.3+build", " 1.2.3", "1.2.3\n", "a.b.c", "1.-2.3", "١.٢.٣",
])
def test_parse_version_rejects_non_strict_semver(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected MAJOR\.MINOR\.PATCH"):
        parse_version(text)


def test_parse_version_rejects_non_string() -> None:
    with pytest.raises(TypeError, match="version must be a string"):
        parse_version(1.2)  # type: ignore[arg-type]


# --- bump_problem ------------------------------------------------------------------------


def test_no_changes_and_same_version_is_fine() -> None:
    assert bump_problem("1.2.0", "1.2.0", []) is None


def test_no_changes_with_a_bump_is_fine() -> None:
    assert bump_problem("1.2.0", "1.2.1", []) is None


def test_version_going_backwards_is_a_problem_even_without_changes() -> None:
    assert bump_problem("1.2.0", "1.1.9", []) == "version goes backwards: 1.2.0 -> 1.1.9"


def test_major_going_backwards_is_a_problem_despite_larger_minor() -> None:
    problem = bump_problem("2.0.0", "1.9.9", [change("major")])
    assert problem is not None and "backwards" in problem


def test_cosmetic_change_with_same_version_needs_patch() -> None:
    problem = bump_problem("1.2.0", "1.2.0", [change("patch", detail="title 'A' -> 'B'")])
    assert problem == ("cosmetic change (title 'A' -> 'B' at /p) needs a patch version bump: "
                       "1.2.0 -> 1.2.1 (got 1.2.0)")


def test_cosmetic_change_with_patch_bump_is_fine() -> None:
    assert bump_problem("1.2.0", "1.2.1", [change("patch")]) is None


def test_widening_with_patch_bump_needs_minor() -> None:
    changes = [change("minor", detail="optional property 'y' added")]
    problem = bump_problem("1.2.3", "1.2.4", changes)
    assert problem is not None
    assert problem.startswith("non-breaking change (optional property 'y' added at /p)")
    assert "needs a minor version bump: 1.2.3 -> 1.3.0 (got 1.2.4)" in problem


def test_widening_with_minor_bump_is_fine() -> None:
    assert bump_problem("1.2.3", "1.3.0", [change("minor"), change("patch")]) is None


def test_widening_with_major_bump_is_fine() -> None:
    assert bump_problem("1.2.3", "2.0.0", [change("minor")]) is None


def test_breaking_change_with_minor_bump_needs_major() -> None:
    old = obj({"x": {"type": "string"}}, additionalProperties=False)
    new = obj({}, additionalProperties=False)
    problem = bump_problem("1.2.0", "1.3.0", diff_schemas(old, new))
    assert problem == ("breaking change (property 'x' removed while additionalProperties is "
                       "false at /properties/x) needs a major version bump: 1.2.0 -> 2.0.0 "
                       "(got 1.3.0)")


def test_breaking_change_with_same_version_needs_major() -> None:
    problem = bump_problem("0.4.1", "0.4.1", [change("major")])
    assert problem is not None and "needs a major version bump: 0.4.1 -> 1.0.0" in problem


def test_breaking_change_with_major_bump_is_fine() -> None:
    assert bump_problem("1.2.0", "2.0.0", [change("major"), change("minor")]) is None


def test_problem_message_counts_further_changes_of_the_same_level() -> None:
    problem = bump_problem("1.0.0", "1.0.1", [change("major", detail="first"), change("minor"),
                                              change("major"), change("major")])
    assert problem is not None and "(first at /p; and 2 more)" in problem


def test_problem_message_names_the_root_for_an_empty_path() -> None:
    changes = diff_schemas({"type": "string"}, {"type": "integer", "title": "T"})
    changes = [c for c in changes if c.kind == "title_changed"]
    problem = bump_problem("1.0.0", "1.0.0", changes)
    assert problem is not None and "at /title" in problem
    assert "the schema root" in (bump_problem("1.0.0", "1.0.0", [change("major", path="")]) or "")


def test_bump_problem_rejects_invalid_versions() -> None:
    with pytest.raises(ValueError, match=r"invalid version 'v1\.0\.0'"):
        bump_problem("v1.0.0", "2.0.0", [])
    with pytest.raises(ValueError, match=r"invalid version '2\.0'"):
        bump_problem("1.0.0", "2.0", [])


def test_pydantic_end_to_end_breaking_change_blocks_minor_release() -> None:
    class New(Intent):
        confidence: float = Field(ge=0, le=0.9)

    changes = diff_schemas(intent_schema(), New.model_json_schema())
    problem = bump_problem("1.4.2", "1.5.0", changes)
    assert problem is not None and "-> 2.0.0" in problem
    assert bump_problem("1.4.2", "2.0.0", changes) is None
