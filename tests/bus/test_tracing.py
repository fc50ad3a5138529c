"""Traces across the bus: the worker's span is a child of the orchestrator's request span."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_fsm.tools.bus import InProcessBus, Worker, serve_over_bus, specs_of
from hermes_fsm.tools.bus.sandbox import InlineRunner
from hermes_fsm.tools.executor import ToolExecutor
from tests.bus import tools as test_tools

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the process's first: set it once
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    return _EXPORTER


async def test_one_trace_runs_from_the_caller_down_to_the_workers_execution(spans):
    worker_registry = test_tools.registry
    bus = InProcessBus()
    worker = Worker(bus, "default", specs_of(worker_registry), InlineRunner(worker_registry),
                    heartbeat_s=0.2)
    registry = test_tools.build_registry()
    serve_over_bus(registry, bus)
    executor = ToolExecutor(registry)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        with trace.get_tracer("test").start_as_current_span("turn"):
            (envelope,) = await executor.execute([("t1-s3-c1", "noop", {})])
    finally:
        stop.set()
        await task
    assert envelope["success"]
    by_name = {s.name: s for s in spans.get_finished_spans()}
    turn, request, execute = (by_name["turn"], by_name["hermes.tool_request"],
                              by_name["hermes.tool_execute"])
    assert request.parent is not None and request.parent.span_id == turn.context.span_id
    assert execute.parent is not None and execute.parent.span_id == request.context.span_id
    assert len({turn.context.trace_id, request.context.trace_id,
                execute.context.trace_id}) == 1
    assert request.attributes is not None and execute.attributes is not None
    assert request.attributes["hermes.tool"] == "noop"
    assert execute.attributes["hermes.request_id"] == request.attributes["hermes.request_id"]
    assert execute.attributes["hermes.call_id"] == "t1-s3-c1"
    assert execute.attributes["hermes.outcome"] == "ok"
