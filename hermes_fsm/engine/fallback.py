"""The answer of a turn that produced none: a person always reads something.

A turn whose RESPONSE never ran (its failure route skipped it, or the brain was
unreachable all along) ends with the graph's ``fallback_answer``, filled in with the
first state whose failure route was taken and why, in plain words. A turn cut by its
budget gets ``partial_answer`` instead (see the orchestrator).
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_fsm.events.model import Event, RouteTaken
from hermes_fsm.graph.model import Graph

__all__ = ["REASONS", "fallback_answer"]

REASONS = {"violation": "its output kept breaking its contract",
           "timeout": "it ran out of time", "error": "it kept failing",
           "brain_error": "the model failed or could not be reached",
           "handler_error": "it failed"}
"""How a failure route's ``reason`` (the part before any colon) reads in an answer."""


def fallback_answer(graph: Graph, events: Sequence[Event]) -> str:
    """The graph's ``fallback_answer`` for a turn that routed around its answer."""
    route = next((e for e in events if isinstance(e, RouteTaken)), None)
    state = route.state if route is not None else graph.initial
    reason = "no answer was written"
    if route is not None:
        reason = REASONS.get(route.reason.split(":")[0].strip(), route.reason)
    try:
        return graph.fallback_answer.format(state=state, reason=reason)
    except (KeyError, IndexError, ValueError):  # a template with other fields: as written
        return graph.fallback_answer
