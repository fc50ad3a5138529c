"""The fast JSON Schema check says what jsonschema says, in jsonschema's words.

``hermes_fsm._internal.schema_check.check_schema`` takes jsonschema-rs's "valid" only
where jsonschema could not disagree; everything else is jsonschema's own check. Each case
here runs through both and must end alike: accepted by both, or refused by both with the
same message.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import pytest
import yaml

from hermes_fsm._internal import schema_check
from hermes_fsm._internal.schema_check import check_schema
from hermes_fsm.tools.registry import _Compiled

ROOT = Path(__file__).resolve().parent.parent


def repository_schemas() -> list[Any]:
    found = []
    for path in sorted((ROOT / "contracts").rglob("*")):
        if path.suffix not in (".yaml", ".json"):
            continue
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict):
            found += [doc[k] for k in ("input_schema", "output_schema") if doc.get(k)]
            if "$schema" in doc or "properties" in doc:
                found.append(doc)
    return found


CASES: dict[str, Any] = {
    "empty": {},
    "typo in a type": {"type": "strin"},
    "a bound that is no number": {"type": "object",
                                  "properties": {"a": {"type": "integer", "minimum": "x"}}},
    "a pattern Python cannot compile": {"properties": {"a": {"pattern": "[("}}},
    "a pattern only ECMA knows": {"pattern": "\\p{L}"},
    "a patternProperties key that is no regex": {"patternProperties": {"[(": {}}},
    "a lookbehind": {"pattern": "(?<=a)b"},
    "required not a list": {"required": "a"},
    "an older draft, wrong": {"$schema": "http://json-schema.org/draft-07/schema#",
                              "type": "x"},
    "an older draft, right": {"$schema": "http://json-schema.org/draft-07/schema#",
                              "type": "object"},
    "2020-12 declared": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                         "type": "object"},
    "a property that is no schema": {"properties": {"a": 1}},
    "format not a string": {"format": 1},
    "unknown keywords": {"type": "object", "x-ui": {"pattern": "[("}},
    "a relative $id": {"$id": "not a uri"},
    "a NaN bound": {"maximum": math.nan},
    "a date from YAML": {"type": "string", "default": __import__("datetime").date(2026, 12, 3)},
    "nested arrays": {"prefixItems": [{"type": "string"}, {"items": {"enum": [1, 2]}}]},
    "deep": {"items": {"items": {"items": {"items": {"type": "integer", "multipleOf": 0}}}}},
}


def verdict(check: Any, schema: Any) -> str | None:
    try:
        check(schema)
    except jsonschema.SchemaError as exc:
        return exc.message
    return None


@pytest.mark.parametrize("schema", list(CASES.values()), ids=list(CASES))
def test_the_fast_check_agrees_with_jsonschema(schema: Any) -> None:
    assert verdict(check_schema, schema) == verdict(
        jsonschema.Draft202012Validator.check_schema, schema)


def test_every_schema_of_the_repository_is_accepted_by_the_fast_path() -> None:
    schemas = repository_schemas()
    assert len(schemas) > 20
    for schema in schemas:
        assert schema_check._surely_valid(schema), schema  # else the fast path is idle
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", ["typo in a type", "a pattern Python cannot compile",
                                  "a patternProperties key that is no regex",
                                  "an older draft, right"])
def test_what_the_fast_path_cannot_vouch_for_goes_to_jsonschema(name: str) -> None:
    assert not schema_check._surely_valid(CASES[name])


def test_a_schema_fastjsonschema_cannot_compile_is_checked_by_jsonschema() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}}
    check = _Compiled(schema, jsonschema.Draft202012Validator(schema))
    check({})  # valid for jsonschema, which resolves the ref only for "a"
    with pytest.raises(fastjsonschema.JsonSchemaException):
        check([])
