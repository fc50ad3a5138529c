"""Serve and embed: the ASGI app (HTTP + server-sent events) over an :class:`Orchestrator`.

>>> from hermes_fsm.testing import demo_orchestrator
>>> app = create_app(demo_orchestrator(), tokens={"secret-token": "alice"})
>>> sorted(r.path for r in app.routes)[:2]
['/healthz', '/openapi.json']

Run it with ``hermes-fsm serve`` or any ASGI server (``uvicorn``); mount it in a FastAPI or
Starlette service with ``manage_lifecycle=False`` (see ``examples/``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.server.app import create_app
    from hermes_fsm.server.hub import RunningTurn, Subscription, TurnHub, read_events

__all__ = ["RunningTurn", "Subscription", "TurnHub", "create_app", "read_events"]

__getattr__, __dir__ = lazy_face(__name__, {
    "RunningTurn": "hermes_fsm.server.hub",
    "Subscription": "hermes_fsm.server.hub",
    "TurnHub": "hermes_fsm.server.hub",
    "create_app": "hermes_fsm.server.app",
    "read_events": "hermes_fsm.server.hub",
})
