"""A model-backed answer grounded by structure (issue 18: SmolLM2-135M and Gemma 3 270M
cannot copy a 40-character fact id or a figure reliably).

The RESPONSE request shows each fact of the turn under an alias (``f1`` …) with a
placeholder per value (``{f1.quantity}``); the grammar's evidence is an enum of the aliases
and its text may write a placeholder where a figure goes. The OpenAI brain maps the
aliases back to the fact ids and fills the placeholders before the Response contract
checks the answer, so what is recorded and replayed is the answer the user read. A wrong
alias, an unfilled placeholder or no evidence is still refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError

from hermes_fsm.brain.fact_alias import FactAliases, PlaceholderStream
from hermes_fsm.brain.grammar_schema import grounded_schema, without_patterns
from hermes_fsm.brain.openai import OpenAIBrain
from hermes_fsm.brain.prompt import repair_message
from hermes_fsm.brain.protocol import BrainRequest, Repair
from hermes_fsm.contracts.grounding import states_figure
from hermes_fsm.contracts.states import Response
from hermes_fsm.events.recording import RecordingSink, load_recording
from hermes_fsm.replay import Replayer
from hermes_fsm.testing import demo_orchestrator
from tests.fake_chat_server import FakeChatServer, Reply
from tests.http_support import served
from tests.support import INTENT_TOOLS, MEMORY_NONE, PLAN_EMPTY, PLAN_LOOKUP

QUESTION = "How many A1001 are left in the east?"
STOCK = {"tool": "inventory_lookup", "output": {
    "sku": "A1001", "name": "Wireless mouse", "warehouse": "east", "quantity": 342}}
TOTAL = {"tool": "inventory_lookup", "output": {
    "sku": "A1001", "stock": {"east": 342, "north": 120, "south": 0, "west": 57}, "total": 519}}


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeChatServer, str]]:
    server = FakeChatServer()
    async with served(server.app()) as url:
        yield server, f"{url}/v1"


def script_turn(server: FakeChatServer, *responses: Any) -> None:
    server.script("intent", INTENT_TOOLS)
    server.script("plan", PLAN_LOOKUP, PLAN_EMPTY)
    server.script("response", *responses)
    server.script("memory_commit", MEMORY_NONE)


def in_aliases(body: dict[str, Any]) -> dict[str, Any]:
    """What a small model can do: copy the alias and the placeholder the prompt shows."""
    prompt = "\n".join(m["content"] for m in body["messages"])
    assert re.search(r"^- f1 \(inventory_lookup\): .*\{f1\.quantity\} = 342", prompt, re.M)
    assert "fact-" not in prompt  # no long id to copy
    return {"text": "A1001: {f1.quantity} units left in the east.", "evidence": ["f1"]}


async def test_an_answer_in_aliases_reaches_the_user_in_fact_ids_and_values(fake, tmp_path):
    server, url = fake
    script_turn(server, Reply(in_aliases, chunk_size=3))  # placeholders split across chunks
    orchestrator = demo_orchestrator(brain=OpenAIBrain(url, "fake-model"))
    sink = RecordingSink(tmp_path, orchestrator)
    orchestrator.add_sink(sink)

    result = await orchestrator.run_turn("s1", QUESTION)
    await orchestrator.aclose()
    sink.close()

    assert result.status == "completed"
    assert result.answer == "A1001: 342 units left in the east."
    response = next(e for e in result.events
                    if e.kind == "state_output" and e.state == "RESPONSE")
    (fact_id,) = response.output["evidence"]
    assert fact_id.startswith("fact-") and response.output["text"] == result.answer
    assert not [e for e in result.events if e.kind == "contract_violation"]
    chunks = [e.text for e in result.events if e.kind == "token_chunk"]
    assert "".join(chunks) == result.answer  # streamed filled, as the user reads it
    answered = [e.brain for e in result.events
                if e.kind == "brain_call" and e.state == "RESPONSE"]
    assert answered == ["openai:fake-model"]
    # the recording holds the filled answer and the brain that gave it, and validates
    # against today's contracts (a rerun of a streamed turn diverges at its token_chunk
    # events whatever the answer: the replay brain streams nothing)
    recording = load_recording(sink.path_for("s1"))
    recorded = next(e for e in recording.events
                    if e.kind == "state_output" and e.state == "RESPONSE")
    assert recorded.output["text"] == result.answer and recorded.output["evidence"] == [fact_id]
    assert [e.brain for e in recording.events
            if e.kind == "brain_call" and e.state == "RESPONSE"] == ["openai:fake-model"]
    assert Replayer().validate(recording).ok


async def test_an_alias_that_names_no_fact_is_refused_and_the_repair_speaks_aliases(fake):
    server, url = fake
    script_turn(server, {"text": "A1001: {f1.quantity} units.", "evidence": ["f7"]},
                in_aliases)
    orchestrator = demo_orchestrator(brain=OpenAIBrain(url, "fake-model"))

    result = await orchestrator.run_turn("s1", QUESTION)
    await orchestrator.aclose()

    refused = [e for e in result.events if e.kind == "contract_violation"]
    assert [e.state for e in refused] == ["RESPONSE"]
    assert "f7" in json.dumps(refused[0].errors)
    assert result.status == "completed" and result.answer == "A1001: 342 units left in the east."
    retry = [r for r in server.requests if server.contract_of(r) == "response"][1]
    repair = retry["messages"][-1]["content"]
    assert "f7" in repair and "(facts: f1)" in repair and "fact-" not in repair


async def test_an_unfilled_placeholder_is_refused(fake):
    server, url = fake
    script_turn(server, {"text": "A1001: {f1.stock} units.", "evidence": ["f1"]}, in_aliases)
    orchestrator = demo_orchestrator(brain=OpenAIBrain(url, "fake-model"))

    result = await orchestrator.run_turn("s1", QUESTION)
    await orchestrator.aclose()

    (refused,) = [e for e in result.events if e.kind == "contract_violation"]
    assert "{f1.stock}" in json.dumps(refused.errors, ensure_ascii=False)
    assert result.answer == "A1001: 342 units left in the east."


def test_the_contract_refuses_a_placeholder_and_resolve_invents_no_evidence():
    with pytest.raises(ValidationError, match="placeholder"):
        Response.model_validate({"text": "There are {f2} left.", "evidence": []})
    aliases = FactAliases.of([("fact-a", STOCK)])
    resolved = json.loads(aliases.resolve('{"text": "{f1.quantity} left", "evidence": []}'))
    assert resolved == {"text": "342 left", "evidence": []}  # no evidence stays none
    assert aliases.resolve("not json {f1}") == "not json {f1}"  # refused as it was
    context = {"fact_ids": {"fact-a"}, "fact_figures": {"fact-a": ["342"]}}
    with pytest.raises(ValidationError, match="names no fact"):
        Response.model_validate_json(aliases.resolve(
            '{"text": "342 left", "evidence": ["f2"]}'), context=context)


def test_each_value_has_a_placeholder_and_the_whole_fact_one_too():
    aliases = FactAliases.of([("fact-a", STOCK), ("fact-b", TOTAL)])
    assert aliases.ids == {"f1": "fact-a", "f2": "fact-b"}
    assert aliases.values["{f1.quantity}"] == "342"
    assert aliases.values["{f2.stock}"] == "east 342, north 120, south 0, west 57"
    assert aliases.values["{f2}"].endswith("total 519")
    assert aliases.with_figures() == ["{f1.quantity}", "{f2.stock}", "{f2.total}"]
    assert aliases.fill("{f2.total} in all ({f2.stock}); {f3} {f1.nope}") == (
        "519 in all (east 342, north 120, south 0, west 57); {f3} {f1.nope}")


def test_the_repair_message_names_facts_by_alias():
    fact_id = "fact-turn-0123456789abcdef-s4-c1"
    with pytest.raises(ValidationError) as refused:
        Response.model_validate({"text": "342", "evidence": ["x"]},
                                context={"fact_ids": {fact_id}})
    request = _request([(fact_id, STOCK)], repair=Repair.violation("response@1.0.0",
                                                                    refused.value))
    text = repair_message(request)
    assert "(facts: f1)" in text and "fact-turn" not in text


def test_the_grammar_takes_a_placeholder_or_the_figure_and_compiles():
    schema = grounded_schema(Response.json_schema(), [("f1", ["342"]), ("f2", [])],
                             placeholders=["{f1.quantity}"], also=["{f1.name}", "{f2}"])
    assert schema["properties"]["evidence"]["items"]["enum"] == ["f1", "f2"]
    pattern = re.compile(schema["properties"]["text"]["pattern"])
    assert pattern.match("A1001 has {f1.quantity} units.")
    assert pattern.match("还有{f1.quantity}件")
    assert pattern.match("A1001 has 342 units.")
    assert not pattern.match("A1001 is in stock.")
    assert not pattern.match("{f1.name}: {f1.quantity} left, see {f2}")  # the figure first
    assert pattern.match("{f1.quantity} left of {f1.name}, see the calendar")
    assert not pattern.match("A1001 has {f1.name}.")  # no figure
    assert not pattern.match("A1001 has {f1.quantity} of {f3.x}.")  # only the facts' ones
    assert not pattern.match("{f1.quantity} {f1.name} {f2}")  # one more at most
    # what the contract reads as the figure, the grammar writes: "1-0" states no 0
    zero = re.compile(grounded_schema(Response.json_schema(), [("f1", ["0"])])[
        "properties"]["text"]["pattern"])
    assert not zero.match("this is not a 1-0 answer") and zero.match("B2002: 0 left")
    assert not states_figure("this is not a 1-0 answer", ["0"])
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(grounded_schema(
        without_patterns(Response.json_schema()), [("f1", ["342"])],
        placeholders=["{f1.quantity}"])))
    assert llama_grammar.LlamaGrammar.from_string(gbnf, verbose=False) is not None


def test_a_placeholder_split_across_pieces_streams_as_its_value():
    stream = PlaceholderStream({"{f1.quantity}": "342"})
    pieces = ["A1001: {", "f1", ".quan", "tity} units {f", "9} {x"]
    shown = "".join(stream.feed(p) for p in pieces) + stream.flush()
    assert shown == "A1001: 342 units {f9} {x"


def _request(facts: list[tuple[str, Any]], **fields: Any) -> BrainRequest:
    from hermes_fsm.contracts.states import ResultReport

    report = ResultReport.model_validate({
        "facts": [{"id": i, "source": "t", "content": c} for i, c in facts],
        "violations": [], "needs_more_tools": False})
    return BrainRequest(state="RESPONSE", contract_name="response",
                        schema=Response.json_schema(), text=QUESTION, user_id="u",
                        outputs={"result_report": report}, attempt=2, **fields)


def test_a_memory_update_can_only_target_a_node_of_the_graph():
    """SmolLM2 wrote target_node_id "East Warehouse-A1001" on MEMORY_COMMIT (refused to the
    failure route, the turn degraded): the grammar's node is an enum of the graph's."""
    from hermes_fsm.brain.node_schema import graph_nodes_schema
    from hermes_fsm.brain.protocol import BrainRequest
    from hermes_fsm.contracts.states import MemoryCommit
    from hermes_fsm.conversation.graph import Conversation

    conv = Conversation()
    brain = OpenAIBrain("http://127.0.0.1:9/v1", "m", structured_output="json_object_schema")
    request = BrainRequest(state="MEMORY_COMMIT", contract_name="memory_commit",
                           schema=MemoryCommit.json_schema(), text="hi", user_id="u",
                           conversation=conv)
    sent = brain._body(request, stream=False)["response_format"]["schema"]
    assert sent["$defs"]["MemoryUpdate"]["properties"]["target_node_id"]["type"] == "null"
    narrowed = graph_nodes_schema(MemoryCommit.json_schema(), ["ent_1", "int_2"])
    target = narrowed["$defs"]["MemoryUpdate"]["properties"]["target_node_id"]
    assert target["anyOf"][0]["enum"] == ["ent_1", "int_2"]
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(without_patterns(narrowed)))
    assert '"ent_1"' in gbnf.replace('\\"', '"')
    assert llama_grammar.LlamaGrammar.from_string(gbnf, verbose=False) is not None


def test_a_memory_commit_request_bounds_its_updates_and_their_strings():
    """Gemma 3 wrote "tool:get_inventory:…-la-la-la…" or 15 updates of B2001…B2014 until the
    token cap cut the JSON (10 of 11 refused MEMORY_COMMITs): the grammar bounds both."""
    from hermes_fsm.brain.node_schema import MEMORY_TEXT_MAX, MEMORY_UPDATES_MAX, bounded_pattern
    from hermes_fsm.brain.protocol import BrainRequest
    from hermes_fsm.contracts.states import MemoryCommit, MemoryUpdate

    brain = OpenAIBrain("http://127.0.0.1:9/v1", "m", structured_output="json_object_schema")
    request = BrainRequest(state="MEMORY_COMMIT", contract_name="memory_commit",
                           schema=MemoryCommit.json_schema(), text="hi", user_id="u")
    sent = brain._body(request, stream=False)["response_format"]["schema"]
    assert sent["properties"]["memory_updates"]["maxItems"] == MEMORY_UPDATES_MAX
    update = sent["$defs"]["MemoryUpdate"]["properties"]
    key = re.compile(update["key"]["pattern"])  # the bound folded into the JSON-safe pattern
    assert key.match("a" * MEMORY_TEXT_MAX) and not key.match("a" * (MEMORY_TEXT_MAX + 1))
    assert not key.match("") and not key.match("a\nb")
    pattern = re.compile(update["evidence_source"]["pattern"])  # GBNF's classes: Python's too
    assert "+" not in update["evidence_source"]["pattern"]
    assert "*" not in update["evidence_source"]["pattern"]
    assert pattern.match("tool:get_inventory:hz_xh_001:IP15-128")
    assert not pattern.match("tool:get_inventory:" + "-la" * 40)  # cut before the cap
    assert "maxItems" not in MemoryCommit.json_schema()["properties"]["memory_updates"]
    contract = MemoryUpdate.model_fields["evidence_source"].metadata
    assert any("+" in str(m) for m in contract)  # the contract keeps its own pattern
    assert bounded_pattern(r"[+*]\d+(a|b)*") == r"[+*]\d{1,48}(a|b){0,4}"
    llama_grammar = pytest.importorskip(
        "llama_cpp.llama_grammar", reason="llama-cpp-python is not installed (the llm extra)")
    assert llama_grammar.LlamaGrammar.from_json_schema(json.dumps(sent), verbose=False)
