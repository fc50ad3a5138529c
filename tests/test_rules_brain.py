"""The rules brain: intents, plans, answers and memory from a YAML rule book, no model."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest

from hermes_fsm.brain.protocol import Brain, BrainRequest, Repair, RepairError, ToolDescription
from hermes_fsm.brain.rules import RuleBook, RulesBrain, detect_language
from hermes_fsm.contracts.base import Contract
from hermes_fsm.contracts.states import (
    ExecutionResults,
    Fact,
    Intent,
    MemoryCommit,
    Plan,
    Response,
    ResultReport,
    ToolFailure,
    ToolSuccess,
)
from hermes_fsm.demo.tools import build_demo_registry, inventory_data, warehouse_code
from hermes_fsm.errors import BrainError, ConfigError, ToolError
from hermes_fsm.sources import FixedClock
from hermes_fsm.tools.registry import Tool, ToolRegistry

BASE = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai: "tomorrow" is 2026-12-02
BRAIN = RulesBrain(timezone="Asia/Shanghai", clock=FixedClock(BASE))
ZH_STOCK = "SKU A1001 在华东仓还有多少库存?"
EN_STOCK = "How many A1001 are left in the east warehouse?"


async def decide(contract: str, text: str, outputs: Mapping[str, Contract] | None = None,
                 tools: list[ToolDescription] | None = None, repair: Repair | None = None,
                 brain: RulesBrain = BRAIN) -> Any:
    request = BrainRequest(state=contract.upper(), contract_name=contract, schema={}, text=text,
                           user_id="u1", outputs=outputs or {}, tools=tools or [], repair=repair)
    return await brain.decide(request)


async def intent_of(text: str) -> Intent:
    return Intent.validate_output(await decide("intent", text))  # type: ignore[return-value]


async def plan_for(text: str, registry: ToolRegistry, repair: Repair | None = None) -> Plan:
    outputs = {"intent": await intent_of(text)}
    raw = await decide("plan", text, outputs, registry.describe(), repair)
    return Plan.validate_output(raw, {"tool_catalog": registry})  # type: ignore[return-value]


def run_calls(plan: Plan, registry: ToolRegistry) -> tuple[ExecutionResults, ResultReport]:
    """Run the planned calls on the real demo tools; facts and failures shaped as the engine's."""
    results: list[ToolSuccess | ToolFailure] = []
    facts, violations = [], []
    for n, call in enumerate(plan.tool_calls, 1):
        call_id = f"call-{n}"
        try:
            output = registry.get(call.tool_name).fn(**call.arguments)
        except ToolError as exc:
            results.append(ToolFailure(call_id=call_id, tool_name=call.tool_name,
                                       error_code="TOOL_ERROR", message=str(exc), retryable=False))
            violations.append(f"{call_id} ({call.tool_name}) failed: TOOL_ERROR: {exc}")
        else:
            results.append(ToolSuccess(call_id=call_id, tool_name=call.tool_name, output=output))
            facts.append(Fact(id=f"fact-{call_id}", source=call_id,
                              content={"tool": call.tool_name, "output": output}))
    report = ResultReport(facts=facts, violations=violations, needs_more_tools=False)
    return ExecutionResults(results=results), report


async def turn(text: str, registry: ToolRegistry | None = None) -> dict[str, Any]:
    """One whole turn through the brain, every output validated by the real contracts."""
    registry = registry or build_demo_registry()
    outputs: dict[str, Any] = {"intent": await intent_of(text)}
    outputs["plan"] = plan = await plan_for(text, registry)
    if plan.tool_calls:
        outputs["execution_results"], outputs["result_report"] = run_calls(plan, registry)
    outputs["response"] = await respond(text, outputs, registry)
    outputs["memory_commit"] = MemoryCommit.validate_output(
        await decide("memory_commit", text, outputs, registry.describe()))
    return outputs


async def respond(text: str, outputs: dict[str, Any],
                  registry: ToolRegistry | None = None) -> Response:
    """The answer, validated against this turn's fact ids (the engine passes every tool)."""
    report = outputs.get("result_report")
    fact_ids = {f.id for f in report.facts} if report is not None else set()
    tools = (registry or build_demo_registry()).describe()
    raw = await decide("response", text, outputs, tools)
    return Response.validate_output(raw, {"fact_ids": fact_ids})  # type: ignore[return-value]


