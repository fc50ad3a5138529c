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

from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.engine.turn import TurnContext, TurnResult

__all__ = ["Orchestrator", "TurnContext", "TurnResult"]
