"""``hermes-fsm serve``: the ASGI app under uvicorn, as the configuration says.

uvicorn takes its C HTTP parser (httptools) and event loop (uvloop) when they are
installed: ``pip install 'hermes-fsm[serve]'``.
"""

from __future__ import annotations

import ipaddress
from typing import Any, TextIO

import uvicorn

from hermes_fsm.config.build import STORE_EVENT_LOG_TURNS, store_reading_orchestrator
from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.config.telemetry import configure_telemetry
from hermes_fsm.errors import UsageError
from hermes_fsm.server.app import create_app

__all__ = ["serve", "session_bound"]


SERVER_EVENT_LOG_TURNS = STORE_EVENT_LOG_TURNS
"""The server's default ``sessions.event_log_turns``: it reads a session's events from the
store (view, replay, ``events?after=SEQ``), so a cached session keeps none of its log and
its memory stays flat in the number of turns (bench/session_memory.py)."""


def server_orchestrator(config: HermesConfig) -> Any:
    """The orchestrator ``serve`` runs: the configuration's, with the server's event-log
    window (:data:`SERVER_EVENT_LOG_TURNS`) unless ``sessions.event_log_turns`` is set."""
    return store_reading_orchestrator(config)


def session_bound(orchestrator: Any) -> str:
    """What bounds the memory the server's sessions hold, in words (printed at start)."""
    cache = orchestrator.session_cache
    turns = orchestrator.event_log_turns
    log = "every turn" if turns is None else f"the last {turns} turn(s)"
    each = (f"each keeps {orchestrator.history_window} messages and {log} of its event log "
            "(sessions.event_log_turns)")
    if orchestrator.store is None:
        return (f"kept in this process only (no store): {each}; nothing is evicted, so memory "
                "grows with the number of sessions")
    if cache.max_bytes is None:
        return f"cached over {orchestrator.store.name}, unbounded (sessions.cache_mb: null); {each}"
    return (f"cached over {orchestrator.store.name}, at most {cache.max_bytes / 2**20:g} MiB "
            f"(sessions.cache_mb; least recently used evicted, reloaded from the store); {each}")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(config: HermesConfig, *, host: str | None = None, port: int | None = None,
          out: TextIO | None = None) -> int:
    """Serve until interrupted; returns the exit code.

    Raises:
        UsageError: no bearer tokens configured for a non-loopback address.
    """
    host = host or config.server.host
    port = config.server.port if port is None else port
    tokens = config.server.tokens
    if not tokens and not _loopback(host):
        raise UsageError(f"refusing to serve on {host} without authentication: set "
                         "server.tokens in the config (or HERMES_SERVER_TOKENS="
                         "'token=user,...'), or listen on 127.0.0.1")
    orchestrator = server_orchestrator(config)
    app: Any = create_app(orchestrator, tokens=tokens)
    if configure_telemetry(config):  # telemetry: on: each request a root span
        from hermes_fsm.server.tracing import TracedApp

        app = TracedApp(app)
    if out is not None:
        auth = f"{len(tokens)} bearer token(s)" if tokens else "no authentication (loopback)"
        out.write(f"hermes-fsm serving on http://{host}:{port} with {auth}; "
                  f"API at http://{host}:{port}/openapi.json\n"
                  f"sessions: {session_bound(orchestrator)}\n")
        out.flush()
    uvicorn.run(app, host=host, port=port, log_level=config.log.level,
                access_log=config.log.level == "debug")
    return 0
