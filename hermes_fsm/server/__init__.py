"""Serve and embed: the ASGI app (HTTP + server-sent events) over an :class:`Orchestrator`.

>>> from hermes_fsm.testing import demo_orchestrator
>>> app = create_app(demo_orchestrator(), tokens={"secret-token": "alice"})
>>> sorted(r.path for r in app.routes)[:2]
['/healthz', '/openapi.json']

Run it with ``hermes-fsm serve`` or any ASGI server (``uvicorn``); mount it in a FastAPI or
Starlette service with ``manage_lifecycle=False`` (see ``examples/``).
"""

from __future__ import annotations

from hermes_fsm.server.app import create_app
from hermes_fsm.server.hub import RunningTurn, Subscription, TurnHub, read_events

__all__ = ["RunningTurn", "Subscription", "TurnHub", "create_app", "read_events"]