# --- the brain as a whole ------------------------------------------------------------------


def test_rules_brain_satisfies_the_brain_protocol() -> None:
    assert isinstance(BRAIN, Brain)
    assert BRAIN.name == "rules"


async def test_chinese_stock_question_is_answered_with_the_tools_number() -> None:
    out = await turn(ZH_STOCK)
    intent, plan, response = out["intent"], out["plan"], out["response"]
    assert intent.intent_type == "inventory_query"
    assert intent.parameters == {"sku": "A1001", "warehouse": "east", "lang": "zh"}
    assert intent.needs_tools is True and intent.confidence == 0.9
    assert [(c.tool_name, c.arguments) for c in plan.tool_calls] == [
        ("inventory_lookup", {"sku": "A1001", "warehouse": "east"})]
    assert "342" in response.text and "华东" in response.text
    assert response.evidence == ["fact-call-1"]


async def test_english_stock_question_is_answered_with_the_tools_number() -> None:
    out = await turn(EN_STOCK)
    assert out["intent"].parameters == {"sku": "A1001", "warehouse": "east", "lang": "en"}
    assert out["plan"].tool_calls[0].arguments == {"sku": "A1001", "warehouse": "east"}
    assert out["response"].text == (
        "There are 342 units of A1001 (Wireless mouse) in the East China warehouse.")
    assert out["response"].evidence == ["fact-call-1"]


async def test_unknown_contract_raises_brain_error_naming_it_and_the_fix() -> None:
    with pytest.raises(BrainError, match=r"does not know contract 'weather'.*handler"):
        await decide("weather", "hi")


async def test_intent_outputs_are_fresh_dicts_despite_the_cache() -> None:
    first = await decide("intent", EN_STOCK)
    first["parameters"]["sku"] = "XXX"
    assert (await decide("intent", EN_STOCK))["parameters"]["sku"] == "A1001"


# --- intent --------------------------------------------------------------------------------


async def test_intent_omits_the_warehouse_when_none_is_said() -> None:
    assert (await intent_of("How many A1001 are left?")).parameters == {"sku": "A1001",
                                                                          "lang": "en"}


async def test_do_you_have_questions_are_stock_questions() -> None:
    intent = await intent_of("Do you have B2002 in the north warehouse?")
    assert intent.intent_type == "inventory_query"
    assert intent.parameters == {"sku": "B2002", "warehouse": "north", "lang": "en"}


@pytest.mark.parametrize(("text", "warehouse"), [
    ("how many B2001 in the north china warehouse", "north"),
    ("A1002 在西南仓有多少库存", "west"),
    ("how many A1001 are in the mars warehouse", "mars"),  # unknown: the tool will say so
])
async def test_intent_normalises_the_warehouse_with_the_demo_codes(text: str,
                                                                  warehouse: str) -> None:
    assert (await intent_of(text)).parameters["warehouse"] == warehouse


async def test_english_reminder_request_gives_text_and_due() -> None:
    intent = await intent_of("remind me to call Bob tomorrow at 9")
    assert intent.intent_type == "create_reminder" and intent.needs_tools
    assert intent.parameters == {  # the due time is exact: ISO 8601 with the zone's offset
        "text": "call Bob", "due": "2026-12-02T09:00:00+08:00", "due_text": "tomorrow at 9",
        "due_date": "2026-12-02", "due_start": "2026-12-02", "due_end": "2026-12-02",
        "lang": "en"}


async def test_chinese_reminder_request_gives_text_and_due() -> None:
    intent = await intent_of("提醒我明天九点给张三打电话")
    assert intent.intent_type == "create_reminder"
    assert intent.parameters["text"] == "给张三打电话"
    assert intent.parameters["due"] == "2026-12-02T09:00:00+08:00"
    assert intent.parameters["due_text"] == "明天九点"


@pytest.mark.parametrize("text", ["what are my reminders", "我的提醒", "show all reminders",
                                  "how many reminders do I have?"])
async def test_reminder_questions_are_list_reminders(text: str) -> None:
    intent = await intent_of(text)
    assert intent.intent_type == "list_reminders" and intent.needs_tools


