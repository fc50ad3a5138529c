"""Context building: the token budget per part, trimming rules, the rolling summary, the
``context_built`` event, and how replay treats it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.brain.prompt import chat_messages, history_block, memory_block, tools_block
from hermes_fsm.brain.protocol import BrainRequest, SummaryRequest, ToolDescription
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.brain.tokens import CalibratedCounter, HeuristicCounter
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import load_config
from hermes_fsm.contracts.states import Intent
from hermes_fsm.engine.context import ContextBuilder, ContextConfig, apply_fold
from hermes_fsm.errors import ConfigError, ContextOverflow
from hermes_fsm.events.model import EVENT_ADAPTER
from hermes_fsm.events.recording import parse_recording, recording_text
from hermes_fsm.memory import MemoryItem, format_recall
from hermes_fsm.replay import Replayer
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from tests.support import happy_script

COUNT = HeuristicCounter()
INTENT_SCHEMA = {"type": "object", "properties": {"intent_type": {"type": "string"}}}
PLAN_SCHEMA = {"type": "object", "properties": {"tool_calls": {"type": "array"}}}
QUESTION = "How many A1001 are left in the east warehouse?"
CONSTRAINT = "I must submit the tax report before Friday 5pm."
# Small, but above the largest system prompt of the bundled contracts (memory_commit@2 with
# its schema, the clock and the conversation blocks: ~660 tokens), which is never trimmed.
SMALL = {"max_context_tokens": 1400, "reserved_output_tokens": 200}


def request(text: str = "hi", schema: Any = None, **fields: Any) -> BrainRequest:
    return BrainRequest(state="INTENT", contract_name="intent",
                        schema=schema or INTENT_SCHEMA, text=text, user_id="u", **fields)


def builder(**config: Any) -> ContextBuilder:
    return ContextBuilder(ContextConfig(**config), counter=HeuristicCounter())


def turns(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for question, answer in pairs:
        out += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return out


class RecordingRules(RulesBrain):
    """The rules brain, noting every request it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[BrainRequest] = []
        self.summaries: list[SummaryRequest] = []

    async def decide(self, request: BrainRequest) -> Any:
        self.requests.append(request)
        return await super().decide(request)

    async def summarize(self, request: SummaryRequest) -> str:
        self.summaries.append(request)
        return await super().summarize(request)


def built_events(events: Any) -> list[Any]:
    return [e for e in events if e.kind == "context_built"]


# --- the budget --------------------------------------------------------------------------


def test_the_budget_is_the_window_less_the_reserved_output_split_by_shares() -> None:
    budget = ContextConfig(max_context_tokens=10_000, reserved_output_tokens=2_000).budget()
    assert budget.available == 8_000
    assert dict(budget.caps) == {"memory": 1_200, "tools": 1_600, "history": 2_800,
                                 "input": 1_600}
    assert budget.summary_cap == 1_120  # 40 % of the history cap


def test_a_cap_wins_over_its_share_and_a_model_has_its_own_window() -> None:
    config = ContextConfig(max_context_tokens=4_000, reserved_output_tokens=1_000,
                           models={"big-model": 101_000}, caps={"tools": 500},
                           shares={"history": 0.45})
    assert config.budget().caps["tools"] == 500
    assert config.budget().caps["history"] == 1_350
    big = config.budget("big-model")
    assert (big.window, big.available, big.caps["history"]) == (101_000, 100_000, 45_000)


def test_the_brains_answer_limit_is_the_reserve_unless_one_is_set() -> None:
    from hermes_fsm.brain.openai import OpenAIBrain

    brain = OpenAIBrain("http://127.0.0.1:9/v1", "small", max_tokens=300)
    windows = {"models": {"small": 2_048}}
    assert ContextBuilder(ContextConfig(**windows), brain=brain).budget.reserved_output == 300
    explicit = ContextConfig(**windows, reserved_output_tokens=500)
    assert ContextBuilder(explicit, brain=brain).budget.reserved_output == 500
    greedy = OpenAIBrain("http://127.0.0.1:9/v1", "small", max_tokens=2_000)
    with pytest.raises(ConfigError, match=r"brain.max_tokens \(2000\)"):
        ContextBuilder(ContextConfig(**windows), brain=greedy)


