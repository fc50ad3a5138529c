"""The HTTP request as the root span of what it causes (``telemetry:`` on only).

:class:`TracedApp` wraps the ASGI app: each HTTP request is a server span named after its
route (``POST /v1/sessions/{session_id}/turns``), a child of the caller's span when the
request carries a W3C ``traceparent``. The turn a ``POST …/turns`` starts runs in a task
made while that span is current, so the turn's spans (:mod:`hermes_fsm.engine.tracing`)
and, over the bus, the worker's, are its descendants: one trace per request.

``hermes-fsm serve`` wraps the app only when tracing is on; otherwise nothing of this runs.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opentelemetry import propagate, trace

__all__ = ["TracedApp"]

_tracer = trace.get_tracer("hermes_fsm.server")
_SESSION = re.compile(r"^/v1/sessions/([^/]+)(/.*)?$")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _route(path: str) -> tuple[str, str | None]:
    """The route template of ``path`` and the session id in it (if any)."""
    match = _SESSION.match(path)
    if match is None:
        return path, None
    return f"/v1/sessions/{{session_id}}{match.group(2) or ''}", match.group(1)


class TracedApp:
    """An ASGI app whose HTTP requests are server spans (see the module docs)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:  # app.state, … of the wrapped app
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request inside its span; other scopes (lifespan) pass through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1")
                   for k, v in scope.get("headers", ()) if k in (b"traceparent", b"tracestate")}
        method = scope.get("method", "GET")
        route, session_id = _route(scope.get("path", ""))
        attributes: dict[str, Any] = {"http.request.method": method, "http.route": route,
                                      "url.path": scope.get("path", "")}
        if session_id is not None:
            attributes["hermes.session_id"] = session_id
        with _tracer.start_as_current_span(
                f"{method} {route}", context=propagate.extract(carrier) if carrier else None,
                kind=trace.SpanKind.SERVER, attributes=attributes) as span:

            async def traced_send(message: MutableMapping[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(trace.Status(trace.StatusCode.ERROR))
                await send(message)

            await self.app(scope, receive, traced_send)