@pytest.mark.parametrize("text", ["I prefer email", "I like green tea", "我喜欢喝茶",
                                  "call me Bob", "我叫张三", "please answer in Chinese"])
async def test_stated_preferences_are_preference_intents_without_tools(text: str) -> None:
    intent = await intent_of(text)
    assert (intent.intent_type, intent.needs_tools) == ("preference", False)


@pytest.mark.parametrize(("text", "kind"), [("hello", "greeting"), ("你好", "greeting"),
                                            ("thanks!", "thanks"), ("谢谢", "thanks")])
async def test_greetings_and_thanks_are_smalltalk_without_tools(text: str, kind: str) -> None:
    intent = await intent_of(text)
    assert (intent.intent_type, intent.needs_tools) == ("smalltalk", False)
    assert intent.parameters["kind"] == kind


async def test_anything_else_is_unknown_with_low_confidence() -> None:
    intent = await intent_of("what's the weather like in Paris?")
    assert (intent.intent_type, intent.needs_tools) == ("unknown", False)
    assert intent.confidence < 0.5


def test_language_is_chinese_exactly_when_there_are_cjk_characters() -> None:
    assert [detect_language(t) for t in ("hello", ZH_STOCK, "SKU A1001", "")] == [
        "en", "zh", "en", "en"]


# --- plan ----------------------------------------------------------------------------------


async def test_plan_gives_each_call_a_reasoning_trace() -> None:
    plan = await plan_for(EN_STOCK, build_demo_registry())
    assert "A1001" in plan.tool_calls[0].reasoning_trace


async def test_plan_is_empty_when_the_intents_tool_is_not_available() -> None:
    registry = ToolRegistry([build_demo_registry().get("list_reminders")])
    assert (await plan_for(EN_STOCK, registry)).tool_calls == []


async def test_plan_is_empty_when_a_required_slot_is_missing() -> None:
    assert (await plan_for("remind me to buy milk", build_demo_registry())).tool_calls == []


async def test_plan_is_empty_for_an_intent_that_needs_no_tool() -> None:
    assert (await plan_for("hello", build_demo_registry())).tool_calls == []


async def test_second_planning_round_plans_nothing_new() -> None:
    registry = build_demo_registry()
    first = await plan_for(EN_STOCK, registry)
    results, report = run_calls(first, registry)
    outputs = {"intent": await intent_of(EN_STOCK), "plan": first, "execution_results": results,
               "result_report": report}
    assert await decide("plan", EN_STOCK, outputs, registry.describe()) == {"tool_calls": []}


async def test_later_round_retries_only_the_calls_that_failed_retryably() -> None:
    registry = build_demo_registry()
    first = Plan.validate_output({"tool_calls": [
        {"tool_name": "inventory_lookup", "arguments": {"sku": "A1001"}, "reasoning_trace": "a"},
        {"tool_name": "list_reminders", "arguments": {}, "reasoning_trace": "b"},
        {"tool_name": "inventory_lookup", "arguments": {"sku": "Z9"}, "reasoning_trace": "c"}]})
    results = ExecutionResults(results=[
        ToolFailure(call_id="c1", tool_name="inventory_lookup", error_code="TIMEOUT",
                    message="inventory_lookup did not answer within 10s", retryable=True),
        ToolSuccess(call_id="c2", tool_name="list_reminders", output={"reminders": []}),
        ToolFailure(call_id="c3", tool_name="inventory_lookup", error_code="TOOL_ERROR",
                    message="no product", retryable=False)])
    report = ResultReport(facts=[], violations=["c1 timed out"], needs_more_tools=True)
    outputs = {"intent": await intent_of(EN_STOCK), "plan": first, "execution_results": results,
               "result_report": report}
    plan = Plan.validate_output(await decide("plan", EN_STOCK, outputs, registry.describe()),
                                {"tool_catalog": registry})
    assert [(c.tool_name, c.arguments) for c in plan.tool_calls] == [  # type: ignore[attr-defined]
        ("inventory_lookup", {"sku": "A1001"})]
    assert "did not answer" in plan.tool_calls[0].reasoning_trace  # type: ignore[attr-defined]


