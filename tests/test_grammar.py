"""Every state contract's schema compiles to a llama.cpp grammar (issue 18: an untyped field
made llama-cpp-python fall back to free JSON without a word)."""

from __future__ import annotations

import json
import re

import pytest

from hermes_fsm.brain.grammar_schema import (
    gbnf_pattern,
    grammar_patterns,
    json_safe_strings,
    without_patterns,
)
from hermes_fsm.brain.protocol import ToolDescription
from hermes_fsm.brain.tool_schema import offered_tools_schema
from hermes_fsm.contracts.base import JSON_TYPES, explicit_any
from hermes_fsm.contracts.schema_diff import diff_schemas
from hermes_fsm.contracts.states import STATE_CONTRACTS, MemoryCommit, MemoryUpdate, Plan
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.graph.loader import default_graph_path, load_graph

CONTRACTS = sorted({*STATE_CONTRACTS, *load_graph(default_graph_path()).contracts},
                   key=lambda c: c.ref())


def _grammar(schema: dict[str, object]) -> object:
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    return llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


@pytest.mark.parametrize("contract", CONTRACTS, ids=[c.ref() for c in CONTRACTS])
def test_every_contract_schema_compiles_to_a_llama_cpp_grammar(contract):
    assert _grammar(contract.json_schema()) is not None


def test_the_untyped_memory_value_is_any_json_value_in_the_schema():
    value = MemoryCommit.json_schema()["$defs"]["MemoryUpdate"]["properties"]["value"]
    assert value["type"] == JSON_TYPES


@pytest.mark.parametrize("value", ["email", 3, 2.5, True, None, ["a", 1], {"k": [1, {"x": None}]}])
def test_the_memory_value_still_takes_any_json_value(value):
    update = MemoryUpdate.model_validate({"key": "k", "update_type": "create", "value": value,
                                          "evidence_source": "user_message"})
    assert update.value == value


def test_an_explicit_any_is_no_change_to_the_schema_diff():
    raw = MemoryUpdate.model_json_schema()
    assert diff_schemas(raw, explicit_any(raw)) == []
    assert diff_schemas(explicit_any(raw), raw) == []


def test_explicit_any_leaves_typed_and_combined_subschemas_alone():
    schema = {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"anyOf": [{"type": "integer"}, {}]},
        "c": {"$ref": "#/$defs/X"}, "d": {"items": {}}, "e": {"enum": [1, 2]}},
        "$defs": {"X": {"title": "X"}}}
    out = explicit_any(schema)
    props = out["properties"]
    assert props["a"] == {"type": "string"} and props["c"] == {"$ref": "#/$defs/X"}
    assert props["b"]["anyOf"][1] == {"type": JSON_TYPES} and "type" not in props["b"]
    assert props["d"]["items"] == {"type": JSON_TYPES} and props["e"] == {"enum": [1, 2]}
    assert out["$defs"]["X"]["type"] == JSON_TYPES


# --- the plan schema handed to a model names the offered tools -------------------------------

def _offered() -> list[ToolDescription]:
    return list(build_demo_registry().describe())


def test_the_plan_schema_narrowed_to_the_offered_tools_compiles_to_a_grammar():
    assert _grammar(offered_tools_schema(Plan.json_schema(), _offered())) is not None


