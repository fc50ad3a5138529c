"""The OpenAI-compatible brain against a real HTTP chat-completions server (a scripted fake)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hermes_fsm.brain.grammar_schema import json_safe_strings
from hermes_fsm.brain.openai import OpenAIBrain
from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import BrainConfig
from hermes_fsm.errors import BrainError, ConfigError, RetryableError
from hermes_fsm.testing import demo_orchestrator
from tests.fake_chat_server import FakeChatServer, Reply
from tests.http_support import served
from tests.support import INTENT_CHAT, INTENT_TOOLS, MEMORY_NONE, PLAN_EMPTY, PLAN_LOOKUP

INTENT_SCHEMA = {"type": "object", "properties": {"intent_type": {"type": "string"}}}
RESPONSE = {"text": "Hello there, how can I help?", "evidence": []}


class Sleeps:
    """Records the backoff delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeChatServer, str]]:
    server = FakeChatServer()
    async with served(server.app()) as url:
        yield server, f"{url}/v1"


def intent_request(**fields: Any) -> BrainRequest:
    return BrainRequest(state="INTENT", contract_name="intent", schema=INTENT_SCHEMA,
                        text="hi", user_id="u", **fields)


async def test_a_request_carries_the_contract_schema_as_the_response_format(fake: Any) -> None:
    server, url = fake
    server.script("intent", INTENT_CHAT)
    brain = OpenAIBrain(url, "fake-model")

    reply = await brain.decide(intent_request())
    await brain.aclose()

    sent = server.requests[0]["response_format"]
    assert sent == {"type": "json_schema",
                    "json_schema": {"name": "intent", "schema": INTENT_SCHEMA}}
    assert reply.usage["total_tokens"] == reply.usage["prompt_tokens"] + reply.usage[
        "completion_tokens"]


async def test_a_429_is_retried_after_the_retry_after_delay(fake: Any) -> None:
    server, url = fake
    server.script("intent", Reply(status=429, headers={"Retry-After": "2"}), INTENT_CHAT)
    sleeps = Sleeps()
    brain = OpenAIBrain(url, "fake-model", sleep=sleeps)

    reply = await brain.decide(intent_request())
    await brain.aclose()

    assert sleeps.delays == [2.0]
    assert '"smalltalk"' in reply.output


async def test_a_500_is_retried_with_growing_backoff(fake: Any) -> None:
    server, url = fake
    server.script("intent", Reply(status=500), Reply(status=503), INTENT_CHAT)
    sleeps = Sleeps()
    brain = OpenAIBrain(url, "fake-model", sleep=sleeps, backoff_s=1.0)

    await brain.decide(intent_request())
    await brain.aclose()

    assert len(server.requests) == 3
    assert 0.5 <= sleeps.delays[0] <= 1.5 and 1.0 <= sleeps.delays[1] <= 3.0


async def test_a_server_that_stays_down_raises_retryable_error_after_the_retries(
        fake: Any) -> None:
    server, url = fake
    server.script("intent", Reply(status=502))
    brain = OpenAIBrain(url, "fake-model", sleep=Sleeps(), max_retries=2)

    with pytest.raises(RetryableError, match="HTTP 502 after 3 attempt"):
        await brain.decide(intent_request())
    await brain.aclose()
    assert len(server.requests) == 3


async def test_an_unreachable_server_raises_retryable_error() -> None:
    brain = OpenAIBrain("http://127.0.0.1:9/v1", "m", sleep=Sleeps(), max_retries=1)

    with pytest.raises(RetryableError, match="ConnectError"):
        await brain.decide(intent_request())
    await brain.aclose()


async def test_a_refused_request_raises_brain_error_with_the_servers_reason(fake: Any) -> None:
    server, url = fake
    server.script("intent", Reply(status=404, content="model 'nope' not found"))
    brain = OpenAIBrain(url, "nope")

    with pytest.raises(BrainError, match="model 'nope' not found"):
        await brain.decide(intent_request())
    await brain.aclose()


async def test_a_server_without_json_schema_gets_json_mode_with_the_schema(fake: Any) -> None:
    server, url = fake
    server.refused_formats = {"json_schema"}
    server.script("intent", INTENT_CHAT)
    brain = OpenAIBrain(url, "fake-model")

    await brain.decide(intent_request())
    await brain.decide(intent_request())
    await brain.aclose()

    formats = [r["response_format"] for r in server.requests]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert formats[1]["schema"] == json_safe_strings(INTENT_SCHEMA)  # JSON-safe for a grammar


async def test_the_api_key_comes_from_the_environment_variable_named_in_config(
        fake: Any) -> None:
    server, url = fake
    server.script("intent", INTENT_CHAT)
    config = BrainConfig(kind="openai", base_url=url, model="fake-model",
                         api_key_env="FAKE_KEY")
    brain = OpenAIBrain.from_config(config, environ={"FAKE_KEY": "sk-123"})

    await brain.decide(intent_request())
    await brain.aclose()

    assert server.authorizations == ["Bearer sk-123"]