async def test_repair_drops_the_call_the_refusal_names_as_unknown() -> None:
    registry = build_demo_registry()
    plan = await plan_for(EN_STOCK, registry)
    narrower = ToolRegistry([registry.get("list_reminders")])  # the tool went away
    with pytest.raises(pydantic.ValidationError) as refused:
        Plan.validate_output(plan.model_dump(), {"tool_catalog": narrower})
    repaired = await plan_for(EN_STOCK, registry,
                              repair=Repair.violation(Plan.ref(), refused.value))
    assert repaired.tool_calls == []


def stock_tool(sku: dict[str, Any], warehouse: dict[str, Any]) -> ToolRegistry:
    """A registry of one inventory_lookup whose arguments have the given schemas."""
    return ToolRegistry([Tool(
        name="inventory_lookup", description="Stock of a SKU.", fn=lambda **_: {},
        input_schema={"type": "object", "properties": {"sku": sku, "warehouse": warehouse},
                      "required": ["sku"], "additionalProperties": False})])


async def refused_plan(registry: ToolRegistry) -> Repair:
    with pytest.raises(pydantic.ValidationError) as refused:
        await plan_for(EN_STOCK, registry)
    return Repair.violation(Plan.ref(), refused.value)


async def test_repair_drops_an_invalid_optional_argument_and_keeps_the_call() -> None:
    registry = stock_tool({"type": "string"}, {"enum": ["north"]})  # east is not offered
    plan = await plan_for(EN_STOCK, registry, repair=await refused_plan(registry))
    assert [(c.tool_name, c.arguments) for c in plan.tool_calls] == [
        ("inventory_lookup", {"sku": "A1001"})]


async def test_a_required_argument_that_fails_its_pattern_is_a_missing_slot_not_a_call() -> None:
    registry = stock_tool({"pattern": "^B"}, {"type": "string"})
    plan = await plan_for(EN_STOCK, registry)
    assert plan.tool_calls == []
    assert [(m.tool, m.slot, m.reason, m.value) for m in plan.missing_slots] == [
        ("inventory_lookup", "sku", "invalid", "A1001")]


async def test_repair_reads_the_refused_call_from_the_error_location() -> None:
    registry = build_demo_registry()
    refusal = Repair("violation", "refused", Plan.ref(), (
        RepairError(("tool_calls", 0, "arguments"), "bad", "dict_type"),))
    plan = await plan_for(EN_STOCK, registry, repair=refusal)
    assert plan.tool_calls == []  # its arguments are fine by the schema: the call goes


async def test_repair_never_resends_the_same_plan() -> None:
    plan = await plan_for(EN_STOCK, build_demo_registry(), repair=Repair.timeout(15.0))
    assert plan.tool_calls == []


# --- response ------------------------------------------------------------------------------


async def test_answer_without_a_warehouse_gives_the_total_and_each_warehouse() -> None:
    text = (await turn("How many A1001 are left?"))["response"].text
    assert "519" in text and "East China 342" in text


async def test_out_of_stock_answer_still_says_the_number() -> None:
    response = (await turn("A1001在华南仓有货吗"))["response"]
    assert "0 件" in response.text and response.evidence == ["fact-call-1"]


async def test_reminders_are_created_then_listed_in_the_users_language() -> None:
    registry = build_demo_registry()
    created = (await turn("remind me to call Bob tomorrow at 9", registry))["response"]
    assert created.text == "Done: reminder r1 is set to call Bob, due 2026-12-02T09:00:00+08:00."
    listed = (await turn("我的提醒", registry))["response"]
    assert listed.text == "你有 1 条提醒:call Bob(2026-12-02T09:00:00+08:00)。"


async def test_failed_tool_gets_an_honest_answer_with_the_reason() -> None:
    out = await turn("how many Z9999 are in the east warehouse")
    assert out["result_report"].facts == []
    assert out["response"].text.startswith("Sorry, I couldn't look up the stock: ")
    assert "no product with SKU 'Z9999'" in out["response"].text
    assert out["response"].evidence == []


async def test_failure_answer_falls_back_to_the_reports_violations() -> None:
    report = ResultReport(facts=[], violations=["call-1 timed out"], needs_more_tools=False)
    outputs = {"intent": await intent_of(EN_STOCK), "result_report": report}
    response = await respond(EN_STOCK, outputs)
    assert response.text == "Sorry, that could not be done: call-1 timed out."


