"""OpenTelemetry spans of the bus, with the trace context carried in its messages.

The orchestrator's side opens ``hermes.tool_request`` (a client span) around each request
and writes the W3C trace context (``traceparent``, ``tracestate``) into the request's
``trace``; the worker opens ``hermes.tool_execute`` as its child, so one trace runs from
the turn down to the worker's execution. Attributes: ``hermes.tool``,
``hermes.request_id``, ``hermes.call_id``, ``hermes.attempt``, ``hermes.session_id``,
``hermes.outcome``.

Only ``opentelemetry-api`` is used here; without an SDK configured (the default; see
``telemetry:`` in the configuration) every span is a no-op and no context is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import propagate, trace

__all__ = ["execute_span", "request_span", "trace_context"]

_tracer = trace.get_tracer("hermes_fsm.bus")


def _off() -> bool:
    """No tracer provider was ever set (no SDK configured): every span would be a no-op,
    so none is opened and no context written (what a call costs stays the bus's)."""
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def trace_context() -> dict[str, str]:
    """The current trace context as message fields (``{}`` when nothing is traced)."""
    carrier: dict[str, str] = {}
    if not _off():
        propagate.inject(carrier)
    return carrier


@contextmanager
def request_span(tool: str, call_id: str) -> Iterator[Any]:
    """The orchestrator's span of one request (set ``hermes.request_id`` on it)."""
    if _off():
        yield trace.INVALID_SPAN
        return
    with _tracer.start_as_current_span(
            "hermes.tool_request", kind=trace.SpanKind.CLIENT,
            attributes={"hermes.tool": tool, "hermes.call_id": call_id}) as span:
        yield span


@contextmanager
def execute_span(carrier: dict[str, str], attributes: dict[str, Any]) -> Iterator[Any]:
    """The worker's span of one execution, a child of the request's (from ``carrier``)."""
    if _off():
        yield trace.INVALID_SPAN
        return
    parent = propagate.extract(carrier) if carrier else None
    with _tracer.start_as_current_span("hermes.tool_execute", context=parent,
                                       kind=trace.SpanKind.SERVER,
                                       attributes=attributes) as span:
        yield span
