"""The ASGI app (Starlette): turns over HTTP, live event streams, graph, recordings, health.

::

    POST /v1/sessions/{session_id}/turns        {"text": ..., "user_id"?: ..., "domain"?: ...}
         → the turn's result (JSON), or with ``Accept: text/event-stream`` its events as
           server-sent events as they happen, ending with a ``result`` event
    GET  /v1/sessions/{session_id}/events?after=SEQ   (JSON, or SSE following a running turn)
    GET  /v1/sessions/{session_id}/recording    the session's recording (JSONL)
    GET  /v1/graph?format=mermaid|dot|svg|html
    GET  /healthz   GET /readyz   GET /openapi.json

With bearer tokens (``tokens``: token → user id) every ``/v1`` request needs
``Authorization: Bearer TOKEN`` and may only touch its user's sessions. Without tokens the
app trusts the caller (mount it behind your own authentication) and takes ``user_id`` from
the body.

Every error, an endpoint's or Starlette's (no such path: 404, wrong method: 405, a bug:
500), is the JSON error ``{"error": {"code", "message", "details"?}}``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Protocol

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from hermes_fsm._internal.redact import redact
from hermes_fsm.engine.turn import Services
from hermes_fsm.errors import HermesError, SessionArchived, SessionBusy, SessionError, UsageError
from hermes_fsm.events.model import EVENTS_ADAPTER, Event
from hermes_fsm.events.recording import RecordingSource, recording_header, recording_text
from hermes_fsm.events.sinks import SinkHost, event_json
from hermes_fsm.graph.model import Graph
from hermes_fsm.server.health import ReadinessSource, readiness
from hermes_fsm.server.hub import (
    EventLogs,
    RunningTurn,
    Subscription,
    TurnHub,
    TurnRunner,
    read_events,
)
from hermes_fsm.server.idempotency import HEADER as IDEMPOTENCY_HEADER
from hermes_fsm.server.idempotency import TurnIdempotency, key_problem
from hermes_fsm.server.openapi import openapi_document
from hermes_fsm.server.wire import (
    SESSION_ID,
    EventStreamResponse,
    JSONBytes,
    TurnRequest,
    error_response,
    result_json,
    sse,
    sse_data,
    validation_response,
)
from hermes_fsm.store.protocol import SessionStore
from hermes_fsm.viz.render import render_graph

__all__ = ["ServedOrchestrator", "create_app"]

_GRAPH_TYPES = {"mermaid": "text/plain; charset=utf-8", "dot": "text/vnd.graphviz; charset=utf-8",
                "svg": "image/svg+xml", "html": "text/html; charset=utf-8"}
_KEEPALIVE_S = 15.0
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

log = logging.getLogger("hermes_fsm.server")


class ServedOrchestrator(EventLogs, TurnRunner, ReadinessSource, RecordingSource, SinkHost,
                         Protocol):
    """What the app uses of an orchestrator (an :class:`~hermes_fsm.Orchestrator` is one):
    turns and sessions, the graph, readiness, recordings, a sink for live streams, and
    its lifecycle when ``manage_lifecycle`` is on."""

    @property
    def graph(self) -> Graph: ...
    @property
    def services(self) -> Services: ...
    @property
    def store(self) -> SessionStore | None: ...
    async def start(self) -> object: ...
    async def aclose(self) -> None: ...


def create_app(orchestrator: ServedOrchestrator, *, tokens: Mapping[str, str] | None = None,
               manage_lifecycle: bool = True, drain_timeout_s: float = 30.0) -> Starlette:
    """An ASGI app serving ``orchestrator``.

    Args:
        orchestrator: the :class:`~hermes_fsm.Orchestrator` whose turns it runs.
        tokens: bearer token → user id; ``None`` or empty turns authentication off.
        manage_lifecycle: start the orchestrator (MCP servers) on startup and close it on
            shutdown, after running turns end (at most ``drain_timeout_s``). Pass ``False``
            when you mount the app and manage the orchestrator yourself (a mounted app's
            lifespan does not run).
        drain_timeout_s: how long shutdown waits for running turns.

    Returns:
        A Starlette app; ``app.state.hub`` is its :class:`TurnHub`.
    """
    hub = TurnHub(orchestrator)
    orchestrator.add_sink(hub)
    api = _Api(orchestrator, hub, dict(tokens or {}))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_lifecycle:
            await orchestrator.start()
        try:
            yield
        finally:
            await hub.drain(drain_timeout_s)
            if manage_lifecycle:
                await orchestrator.aclose()

    routes = [
        Route("/v1/sessions/{session_id}/turns", api.post_turn, methods=["POST"]),
        Route("/v1/sessions/{session_id}/events", api.get_events, methods=["GET"]),
        Route("/v1/sessions/{session_id}/recording", api.get_recording, methods=["GET"]),
        Route("/v1/graph", api.get_graph, methods=["GET"]),
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/readyz", api.readyz, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        HTTPException: _http_error, ClientDisconnect: _client_disconnected,
        Exception: _internal_error})
    app.state.hub = hub
    app.state.orchestrator = orchestrator
    return app


class _Api:
    """The endpoints, sharing the orchestrator, the hub and the token table."""

    def __init__(self, orchestrator: ServedOrchestrator, hub: TurnHub,
                 tokens: dict[str, str]) -> None:
        self.orchestrator = orchestrator
        self.hub = hub
        self.tokens = tokens
        self._openapi: bytes | None = None
        self.idempotency: TurnIdempotency | None = None  # made at the first keyed turn

    # --- authentication and sessions ----------------------------------------------------

    def _user(self, request: Request) -> str | Response | None:
        """The authenticated user (``None`` when authentication is off), or a 401 response."""
        if not self.tokens:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        challenge = {"WWW-Authenticate": 'Bearer realm="hermes-fsm"'}
        if scheme.lower() != "bearer" or not token.strip():
            return error_response(401, "unauthenticated",
                                  "missing bearer token; send 'Authorization: Bearer TOKEN' "
                                  "with a token from the server's configuration",
                                  headers=challenge)
        user = None
        for known, user_id in self.tokens.items():  # compare every token: no timing hint
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                user = user_id
        if user is None:
            return error_response(401, "unauthenticated",
                                  "unknown bearer token; use a token from the server's "
                                  "configuration (server.tokens or HERMES_SERVER_TOKENS)",
                                  headers=challenge | {"WWW-Authenticate":
                                                       'Bearer error="invalid_token"'})
        return user

    def _caller(self, request: Request) -> tuple[str | None, str] | Response:
        """The authenticated user and the path's session id, or the refusal (401 before 422)."""
        user = self._user(request)
        if isinstance(user, Response):
            return user
        session_id = self._session_id(request)
        if isinstance(session_id, Response):
            return session_id
        return user, session_id

    def _session_id(self, request: Request) -> str | Response:
        session_id: str = request.path_params["session_id"]
        if not SESSION_ID.match(session_id):
            return error_response(
                422, "validation_failed",
                "invalid session id: use 1-128 letters, digits and _.:@- (starting with a "
                "letter or digit)",
                [{"loc": ["path", "session_id"], "msg": "invalid session id",
                  "type": "string_pattern_mismatch"}])
        return session_id

    async def _existing(self, session_id: str, user: str | None) -> Response | None:
        """404 for an unknown session, 403 for another user's; ``None`` when allowed.

        A durable session is looked up in the store: any server process (a restarted
        one, another replica) serves it, not only the one that ran its turns."""
        session = self.orchestrator.sessions().get(session_id)
        owner = session.user_id if session is not None else None
        store = self.orchestrator.store
        if owner is None and store is not None:
            record = await store.get(session_id)
            owner = record.user_id if record is not None else None
        if owner is None:
            return error_response(404, "session_not_found",
                                  f"no session {session_id!r}; start it with "
                                  f"POST /v1/sessions/{session_id}/turns")
        return self._owned(session_id, owner, user)

    @staticmethod
    def _owned(session_id: str, owner: str, user: str | None) -> Response | None:
        if user is not None and owner != user:
            return error_response(403, "forbidden",
                                  f"session {session_id!r} belongs to another user; "
                                  "use a session id of your own")
        return None

    async def _logged(self, session_id: str, after: int) -> list[Event]:
        """The session's events with ``seq > after``: from the store when there is one
        (the truth: a cached session holds only what this process appended), else from
        the session's in-process log."""
        store = self.orchestrator.store
        if store is None:
            return read_events(self.orchestrator, session_id, after) or []
        logged: list[Event] = EVENTS_ADAPTER.validate_python(
            await store.events_after(session_id, after))
        return logged

    # --- turns ----------------------------------------------------------------------------

    async def post_turn(self, request: Request) -> Response:
        caller = self._caller(request)
        if isinstance(caller, Response):
            return caller
        user, session_id = caller
        try:
            body = TurnRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return validation_response(exc, "body")
        if user is not None and body.user_id not in (None, user):
            return error_response(403, "forbidden",
                                  f"user_id {body.user_id!r} is not the token's user; omit "
                                  "user_id or send your own")
        user_id = user or body.user_id or "anonymous"
        session = self.orchestrator.sessions().get(session_id)
        if session is not None:
            refused = self._owned(session_id, session.user_id, user_id)
            if refused is not None:
                return refused
        stream = "text/event-stream" in request.headers.get("accept", "")
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is not None:  # at most one run per key (hermes_fsm.server.idempotency)
            problem = key_problem(key)
            if problem is None and stream:
                problem = ("Idempotency-Key applies to JSON turns; send it without "
                           "'Accept: text/event-stream' (a stream resumes with GET "
                           f"/v1/sessions/{session_id}/events?after=SEQ)")
            if problem:
                return error_response(422, "validation_failed", problem, [
                    {"loc": ["header", "Idempotency-Key"], "msg": problem,
                     "type": "value_error"}])
            if self.idempotency is None:
                self.idempotency = TurnIdempotency(self.orchestrator.store)
            return await self.idempotency.answer(
                key, user_id, session_id, body.model_dump_json().encode(),
                lambda: self._json_turn(session_id, body.text, user_id, body.domain))
        if stream:
            return await self._stream_turn(self.hub.start(session_id, body.text, user_id,
                                                          body.domain))
        return await self._json_turn(session_id, body.text, user_id, body.domain)

    async def _json_turn(self, session_id: str, text: str, user_id: str,
                         domain: str | None = None) -> Response:
        running = self.hub.start(session_id, text, user_id, domain)
        assert running.task is not None
        try:  # shielded: a client that goes away does not cancel the turn
            result = await asyncio.shield(running.task)
        except HermesError as exc:
            return _error_for(exc)
        return JSONBytes(result_json(result))

    async def _stream_turn(self, running: RunningTurn) -> Response:
        subscription = running.subscribe(0)
        await subscription.wait()
        if not running.events:  # over before its first event: refused (busy, wrong user, …)
            if running.error is None:
                return error_response(500, "internal_error", "the turn ended without events")
            if isinstance(running.error, HermesError):
                return _error_for(running.error)
            raise running.error
        return EventStreamResponse(self._event_stream(subscription, 0), headers=_SSE_HEADERS,
                                   on_disconnect=subscription.close)

    async def _event_stream(self, subscription: Subscription, after: int,
                            head: bytes = b"") -> AsyncIterator[tuple[bytes, bool]]:
        """``head``, then the events of ``subscription``, then the turn's result, as
        ``(block, last)`` for :class:`EventStreamResponse`.

        A turn emits its events in bursts between awaits: each burst goes out as one
        block (one send, one wake-up of the client), not one per event; the last one
        carries the result and ends the response.
        """
        running = subscription.running
        try:
            while not subscription.closed:
                finished = running.finished  # before taking: no event can follow the end
                frames = [head, *(sse_data(kind, data) for kind, data in subscription.ready_data()
                                  if data["seq"] > after)]
                head = b""
                if finished:
                    frames.append(_last_frame(running))
                    yield b"".join(frames), True
                    return
                if len(frames) > 1 or frames[0]:
                    yield b"".join(frames), False
                try:
                    await subscription.wait(_KEEPALIVE_S)
                except TimeoutError:
                    yield b": keep-alive\n\n", False
        finally:
            running.unsubscribe(subscription)

    # --- reading ----------------------------------------------------------------------------

    async def get_events(self, request: Request) -> Response:
        caller = self._caller(request)
        if isinstance(caller, Response):
            return caller
        user, session_id = caller
        after = _after(request)
        if isinstance(after, Response):
            return after
        refused = await self._existing(session_id, user)
        if refused is not None:
            return refused
        logged = await self._logged(session_id, after)
        last = max(after, logged[-1].seq if logged else 0)
        running = self.hub.running.get(session_id)
        if "text/event-stream" in request.headers.get("accept", ""):
            head = b"".join(sse(e) for e in logged)
            if running is None:  # nothing running: the log is all there is
                return EventStreamResponse(_once(head), headers=_SSE_HEADERS)
            subscription = running.subscribe(last)
            return EventStreamResponse(self._event_stream(subscription, last, head),
                                       headers=_SSE_HEADERS, on_disconnect=subscription.close)
        live = [] if running is None else [
            event_json(kind, data) for kind, data in running.events.pairs() if data["seq"] > last]
        body = b'{"session_id":%s,"running":%s,"events":[%s]}' % (
            json.dumps(session_id).encode(), b"true" if running is not None else b"false",
            b",".join([*(e.model_dump_json().encode() for e in logged), *live]))
        return Response(body, media_type="application/json")

    async def get_recording(self, request: Request) -> Response:
        caller = self._caller(request)
        if isinstance(caller, Response):
            return caller
        user, session_id = caller
        refused = await self._existing(session_id, user)
        if refused is not None:
            return refused
        store = self.orchestrator.store
        if store is None:
            text = recording_text(self.orchestrator, session_id)
        else:  # durable: the whole log, whichever process wrote it
            record = await store.get(session_id)
            owner = record.user_id if record is not None else user or "anonymous"
            header = recording_header(self.orchestrator, session_id, owner)
            text = "\n".join([header.model_dump_json(), *(
                e.model_dump_json() for e in await self._logged(session_id, 0))]) + "\n"
        return Response(text, media_type="application/x-ndjson")

    async def get_graph(self, request: Request) -> Response:
        user = self._user(request)
        if isinstance(user, Response):
            return user
        fmt = request.query_params.get("format", "mermaid")
        if fmt not in _GRAPH_TYPES:
            return error_response(
                422, "validation_failed", f"unknown graph format {fmt!r}; use one of "
                + ", ".join(_GRAPH_TYPES),
                [{"loc": ["query", "format"], "msg": f"must be one of {list(_GRAPH_TYPES)}",
                  "type": "enum"}])
        return Response(render_graph(self.orchestrator.graph, fmt), media_type=_GRAPH_TYPES[fmt])

    # --- service ------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(self, request: Request) -> Response:
        ready, checks = await readiness(self.orchestrator)
        return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)

    async def openapi(self, request: Request) -> Response:
        if self._openapi is None:
            self._openapi = json.dumps(openapi_document(bool(self.tokens))).encode()
        return Response(self._openapi, media_type="application/json")