async def test_answer_cites_only_the_facts_it_used() -> None:
    registry = build_demo_registry()
    out = await turn(EN_STOCK, registry)
    memory_fact = Fact(id="fact-memory-1", source="memory", content="likes tea")
    report = ResultReport(facts=[*out["result_report"].facts, memory_fact], violations=[],
                          needs_more_tools=False)
    response = await respond(EN_STOCK, {**out, "result_report": report})
    assert response.evidence == ["fact-call-1"]


async def answer_after(refusal: Repair) -> dict[str, Any]:
    """The raw answer to a stock question, asked again after ``refusal``."""
    registry = build_demo_registry()
    out = await turn(EN_STOCK, registry)
    request = BrainRequest(state="RESPONSE", contract_name="response", schema={}, text=EN_STOCK,
                           user_id="u1", outputs=out, tools=registry.describe(), attempt=2,
                           repair=refusal)
    raw: dict[str, Any] = await BRAIN.decide(request)
    return raw


async def test_an_answer_whose_citations_were_refused_is_given_without_them() -> None:
    with pytest.raises(pydantic.ValidationError) as refused:
        Response.validate_output({"text": "342", "evidence": ["fact-call-1"]},
                                 {"fact_ids": set()})
    raw = await answer_after(Repair.violation(Response.ref(), refused.value))
    assert raw["evidence"] == [] and "342" in raw["text"]


async def test_an_answer_refused_for_something_else_keeps_its_citations() -> None:
    with pytest.raises(pydantic.ValidationError) as refused:
        Response.validate_output({"text": "", "evidence": []})  # mentions no evidence
    raw = await answer_after(Repair.violation(Response.ref(), refused.value))
    assert raw["evidence"] == ["fact-call-1"]


@pytest.mark.parametrize(("text", "answer"), [
    ("hello", "Hello! I can check stock"),
    ("thanks!", "You're welcome!"),
    ("谢谢", "不客气!"),
    ("I prefer email", "Got it, I'll remember that you prefer to be contacted by email."),
    ("我叫张三", "好的,我记住了:你叫张三。"),
    ("what's the weather like in Paris?", "Sorry, I did not understand that. I can look up"),
])
async def test_without_a_result_report_the_answer_follows_the_intent(text: str,
                                                                     answer: str) -> None:
    response = await respond(text, {"intent": await intent_of(text)})
    assert response.text.startswith(answer) and response.evidence == []


async def test_without_any_outputs_the_answer_says_what_the_brain_can_do() -> None:
    response = await respond("???", {})
    assert "I can look up stock" in response.text and response.evidence == []


async def test_a_plan_that_produced_no_facts_is_said_so() -> None:
    registry = build_demo_registry()
    outputs = {"intent": await intent_of(EN_STOCK), "plan": await plan_for(EN_STOCK, registry)}
    response = await respond(EN_STOCK, outputs)
    assert "returned nothing" in response.text and response.evidence == []


async def test_a_missing_slot_is_asked_for() -> None:
    out = await turn("提醒我买牛奶")
    assert out["response"].text == "要在什么时候提醒你买牛奶?"


async def test_a_failed_planning_is_said_honestly() -> None:
    response = await respond(EN_STOCK, {"intent": await intent_of(EN_STOCK)})
    assert response.text == "Sorry, I couldn't do that this time; please try again."


async def test_an_unavailable_tool_is_said_so() -> None:
    registry = ToolRegistry([build_demo_registry().get("list_reminders")])
    out = await turn(EN_STOCK, registry)
    assert out["response"].text == (
        "Sorry, I can't look up the stock right now: that tool is not available.")


async def test_a_tool_without_a_template_is_answered_generically() -> None:
    fact = Fact(id="fact-call-1", source="call-1", content={"tool": "weather", "output": 21})
    report = ResultReport(facts=[fact], violations=[], needs_more_tools=False)
    response = await respond("weather?", {"result_report": report})
    assert response.text == "weather returned: 21" and response.evidence == ["fact-call-1"]


