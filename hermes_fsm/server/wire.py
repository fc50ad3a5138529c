"""What goes over the wire: request and response bodies, errors, server-sent events.

Errors are one JSON shape, ``{"error": {"code", "message", "details"?}}``; validation
errors (422) list each field problem as ``{"loc", "msg", "type"}``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import to_json
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from hermes_fsm._internal.json_safe import nul_position
from hermes_fsm.engine.turn import TurnResult
from hermes_fsm.events.model import Event, EventList
from hermes_fsm.events.sinks import event_json

__all__ = ["SESSION_ID", "EventStreamResponse", "JSONBytes", "TurnRequest", "error_response",
           "result_json", "sse", "sse_data", "validation_response"]

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
"""What a session id in a URL may look like."""


_SAID = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
"""Not blank, no U+0000: what the turn's text and a domain must be (documented in the
schema; the validators below word the refusals)."""
_NO_NUL = r"^[^\u0000]*$"
"""No U+0000: what a user id must be."""


class TurnRequest(BaseModel):
    """The body of ``POST /v1/sessions/{session_id}/turns``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(min_length=1, max_length=32_000, description="the user's message",
                      json_schema_extra={"pattern": _SAID})
    user_id: str | None = Field(
        default=None, min_length=1, max_length=200, json_schema_extra={"pattern": _NO_NUL},
        description="who is asking; with bearer tokens it must be the token's user (or omitted)")
    domain: str | None = Field(
        default=None, min_length=1, max_length=200, json_schema_extra={"pattern": _SAID},
        description=(
            "the memory domain a new session declares (e.g. credit_card): recall and "
            "commits of its turns stay inside it; for an existing session, its own or omitted"))

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("text is blank; send the user's message")
        return text

    @field_validator("text", "user_id", "domain")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        if value is not None and (at := nul_position(value)) is not None:
            raise ValueError(f"holds U+0000 (a NUL character) at position {at}; remove it "
                             "(no session store can keep it) and send it again")
        return value


class TurnResponse(BaseModel):
    """A turn's result (the JSON answer, and the ``result`` server-sent event)."""

    session_id: str
    turn_id: str
    status: str = Field(description="completed, degraded, partial, awaiting_input or "
                                    "awaiting_approval")
    answer: str
    path: list[str]
    duration_ms: float
    last_seq: int = Field(description="the seq of the turn's last event")
    pending: dict[str, Any] | None = Field(
        default=None, description="what the turn waits for (awaiting_*): the task id, its "
        "kind (clarify, approval, confirm), the question, the slot, and for an approval the "
        "exact calls that would run; answer it with the next message on the session "
        "(yes/确认 or no/取消 for an approval)")


class ErrorBody(BaseModel):
    """An error's code, message and (for 422) field details."""

    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorResponse(BaseModel):
    """Every error response."""

    error: ErrorBody


def error_response(status: int, code: str, message: str,
                   details: list[dict[str, Any]] | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    """An error in the one shape every endpoint uses."""
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def validation_response(exc: ValidationError, where: str) -> Response:
    """422 listing each field problem of ``exc`` (``where``: ``body`` or ``query``)."""
    details = [{"loc": [where, *err["loc"]], "msg": err["msg"], "type": err["type"]}
               for err in exc.errors(include_url=False, include_context=False)]
    fields = ", ".join(".".join(str(p) for p in d["loc"]) for d in details)
    return error_response(422, "validation_failed", f"invalid request: {fields}", details)


def result_json(result: TurnResult) -> dict[str, Any]:
    """A :class:`TurnResult` as :class:`TurnResponse` data."""
    events = result.events
    last_seq = events.last_seq() if isinstance(events, EventList) else (  # no object built
        events[-1].seq if len(events) else 0)
    return {"session_id": result.session_id, "turn_id": result.turn_id,
            "status": result.status, "answer": result.answer, "path": list(result.path),
            "duration_ms": result.duration_ms, "last_seq": last_seq,
            "pending": _pending(events) if result.status.startswith("awaiting") else None}


def _pending(events: Any) -> dict[str, Any] | None:
    """The task the turn left waiting, from its ``graph_updated`` events."""
    waiting: dict[str, dict[str, Any]] = {}
    data = events.data if isinstance(events, EventList) else [e.model_dump() for e in events]
    for event in data:
        if event["kind"] != "graph_updated":
            continue
        for op in event["ops"]:
            if op["op"] == "task":
                waiting[op["task"]["id"]] = op["task"]
            elif op["op"] == "task_end":
                waiting.pop(op["id"], None)
    if not waiting:
        return None
    task = list(waiting.values())[-1]
    return {"task_id": task["id"], "kind": task["kind"], "question": task["question"],
            "slot": task["slot"] or None, "calls": task["plan"],
            "expires_at": task["expires_at"]}


class JSONBytes(Response):
    """A JSON answer of data serialized by pydantic-core (compact UTF-8, as Starlette's
    ``JSONResponse`` writes it, at a fraction of the cost): a ``Response`` whose
    ``render`` is pydantic-core's, as Starlette's documentation shows for custom JSON."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return to_json(content)


def sse(event: Event | None = None, *, name: str | None = None, data: Any = None) -> bytes:
    """One server-sent event: an :data:`Event` (``id`` = its seq, ``event`` = its kind), or a
    named one with JSON ``data`` (``result``, ``error``)."""
    if event is not None:
        payload = event.model_dump_json().encode()
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.kind.encode(), payload)
    return b"event: %s\ndata: %s\n\n" % ((name or "message").encode(), to_json(data))


def sse_data(kind: type[Any], data: Mapping[str, Any]) -> bytes:
    """:func:`sse` of the event given as its class and field dict (the same bytes)."""
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (data["seq"], data["kind"].encode(),
                                                   event_json(kind, data))


class EventStreamResponse(Response):
    """A ``text/event-stream`` response sending each block of frames as it comes.

    ``frames`` yields ``(block, last)``: a block marked last goes out with the end of the
    response (one body message, so a server writes the last events, the result and the
    chunked encoding's end together). Lighter than Starlette's ``StreamingResponse`` (no
    task group per response): one watcher task reads the request's channel and, when the
    client disconnects, calls ``on_disconnect`` (which should make ``frames`` end) — a
    stream whose client went away stops taking events.
    """

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[tuple[bytes, bool]], *,
                 headers: dict[str, str] | None = None,
                 on_disconnect: Callable[[], None] | None = None) -> None:
        self.frames = frames
        self.on_disconnect = on_disconnect
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            if self.on_disconnect is not None:
                self.on_disconnect()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            ended = False
            async for block, last in self.frames:
                if gone:
                    break
                await send({"type": "http.response.body", "body": block, "more_body": not last})
                if last:
                    ended = True
                    break
            if not gone and not ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away mid-send (ASGI 2.4 servers say so)
            pass
        finally:
            watcher.cancel()
            await _aclose(self.frames)


async def _aclose(frames: AsyncIterator[Any]) -> None:
    close = getattr(frames, "aclose", None)
    if close is not None:
        await close()