def test_a_missing_api_key_variable_is_a_config_error() -> None:
    config = BrainConfig(kind="openai", base_url="http://x/v1", model="m", api_key_env="NOPE")

    with pytest.raises(ConfigError, match="NOPE"):
        OpenAIBrain.from_config(config, environ={})


async def test_readiness_check_lists_the_model(fake: Any) -> None:
    _, url = fake
    brain = OpenAIBrain(url, "fake-model")

    check = await brain.check()
    await brain.aclose()

    assert check["ready"] is True and check["model_listed"] is True


# --- whole turns ----------------------------------------------------------------------------


def tool_turn(server: FakeChatServer) -> None:
    server.script("intent", INTENT_TOOLS)
    server.script("plan", PLAN_LOOKUP, PLAN_EMPTY)
    server.script("response", lambda body: {"text": "There are 342 A1001 in the east.",
                                            "evidence": []})
    server.script("memory_commit", MEMORY_NONE)


async def test_a_tool_turn_runs_against_the_server_with_usage_in_every_brain_call(
        fake: Any) -> None:
    server, url = fake
    tool_turn(server)
    orchestrator = demo_orchestrator(brain=OpenAIBrain(url, "fake-model"))

    result = await orchestrator.run_turn("s1", "How many A1001 are left in the east?")
    await orchestrator.aclose()

    assert result.status == "completed" and "342" in result.answer
    calls = [e for e in result.events if e.kind == "brain_call"]
    assert [c.state for c in calls] == ["INTENT", "PLANNING", "RESPONSE", "MEMORY_COMMIT"]
    assert all(c.usage.get("total_tokens", 0) > 0 for c in calls)


async def test_the_answer_is_streamed_as_token_chunks(fake: Any) -> None:
    server, url = fake
    tool_turn(server)
    orchestrator = demo_orchestrator(brain=OpenAIBrain(url, "fake-model"))

    result = await orchestrator.run_turn("s1", "How many A1001 are left in the east?")
    await orchestrator.aclose()

    chunks = [e for e in result.events if e.kind == "token_chunk"]
    assert len(chunks) > 3 and {c.state for c in chunks} == {"RESPONSE"}
    assert "".join(c.text for c in chunks) == result.answer
    streamed = [r for r in server.requests if r.get("stream")]
    assert [server.contract_of(r) for r in streamed] == ["response"]


async def test_output_that_is_not_json_is_a_contract_violation_retried_with_the_errors(
        fake: Any) -> None:
    server, url = fake
    server.script("intent", "Sure! The intent is smalltalk.", INTENT_CHAT)
    server.script("response", RESPONSE)
    server.script("memory_commit", MEMORY_NONE)
    orchestrator = demo_orchestrator(brain=OpenAIBrain(url, "fake-model"))

    result = await orchestrator.run_turn("s1", "hello")
    await orchestrator.aclose()

    kinds = [e.kind for e in result.events]
    assert "contract_violation" in kinds and "retry" in kinds
    second = [r for r in server.requests if server.contract_of(r) == "intent"][1]
    assert "refused by contract intent" in second["messages"][-1]["content"]
    assert result.status == "completed" and result.answer == RESPONSE["text"]


async def test_an_out_of_bounds_value_is_refused_and_repaired(fake: Any) -> None:
    server, url = fake
    server.script("intent", {**INTENT_CHAT, "confidence": 10}, INTENT_CHAT)
    server.script("response", RESPONSE)
    server.script("memory_commit", MEMORY_NONE)
    orchestrator = demo_orchestrator(brain=OpenAIBrain(url, "fake-model"))

    result = await orchestrator.run_turn("s1", "hello")
    await orchestrator.aclose()

    violation = next(e for e in result.events if e.kind == "contract_violation")
    assert violation.errors[0]["loc"] == ["confidence"]
    second = [r for r in server.requests if server.contract_of(r) == "intent"][1]
    assert "confidence" in second["messages"][-1]["content"]


def test_build_orchestrator_builds_the_openai_brain() -> None:
    from hermes_fsm.config.settings import HermesConfig

    config = HermesConfig(brain=BrainConfig(kind="openai", base_url="http://127.0.0.1:1/v1",
                                            model="m"), mcp_servers={})
    orchestrator = build_orchestrator(config)

    assert isinstance(orchestrator.services.brain, OpenAIBrain)
    assert orchestrator.services.brain.endpoint == "http://127.0.0.1:1/v1/chat/completions"


def test_an_openai_brain_without_base_url_is_refused_by_the_config() -> None:
    with pytest.raises(ValueError, match="base_url"):
        BrainConfig(kind="openai", model="m")


