"""A model's answer grounded in the turn's facts (issue 18: Gemma 3 270M broke RESPONSE's
contract on every call, SmolLM2 cited no fact and wrote no figure).

- Gemma's chat format (llama-cpp-python's ``gemma``) drops the system message, so the model
  never saw the schema or the instructions: ``system_role: false`` puts them in the first
  user message.
- The answer's schema sent for constrained decoding names the turn's facts (an enum of
  their ids) and makes ``text`` write one of their figures; the prompt lists the facts as
  lines a small model copies.
- The Response contract refuses an answer that cites a fact with figures and states none.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from hermes_fsm.brain.grammar_schema import grounded_schema, turn_facts, without_patterns
from hermes_fsm.brain.openai import OpenAIBrain
from hermes_fsm.brain.prompt import chat_messages, facts_block
from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.config.settings import BrainConfig
from hermes_fsm.contracts.grounding import figures, states_figure
from hermes_fsm.contracts.states import Response, ResultReport

FACT_ID = "fact-t1-s3-c1"
REPORT = ResultReport.model_validate({"facts": [{
    "id": FACT_ID, "source": "t1-s3-c1", "content": {"tool": "inventory_lookup", "output": {
        "sku": "A1001", "name": "Wireless mouse", "warehouse": "east", "quantity": 342}}}],
    "violations": [], "needs_more_tools": False})


def _request(**kw) -> BrainRequest:
    base = dict(state="RESPONSE", contract_name="response", schema=Response.json_schema(),
                text="How many A1001 are left in the east warehouse?", user_id="u",
                outputs={"result_report": REPORT})
    base.update(kw)
    return BrainRequest(**base)  # type: ignore[arg-type]


def test_without_a_system_role_the_instructions_head_the_first_user_message():
    request = _request()
    with_role = chat_messages(request)
    merged = chat_messages(request, system_role=False)
    assert [m["role"] for m in with_role] == ["system", "user"]
    assert [m["role"] for m in merged] == ["user"]
    assert merged[0]["content"] == with_role[0]["content"] + "\n\n" + with_role[1]["content"]
    assert '"evidence"' in merged[0]["content"]  # the schema is what the model now sees


def test_the_openai_brain_takes_system_role_from_configuration():
    config = BrainConfig(kind="openai", base_url="http://127.0.0.1:9/v1", model="gemma",
                         system_role=False)
    brain = OpenAIBrain.from_config(config, environ={})
    body = brain._body(_request(), stream=False)
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert BrainConfig().system_role is True  # the default sends a system message


def test_the_answer_schema_names_the_facts_and_forces_a_figure():
    schema = grounded_schema(Response.json_schema(), [(FACT_ID, ["342"])])
    evidence = schema["properties"]["evidence"]
    assert evidence["items"] == {"type": "string", "enum": [FACT_ID]}
    assert evidence["minItems"] == 1
    assert evidence["maxItems"] == 1  # SmolLM2 repeated "f1" until the token cap cut the JSON
    pattern = re.compile(schema["properties"]["text"]["pattern"])
    assert pattern.match("A1001 has 342 units in the east.")
    assert pattern.match("342")
    assert pattern.match("华东仓还有342件")
    assert not pattern.match("A1001 is in stock.")
    assert not pattern.match("A1001 has 3420 units.")
    assert not pattern.match("A1342 is in stock.")
    assert not pattern.match('342 "quoted"')  # no quote or escape: GBNF-safe, JSON-safe
    assert pattern.match("x" * 70 + " 342 " + "y" * 70)
    assert not pattern.match("x" * 100 + " 342")  # bounded: the string closes before the cap
    assert not pattern.match("A1001 {f1.x} has 342 units.")  # no placeholder the facts lack
    assert Response.json_schema()["properties"]["evidence"].get("minItems") is None  # a copy


def test_without_facts_the_answer_cites_nothing_and_other_schemas_are_unchanged():
    schema = grounded_schema(Response.json_schema(), [])
    assert schema["properties"]["evidence"]["maxItems"] == 0
    free = re.compile(schema["properties"]["text"]["pattern"])  # free, bounded, JSON-safe
    assert free.match("Hello! How can I help?") and free.match("你好，我能帮你什么？")
    assert not free.match("x" * 161) and not free.match("")
    other = {"type": "object", "properties": {"intent_type": {"type": "string"}}}
    assert grounded_schema(other, [(FACT_ID, ["1"])]) is other


def test_the_brain_sends_the_grounded_schema_and_the_facts_block():
    brain = OpenAIBrain("http://127.0.0.1:9/v1", "m", structured_output="json_object_schema")
    body = brain._body(_request(), stream=False)
    sent = body["response_format"]["schema"]
    assert sent["properties"]["evidence"]["items"]["enum"] == ["f1"]  # the fact's alias
    assert "342" in sent["properties"]["text"]["pattern"]
    user = body["messages"][-1]["content"]
    assert "- f1 (inventory_lookup): {f1.sku} = A1001;" in user
    assert "{f1.quantity} = 342" in user
    assert "write {f1.quantity} where the number goes" in user
    assert FACT_ID not in user  # the long id is not the model's to copy


def test_the_facts_block_is_only_for_an_answer_with_facts():
    assert facts_block(_request(outputs={})) == ""
    plan_like = _request(contract_name="plan", schema={"type": "object", "properties": {}})
    assert facts_block(plan_like) == ""
    assert turn_facts({"result_report": REPORT})[0][0] == FACT_ID


def test_the_grounded_schema_compiles_to_a_llama_cpp_grammar():
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    schema = without_patterns(Response.json_schema())
    schema = grounded_schema(schema, [(FACT_ID, ["342", "0", "1.5"]), ("fact-2", ["57"])])
    gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    text_rule = next(line for line in gbnf.splitlines() if line.startswith("text ::="))
    assert text_rule.count("|") == 3 and FACT_ID in gbnf  # four figures, the ids as an enum
    assert llama_grammar.LlamaGrammar.from_string(gbnf, verbose=False) is not None


def test_figures_are_the_numbers_among_a_facts_values():
    assert figures({"sku": "A1001", "name": "USB-C cable 1m", "quantity": 0}) == ["0"]
    assert figures({"stock": {"east": 342, "west": 57}, "total": 399, "ok": True}) == [
        "342", "57", "399"]
    assert states_figure("B2002: 0 units", ["0"])
    assert not states_figure("B2001: 980 units", ["0"])


def test_nan_and_infinity_are_no_figures_so_a_fact_of_them_asks_for_none():
    """A tool that lies with NaN (the store keeps it as "NaN") must not make every answer
    citing its fact a contract violation: there is no figure the answer could write."""
    assert figures({"quantity": float("nan"), "note": "x"}) == []
    assert figures({"low": float("-inf"), "high": float("inf"), "count": 3}) == ["3"]


def test_the_contract_refuses_an_answer_citing_a_fact_without_its_figure():
    context = {"fact_ids": {FACT_ID}, "fact_figures": {FACT_ID: ["342"]}}
    ok = {"text": "A1001: 342 units in the East China warehouse.", "evidence": [FACT_ID]}
    assert Response.model_validate(ok, context=context).text.startswith("A1001")
    with pytest.raises(ValidationError, match="states none of its figures"):
        Response.model_validate({"text": "A1001 is in stock.", "evidence": [FACT_ID]},
                                context=context)
    with pytest.raises(ValidationError, match="states none of its figures"):
        Response.model_validate({"text": "There are 3420.", "evidence": [FACT_ID]},
                                context=context)
    # an answer citing nothing, or a fact without figures, is not asked for one
    assert Response.model_validate({"text": "Hello!", "evidence": []}, context=context)
    no_figures = {"fact_ids": {"f"}, "fact_figures": {"f": []}}
    assert Response.model_validate({"text": "Done.", "evidence": ["f"]}, context=no_figures)


def test_the_prompt_shows_an_answers_schema_without_the_descriptions_a_model_copies():
    # SmolLM2 answered "The answer, with evidence references that must name facts of this
    # turn." (the Response docstring, as the schema's description) in 17 of 27 refusals
    from hermes_fsm.brain.prompt import system_prompt
    from hermes_fsm.contracts.states import Intent

    prompt = system_prompt(_request())
    assert (Response.__doc__ or "").strip() not in prompt
    assert "Ids of the facts" not in prompt and '"title"' not in prompt
    assert '"evidence"' in prompt and '"text"' in prompt  # the schema itself is there
    assert (Response.__doc__ or "").strip() in json.dumps(Response.json_schema())  # kept elsewhere
    # other contracts keep theirs: their descriptions say what a field means
    intent = system_prompt(_request(state="INTENT", contract_name="intent",
                                    schema=Intent.json_schema()))
    described = json.dumps(Intent.json_schema(), ensure_ascii=False, separators=(",", ":"))
    assert described in intent


@pytest.mark.parametrize("facts", [[], [(FACT_ID, ["342"])],
                                   [(FACT_ID, [str(n) for n in range(20)])]],
                         ids=["no facts", "a figure", "too many figures to force"])
def test_an_answers_text_cannot_hold_a_raw_control_character(facts):
    # llama-cpp-python's own string rule is [^"\\]: Gemma 3 wrote "I prefer short
    # answers.\nYou are the response step…" (no JSON) in 12 RESPONSE outputs
    schema = grounded_schema(Response.json_schema(), facts)
    pattern = re.compile(schema["properties"]["text"]["pattern"])
    assert pattern.match("A1001 has 342 units left.")
    for control in ("\n", "\r", "\t", "\x00", "\x1f"):
        assert not pattern.match(f"A1001 has 342{control} units left."), repr(control)
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    assert llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


def _report(tool: str, output: dict[str, object]) -> ResultReport:
    return ResultReport.model_validate({"facts": [{
        "id": FACT_ID, "source": "t1-s3-c1", "content": {"tool": tool, "output": output}}],
        "violations": [], "needs_more_tools": False})


REMINDERS = _report("list_reminders", {"reminders": [
    {"id": "r1", "text": "call Bob", "due": "2026-12-05T09:00:00+00:00"},
    {"id": "r2", "text": "给李雷打电话", "due": "2026-12-05T10:00:00+00:00"}], "total": 2})
REMINDER = _report("create_reminder", {
    "id": "r2", "text": "给李雷打电话", "due": "2026-12-05T10:00:00+00:00"})


def _text_pattern(report: ResultReport) -> tuple[re.Pattern[str], str]:
    brain = OpenAIBrain("http://127.0.0.1:9/v1", "m", structured_output="json_object_schema")
    body = brain._body(_request(outputs={"result_report": report}), stream=False)
    return (re.compile(body["response_format"]["schema"]["properties"]["text"]["pattern"]),
            body["messages"][-1]["content"])


def test_a_listing_is_answered_with_its_items_not_its_count_alone():
    # SmolLM2 answered "What are my reminders?" with the count (the figure forced) or a date
    pattern, prompt = _text_pattern(REMINDERS)
    assert "write {f1.total} where the number goes, then {f1.reminders} where the items go" in (
        prompt)
    assert pattern.match("You have 2 reminders: {f1.reminders}.")
    assert pattern.match("你有{f1.total}条提醒:{f1.reminders}")
    assert not pattern.match("You have 2 reminders.")
    assert not pattern.match("You have {f1.total} reminders.")
    assert not pattern.match("2{f1.reminders}")  # the figure stands alone
    assert not pattern.match("You have 2 reminders, " + "x" * 40 + " {f1.reminders}")  # close
    stock, _ = _text_pattern(REPORT)  # no list: the figure alone answers
    assert stock.match("A1001 has 342 units in the east.")


def test_facts_without_figures_are_answered_in_their_words():
    # SmolLM2 confirmed a reminder to call 李雷 with its due time alone
    pattern, prompt = _text_pattern(REMINDER)
    assert "write {f1.text} where its words go" in prompt
    assert pattern.match("好的,已设置提醒:给李雷打电话")
    assert pattern.match("Done: I will remind you to {f1.text} tomorrow.")
    assert not pattern.match("2026-12-05T10:00:00+00:00")
    assert not pattern.match("Reminder {f1.id} is set.")  # an id says nothing
    assert grounded_schema(Response.json_schema(), [("f1", [])], words=[
        ("{f1.x}", 'say "hi"')])["properties"]["text"]["pattern"].count("say") == 0
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    for report in (REMINDER, REMINDERS):
        brain = OpenAIBrain("http://127.0.0.1:9/v1", "m", structured_output="json_object_schema")
        schema = brain._body(_request(outputs={"result_report": report}),
                             stream=False)["response_format"]["schema"]
        assert llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


def test_an_answers_clock_is_the_time_without_the_rule_for_tool_arguments():
    # SmolLM2 copied the rule's example timestamp into answers
    now = datetime(2026, 12, 4, 19, 8, 50, tzinfo=UTC)
    answer = chat_messages(_request(now=now))[0]["content"]
    assert "Now: 2026-12-04T19:08:50+00:00 (Friday" in answer
    assert "tool argument" not in answer and answer.count("2026-12-04T19:08:50") == 1
    plan = chat_messages(_request(now=now, contract_name="plan", schema={
        "type": "object", "properties": {"tool_calls": {"type": "array"}}}))[0]["content"]
    assert "Every date or time in a tool argument must be exact" in plan
