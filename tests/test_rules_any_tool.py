"""The rules brain plans any tool (issue 18, point 3): an intent names its tool and the call's
arguments come from the tool's input schema; a tool without a template of its own is
answered by ``generic`` (``{output}`` a text result as it is); a tool that is not offered is
named in the answer; a minimal rules file is a few lines (every answer section has a
default)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.brain.protocol import BrainRequest, ToolDescription
from hermes_fsm.brain.rules import RuleBook, RulesBrain
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import load_config
from hermes_fsm.contracts.states import Intent, Plan
from hermes_fsm.errors import ConfigError

SUM_SCHEMA = {
    "type": "object",
    "required": ["a", "b"],
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
}
GET_SUM = ToolDescription("everything.get-sum", "Returns the sum of two numbers", SUM_SCHEMA)

# a whole rules file: one intent that names its tool, nothing else
RULES = r"""
intents:
  - name: sum
    confidence: 0.9
    patterns: ['\badd\b', '加']
    extract: ['(?P<a>-?\d+(?:\.\d+)?)\D+?(?P<b>-?\d+(?:\.\d+)?)']
    tool: everything.get-sum
"""

TOOLS = '''
from hermes_fsm import ToolRegistry

registry = ToolRegistry()

@registry.tool(name="everything.get-sum")
def get_sum(a: float, b: float) -> str:
    """Returns the sum of two numbers (a text, as server-everything's does)."""
    return f"The sum of {a:g} and {b:g} is {a + b:g}."
'''


def brain(tmp_path: Path, text: str = RULES) -> RulesBrain:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return RulesBrain.from_file(path)


async def decide(
    brain: RulesBrain,
    contract: str,
    text: str,
    outputs: dict[str, Any],
    tools: list[ToolDescription],
) -> Any:
    return await brain.decide(
        BrainRequest(contract.upper(), contract, {}, text, "u1", outputs=outputs, tools=tools)
    )


def test_a_minimal_rules_file_is_a_few_lines(tmp_path: Path) -> None:
    book = brain(tmp_path).rules  # no answers section at all
    assert book.answers.generic and book.answers.failure and book.answers.no_facts
    assert book.intents[0].needs_tools  # naming a tool means it needs tools


async def test_an_intent_plans_its_tool_with_arguments_typed_by_the_schema(tmp_path: Path) -> None:
    rules = brain(tmp_path)
    intent = Intent.validate_output(await decide(rules, "intent", "add 3 and 4.5", {}, []))
    raw = await decide(rules, "plan", "add 3 and 4.5", {"intent": intent}, [GET_SUM])
    plan = Plan.validate_output(raw)
    assert isinstance(plan, Plan)
    assert [(c.tool_name, c.arguments) for c in plan.tool_calls] == [
        ("everything.get-sum", {"a": 3, "b": 4.5})
    ]  # numbers, not the texts "3", "4.5"


async def test_a_required_property_without_a_slot_is_asked_for(tmp_path: Path) -> None:
    rules = brain(tmp_path)
    intent = Intent.validate_output(await decide(rules, "intent", "add 3", {}, []))
    raw = await decide(rules, "plan", "add 3", {"intent": intent}, [GET_SUM])
    assert raw["tool_calls"] == []
    assert {m["slot"] for m in raw["missing_slots"]} == {"a", "b"}


async def test_a_tool_that_is_not_offered_is_named_in_the_answer(tmp_path: Path) -> None:
    rules = brain(tmp_path)
    intent = Intent.validate_output(await decide(rules, "intent", "add 3 and 4", {}, []))
    plan = Plan.validate_output(await decide(rules, "plan", "add 3 and 4", {"intent": intent}, []))
    assert isinstance(plan, Plan) and plan.tool_calls == []
    answer = await decide(rules, "response", "add 3 and 4", {"intent": intent, "plan": plan}, [])
    assert "everything.get-sum" in answer["text"] and "not among the tools" in answer["text"]


def test_an_unknown_intent_is_answered_by_the_built_in_last_resort(tmp_path: Path) -> None:
    book = brain(tmp_path).rules
    said = book.say(book.answers.reply_for("unknown"), "en", {})
    assert said is not None and said.startswith("Sorry")


def test_a_reply_section_of_the_file_still_needs_its_last_resort(tmp_path: Path) -> None:
    text = RULES + "answers:\n  replies:\n    unknown: [{en: 'Hi {name}', zh: '你好 {name}'}]\n"
    with pytest.raises(ConfigError, match="needs a variant without fields"):
        brain(tmp_path, text)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    name = f"h18sum_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    config = tmp_path / "hermes.yaml"
    config.write_text(
        f"mcp_servers: {{}}\ntools: {{local: ['{name}:registry']}}\n"
        "brain: {kind: rules, rules_file: rules.yaml}\nsessions: {store: memory}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.syspath_prepend(str(tmp_path / "nothing-here"))  # restores sys.path after
    return config


@pytest.mark.parametrize("text", ["add 3 and 4.5", "3 加 4.5 等于多少"])
async def test_a_turn_runs_the_tool_and_the_generic_answer_quotes_its_text(
    app: Path, text: str
) -> None:
    orchestrator = build_orchestrator(load_config(app, environ={}))
    result = await orchestrator.run_turn("s1", text, user_id="u1")
    assert result.status == "completed"
    assert "The sum of 3 and 4.5 is 7.5." in result.answer  # as it is, not '"The sum …"'
    assert '"' not in result.answer


async def test_the_packaged_rules_still_load_and_keep_their_own_templates() -> None:
    book = RuleBook.default()
    assert "inventory_lookup" in book.answers.tools
    assert "unavailable" in book.answers.model_fields_set
