"""What a recording says about a graph: the numbers the graph view lays over the diagram.

An :class:`Overlay` counts, from a stream of events, how often each edge ran (from
``state_entered``: its ``source``, ``trigger`` and ``state``), how long was spent in each
state (the sum of ``state_exited.duration_ms``), and per state the visits, retries,
contract violations, timeouts, handler errors, failure routes taken and turn aborts.

>>> from datetime import UTC, datetime
>>> from hermes_fsm.events.model import StateEntered
>>> at = datetime(2026, 1, 1, tzinfo=UTC)
>>> ev = StateEntered(session_id="s", turn_id="t", seq=1, at=at, state="INTENT",
...                   source="IDLE", trigger="start")
>>> overlay = overlay_from_events([ev])
>>> overlay.edge_count("IDLE", "INTENT", "start"), overlay.visits["INTENT"]
(1, 1)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DRAWN_KINDS", "Overlay", "overlay_from_events"]

DRAWN_KINDS = ("start", "done", "retry", "fail")
"""Edge kinds drawn in diagrams; an ``abort`` is counted per state instead."""


@dataclass(frozen=True)
class Overlay:
    """Counts and times per edge and per state, taken from recorded events.

    Attributes:
        edges: ``(source, dest, kind)`` → how many times that edge ran.
        visits: state → times entered.
        time_ms: state → total milliseconds spent in it.
        retries: state → ``retry`` events.
        violations: state → ``contract_violation`` events.
        timeouts: state → state-scope ``timed_out`` events.
        errors: state → ``handler_failed`` events.
        routes: state → failure routes taken from it (``route_taken``).
        aborts: state → turns aborted (budget ran out) while in it.
        turns: how many turns the events cover.
        steps: the compensation steps per state (see the field).
    """

    edges: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    visits: Mapping[str, int] = field(default_factory=dict)
    time_ms: Mapping[str, float] = field(default_factory=dict)
    retries: Mapping[str, int] = field(default_factory=dict)
    violations: Mapping[str, int] = field(default_factory=dict)
    timeouts: Mapping[str, int] = field(default_factory=dict)
    errors: Mapping[str, int] = field(default_factory=dict)
    routes: Mapping[str, int] = field(default_factory=dict)
    aborts: Mapping[str, int] = field(default_factory=dict)
    turns: int = 0
    steps: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """``(state, kind)`` → the tools of the compensation steps that ran there: ``kind``
    ``status`` (a write's status query) or ``compensate`` (an undo); their counts are in
    :attr:`edges` as ``(state, state, kind)`` (see :mod:`hermes_fsm.tools.compensation`)."""

    def edge_count(self, source: str, dest: str, kind: str) -> int:
        """How many times the ``kind`` edge from ``source`` to ``dest`` ran."""
        return self.edges.get((source, dest, kind), 0)

    def total_time_ms(self) -> float:
        """Milliseconds spent in all states together."""
        return sum(self.time_ms.values())

    def states(self) -> set[str]:
        """Every state the events mention."""
        names: set[str] = set()
        for source, dest, _ in self.edges:
            names.update((source, dest))
        for counts in (self.visits, self.time_ms, self.retries, self.violations,
                       self.timeouts, self.errors, self.routes, self.aborts):
            names.update(counts)
        return names


def overlay_from_events(events: Iterable[Any]) -> Overlay:
    """Count what ``events`` (any :data:`~hermes_fsm.events.model.Event` objects) say per edge
    and per state; events of kinds that say nothing about the graph are ignored."""
    edges: Counter[tuple[str, str, str]] = Counter()
    visits: Counter[str] = Counter()
    time_ms: dict[str, float] = {}
    retries: Counter[str] = Counter()
    violations: Counter[str] = Counter()
    timeouts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    routes: Counter[str] = Counter()
    aborts: Counter[str] = Counter()
    turns: set[str] = set()
    steps: dict[tuple[str, str], list[str]] = {}
    current = ""
    for event in events:
        kind = event.kind
        turns.add(event.turn_id)
        if kind == "state_entered":
            current = event.state
            visits[event.state] += 1
            if event.trigger in DRAWN_KINDS:
                edges[(event.source, event.state, event.trigger)] += 1
            elif event.trigger == "abort":  # drawn only where it happened (svg.py)
                aborts[event.source] += 1
                edges[(event.source, event.state, "abort")] += 1
        elif kind == "state_exited":
            time_ms[event.state] = time_ms.get(event.state, 0.0) + event.duration_ms
        elif kind == "retry":
            retries[event.state] += 1
        elif kind == "contract_violation":
            violations[event.state] += 1
        elif kind == "timed_out" and event.scope == "state":
            timeouts[event.state] += 1
        elif kind == "handler_failed":
            errors[event.state] += 1
        elif kind == "route_taken":
            routes[event.state] += 1
        elif kind == "tool_call_started" and current:
            step = _STEPS.get(event.call_id.rsplit("-", 1)[-1])
            if step is not None:  # a compensation step: its own edge on the state
                edges[(current, current, step)] += 1
                tools = steps.setdefault((current, step), [])
                if event.tool not in tools:
                    tools.append(event.tool)
    return Overlay(edges=dict(edges), visits=dict(visits), time_ms=time_ms,
                   retries=dict(retries), violations=dict(violations),
                   timeouts=dict(timeouts), errors=dict(errors), routes=dict(routes),
                   aborts=dict(aborts), turns=len(turns),
                   steps={k: tuple(v) for k, v in steps.items()})


_STEPS = {"status": "status", "undo": "compensate"}
"""Call id suffixes of compensation steps (``<call_id>-status``, ``<call_id>-undo``)."""
