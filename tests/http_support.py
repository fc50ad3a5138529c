"""Serving an ASGI app with uvicorn on a free 127.0.0.1 port, and reading SSE over HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn


@asynccontextmanager
async def served(app: Any, startup_timeout_s: float = 10.0,
                 **options: Any) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn (lifespan on) in this event loop; yields its base URL.

    ``options`` go to ``uvicorn.Config`` (e.g. ``http="h11"``).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                           backlog=512, **options))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(startup_timeout_s):
            while not server.started:
                if task.done():
                    task.result()  # raises what made the server fail to start
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, 15)
        finally:
            sock.close()


async def read_sse(response: httpx.Response, limit: int | None = None
                   ) -> AsyncIterator[dict[str, Any]]:
    """Parse server-sent events from a streaming response: ``{"id", "event", "data"}``.

    ``data`` is decoded JSON. Stops after ``limit`` events when given.
    """
    fields: dict[str, Any] = {}
    seen = 0
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                fields["data"] = json.loads(fields["data"])
                yield fields
                seen += 1
                if limit is not None and seen >= limit:
                    return
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value
