"""The OpenAPI 3.1 document of the ASGI app (served at ``/openapi.json``).

Schemas come from the same pydantic models the app validates with, and the event union.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic.json_schema import models_json_schema

from hermes_fsm.events.model import EVENT_ADAPTER
from hermes_fsm.server.idempotency import KEY_PATTERN
from hermes_fsm.server.wire import ErrorResponse, TurnRequest, TurnResponse

__all__ = ["openapi_document"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(name)}}


_ERRORS = {
    400: "the request body was not received (the client went away while sending it)",
    401: "missing or unknown bearer token",
    403: "another user's session, or a user_id that is not the token's",
    404: "unknown session",
    409: "a turn is already running on the session",
    410: "the session was archived (start a new one)",
    422: "invalid request: session id, query or body (field details in error.details)",
    500: "a bug (code internal_error: the server's log has the traceback), or the turn "
         "failed (code turn_failed)",
}


_TURN_ERRORS: dict[int, dict[str, Any]] = {
    409: {"description": "a turn is already running on the session (code session_busy), or "
          "the turn with this Idempotency-Key still runs on another server process (code "
          "idempotency_key_in_progress: retry with the same key after Retry-After seconds)",
          "headers": {"Retry-After": {"description": "seconds (idempotency_key_in_progress)",
                                      "schema": {"type": "string"}}}},
    422: {"description": "invalid request: session id, body or Idempotency-Key header (field "
          "details in error.details), or the key was already used on this session for "
          "another request (code idempotency_key_reused)"},
}
"""What the turn operation adds to an error answer (its Idempotency-Key header)."""


def _errors(*codes: int, authenticated: bool,
            special: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The error answers of an operation, every one the JSON ``ErrorResponse``; 401 only
    when tokens are configured (``authenticated``); ``special`` replaces a code's
    description or adds its headers for this operation."""
    responses: dict[str, Any] = {}
    for code in codes:
        if code == 401 and not authenticated:
            continue
        responses[str(code)] = {"description": _ERRORS[code], "content": _json("ErrorResponse")}
        if code == 401:
            responses[str(code)]["headers"] = {"WWW-Authenticate": {
                "description": "the bearer challenge", "schema": {"type": "string"}}}
        responses[str(code)].update((special or {}).get(code, {}))
    return responses


_TEXT = {"schema": {"type": "string"}}
_READINESS = {"application/json": {"schema": {
    "type": "object", "required": ["ready", "checks"], "properties": {
        "ready": {"type": "boolean"},
        "checks": {"type": "object", "description": "one check a backend (brain, memory, "
                   "each MCP server): {ready, ...details}",
                   "additionalProperties": {"type": "object", "required": ["ready"],
                                            "properties": {"ready": {"type": "boolean"}}}}}}}}


_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key", "in": "header", "required": False,
    "description": "Runs the turn at most once per (user, session, key). A retry with the "
    "same key and body gets the recorded answer (same status and body, header "
    "Idempotent-Replayed: true) without running again; a duplicate sent while the turn runs "
    "waits for it; the same key with another body is 422 idempotency_key_reused; a 409 "
    "session_busy or 500 answer is not kept (the next retry runs the turn). JSON turns only: "
    "refused (422) with Accept: text/event-stream. Send a fresh random key (a UUID) per new "
    "turn and the same one on its retries.",
    "schema": {"type": "string", "pattern": KEY_PATTERN, "minLength": 1, "maxLength": 200},
}
_REPLAYED = {"Idempotent-Replayed": {
    "description": "present when the answer is the recorded answer of an earlier request "
    "with the same Idempotency-Key (nothing ran again)",
    "schema": {"type": "string", "enum": ["true"]}}}


