"""uvicorn's HTTP protocol with one socket write per burst of a response.

uvicorn writes a response's status line and headers, then each body part, each with its own
``transport.write`` — and uvloop writes each to the socket at once: a JSON answer costs two
``write`` calls, two TCP segments, and a client woken twice (headers, then body). Here the
writes a response makes within one step of the event loop are joined and go out in one
``write`` at the end of that step — or as soon as the response is complete: headers and
body together, a stream's headers with its first events, the last events with the chunked
encoding's end. Nothing waits longer than the step that wrote it (a stream's headers
still go out before its first event is ready).

``hermes-fsm serve`` runs it (see :func:`uvicorn_options`); with your own uvicorn, pass
``http=http_protocol()``.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

__all__ = ["http_protocol", "uvicorn_options"]


class CoalescingTransport:
    """A transport whose writes within one event-loop step go out as one write.

    Everything else goes to the wrapped transport; ``close`` sends what is pending first.
    """

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None
        self._flushing: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        pending = self._pending
        if pending is None:
            self._pending = [data]
            self._flushing = self._loop.call_soon(self.flush)
        else:
            pending.append(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Write what is pending now (it would go at the end of the loop's step)."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            flushing, self._flushing = self._flushing, None
            if flushing is not None:
                flushing.cancel()  # a no-op when it is what runs this
            if not self.transport.is_closing():  # the client went away meanwhile: drop it
                self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def get_write_buffer_size(self) -> int:
        size: int = self.transport.get_write_buffer_size()
        return size + sum(len(data) for data in self._pending or ())

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def abort(self) -> None:
        self._pending = None
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        self.transport.abort()

    # the calls a protocol makes for every request, without __getattr__'s detour
    def is_closing(self) -> bool:
        closing: bool = self.transport.is_closing()
        return closing

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


_PROTOCOLS: dict[str, type[asyncio.Protocol]] = {}


def http_protocol(http: str = "auto") -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class (``auto``: httptools when installed, else h11), writing
    through a :class:`CoalescingTransport`; pass it as uvicorn's ``http``."""
    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    protocol = _PROTOCOLS.get(http)
    if protocol is not None:
        return protocol
    base: Any
    if http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    elif http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    else:
        raise ValueError(f"unknown HTTP protocol {http!r}: use auto, httptools or h11")

    class Coalescing(base):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(CoalescingTransport(transport, self.loop))

        def on_response_complete(self) -> None:
            self.transport.flush()  # the whole response now, not at the end of the step
            super().on_response_complete()

    Coalescing.__name__ = Coalescing.__qualname__ = f"Coalescing{base.__name__}"
    _PROTOCOLS[http] = Coalescing
    return Coalescing


def uvicorn_options(http: str = "auto") -> dict[str, Any]:
    """What ``hermes-fsm serve`` hands uvicorn besides the app, address and logging."""
    return {"http": http_protocol(http)}
