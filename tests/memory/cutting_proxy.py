"""A TCP proxy in front of Redis that drops a connection part-way through a chosen command.

The commit-fault tests point their client at it to lose the connection while a command or a
batch is in flight. It forwards the client's stream to Redis one whole RESP command at a time;
while ``cut`` is set, the ``nth`` command of that name on a connection gets only ``keep`` (a
fraction) of its bytes forwarded, then both sides of that connection are closed. Redis is left
with a partial command, or a ``MULTI`` whose ``EXEC`` never came, from a client that is gone.
Replies travel back untouched.

Killing an idle connection (``CLIENT KILL`` between two commands) is no substitute: from
redis-py 8.2 the pool reconnects a connection that the server closed while it was idle, so the
next command goes out on a fresh connection and never meets the fault.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urlparse


@dataclass(frozen=True)
class Cut:
    """Where to drop a connection: ``keep`` of the ``nth`` ``command`` reaches Redis."""

    command: bytes
    nth: int = 1
    keep: float = 0.0


@dataclass
class CutMade:
    """A connection dropped by the proxy: what reached Redis on it."""

    before: list[bytes] = field(default_factory=list)  # names of the whole commands forwarded
    command: bytes = b""
    sent: int = 0  # bytes of ``command`` forwarded
    length: int = 0  # bytes of ``command`` in all


def first_command(buffer: bytes) -> tuple[int, bytes] | None:
    """The end and the upper-case name of the RESP command at the start of ``buffer``, or None
    while it is incomplete.

    >>> first_command(b"*2\\r\\n$4\\r\\necho\\r\\n$2\\r\\nhi\\r\\n*1")
    (22, b'ECHO')
    >>> first_command(b"*2\\r\\n$4\\r\\necho\\r\\n$2\\r\\nh") is None
    True
    """
    if not buffer:
        return None
    if buffer[:1] != b"*":
        raise ValueError(f"not a RESP array (inline commands are not proxied): {buffer[:20]!r}")
    line_end = buffer.find(b"\r\n")
    if line_end < 0:
        return None
    pos, name = line_end + 2, b""
    for i in range(int(buffer[1:line_end])):
        line_end = buffer.find(b"\r\n", pos)
        if line_end < 0:
            return None
        start = line_end + 2
        size = int(buffer[pos + 1:line_end])  # after the "$"
        pos = start + size + 2
        if pos > len(buffer):
            return None
        if i == 0:
            name = buffer[start:start + size].upper()
    return pos, name


class CuttingProxy:
    """``async with CuttingProxy(redis_url) as proxy``: connect to ``proxy.url``, set
    ``proxy.cut`` to drop connections, read ``proxy.cuts`` for where they were dropped."""

    def __init__(self, upstream_url: str) -> None:
        parsed = urlparse(upstream_url)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 6379)
        self._path = parsed.path
        self.cut: Cut | None = None
        self.cuts: list[CutMade] = []
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None, "use the proxy inside `async with`"
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}{self._path}"

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept(self, client_r: asyncio.StreamReader,
                      client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            redis_r, redis_w = await asyncio.open_connection(*self._upstream)
        except OSError:
            client_w.close()
            self._connections.discard(task)
            return
        replies = asyncio.create_task(self._relay(redis_r, client_w))
        try:
            await self._forward(client_r, redis_w)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for writer in (redis_w, client_w):  # close(), not abort(): what was sent arrives
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            replies.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await replies
            self._connections.discard(task)

    async def _forward(self, client_r: asyncio.StreamReader,
                       redis_w: asyncio.StreamWriter) -> None:
        """The client's commands to Redis, whole, until the cut or the client's end."""
        buffer, made = b"", CutMade()
        seen: dict[bytes, int] = {}
        while data := await client_r.read(65536):
            buffer += data
            while (found := first_command(buffer)) is not None:
                end, name = found
                seen[name] = seen.get(name, 0) + 1
                cut = self.cut
                if cut is not None and name == cut.command and seen[name] == cut.nth:
                    made.command, made.length = name, end
                    made.sent = int(end * cut.keep)
                    redis_w.write(buffer[:made.sent])
                    await redis_w.drain()
                    self.cuts.append(made)
                    return
                redis_w.write(buffer[:end])
                made.before.append(name)
                buffer = buffer[end:]
            await redis_w.drain()

    @staticmethod
    async def _relay(redis_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await redis_r.read(65536):
                client_w.write(data)
                await client_w.drain()
        client_w.close()