def openapi_document(authenticated: bool = True) -> dict[str, Any]:
    """The document; ``authenticated`` adds the bearer security scheme to ``/v1`` paths."""
    _, defs = models_json_schema(
        [(TurnRequest, "validation"), (TurnResponse, "serialization"),
         (ErrorResponse, "serialization")], ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    event_schema = EVENT_ADAPTER.json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(event_schema.pop("$defs", {}))
    schemas["Event"] = event_schema
    security: list[dict[str, list[str]]] = [{"bearer": []}] if authenticated else []
    session = {"name": "session_id", "in": "path", "required": True,
               "schema": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"}}
    stream = {"text/event-stream": {"schema": {  # one event (OpenAPI 3.2's itemSchema)
        "type": "object", "required": ["event", "data"],
        "description": "server-sent events: `id` = seq, `event` = the event's kind, `data` = "
        "the Event as JSON; a last `result` event carries the TurnResponse (or an `error` "
        "event the ErrorBody of a turn that failed)",
        "properties": {"id": {"type": "string", "pattern": "^[0-9]+$"},
                       "event": {"type": "string"},
                       "data": {"type": "string", "contentMediaType": "application/json"}}}}}
    paths = {
        "/v1/sessions/{session_id}/turns": {"post": {
            "summary": "Run a turn (JSON result, or its events as server-sent events)",
            "parameters": [session, _IDEMPOTENCY_KEY], "security": security,
            "requestBody": {"required": True, "content": _json("TurnRequest")},
            "responses": {"200": {"description": "the turn's result, or its event stream",
                                  "headers": _REPLAYED,
                                  "content": {**_json("TurnResponse"), **stream}},
                          **_errors(400, 401, 403, 409, 410, 422, 500,
                                    authenticated=authenticated, special=_TURN_ERRORS)}}},
        "/v1/sessions/{session_id}/events": {"get": {
            "summary": "A session's events after a sequence number (JSON, or SSE following "
                       "a running turn)",
            "parameters": [session, {"name": "after", "in": "query", "required": False,
                                     "schema": {"type": "integer", "minimum": 0}}],
            "security": security,
            "responses": {"200": {"description": "the events", "content": {
                "application/json": {"schema": {"type": "object", "properties": {
                    "session_id": {"type": "string"}, "running": {"type": "boolean"},
                    "events": {"type": "array", "items": _ref("Event")}}}}, **stream}},
                **_errors(401, 403, 404, 422, 500, authenticated=authenticated)}}},
        "/v1/sessions/{session_id}/recording": {"get": {
            "summary": "The session's recording (JSONL: a header, then one event a line)",
            "parameters": [session], "security": security,
            "responses": {"200": {"description": "the recording",
                                  "content": {"application/x-ndjson": {
                                      "schema": {"type": "string"}}}},
                          **_errors(401, 403, 404, 422, 500,
                                    authenticated=authenticated)}}},
        "/v1/graph": {"get": {
            "summary": "The state graph as Mermaid, DOT, SVG or an HTML page",
            "parameters": [{"name": "format", "in": "query", "required": False, "schema": {
                "type": "string", "enum": ["mermaid", "dot", "svg", "html"],
                "default": "mermaid"}}],
            "security": security,
            "responses": {"200": {"description": "the graph", "content": {
                "text/plain": _TEXT, "text/vnd.graphviz": _TEXT, "image/svg+xml": _TEXT,
                "text/html": _TEXT}}, **_errors(401, 422, 500, authenticated=authenticated)}}},
        "/healthz": {"get": {"summary": "Alive", "responses": {
            "200": {"description": "ok", "content": {"text/plain": _TEXT}},
            **_errors(500, authenticated=authenticated)}}},
        "/readyz": {"get": {"summary": "Backends and MCP servers ready, with details",
                            "responses": {"200": {"description": "ready", "content": _READINESS},
                                          "503": {"description": "not ready (the checks say "
                                                  "which backend and why)",
                                                  "content": _READINESS},
                                          **_errors(500, authenticated=authenticated)}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "hermes-fsm", "version": _version(),
                 "description": "Agent turns over HTTP: an explicit FSM orchestrator. Every "
                 "error is an ErrorResponse (`{\"error\": {\"code\", \"message\", "
                 "\"details\"?}}`), also outside the operations below: an unknown path is "
                 "404 `not_found`, an undocumented method 405 `method_not_allowed` (with "
                 "`Allow`)."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"}}},
    }


def _version() -> str:
    try:
        return version("hermes-fsm")
    except PackageNotFoundError:
        return "0"
