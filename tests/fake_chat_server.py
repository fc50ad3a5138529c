"""A small, real OpenAI-compatible chat-completions server (Starlette) for the brain's tests.

It speaks the protocol — ``POST /v1/chat/completions`` (plain and streamed as server-sent
events, ``usage`` included), ``GET /v1/models``, error bodies, ``Retry-After`` — and plays
scripted replies, per contract (read from the request, as a real model would see it) or in
order. It records every request body.

Options play the servers that differ on token usage when streaming: ``stream_usage=False``
ignores ``stream_options.include_usage`` (as llama-cpp-python's server does);
``tokenize`` serves a tokenize endpoint (llama-cpp-python's ``/extras/tokenize/count`` or
llama.cpp's ``/tokenize``; its tokens are whitespace-separated words);
``refuse_stream_options`` answers 400 to a request carrying ``stream_options``.
``echo_status`` (e.g. 401) answers every completion of an unscripted contract with that
status and a body that echoes the request's ``Authorization`` header, and any other path
(``/mcp`` …) with 401 and every request header, as careless servers do (the secrets test).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

_CONTRACT = re.compile(r"contract '([a-z_]+)'")


@dataclass
class Reply:
    """One scripted answer: an HTTP error (``status``), or ``content`` (text or a callable
    of the request body returning text; a dict is sent as JSON text)."""

    content: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunk_size: int = 5


class FakeChatServer:
    """Scripted replies: ``by_contract[name]`` (in order, the last repeats), else ``queue``."""

    def __init__(self, model: str = "fake-model", *, stream_usage: bool = True,
                 tokenize: Literal["llama-cpp-python", "llama.cpp"] | None = None,
                 refuse_stream_options: bool = False, echo_status: int | None = None) -> None:
        self.model = model
        self.echo_status = echo_status
        self.stream_usage = stream_usage
        self.tokenize = tokenize
        self.refuse_stream_options = refuse_stream_options
        self.tokenized: list[str] = []
        self.by_contract: dict[str, list[Reply]] = {}
        self.queue: list[Reply] = []
        self.refused_formats: set[str] = set()
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self._played: dict[str, int] = {}

    def script(self, contract: str,
               *replies: Reply | dict[str, Any] | str | Callable[[Any], Any]) -> None:
        """Replies for a contract, in order (plain content is wrapped in a :class:`Reply`)."""
        self.by_contract[contract] = [r if isinstance(r, Reply) else Reply(r) for r in replies]

    def app(self) -> Starlette:
        routes = [Route("/v1/chat/completions", self._completions, methods=["POST"]),
                  Route("/v1/models", self._models, methods=["GET"])]
        if self.tokenize == "llama-cpp-python":
            routes.append(Route("/extras/tokenize/count", self._count, methods=["POST"]))
        elif self.tokenize == "llama.cpp":
            routes.append(Route("/tokenize", self._tokens, methods=["POST"]))
        if self.echo_status is not None:
            routes.append(Route("/{path:path}", self._echo_headers,
                                methods=["GET", "POST", "DELETE"]))
        return Starlette(routes=routes)

    async def _echo_headers(self, request: Request) -> Response:
        return JSONResponse({"error": {"message": f"unauthorized: {dict(request.headers)}",
                                       "type": "auth_error"}}, status_code=401)

    @staticmethod
    def words(text: str) -> int:
        """The fake tokenizer: one token per whitespace-separated word."""
        return len(text.split())

    async def _count(self, request: Request) -> Response:
        text = (await request.json())["input"]
        self.tokenized.append(text)
        return JSONResponse({"count": self.words(text)})

    async def _tokens(self, request: Request) -> Response:
        text = (await request.json())["content"]
        self.tokenized.append(text)
        return JSONResponse({"tokens": list(range(self.words(text)))})

    def contract_of(self, body: dict[str, Any]) -> str | None:
        match = _CONTRACT.search(body["messages"][0]["content"])
        return match.group(1) if match else None

    def _next(self, body: dict[str, Any]) -> Reply:
        contract = self.contract_of(body)
        if contract in self.by_contract:
            replies = self.by_contract[contract]
            index = self._played.get(contract, 0)
            self._played[contract] = index + 1
            return replies[min(index, len(replies) - 1)]
        if self.queue:
            return self.queue.pop(0)
        return Reply(status=500, content=f"nothing scripted for contract {contract!r}")

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("authorization"))
        if self.echo_status is not None and self.contract_of(body) not in self.by_contract:
            return JSONResponse({"error": {"message": "invalid credentials: Authorization: "
                                           f"{request.headers.get('authorization')}",
                                           "type": "invalid_request_error"}},
                                status_code=self.echo_status)
        if self.refuse_stream_options and "stream_options" in body:
            return JSONResponse({"error": {"message": "Unrecognized request argument supplied: "
                                           "stream_options", "type": "invalid_request_error"}},
                                status_code=400)
        fmt = (body.get("response_format") or {}).get("type")
        if fmt in self.refused_formats:
            return JSONResponse({"error": {"message": f"response_format type {fmt!r} is not "
                                           "supported", "type": "invalid_request_error"}},
                                status_code=400)
        reply = self._next(body)
        if reply.status != 200:
            return JSONResponse({"error": {"message": str(reply.content or "error"),
                                           "type": "server_error"}},
                                status_code=reply.status, headers=reply.headers)
        content = reply.content(body) if callable(reply.content) else reply.content
        if isinstance(content, dict):
            content = json.dumps(content)
        prompt = sum(len(m["content"].split()) for m in body["messages"])
        completion = max(1, len(content) // 4)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                 "total_tokens": prompt + completion}
        if body.get("stream"):
            include = (self.stream_usage
                       and (body.get("stream_options") or {}).get("include_usage", False))
            return StreamingResponse(self._chunks(content, reply.chunk_size,
                                                  usage if include else None),
                                     media_type="text/event-stream")
        return JSONResponse({
            "id": "chatcmpl-fake", "object": "chat.completion", "model": self.model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": usage})

    async def _chunks(self, content: str, size: int,
                      usage: dict[str, int] | None) -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                    "model": self.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(data)}\n\n".encode()

        yield chunk({"role": "assistant"})
        for i in range(0, len(content), size):
            yield chunk({"content": content[i:i + size]})
        yield chunk({}, "stop")
        if usage is not None:
            data = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
                    "usage": usage}
            yield f"data: {json.dumps(data)}\n\n".encode()
        yield b"data: [DONE]\n\n"
