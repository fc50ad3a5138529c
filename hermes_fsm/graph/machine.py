"""The graph's transitions as a table, fired for one session at a time.

This is a graph model, not a ``transitions`` machine: ``transitions`` is not in the firing
path (nor imported). One :class:`GraphMachine` is built per graph and shared by every
session of an orchestrator; the state lives on the session (``session.state``), and
``machine.fire(trigger, session, turn)`` moves it. Firing means: take the transitions of
``trigger`` out of the session's state, in the order the graph declares them, and the
first one whose checks pass is taken. Its checks, in order: the contract guard (a
``done`` fires only for a state whose output was validated and stored on the turn,
``turn.output_state``), the graph's ``conditions`` (each must return ``True``) and
``unless`` (each must return ``False``), and the per-turn ``limit``. Taking it tells the
turn of the exit and the entry (``turn.on_transition``: events, counters), then sets
the session's state. The turn counts the transitions between two states
(``turn.taken[(source, dest)]``) only where an edge between them has a ``limit``: the
machine passes ``key=None`` for the others. ``retry``, ``fail`` and ``abort`` are derived
transitions of the same table (see :class:`~hermes_fsm.graph.model.Graph`).

Why not fire through ``transitions``' public API (``Event.trigger`` with the guard, the
conditions and the limit as its conditions, the turn's bookkeeping as a ``before``
callback)? Measured on the bench's seven-state turn (``bench/engine_overhead.py`` runs
both, ``hermes-fsm`` and ``hermes-fsm, transitions firing``): ~0.4 µs a transition through
this table, ~14 µs more through ``Event.trigger`` (~90 calls a transition: event data,
state lookups, enter/exit callback lists, a dozen log-level checks), which made the
engine's whole turn 1.7–1.9× as expensive and 1,000 concurrent turns 1.7× as long.
Adding sessions as models (``add_model``) costs more still, and grows with the number of
live sessions.
The table does what the engine needs and nothing else, and leaves every logger alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_fsm.errors import HermesError
from hermes_fsm.graph.model import Graph

__all__ = ["Edge", "GraphMachine"]

Check = tuple[Callable[[Any], Any], bool]
"""A condition and the value it must return (``True`` for ``conditions``, ``False`` for
``unless``); compared with ``==``."""


@dataclass(frozen=True, slots=True)
class Edge:
    """One transition of the table.

    ``key`` identifies it for per-turn limits (``turn.taken``); ``guarded``: a ``done``,
    taken only after a validated output of ``source``.
    """

    trigger: str
    source: str
    dest: str
    checks: tuple[Check, ...] = ()
    limit: int | None = None
    guarded: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.dest)


class GraphMachine:
    """The transitions of a :class:`~hermes_fsm.graph.model.Graph`, by trigger and source.

    Attributes:
        graph: the graph.
        name: the graph's name.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.name = graph.name
        edges: list[Edge] = []
        for t in graph.transitions:
            checks = tuple((c.check, True) for c in t.conditions) + tuple(
                (c.check, False) for c in t.unless)
            edges.append(Edge(t.trigger, t.source, t.dest, checks, t.limit,
                              guarded=t.trigger == "done"))
        for spec in graph.states.values():
            if not spec.working:
                continue
            edges.append(Edge("retry", spec.name, spec.name))
            if spec.on_failure:
                edges.append(Edge("fail", spec.name, spec.on_failure))
        edges.extend(Edge("abort", state, graph.initial) for state in graph.states)
        self._edges = tuple(edges)  # in the order declared, derived ones last
        # the keys some edge limits: only their transitions are counted (turn.taken)
        limited = {edge.key for edge in edges if edge.limit is not None}
        table: dict[tuple[str, str], list[tuple[Edge, tuple[str, str] | None]]] = {}
        for edge in edges:
            table.setdefault((edge.trigger, edge.source), []).append(
                (edge, edge.key if edge.key in limited else None))
        self._table = {where: tuple(found) for where, found in table.items()}
        # the same, by trigger then source: fire looks a step up without building a key
        self._by_trigger: dict[str, dict[str, tuple[tuple[Edge, tuple[str, str] | None], ...]]] = {}
        for (trigger, source), found in self._table.items():
            self._by_trigger.setdefault(trigger, {})[source] = found

    def fire(self, trigger: str, session: Any, turn: Any) -> bool:
        """Fire ``trigger`` for ``session`` (carrying ``.state``); True when a transition ran.

        Raises:
            HermesError: ``trigger`` has no transition out of the session's state (an engine
                or graph bug: the loader and the derived transitions rule it out).
        """
        source = session.state
        by_source = self._by_trigger.get(trigger)
        candidates = by_source.get(source) if by_source is not None else None
        if candidates is None:
            raise HermesError(f"{self.name}: can't fire {trigger!r} from state {source!r}")
        for edge, key in candidates:
            if edge.guarded and turn.output_state != source:
                continue  # the guard: no validated output of this state, no transition
            for check, target in edge.checks:
                if check(turn) != target:
                    break
            else:
                if edge.limit is not None and turn.taken.get(key, 0) >= edge.limit:
                    continue
                turn.on_transition(source, edge.dest, trigger, key)
                session.state = edge.dest
                return True
        return False

    def edges(self) -> list[tuple[str, str, str | None]]:
        """Every ``(trigger, source, dest)`` of the machine, derived ones included: by
        trigger, then by source, each in the order it first appears."""
        order = dict.fromkeys(edge.trigger for edge in self._edges)
        return [(edge.trigger, edge.source, edge.dest) for name in order
                for (trigger, _), found in self._table.items() if trigger == name
                for edge, _ in found]
