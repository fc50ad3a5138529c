"""The engine: runs turns of a graph for many sessions.

- :mod:`~hermes_fsm.engine.orchestrator`: :class:`Orchestrator`;
- :mod:`~hermes_fsm.engine.turn`, :mod:`~hermes_fsm.engine.session`: a turn's context and
  result, a session's state;
- :mod:`~hermes_fsm.engine.context`: the token budget of brain requests;
- :mod:`~hermes_fsm.engine.durable`, :mod:`~hermes_fsm.engine.archive`: durable sessions over
  a store, archiving idle ones;
- :mod:`~hermes_fsm.engine.handlers`: the default state handlers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.engine.orchestrator import Orchestrator
    from hermes_fsm.engine.turn import TurnContext, TurnResult

__all__ = ["Orchestrator", "TurnContext", "TurnResult"]

__getattr__, __dir__ = lazy_face(__name__, {
    "Orchestrator": "hermes_fsm.engine.orchestrator",
    "TurnContext": "hermes_fsm.engine.turn",
    "TurnResult": "hermes_fsm.engine.turn",
})