# --- memory commit -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "key", "value", "memory_type"), [
    ("I prefer email", "preference.contact_channel", "email", "preference"),
    ("我更喜欢用邮件联系", "preference.contact_channel", "email", "preference"),
    ("call me Bob", "profile.name", "Bob", "fact"),
    ("我叫张三", "profile.name", "张三", "fact"),
    ("I like green tea", "preference.likes.green_tea", "green tea", "preference"),
    ("please answer in Chinese", "preference.language", "chinese", "preference"),
])
async def test_memory_commit_records_what_the_user_stated(text: str, key: str, value: str,
                                                          memory_type: str) -> None:
    commit = MemoryCommit.validate_output(await decide("memory_commit", text))
    [update] = commit.memory_updates  # type: ignore[attr-defined]
    assert (update.key, update.value, update.memory_type) == (key, value, memory_type)
    assert (update.update_type, update.evidence_source) == ("create", "user_message")


async def test_memory_commit_is_empty_when_nothing_was_stated() -> None:
    assert await decide("memory_commit", EN_STOCK) == {"memory_updates": []}


async def test_memory_commit_finds_several_statements_in_one_message() -> None:
    commit = await decide("memory_commit", "Call me Ann, and I prefer phone calls.")
    assert [(u["key"], u["value"]) for u in commit["memory_updates"]] == [
        ("preference.contact_channel", "phone"), ("profile.name", "Ann")]


# --- rule files ----------------------------------------------------------------------------

MINIMAL = """\
intents:
  - name: hello
    confidence: 0.9
    patterns: ['hello']
answers:
  tools: {}
  replies:
    hello: [{en: Hi!, zh: 你好!}]
    unknown: [{en: Sorry., zh: 抱歉。}]
  generic: [{en: "{tool}: {output}", zh: "{tool}:{output}"}]
  failure: [{en: "Failed: {message}", zh: "失败:{message}"}]
  no_facts: [{en: Nothing found., zh: 没有结果。}]
  unavailable: [{en: Not available., zh: 不可用。}]
"""


def rules_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text, "utf-8")
    return path


async def test_a_user_rules_file_drives_the_brain(tmp_path: Path) -> None:
    brain = RulesBrain.from_file(rules_file(tmp_path, MINIMAL))
    assert (await decide("intent", "Hello there", brain=brain))["intent_type"] == "hello"
    response = await decide("response", "hello", brain=brain)
    assert response == {"text": "Sorry.", "evidence": []}  # no intent output: the fallback


def test_the_default_rules_come_with_the_package() -> None:
    rules = RuleBook.default()
    assert rules is RuleBook.default()
    assert {"inventory_query", "create_reminder", "list_reminders"} <= set(rules.plans)


def test_invalid_yaml_is_a_config_error_with_file_and_line(tmp_path: Path) -> None:
    path = rules_file(tmp_path, MINIMAL.replace("patterns: ['hello']", "patterns: ['hello'"))
    with pytest.raises(ConfigError, match=rf"^{path}:4: YAML syntax error: the \[\.\.\.\] list"):
        RuleBook.from_file(path)


def test_unknown_field_is_named_with_its_line_and_the_allowed_fields(tmp_path: Path) -> None:
    path = rules_file(tmp_path, MINIMAL.replace("confidence: 0.9", "confidense: 0.9"))
    with pytest.raises(ConfigError) as error:
        RuleBook.from_file(path)
    message = str(error.value)
    assert f"{path}:3: intents[0].confidense: unknown field 'confidense'" in message
    assert "allowed: name, confidence, needs_tools, patterns," in message
    assert f"{path}:2: intents[0].confidence: this required field is missing" in message


SLOTS = MINIMAL.replace("    patterns: ['hello']\n", "    patterns: ['hello']\n"
                        "    extract: ['hello (?P<town>\\w+)']\n"
                        "    normalize: {town: towns}\n")


async def test_a_normaliser_is_an_aliases_table_of_the_rule_book(tmp_path: Path) -> None:
    text = SLOTS.replace("answers:", "aliases:\n  towns: {sh: [shanghai, 上海]}\nanswers:")
    brain = RulesBrain.from_file(rules_file(tmp_path, text))
    assert (await decide("intent", "hello Shanghai", brain=brain))["parameters"]["town"] == "sh"
    # a value no table names is lower-cased (the tool then says it does not know it)
    assert (await decide("intent", "hello Mars", brain=brain))["parameters"]["town"] == "mars"


