"""``hermes-fsm serve``: the ASGI app under uvicorn, as the configuration says.

uvicorn takes its C HTTP parser (httptools) and event loop (uvloop) when they are
installed: ``pip install 'hermes-fsm[serve]'``.
"""

from __future__ import annotations

import ipaddress
from typing import Any, TextIO

import uvicorn

from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.config.telemetry import configure_telemetry
from hermes_fsm.errors import UsageError
from hermes_fsm.server.app import create_app

__all__ = ["serve"]


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
    orchestrator = build_orchestrator(config)
    app: Any = create_app(orchestrator, tokens=tokens)
    if configure_telemetry(config):  # telemetry: on: each request a root span
        from hermes_fsm.server.tracing import TracedApp

        app = TracedApp(app)
    if out is not None:
        auth = f"{len(tokens)} bearer token(s)" if tokens else "no authentication (loopback)"
        out.write(f"hermes-fsm serving on http://{host}:{port} with {auth}; "
                  f"API at http://{host}:{port}/openapi.json\n")
        out.flush()
    uvicorn.run(app, host=host, port=port, log_level=config.log.level,
                access_log=config.log.level == "debug")
    return 0