async def test_a_format_refusal_sent_as_a_500_falls_back_instead_of_retrying(
        fake: Any) -> None:
    server, url = fake  # llama-cpp-python answers an unknown response_format with HTTP 500
    server.script("intent", Reply(status=500, content="validation error: response_format.type "
                                  "Input should be 'text' or 'json_object'"), INTENT_CHAT)
    sleeps = Sleeps()
    brain = OpenAIBrain(url, "fake-model", sleep=sleeps)

    await brain.decide(intent_request())
    await brain.aclose()

    assert sleeps.delays == []
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema",
                                                                       "json_object"]


# --- token usage of streamed answers --------------------------------------------------------

RESPONSE_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"},
                                                    "evidence": {"type": "array"}}}
ANSWER = {"text": "There are 342 A1001 in the east warehouse.", "evidence": []}


def streamed_request(chunks: list[str]) -> BrainRequest:
    return BrainRequest(state="RESPONSE", contract_name="response", schema=RESPONSE_SCHEMA,
                        text="How many A1001 are left?", user_id="u", on_token=chunks.append)


async def streamed_reply(server: FakeChatServer, url: str) -> tuple[Any, list[str]]:
    server.script("response", ANSWER)
    brain = OpenAIBrain(url, "fake-model")
    chunks: list[str] = []
    try:
        reply = await brain.decide(streamed_request(chunks))
    finally:
        await brain.aclose()
    return reply, chunks


def prompt_words(body: dict[str, Any]) -> int:
    return sum(FakeChatServer.words(m["content"]) for m in body["messages"])


async def test_a_streamed_answer_asks_for_usage_and_records_what_the_server_reports(
        fake: Any) -> None:
    server, url = fake

    reply, chunks = await streamed_reply(server, url)

    sent = server.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert "".join(chunks) == ANSWER["text"]
    prompt = prompt_words(sent)  # the fake's usage: prompt words, completion len // 4
    completion = len(json.dumps(ANSWER)) // 4
    assert reply.usage == {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    assert reply.usage_source == "server"
    assert server.tokenized == []  # nothing counted when the server reports


@pytest.mark.parametrize("tokenize", ["llama-cpp-python", "llama.cpp"])
async def test_a_stream_without_usage_is_counted_with_the_servers_tokenizer(
        tokenize: Any) -> None:
    server = FakeChatServer(stream_usage=False, tokenize=tokenize)
    async with served(server.app()) as root:
        reply, _ = await streamed_reply(server, f"{root}/v1")

    prompt, completion = prompt_words(server.requests[0]), FakeChatServer.words(
        json.dumps(ANSWER))
    assert reply.usage == {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    assert reply.usage_source == "tokenizer"
    assert json.dumps(ANSWER) in server.tokenized  # the answer as streamed, counted


async def test_a_stream_without_usage_or_tokenizer_is_marked_as_an_estimate() -> None:
    server = FakeChatServer(stream_usage=False)
    async with served(server.app()) as root:
        reply, _ = await streamed_reply(server, f"{root}/v1")

    content_chunks = -(-len(json.dumps(ANSWER)) // Reply().chunk_size)
    assert reply.usage == {"completion_tokens": content_chunks}  # no prompt count invented
    assert reply.usage_source == "estimated:stream_chunks"


async def test_a_server_that_refuses_stream_options_gets_streams_without_them() -> None:
    server = FakeChatServer(refuse_stream_options=True, tokenize="llama.cpp")
    server.script("response", ANSWER)
    async with served(server.app()) as root:
        brain = OpenAIBrain(f"{root}/v1", "fake-model", sleep=Sleeps())
        first = await brain.decide(streamed_request([]))
        second = await brain.decide(streamed_request([]))
        await brain.aclose()

    assert ["stream_options" in r for r in server.requests] == [True, False, False]
    assert first.usage_source == second.usage_source == "tokenizer"
    assert first.output == second.output == json.dumps(ANSWER)


async def test_a_streamed_turn_records_the_answers_usage_in_its_brain_call() -> None:
    server = FakeChatServer(stream_usage=False, tokenize="llama-cpp-python")
    tool_turn(server)
    async with served(server.app()) as root:
        orchestrator = demo_orchestrator(brain=OpenAIBrain(f"{root}/v1", "fake-model"))
        result = await orchestrator.run_turn("s1", "How many A1001 are left in the east?")
        await orchestrator.aclose()

    calls = {c.state: c for c in result.events if c.kind == "brain_call"}
    assert calls["RESPONSE"].usage["prompt_tokens"] > 0
    assert calls["RESPONSE"].usage["completion_tokens"] > 0
    assert calls["RESPONSE"].usage_source == "tokenizer"
    assert calls["INTENT"].usage_source == "server"  # not streamed: the answer's own usage