def test_a_normaliser_naming_no_aliases_table_is_refused_with_its_line(tmp_path: Path) -> None:
    path = rules_file(tmp_path, SLOTS)
    with pytest.raises(ConfigError, match=rf"{path}:6: intents\[0\]\.normalize\.town: unknown "
                                          r"normaliser 'towns'; use upper, lower or a table of "
                                          r"`aliases` \(none declared\)"):
        RuleBook.from_file(path)


def test_the_default_warehouse_aliases_agree_with_the_demo_inventory() -> None:
    normalise = RuleBook.default().normalizers["warehouse_code"]
    for code, info in inventory_data()["warehouses"].items():
        for name in (code, *info["names"]):
            assert normalise(name) == code == warehouse_code(name), name


def test_bad_regex_is_named_with_its_line(tmp_path: Path) -> None:
    path = rules_file(tmp_path, MINIMAL.replace("['hello']", "\n      - 'hel(lo'"))
    with pytest.raises(ConfigError, match=rf"{path}:5: intents\[0\]\.patterns\[0\]: "
                                          r"bad regex 'hel\(lo'"):
        RuleBook.from_file(path)


def test_a_planned_tool_without_a_template_is_taken_by_the_generic_answer(tmp_path: Path
                                                                          ) -> None:
    text = MINIMAL.replace("answers:", "plans:\n  hello:\n    - tool: lookup\n"
                                       "      reasoning: why\nanswers:")
    book = RuleBook.from_file(rules_file(tmp_path, text))  # issue 18: no longer refused
    assert "lookup" not in book.answers.tools and book.plans["hello"][0].tool == "lookup"


def test_intent_without_reply_template_is_refused(tmp_path: Path) -> None:
    path = rules_file(tmp_path, MINIMAL.replace("    hello: [{en: Hi!, zh: 你好!}]\n", ""))
    with pytest.raises(ConfigError, match=rf"{path}:2: intents\[0\]\.name: no reply template "
                                          r"for intent 'hello'; add answers\.replies\.hello"):
        RuleBook.from_file(path)


def test_malformed_template_is_named_with_its_line(tmp_path: Path) -> None:
    path = rules_file(tmp_path, MINIMAL.replace("en: Nothing found.", "en: 'Nothing {found'"))
    with pytest.raises(ConfigError, match=rf"{path}:12: answers\.no_facts\[0\]: bad template"):
        RuleBook.from_file(path)


def test_missing_rules_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml:1: cannot read the file"):
        RulesBrain.from_file(tmp_path / "nope.yaml")


# --- the demo MCP server's calendar ------------------------------------------------------------


def registry_with_calendar() -> ToolRegistry:
    """The demo tools plus the MCP server's calendar_query, registered under its MCP name."""
    from hermes_fsm.demo.calendar import CALENDAR_QUERY, calendar_query

    registry = build_demo_registry()
    registry.tool(name="demo.calendar_query", description=CALENDAR_QUERY)(calendar_query)
    return registry


async def test_a_stock_question_also_plans_the_calendar_when_the_mcp_tool_is_offered() -> None:
    plan = await plan_for(EN_STOCK, registry_with_calendar())
    assert [(c.tool_name, c.arguments) for c in plan.tool_calls] == [
        ("inventory_lookup", {"sku": "A1001", "warehouse": "east"}),
        ("demo.calendar_query", {"query": "A1001", "warehouse": "east"})]


async def test_the_answer_cites_the_stock_and_the_next_restock() -> None:
    out = await turn(EN_STOCK, registry_with_calendar())
    assert out["response"].text == (
        "There are 342 units of A1001 (Wireless mouse) in the East China warehouse. "
        "On the calendar: Restock A1001 (Wireless mouse) on 2026-12-03.")
    assert len(out["response"].evidence) == 2


async def test_the_chinese_answer_cites_the_next_restock_too() -> None:
    out = await turn(ZH_STOCK, registry_with_calendar())
    assert "342" in out["response"].text and "2026-12-03 Restock A1001" in out["response"].text