@pytest.mark.parametrize("fields, message", [
    ({"shares": {"history": 0.9, "tools": 0.5}}, "add up to"),
    ({"max_context_tokens": 1_000, "reserved_output_tokens": 950}, "reserved_output_tokens"),
    ({"caps": {"memory": 0}}, "at least 1"),
    ({"shares": {"prompt": 0.1}}, "prompt"),
])
def test_a_budget_that_cannot_work_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ContextConfig(**fields)


def test_the_context_section_of_a_config_file_is_read_and_checked(tmp_path: Any) -> None:
    path = tmp_path / "hermes.yaml"
    path.write_text("context:\n  max_context_tokens: 32000\n  on_input_overflow: truncate\n",
                    encoding="utf-8")
    config = load_config(path, environ={})
    assert config.context.max_context_tokens == 32_000
    assert config.context.on_input_overflow == "truncate"
    path.write_text("history_window: 20\ncontext:\n  shares: {history: 1.5}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"hermes.yaml:2: context: .*shares of \['history'\]"):
        load_config(path, environ={})


def test_a_tokenizer_file_is_found_next_to_the_config_file(tmp_path: Any) -> None:
    import shutil

    from hermes_fsm.memory.onnx_embedder import minilm_files

    (tmp_path / "conf").mkdir()
    shutil.copy(minilm_files()[1], tmp_path / "conf" / "tokenizer.json")
    path = tmp_path / "conf" / "hermes.yaml"
    path.write_text("mcp_servers: {}\ncontext: {tokenizer: tokenizer.json}\n", encoding="utf-8")
    orchestrator = build_orchestrator(load_config(path, environ={}))
    assert orchestrator.context.counter.name == "tokenizer:tokenizer.json"
    assert orchestrator.context.counter.count("hello world") == 2


def test_an_orchestrator_built_from_config_uses_the_configured_budget(tmp_path: Any) -> None:
    path = tmp_path / "hermes.yaml"
    path.write_text("mcp_servers: {}\ncontext: {max_context_tokens: 3000, "
                    "reserved_output_tokens: 500}\n", encoding="utf-8")
    orchestrator = build_orchestrator(load_config(path, environ={}))
    assert orchestrator.context.budget.window == 3_000
    assert orchestrator.context.budget.available == 2_500


# --- trimming, part by part ------------------------------------------------------------------

WHEN = datetime(2026, 3, 1, tzinfo=UTC)


def recalled(values: list[tuple[str, str, float]]) -> str:
    items = [MemoryItem("u", key, value, "preference", 0.9, "active", WHEN, WHEN,
                        "user_message", "t", score=score) for key, value, score in values]
    return format_recall(items)


def past_outcomes(*lines: str) -> str:
    return "\n" + "\n".join(["Past outcomes of similar requests:", *lines])


@pytest.mark.parametrize("values", [
    [("preference.contact", "email", 0.9), ("fact.city", "Berlin", 0.6),
     ("preference.food", "no shellfish", 0.3)],
    [("preference.contact", "用邮件联系", 0.9), ("fact.city", "住在上海", 0.6),
     ("preference.food", "不吃海鲜", 0.3)],
], ids=["en", "zh"])
def test_memory_over_its_cap_loses_past_outcomes_then_its_lowest_scored_items(
        values: list[tuple[str, str, float]]) -> None:
    memory = recalled(values) + past_outcomes(
        "- [2026-02-01] inventory_lookup({'sku': 'A1001'}) → ok",
        "- [2026-02-02] inventory_lookup({'sku': 'B2002'}) → failed (TIMEOUT)")
    keep = "\n".join(recalled(values).split("\n")[:3])  # the header and the two best items
    context = builder(caps={"memory": COUNT.count(memory_block(keep))})

    built, fields = context.compose(request(memory=memory), [], "")

    assert built.memory == keep
    assert fields["dropped"] == {"memory": 3}  # two past outcomes, then the 0.3 item
    assert fields["parts"]["memory"] <= fields["caps"]["memory"]


def test_memory_that_cannot_keep_one_item_is_left_out_whole() -> None:
    memory = recalled([("preference.contact", "email", 0.9)])
    built, fields = builder(caps={"memory": 5}).compose(request(memory=memory), [], "")
    assert built.memory == ""
    assert fields["parts"]["memory"] == 0 and fields["dropped"] == {"memory": 1}


TOOLS_EN = [
    ToolDescription("weather", "Weather forecast for a city.", {"type": "object"}),
    ToolDescription("inventory_lookup", "Stock of a SKU in a warehouse.", {"type": "object"}),
    ToolDescription("send_email", "Send an email to someone.", {"type": "object"}),
]
TOOLS_ZH = [
    ToolDescription("weather", "查询城市的天气预报。", {"type": "object"}),
    ToolDescription("inventory_lookup", "查询仓库的库存。", {"type": "object"}),
    ToolDescription("send_email", "发送邮件。", {"type": "object"}),
]


@pytest.mark.parametrize("tools, text", [
    (TOOLS_EN, "How much stock of A1001 is in the east warehouse?"),
    (TOOLS_ZH, "华东仓还有多少库存?"),
], ids=["en", "zh"])
def test_tools_over_their_cap_lose_the_ones_least_related_to_the_message(
        tools: list[ToolDescription], text: str) -> None:
    cap = COUNT.count(tools_block([tools[1]]))
    planning = request(text, schema=PLAN_SCHEMA, tools=tools)

    built, fields = builder(caps={"tools": cap}).compose(planning, [], "")

    assert [t.name for t in built.tools] == ["inventory_lookup"]
    assert fields["dropped_tools"] == ["weather", "send_email"]
    assert fields["dropped"]["tools"] == 2
    assert fields["parts"]["tools"] <= cap


def test_tools_are_not_in_the_prompt_of_a_state_that_does_not_plan() -> None:
    built, fields = builder(caps={"tools": 1}).compose(request(tools=TOOLS_EN), [], "")
    assert list(built.tools) == TOOLS_EN  # the brain still knows them; the prompt has none
    assert fields["parts"]["tools"] == 0 and "tools" not in fields["dropped"]
    assert "Tools you may call" not in chat_messages(built)[1]["content"]


@pytest.mark.parametrize("pairs", [
    (("How many A1001?", "342 left."), ("And B2002?", "17 left."), ("Thanks!", "You're welcome.")),
    (("A1001还有多少?", "还有342件。"), ("B2002呢?", "还有17件。"), ("谢谢!", "不客气。")),
], ids=["en", "zh"])
def test_history_over_its_grant_loses_whole_turns_oldest_first(pairs: Any) -> None:
    history = turns(*pairs)
    cap = COUNT.count(history_block(history[-2:]))

    built, fields = builder(caps={"history": cap}).compose(request(), history, "")

    assert list(built.history) == history[-2:]
    assert fields["dropped"] == {"history": 4}
    assert fields["parts"]["history"] <= cap


def test_when_messages_are_not_enough_the_summary_loses_its_oldest_lines() -> None:
    summary = "user: first old thing\nuser: second old thing\nuser: must pay before Friday"
    cap = COUNT.count("Summary of the earlier conversation:\nuser: must pay before Friday")

    built, fields = builder(caps={"history": cap}).compose(
        request(), turns(("hello", "hi")), summary)

    assert built.summary == "user: must pay before Friday"
    assert list(built.history) == []
    assert fields["truncated"] == ["summary"]
    assert fields["parts"]["summary"] + fields["parts"]["history"] <= cap


def test_large_outputs_of_earlier_steps_shrink_the_other_parts_in_proportion() -> None:
    big = Intent(intent_type="inventory_query", parameters={"notes": "stock " * 1_500},
                 confidence=0.9)
    history = turns(*[(f"question {i} about stock", f"answer {i} with 342 units")
                      for i in range(40)])
    memory = recalled([(f"fact.k{i}", f"value number {i}", 0.9 - i / 100) for i in range(40)])
    context = builder(max_context_tokens=2_048, reserved_output_tokens=256)

    _, fields = context.compose(request(memory=memory, outputs={"intent": big}), history, "")

    caps = fields["caps"]
    assert fields["parts"]["steps"] > 1_000
    assert caps["memory"] < context.budget.caps["memory"]
    assert caps["history"] < context.budget.caps["history"]
    assert caps["memory"] / caps["history"] == pytest.approx(
        context.budget.caps["memory"] / context.budget.caps["history"], rel=0.05)
    assert fields["used"] <= fields["budget"] and fields["overflow"] == 0
    assert sum(fields["parts"].values()) == fields["used"]


def test_what_nothing_can_cut_is_reported_as_overflow_never_silent() -> None:
    huge = Intent(intent_type="x", parameters={"notes": "stock " * 2_000}, confidence=0.5)
    context = builder(max_context_tokens=300, reserved_output_tokens=100)

    built, fields = context.compose(
        request(memory=recalled([("fact.a", "b", 0.9)]), outputs={"intent": huge}),
        turns(("a", "b")), "")

    assert fields["overflow"] == fields["used"] - fields["budget"] > 0
    assert built.memory == "" and list(built.history) == []  # the cuttable parts gave way


@pytest.mark.parametrize("text", ["please read this " * 400, "请读一下这段话。" * 300],
                         ids=["en", "zh"])
async def test_an_input_over_its_cap_is_refused_before_the_turn_starts(
        make_orchestrator: Any, text: str) -> None:
    orchestrator = make_orchestrator(context=ContextConfig(caps={"input": 200}))
    with pytest.raises(ContextOverflow, match=r"input budget is 200") as caught:
        await orchestrator.run_turn("s1", text)
    assert "on_input_overflow: truncate" in str(caught.value)
    assert orchestrator.sessions() == {}  # no session, no turn, no events


async def test_over_http_an_input_over_its_cap_is_a_422_naming_the_budget() -> None:
    import httpx

    from hermes_fsm.server import create_app
    from tests.http_support import served

    app = create_app(demo_orchestrator(context=ContextConfig(caps={"input": 50})),
                     tokens={"t": "a"})
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        response = await http.post("/v1/sessions/s1/turns", json={"text": "word " * 200},
                                   headers={"Authorization": "Bearer t"})
    assert response.status_code == 422
    assert "input budget is 50" in response.json()["error"]["message"]


async def test_with_truncate_the_brain_gets_the_input_cut_and_the_event_says_so(
        make_orchestrator: Any) -> None:
    brain = ScriptedBrain(happy_script())
    orchestrator = make_orchestrator(brain=brain, context=ContextConfig(
        caps={"input": 60}, on_input_overflow="truncate"))
    text = "How many A1001? " + "Some very long background story. " * 100

    result = await orchestrator.run_turn("s1", text)

    assert result.events[0].text == text  # the turn records what the user sent
    sent = brain.requests[0].text
    assert text.startswith(sent[:-1]) and sent.endswith("…") and len(sent) < len(text)
    for event in built_events(result.events):
        assert event.truncated == ["input"]
        assert event.parts["input"] <= event.caps["input"] == 60


# --- the event, and what the brain gets ---------------------------------------------------------


async def test_every_brain_request_is_preceded_by_its_context_built_event(
        make_orchestrator: Any) -> None:
    result = await make_orchestrator(brain=RecordingRules()).run_turn("s1", QUESTION)
    events = list(result.events)
    calls = [i for i, e in enumerate(events) if e.kind == "brain_call"]
    assert len(calls) == 4 == len(built_events(events))
    for i in calls:
        built, call = events[i - 1], events[i]
        assert built.kind == "context_built"
        assert (built.state, built.attempt) == (call.state, call.attempt)
    for event in built_events(events):
        assert event.counter == "heuristic"
        assert (event.window, event.reserved_output, event.budget) == (8192, 1024, 7168)
        assert sum(event.parts.values()) == event.used <= event.budget
        assert set(event.parts) == {"system", "summary", "history", "memory", "resources",
                                    "tools", "steps", "graph", "input"}
        assert EVENT_ADAPTER.validate_json(event.model_dump_json()) == event
    planning = next(e for e in built_events(events) if e.state == "PLANNING")
    assert planning.parts["tools"] > 0 and planning.parts["steps"] > 0
    assert planning.parts["graph"] > 0  # INTENT put the SKU and warehouse in the graph
    assert next(e for e in built_events(events) if e.state == "INTENT").parts["graph"] == 0


async def test_the_parts_are_what_the_prompt_sent_to_the_brain_costs(
        make_orchestrator: Any) -> None:
    from hermes_fsm.brain.prompt import input_block, summary_block

    brain = RecordingRules()
    orchestrator = make_orchestrator(brain=brain, history_window=6, context=ContextConfig(
        caps={"input": 12}, on_input_overflow="truncate"))
    events = []
    for text in (CONSTRAINT, QUESTION, "我喜欢用邮件联系", "And how many B2002 in total?"):
        events += built_events((await orchestrator.run_turn("s1", text, "u1")).events)
    assert len(events) == len(brain.requests)
    assert any(e.parts["history"] for e in events) and any(e.parts["summary"] for e in events)
    assert any("input" in e.truncated and e.parts["history"] for e in events)
    assert all(e.dropped == {} for e in events)  # a roomy budget: nothing else gives way
    for event, sent in zip(events, brain.requests, strict=True):
        assert event.parts["history"] == COUNT.count(history_block(sent.history))
        assert event.parts["summary"] == COUNT.count(summary_block(sent.summary))
        assert event.parts["memory"] == COUNT.count(memory_block(sent.memory))
        assert event.parts["input"] == COUNT.count(input_block(sent.text)) <= 12


async def test_retries_build_the_context_again_per_attempt(make_orchestrator: Any) -> None:
    bad = {"intent_type": "x", "parameters": {}, "confidence": 7}
    brain = ScriptedBrain(happy_script(intent=[bad, bad, {
        "intent_type": "inventory_query", "parameters": {"sku": "A1001", "warehouse": "east"},
        "confidence": 0.9, "needs_tools": True}]))
    result = await make_orchestrator(brain=brain).run_turn("s1", QUESTION)
    intents = [e for e in built_events(result.events) if e.state == "INTENT"]
    assert [e.attempt for e in intents] == [1, 2, 3]
    assert intents[1].parts["steps"] > intents[0].parts["steps"]  # the refusal is fed back


async def test_the_console_shows_a_context_line_only_when_something_was_cut(
        make_orchestrator: Any) -> None:
    from hermes_fsm.cli.console import format_event

    quiet = await make_orchestrator().run_turn("s1", QUESTION)
    assert all(format_event(e) is None for e in built_events(quiet.events))
    cut = await make_orchestrator(context=ContextConfig(
        caps={"input": 6}, on_input_overflow="truncate")).run_turn("s1", QUESTION)
    line = format_event(built_events(cut.events)[0])
    assert line is not None and "cut input" in line


def test_chat_messages_carry_the_summary_and_the_whole_window_given() -> None:
    history = turns(*[(f"q{i}", f"a{i}") for i in range(6)])
    prompt = chat_messages(request(history=history, summary="user: must pay before Friday"))
    user = prompt[1]["content"]
    assert "Summary of the earlier conversation:\nuser: must pay before Friday" in user
    assert all(f"user: q{i}" in user for i in range(6))  # no hidden cut of its own
    assert user.index("Summary of") < user.index("Conversation so far") < user.index(
        "User message")


# --- the rolling summary ----------------------------------------------------------------------


async def test_history_over_its_limits_is_folded_into_the_rolling_summary(
        make_orchestrator: Any) -> None:
    brain = RecordingRules()
    orchestrator = make_orchestrator(brain=brain, history_window=4)
    for text in (CONSTRAINT, QUESTION, "And how many B2002 in total?"):
        result = await orchestrator.run_turn("s1", text, user_id="u1")

    (fold,) = [e for e in built_events(result.events) if e.summary is not None]
    assert fold.state == "INTENT" and fold.folded == 4 and fold.summarizer == "rules"
    assert "user: I must submit the tax report before Friday 5pm." in fold.summary
    session = orchestrator.session("s1", "u1")
    assert session.summary == fold.summary
    assert brain.summaries[0].messages[0]["content"] == CONSTRAINT
    last = brain.requests[-1]
    assert last.summary == fold.summary and CONSTRAINT not in [m["content"] for m in
                                                               last.history]
    assert "before Friday 5pm" in chat_messages(last)[1]["content"]


async def test_the_builder_only_says_what_to_fold_the_event_applied_folds_it(
        make_orchestrator: Any) -> None:
    orchestrator = make_orchestrator(history_window=4)
    for text in (CONSTRAINT, QUESTION):
        await orchestrator.run_turn("s1", text, user_id="u1")
    session = orchestrator.session("s1", "u1")
    before = [dict(m) for m in session.history]
    turn = orchestrator.new_turn(session, "hello", "u1", turn_id="t-next")

    built, fields = await orchestrator.context.build(turn, request())

    assert fields["folded"] == 4 and CONSTRAINT in fields["summary"]
    assert built.summary == fields["summary"] and built.history == ()
    assert session.history == before and session.summary == ""  # nothing written
    assert len(turn.history) == 4
    apply_fold(turn, fields)
    assert session.history == [] and session.summary == fields["summary"]
    assert turn.history == ()


async def test_the_rolling_summary_stays_within_budget_over_many_turns(
        make_orchestrator: Any) -> None:
    brain = RecordingRules()
    orchestrator = make_orchestrator(brain=brain, history_window=12,
                                     context=ContextConfig(**SMALL))
    budget = orchestrator.context.budget
    fillers = [QUESTION, "tell me something nice", "我喜欢用邮件联系", "And how many B2002?"]
    texts = [CONSTRAINT] + [fillers[i % len(fillers)] for i in range(40)]
    events = []
    for text in texts:
        events += built_events((await orchestrator.run_turn("s1", text, "u1")).events)

    for event in events:
        assert event.parts["summary"] + event.parts["history"] <= event.caps["history"]
        assert event.parts["summary"] <= budget.summary_cap
        # a rules brain reads no prompt: it gets every tool, outside the budget (issue 18)
        assert event.used - event.parts["tools"] <= event.budget and event.overflow == 0
    folds = [e for e in events if e.summary is not None]
    assert 3 <= len(folds) <= len(texts) // 2  # every few turns, not every turn
    assert "before Friday 5pm" in orchestrator.session("s1", "u1").summary
    assert all(len(r.history) <= 10 for r in brain.requests)


class Summaries(RecordingRules):
    """The rules brain with a summarizer of its own making."""

    name = "custom"

    def __init__(self, summarize: Any) -> None:
        super().__init__()
        self._summarize = summarize

    async def summarize(self, request: SummaryRequest) -> str:
        self.summaries.append(request)
        summary: str = await self._summarize(request)
        return summary


async def fold_event(orchestrator: Orchestrator) -> Any:
    for text in (CONSTRAINT, QUESTION):
        await orchestrator.run_turn("s1", text, "u1")
    result = await orchestrator.run_turn("s1", "hello", "u1")
    (fold,) = [e for e in built_events(result.events) if e.summary is not None]
    return fold


async def test_a_brain_with_a_summarizer_writes_the_summary(make_orchestrator: Any) -> None:
    async def write(request: SummaryRequest) -> str:
        return "user: tax report due before Friday 5pm"

    fold = await fold_event(make_orchestrator(brain=Summaries(write), history_window=4))
    assert (fold.summarizer, fold.summary_error) == ("custom", None)
    assert fold.summary == "user: tax report due before Friday 5pm"


async def test_a_failing_summarizer_falls_back_to_the_extractive_summary_and_says_why(
        make_orchestrator: Any) -> None:
    async def fail(request: SummaryRequest) -> str:
        raise RuntimeError("the model is down")

    fold = await fold_event(make_orchestrator(brain=Summaries(fail), history_window=4))
    assert fold.summarizer == "extractive"
    assert fold.summary_error == "RuntimeError: the model is down"
    assert "before Friday 5pm" in fold.summary


async def test_a_summarizer_that_hangs_is_cut_off_and_falls_back(make_orchestrator: Any) -> None:
    async def hang(request: SummaryRequest) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    orchestrator = make_orchestrator(brain=Summaries(hang), history_window=4,
                                     context=ContextConfig(summary_timeout_s=0.05))
    fold = await fold_event(orchestrator)
    assert fold.summarizer == "extractive"
    assert fold.summary_error == "TimeoutError: no summary within 0.05s"
    assert "before Friday 5pm" in fold.summary


async def test_an_empty_brain_summary_falls_back(make_orchestrator: Any) -> None:
    async def empty(request: SummaryRequest) -> str:
        return "  "

    fold = await fold_event(make_orchestrator(brain=Summaries(empty), history_window=4))
    assert fold.summarizer == "extractive" and "empty" in (fold.summary_error or "")


async def test_a_brain_summary_over_its_budget_is_cut_to_it(make_orchestrator: Any) -> None:
    async def verbose(request: SummaryRequest) -> str:
        return "\n".join(f"user: detail {i} must be kept" for i in range(2_000))

    orchestrator = make_orchestrator(brain=Summaries(verbose), history_window=4)
    fold = await fold_event(orchestrator)
    assert fold.summarizer == "custom" and "summary" in fold.truncated
    assert fold.parts["summary"] <= orchestrator.context.budget.summary_cap


async def test_the_openai_brain_summarizes_with_the_model_and_falls_back_when_it_fails(
        make_orchestrator: Any) -> None:
    from hermes_fsm.brain.openai import OpenAIBrain
    from tests.fake_chat_server import FakeChatServer, Reply
    from tests.http_support import served

    server = FakeChatServer()
    server.queue.append(Reply("user: tax report before Friday 5pm (from the model)"))
    server.queue.append(Reply(status=400, content="bad request"))
    async with served(server.app()) as url:
        brain = OpenAIBrain(f"{url}/v1", "fake-model", max_retries=0)
        context = ContextBuilder(brain=brain)
        previous = "user: earlier things"
        messages = [{"role": "user", "content": CONSTRAINT}]
        good = await context.summarize(brain, "u", "s", previous, messages)
        bad = await context.summarize(brain, "u", "s", previous, messages)
        await brain.aclose()
    assert (good.text, good.summarizer) == ("user: tax report before Friday 5pm (from the "
                                            "model)", "openai:fake-model")
    prompt = server.requests[0]["messages"]
    assert "Keep every stated time and date" in prompt[0]["content"]
    assert "user: earlier things" in prompt[1]["content"] and CONSTRAINT in prompt[1]["content"]
    assert "response_format" not in server.requests[0]
    assert bad.summarizer == "extractive" and "BrainError" in (bad.error or "")
    assert "before Friday 5pm" in bad.text
    assert isinstance(context.counter, CalibratedCounter)  # it reports usage


def test_a_calibrated_counter_learns_only_from_counted_usage() -> None:
    context = ContextBuilder(counter=CalibratedCounter())
    context.observe(100, {"completion_tokens": 9}, "estimated:stream_chunks")
    context.observe(100, {"prompt_tokens": 150}, "estimated:stream_chunks")
    assert context.counter.ratio == 1.0  # type: ignore[attr-defined]
    context.observe(100, {"prompt_tokens": 150}, "server")
    assert context.counter.ratio > 1.0  # type: ignore[attr-defined]


# --- replay -------------------------------------------------------------------------------------


async def recorded_session(make_orchestrator: Any) -> str:
    orchestrator = make_orchestrator(history_window=4)
    for text in (CONSTRAINT, QUESTION, "我喜欢用邮件联系", "hello"):
        await orchestrator.run_turn("s1", text, "u1")
    return recording_text(orchestrator, "s1")


async def test_a_recording_with_context_events_validates_and_reruns(
        make_orchestrator: Any) -> None:
    text = await recorded_session(make_orchestrator)
    recording = parse_recording(text, "<memory>")
    assert any(e["kind"] == "context_built" and e["summary"] for e in recording.raw)
    replayer = Replayer()
    assert replayer.validate(recording).ok
    assert (await rerun(replayer, recording)).ok


async def rerun(replayer: Replayer, recording: Any) -> Any:
    return await replayer.arerun(recording, raise_on_failure=False)


def edit_lines(text: str, kind: str, change: Any) -> str:
    lines = text.splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        event = json.loads(line)
        if event["kind"] == kind:
            event = change(event)
        out.append(json.dumps(event, ensure_ascii=False))
    return "\n".join(out) + "\n"


async def test_rerun_does_not_compare_context_events_but_still_compares_outputs(
        make_orchestrator: Any) -> None:
    text = await recorded_session(make_orchestrator)

    def inflate(event: dict[str, Any]) -> dict[str, Any]:
        return {**event, "used": event["used"] * 3, "window": 128_000,
                "parts": {k: v * 3 for k, v in event["parts"].items()}}

    def rewrite(event: dict[str, Any]) -> dict[str, Any]:
        if event["state"] == "RESPONSE":
            event = {**event, "output": {**event["output"], "text": "something else"},
                     "raw": None}
        return event

    replayer = Replayer()
    other_budget = parse_recording(edit_lines(text, "context_built", inflate), "<inflated>")
    assert (await rerun(replayer, other_budget)).ok  # a recording process's budget is not behaviour
    other_answer = parse_recording(edit_lines(text, "state_output", rewrite), "<rewritten>")
    result = await rerun(replayer, other_answer)
    assert not result.ok and "something else" in result.divergences[0].diff


async def test_a_recording_made_before_context_events_still_reruns(
        make_orchestrator: Any) -> None:
    text = await recorded_session(make_orchestrator)
    lines = text.splitlines()
    kept = [json.loads(line) for line in lines[1:]]
    kept = [e for e in kept if e["kind"] != "context_built"]
    for seq, event in enumerate(kept, start=1):
        event["seq"] = seq
    old = "\n".join([lines[0], *(json.dumps(e, ensure_ascii=False) for e in kept)]) + "\n"
    recording = parse_recording(old, "<old>")
    assert Replayer().validate(recording).ok
    assert (await rerun(Replayer(), recording)).ok


def test_chat_says_a_message_is_too_long_and_goes_on(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from hermes_fsm.cli.main import main

    monkeypatch.delenv("HERMES_CONFIG", raising=False)
    config = tmp_path / "hermes.yaml"
    config.write_text(f"mcp_servers: {{}}\nsessions: {{store: memory}}\nmemory: {{data_dir: "
                      f"{tmp_path / 'data'}}}\ncontext: {{caps: {{input: 30}}}}\n",
                      encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.StringIO("word " * 100 + "\n" + QUESTION + "\n/quit\n"))
    out = io.StringIO()
    assert main(["chat", "--quiet", "--config", str(config)], out=out) == 0
    text = out.getvalue()
    assert "input budget is 30" in text
    assert "agent> " in text and "342" in text


def test_long_ascii_texts_count_like_the_regex() -> None:
    """Long ASCII texts are counted by run lengths: the same counts as the regex."""
    import random

    from hermes_fsm.brain.tokens import _ASCII_TOKENS, _count_runs

    rng = random.Random(7)
    pools = [[chr(i) for i in range(128)], list("ab1 .{"), list("aaaa1111....  "),
             list("a1. \t\x1c\x1f\x0b")]
    for _ in range(3000):
        pool = rng.choice(pools)
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 300)))
        assert _count_runs(text) == len(_ASCII_TOKENS.findall(text)), repr(text)
    long = '{"facts":[{"id":"fact-t1-s3-c1","content":{"sku":"A1001","qty":342}}]} ' * 4
    assert COUNT.count(long) == len(_ASCII_TOKENS.findall(long))


@pytest.mark.parametrize("now", [None, datetime(2026, 12, 1, 10, 30, tzinfo=UTC)])
def test_the_system_prompt_is_measured_once_per_state_and_adds_up_to_the_whole(now):
    from hermes_fsm.brain.prompt import system_parts, system_prompt
    from hermes_fsm.graph.loader import default_graph_path, load_graph

    counter = HeuristicCounter()
    fitter = ContextBuilder(ContextConfig(), counter=counter)
    for spec in load_graph(default_graph_path()).states.values():
        if spec.contract is None:
            continue
        asked = BrainRequest(state=spec.name, contract_name=spec.contract.contract_name,
                             schema=spec.contract.model_json_schema(), text="hi",
                             user_id="u", now=now)
        whole = counter.count(system_prompt(asked))
        assert fitter.compose(asked, [], "")[1]["parts"]["system"] == whole
        fixed, _ = system_parts(asked)
        assert system_parts(asked)[0] is fixed  # the same object: measured once
        assert fitter._system[spec.name][0] is fixed and fitter._system[spec.name][2] > 0
