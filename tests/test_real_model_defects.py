"""The real-model defects of issue 18, each against a real HTTP server (a scripted fake
model) or the real contract: streaming, caps, cancellation, budgets, readable answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from hermes_fsm import Orchestrator
from hermes_fsm.brain.grammar_schema import json_safe_strings
from hermes_fsm.brain.openai import CONTRACT_MAX_TOKENS, AnswerTextStream, OpenAIBrain
from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import load_config
from hermes_fsm.contracts.states import Response
from hermes_fsm.errors import ConfigError
from hermes_fsm.graph.loader import default_graph_path, load_graph
from tests.fake_chat_server import FakeChatServer
from tests.http_support import served
from tests.support import INTENT_CHAT

INTENT_SCHEMA = {"type": "object", "properties": {"intent_type": {"type": "string"}}}


def request(contract: str = "intent", **fields: Any) -> BrainRequest:
    return BrainRequest(state=contract.upper(), contract_name=contract, schema=INTENT_SCHEMA,
                        text="hi", user_id="u", **fields)


# --- streaming a raw control character ----------------------------------------------------

def test_a_raw_newline_in_a_streamed_answer_is_streamed_not_a_crash():
    stream = AnswerTextStream()
    assert stream.feed('{"text": "line1') == "line1"
    assert stream.feed('\nline2"}') == "\nline2"


def test_a_bad_escape_in_a_streamed_answer_stops_the_stream_quietly():
    stream = AnswerTextStream()
    assert stream.feed('{"text": "a') == "a"
    assert stream.feed('\\x41 b"}') == ""
    assert stream.feed(" more") == ""


def test_the_raw_control_character_is_still_a_contract_violation_of_the_whole_answer():
    with pytest.raises(ValidationError):
        Response.validate_output('{"text": "line1\nline2", "evidence": []}')


# --- the Response contract ------------------------------------------------------------------

@pytest.mark.parametrize("text", [" ", "\n\t", "The answer, with evidence references that must "
                                  "name facts of this turn.",
                                  "the answer with evidence references that must name facts of "
                                  "this turn",
                                  "Answer: Ids of the facts the answer relies on."])
def test_the_response_refuses_blank_text_and_the_schemas_own_words(text):
    with pytest.raises(ValidationError) as caught:
        Response.model_validate({"text": text, "evidence": []})
    assert "blank" in str(caught.value) or "restates the schema" in str(caught.value)


def test_the_response_refuses_an_answer_that_restates_the_last_refusal():
    # SmolLM2's answer on a retry, from bench/real_model.py (turn 19)
    said = "Your message was refused by contract response@1.0.0: Your JSON Schema ..."
    with pytest.raises(ValidationError, match="restates why the previous attempt"):
        Response.model_validate({"text": said, "evidence": []})


def test_the_response_takes_a_real_answer():
    assert Response.model_validate({"text": "342 units are left.", "evidence": []}).text


# --- token caps, the format and streaming every state ---------------------------------------

@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeChatServer, str]]:
    server = FakeChatServer()
    async with served(server.app()) as url:
        yield server, f"{url}/v1"


async def test_each_contract_has_a_token_cap_and_configuration_overrides_it(fake):
    server, url = fake
    server.script("intent", INTENT_CHAT)
    brain = OpenAIBrain(url, "fake-model")
    await brain.decide(request())
    assert server.requests[-1]["max_tokens"] == CONTRACT_MAX_TOKENS["intent"]
    capped = OpenAIBrain(url, "fake-model", max_tokens=900, contract_max_tokens={"intent": 64})
    await capped.decide(request())
    assert server.requests[-1]["max_tokens"] == 64
    await brain.aclose()
    await capped.aclose()


async def test_a_configured_json_object_schema_format_sends_no_refused_first_request(fake):
    server, url = fake
    server.refused_formats.add("json_schema")
    server.script("intent", INTENT_CHAT)
    config = load_config(None, environ={}).brain.model_copy(update={
        "kind": "openai", "base_url": url, "model": "fake-model",
        "structured_output": "json_object_schema"})
    brain = OpenAIBrain.from_config(config)
    await brain.decide(request())
    await brain.decide(request())
    assert [r["response_format"]["type"] for r in server.requests] == ["json_object"] * 2
    assert server.requests[0]["response_format"]["schema"] == json_safe_strings(INTENT_SCHEMA)
    assert brain.format_refusals == 0
    await brain.aclose()


async def test_auto_probes_the_format_once_and_counts_the_probe(fake):
    server, url = fake
    server.refused_formats.add("json_schema")
    server.script("intent", INTENT_CHAT)
    brain = OpenAIBrain(url, "fake-model")
    for _ in range(3):
        await brain.decide(request())
    assert [r["response_format"]["type"] for r in server.requests] == [
        "json_schema", "json_object", "json_object", "json_object"]
    assert brain.format_refusals == 1
    await brain.aclose()


async def test_stream_every_state_streams_a_non_text_contract_and_returns_it_whole(fake):
    server, url = fake
    server.script("intent", INTENT_CHAT)
    brain = OpenAIBrain(url, "fake-model", stream_every_state=True)
    reply = await brain.decide(request())
    assert server.requests[-1]["stream"] is True
    assert json.loads(reply.output) == INTENT_CHAT
    await brain.aclose()


class SlowModel:
    """Streams one chunk every 20 ms for 10 s, and notes when the client went away."""

    def __init__(self) -> None:
        self.sent = 0
        self.stopped = asyncio.Event()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._completions,
                                       methods=["POST"])])

    async def _completions(self, request: Request) -> StreamingResponse:
        await request.json()

        async def chunks() -> AsyncIterator[bytes]:
            try:
                yield b'data: {"choices": [{"delta": {"content": "{\\"intent_type\\": \\""}}]}\n\n'
                for _ in range(500):
                    await asyncio.sleep(0.02)
                    self.sent += 1
                    yield b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'
            finally:
                self.stopped.set()

        return StreamingResponse(chunks(), media_type="text/event-stream")


async def test_a_timeout_closes_the_stream_and_the_server_stops_generating():
    model = SlowModel()
    async with served(model.app()) as url:
        brain = OpenAIBrain(f"{url}/v1", "slow", stream_every_state=True, max_retries=0)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await brain.decide(request())
        await asyncio.wait_for(model.stopped.wait(), 5)
        assert model.sent < 500
        await brain.aclose()


# --- budgets from configuration ---------------------------------------------------------------

def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hermes.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_budgets_come_from_configuration(tmp_path):
    config = load_config(_config(tmp_path, "budgets: {budget_s: 240, timeout_s: 90, "
                                           "states: {RESPONSE: 150}}\nmcp_servers: {}\n"),
                         environ={})
    orchestrator = build_orchestrator(config, store=None)
    graph = orchestrator.graph
    assert graph.budget_s == 240
    assert graph.states["RESPONSE"].timeout_s == 150
    timed = [s for s in graph.states.values() if s.name not in ("RESPONSE", graph.initial)
             and s.timeout_s is not None]
    assert timed and all(s.timeout_s == 90 for s in timed)


def test_a_budget_for_an_unknown_state_names_the_states(tmp_path):
    config = load_config(_config(tmp_path, "budgets: {states: {RESPONDING: 150}}\n"),
                         environ={})
    with pytest.raises(ConfigError, match=r"RESPONDING.*RESPONSE"):
        build_orchestrator(config, store=None)


def test_without_budgets_the_graph_file_is_used_as_it_is(tmp_path):
    orchestrator = build_orchestrator(load_config(_config(tmp_path, "mcp_servers: {}\n"),
                                                  environ={}), store=None)
    graph, on_file = orchestrator.graph, load_graph(default_graph_path())
    assert graph.budget_s == on_file.budget_s
    assert {n: s.timeout_s for n, s in graph.states.items()} == {
        n: s.timeout_s for n, s in on_file.states.items()}


# --- a turn always answers something readable -------------------------------------------------

def _unreachable_brain_orchestrator() -> Orchestrator:
    from hermes_fsm.demo.tools import build_demo_registry
    from hermes_fsm.testing import ScriptedBrain

    return Orchestrator(brain=ScriptedBrain({}), tools=build_demo_registry())


async def test_a_turn_whose_brain_never_answers_still_answers_readably():
    result = await _unreachable_brain_orchestrator().run_turn(None, "hello", user_id="u")
    assert result.status == "degraded"
    assert result.answer.strip()
    assert "INTENT" in result.answer and "failed" in result.answer


async def test_the_fallback_answer_comes_over_http_too():
    from hermes_fsm.server import create_app

    orchestrator = _unreachable_brain_orchestrator()
    async with served(create_app(orchestrator)) as url, httpx.AsyncClient(base_url=url) as http:
        response = await http.post("/v1/sessions/s1/turns", json={"text": "hello"})
    assert response.status_code == 200, response.text
    assert response.json()["answer"].startswith("Sorry, I could not answer that")


def test_a_graph_file_sets_its_own_fallback_answer(tmp_path):
    text = default_graph_path().read_text(encoding="utf-8")
    path = tmp_path / "g.yaml"
    path.write_text(text.replace("budget_s: 30", "budget_s: 30\nfallback_answer: 'No luck in "
                                 "{state}.'"), encoding="utf-8")
    graph = load_graph(path)
    assert graph.fallback_answer == "No luck in {state}."
