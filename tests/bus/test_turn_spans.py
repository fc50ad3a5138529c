"""End-to-end spans: one turn's spans form one tree, from the HTTP request down to the
worker's execution of its tool call over Redis (in-memory exporter)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.config import HermesConfig
from hermes_fsm.config import build as config_build
from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.tracing import TracedBrain, TurnTracer, traced_brain
from hermes_fsm.server.app import create_app
from hermes_fsm.server.tracing import TracedApp
from hermes_fsm.tools.bus import Worker, specs_of
from hermes_fsm.tools.bus.sandbox import InlineRunner
from tests.bus.conftest import drop_bus
from tests.http_support import served
from tests.memory.conftest import REDIS_URL, need

QUESTION = "How many A1001 are left in the east warehouse?"
_EXPORTER = InMemorySpanExporter()
_ADDED: list[bool] = []


@pytest.fixture
def spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the process's first: set it once
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not _ADDED:  # another test module may have set the provider: add our exporter
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        _ADDED.append(True)
    _EXPORTER.clear()
    return _EXPORTER


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_one_turns_spans_form_one_tree_from_the_http_request_to_the_worker(spans):
    need(REDIS_URL, 6379, "Redis")
    prefix = f"hermes-test-bus:{uuid.uuid4().hex}"
    config = HermesConfig(mcp_servers={}, sessions={"store": "memory"}, log={"format": "off"},
                          bus={"kind": "redis", "url": REDIS_URL, "prefix": prefix})
    orchestrator = build_orchestrator(config, hooks=[TurnTracer()],
                                      brain=traced_brain(RulesBrain()))
    bus: Any = getattr(orchestrator.services.tools.get("inventory_lookup").fn, "bus")  # noqa: B009
    local = build_demo_registry()
    worker = Worker(bus, "default", specs_of(local), InlineRunner(local), heartbeat_s=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        async with served(TracedApp(create_app(orchestrator))) as url:
            async with httpx.AsyncClient(timeout=30) as client:
                got = await client.post(f"{url}/v1/sessions/span-1/turns",
                                        json={"text": QUESTION, "user_id": "alice"})
        assert got.status_code == 200, got.text
        assert "342" in got.json()["answer"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await drop_bus(bus)
    finished = spans.get_finished_spans()
    (http,) = [s for s in finished if s.name == "POST /v1/sessions/{session_id}/turns"]
    assert http.parent is None  # the root, server side
    assert http.kind == trace.SpanKind.SERVER
    assert _attrs(http)["http.response.status_code"] == 200
    tree = [s for s in finished if s.context.trace_id == http.context.trace_id]
    by_id = {s.context.span_id: s for s in tree}

    def parent(span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None, span.name
        found: ReadableSpan = by_id[span.parent.span_id]
        return found

    for span in tree:  # one tree: every span but the root has its parent in the trace
        if span is not http:
            parent(span)
    (turn,) = [s for s in tree if s.name == "hermes.turn"]
    assert parent(turn) is http
    assert _attrs(turn)["hermes.turn_id"] == got.json()["turn_id"]
    assert _attrs(turn)["hermes.status"] == "completed"
    states = sorted((s for s in tree if s.name == "hermes.state"), key=lambda s: s.start_time
                    or 0)
    assert all(parent(s) is turn for s in states)
    path = got.json()["path"]
    assert [_attrs(s)["hermes.state"] for s in states] == path[1:-1]
    assert [_attrs(s)["hermes.from_state"] for s in states] == path[:-2]
    assert [_attrs(s)["hermes.to_state"] for s in states] == path[2:]
    assert all(_attrs(s)["hermes.attempt"] == 1 for s in states)
    intent = next(s for s in states if _attrs(s)["hermes.state"] == "INTENT")
    assert _attrs(intent)["hermes.contract"] == "intent"
    brain_calls = [s for s in tree if s.name == "hermes.brain_call"]
    assert brain_calls and all(parent(s).name == "hermes.state" for s in brain_calls)
    assert all(_attrs(s)["hermes.contract"] == _attrs(parent(s)).get("hermes.contract")
               and _attrs(s)["hermes.state"] == _attrs(parent(s))["hermes.state"]
               for s in brain_calls)
    (request,) = [s for s in tree if s.name == "hermes.tool_request"]
    (execute,) = [s for s in tree if s.name == "hermes.tool_execute"]
    assert _attrs(parent(request))["hermes.state"] == "EXECUTION"
    assert parent(execute) is request  # the worker's span, across Redis
    assert _attrs(request)["hermes.tool"] == _attrs(execute)["hermes.tool"] == "inventory_lookup"
    assert _attrs(execute)["hermes.request_id"] == _attrs(request)["hermes.request_id"]


async def test_a_failed_turn_ends_its_spans_with_the_error(spans):
    class Broken:
        name = "broken"

        async def decide(self, request):
            raise RuntimeError("the brain fell over")

    orchestrator = build_orchestrator(
        HermesConfig(mcp_servers={}, sessions={"store": "memory"}, log={"format": "off"}),
        hooks=[TurnTracer()], brain=traced_brain(Broken()))
    result = await orchestrator.run_turn("span-2", QUESTION, "alice")  # routed, not raised
    names = [s.name for s in spans.get_finished_spans()]
    assert names.count("hermes.turn") == 1
    (turn,) = [s for s in spans.get_finished_spans() if s.name == "hermes.turn"]
    assert _attrs(turn)["hermes.status"] == result.status
    failing = [s for s in spans.get_finished_spans() if s.name == "hermes.brain_call"
               and s.status.status_code == trace.StatusCode.ERROR]
    assert failing  # the exception is on the brain call's span
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached


def test_tracing_off_adds_nothing_to_a_turn():
    orchestrator = build_orchestrator(HermesConfig(mcp_servers={}, sessions={"store": "memory"}))
    assert not any(isinstance(h, TurnTracer) for h in orchestrator.hooks.hooks)
    assert not isinstance(orchestrator.services.brain, TracedBrain)


def test_tracing_on_adds_the_hook_and_the_brain_span(monkeypatch):
    monkeypatch.setattr(config_build, "configure_telemetry", lambda config: True)
    orchestrator = build_orchestrator(HermesConfig(mcp_servers={}, sessions={"store": "memory"}))
    assert any(isinstance(h, TurnTracer) for h in orchestrator.hooks.hooks)
    assert isinstance(orchestrator.services.brain, TracedBrain)
    assert orchestrator.services.brain.name == "rules"