def test_the_narrowed_plan_schema_refuses_a_tool_not_offered_and_wrong_arguments():
    jsonschema = pytest.importorskip("jsonschema")
    schema = offered_tools_schema(Plan.json_schema(), _offered())
    good = {"tool_calls": [{"tool_name": "inventory_lookup", "reasoning_trace": "stock",
                            "arguments": {"sku": "A1001", "warehouse": "east"}}]}
    jsonschema.validate(good, schema)
    unknown = {"tool_calls": [{**good["tool_calls"][0], "tool_name": "inventory_lookups"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(unknown, schema)
    typed = {"tool_calls": [{**good["tool_calls"][0], "arguments": {"sku": 1001}}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(typed, schema)


def test_with_no_tool_offered_the_plan_must_be_empty():
    jsonschema = pytest.importorskip("jsonschema")
    schema = offered_tools_schema(Plan.json_schema(), [])
    jsonschema.validate({"tool_calls": []}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tool_calls": [{"tool_name": "x", "arguments": {},
                                             "reasoning_trace": "?"}]}, schema)


def test_other_schemas_are_left_as_they_are():
    schema = MemoryCommit.json_schema()
    assert offered_tools_schema(schema, _offered()) == schema


async def test_the_openai_brain_sends_the_narrowed_plan_schema():
    from hermes_fsm.brain.openai import OpenAIBrain
    from hermes_fsm.brain.protocol import BrainRequest
    from tests.fake_chat_server import FakeChatServer
    from tests.http_support import served
    from tests.support import PLAN_LOOKUP

    server = FakeChatServer()
    server.script("plan", PLAN_LOOKUP)
    async with served(server.app()) as url:
        brain = OpenAIBrain(f"{url}/v1", "fake-model")
        await brain.decide(BrainRequest(state="PLANNING", contract_name="plan",
                                        schema=Plan.json_schema(), text="stock?", user_id="u",
                                        tools=tuple(_offered())))
        await brain.aclose()
    sent = server.requests[-1]["response_format"]["json_schema"]["schema"]
    names = [b["properties"]["tool_name"]["enum"][0] for b in sent["$defs"]["ToolCall"]["oneOf"]]
    assert names == [t.name for t in _offered()]


# llama.cpp's GBNF parser knows only these escapes; any other (a regex's \S, \w, \d) makes it
# refuse the grammar, and llama-cpp-python 0.3.36's server then died with SIGSEGV (issue 18)
_GBNF_ESCAPE = re.compile(r'\\(?:[xuU][0-9a-fA-F]+|[tnr\\"\[\]-])')


def _gbnf_text(schema: dict[str, object]) -> str:
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    return str(llama_grammar.json_schema_to_gbnf(json.dumps(schema)))


@pytest.mark.parametrize("contract", CONTRACTS, ids=[c.ref() for c in CONTRACTS])
def test_the_grammar_the_server_gets_has_only_escapes_llama_cpp_parses(contract):
    sent = without_patterns(offered_tools_schema(contract.json_schema(), []))
    leftover = _GBNF_ESCAPE.sub("", _gbnf_text(sent))
    assert "\\" not in leftover, leftover[max(0, leftover.index("\\") - 60):][:120]


def test_dropping_patterns_keeps_a_property_named_pattern():
    schema = {"properties": {"pattern": {"type": "string", "pattern": "^a\\S$"}}}
    assert without_patterns(schema) == {"properties": {"pattern": {"type": "string"}}}
    assert schema["properties"]["pattern"]["pattern"] == "^a\\S$"  # not changed in place


@pytest.mark.parametrize("contract", CONTRACTS, ids=[c.ref() for c in CONTRACTS])
def test_patterns_rewritten_for_the_grammar_have_only_escapes_llama_cpp_parses(contract):
    sent = grammar_patterns(offered_tools_schema(contract.json_schema(), []))
    leftover = _GBNF_ESCAPE.sub("", _gbnf_text(sent))
    assert "\\" not in leftover, leftover[max(0, leftover.index("\\") - 60):][:120]
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    assert llama_grammar.LlamaGrammar.from_json_schema(json.dumps(sent), verbose=False)


def test_the_memory_evidence_source_is_constrained_by_the_grammar_not_dropped():
    update = grammar_patterns(MemoryCommit.json_schema())["$defs"]["MemoryUpdate"]
    pattern = update["properties"]["evidence_source"]["pattern"]
    # the same choices as the contract's, in classes GBNF has (before: no pattern at all)
    assert pattern.startswith("^(user_message|memory|session:[^ ")
    rewritten = re.compile(pattern)
    for ok in ("user_message", "memory", "fact-t1-s3-c1", "tool:get_inventory:hz_xh_001:IP15"):
        assert rewritten.match(ok), ok
    for bad in ("the user said so", "tool:", 'fact-"x"', "fact-a b"):
        assert not rewritten.match(bad), bad


@pytest.mark.parametrize("pattern", ["^(?:a)$", '^say "hi"$', "^a\\bc$", "^a\\\\b$"])
def test_a_pattern_that_cannot_be_rewritten_is_left_to_the_contract(pattern):
    assert gbnf_pattern(pattern) is None
    schema = {"type": "string", "pattern": pattern}
    assert grammar_patterns(schema) == json_safe_strings({"type": "string"})  # ours, JSON-safe


@pytest.mark.parametrize("contract", CONTRACTS, ids=[c.ref() for c in CONTRACTS])
def test_no_string_the_grammar_lets_a_model_write_can_hold_a_raw_control_character(contract):
    # llama-cpp-python's own string rule, [^"\\], lets a raw newline through: no JSON
    sent = grammar_patterns(offered_tools_schema(contract.json_schema(), []))
    strings = list(_string_schemas(sent))
    for schema in strings:
        shaped = [k for k in ("pattern", "enum", "const", "format") if k in schema]
        assert shaped, f"{contract.ref()}: a plain string is left to the server's rule: {schema}"
        if "pattern" in schema:
            assert "\\x00-\\x1F" in schema["pattern"] or "[^" not in schema["pattern"], schema


def test_a_plain_strings_guard_keeps_its_length_bounds():
    for bounds, ok, bad in [({}, ["", "ab"], ["a\nb", 'a"b', "a\\b"]),
                            ({"minLength": 1}, ["a"], [""]),
                            ({"minLength": 2, "maxLength": 3}, ["ab", "abc"], ["a", "abcd"]),
                            ({"minLength": 3}, ["abc", "abcdef"], ["ab"])]:
        guarded = json_safe_strings({"type": "string", **bounds})
        assert set(guarded) == {"type", "pattern"}, guarded
        pattern = re.compile(guarded["pattern"])
        assert all(pattern.match(t) for t in ok) and not any(pattern.match(t) for t in bad)
    assert json_safe_strings({"type": "string", "enum": ["a"]}) == {"type": "string",
                                                                   "enum": ["a"]}
    assert json_safe_strings({"default": {"type": "string"}}) == {"default": {"type": "string"}}
    named = json_safe_strings({"properties": {"default": {"type": "string"},
                                              "enum": {"type": "string"}}})["properties"]
    assert all("pattern" in schema for schema in named.values())  # a property's name is a name


def _string_schemas(schema: object):
    if isinstance(schema, list):
        for item in schema:
            yield from _string_schemas(item)
    elif isinstance(schema, dict):
        if schema.get("type") == "string":
            yield schema
        for key, value in schema.items():
            if key not in ("default", "examples", "const", "enum"):
                yield from _string_schemas(value)