def _after(request: Request) -> int | Response:
    """``after`` (or the SSE ``Last-Event-ID`` header): a seq ≥ 0, or a 422 response."""
    raw = request.query_params.get("after", request.headers.get("last-event-id", "0"))
    try:
        after = int(raw)
        if after < 0:
            raise ValueError
    except ValueError:
        return error_response(422, "validation_failed",
                              f"after={raw!r} is not a sequence number; send an integer ≥ 0",
                              [{"loc": ["query", "after"], "msg": "must be an integer >= 0",
                                "type": "int_parsing"}])
    return after


async def _once(frame: bytes) -> AsyncIterator[tuple[bytes, bool]]:
    yield frame, True


def _last_frame(running: RunningTurn) -> bytes:
    """The event that ends a turn's stream: its result, or why it failed."""
    if running.result is not None:
        return sse(name="result", data=result_json(running.result))
    return sse(name="error", data={"code": "turn_failed", "message": repr(running.error)})


# --- errors outside the endpoints: the same JSON shape (Starlette's exception handlers) ---


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such path, method not allowed, …) as the API's JSON."""
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path}"
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        return error_response(404, "not_found", f"no endpoint {where}; the endpoints are "
                              "listed in GET /openapi.json", headers=headers)
    if exc.status_code == 405:
        allowed = next((v for k, v in headers.items() if k.lower() == "allow"), "")
        return error_response(405, "method_not_allowed",
                              f"{where} is not allowed; use {allowed or 'another method'}",
                              headers=headers)
    code = exc.detail.lower().replace(" ", "_") if exc.detail else "http_error"
    return error_response(exc.status_code, code, f"{where}: {exc.detail}", headers=headers)


async def _client_disconnected(request: Request, exc: Exception) -> Response:
    """A client that went away before sending its whole request: nothing ran, nothing
    to answer; one log line, not a traceback."""
    log.info("client disconnected before sending the whole request: %s %s",
             request.method, request.url.path)
    return error_response(400, "client_disconnected", "the request body was not received")


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug: the JSON error to the client (no details), the traceback to the log (the
    server logs it as it re-raises)."""
    return error_response(500, "internal_error", f"internal error serving {request.method} "
                          f"{request.url.path}; the server's log has the details")


def _error_for(exc: HermesError) -> Response:
    """The HTTP answer to an error a turn raised."""
    if isinstance(exc, SessionBusy):
        return error_response(409, "session_busy", str(exc))
    if isinstance(exc, SessionArchived):  # for good: its summary is in long-term memory
        return error_response(410, "session_archived", str(exc))
    if isinstance(exc, SessionError):
        return error_response(403, "forbidden", str(exc))
    if isinstance(exc, UsageError):
        return error_response(422, "validation_failed", str(exc))
    return error_response(500, "turn_failed", redact(f"{type(exc).__name__}: {exc}"))
