"""The graph as a ``transitions`` machine, shared by every session of an orchestrator.

One :class:`GraphMachine` is built per graph. Sessions are never added to it as models
(``add_model`` costs tens of µs and slows down as sessions accumulate): a trigger is fired
for a session with ``machine.fire(trigger, session, turn)``, which runs transitions'
own ``Event.trigger`` with the session as the model. The state lives on the session
(``session.state``); the machine holds only the graph.

Extension points used: ``transition_cls`` (:class:`GuardedTransition`: the contract
guard, per-turn limits, enter/exit events), ``event_cls`` (:class:`GraphEvent`: a lean
trigger for a machine with no queue or global hooks) and transitions' conditions (the
graph's ``conditions``/``unless``).
"""

from __future__ import annotations

import logging
from typing import Any

from transitions import Event, EventData, Machine, MachineError, Transition

from hermes_fsm.graph.model import Graph

__all__ = ["GraphEvent", "GraphMachine", "GuardedTransition"]

# transitions logs every step at DEBUG/INFO; at WARNING those calls cost one level check.
logging.getLogger("transitions").setLevel(logging.WARNING)


class GuardedTransition(Transition):
    """A transition that refuses to fire a completion (``done``) for an unvalidated output.

    The engine validates a state's output against its contract and stores it on the
    turn (``turn.output``); the guard checks that this happened for *this* state, then
    the graph's conditions and the per-turn ``limit`` decide, and the turn is told of
    the exit and entry so it can emit events.
    """

    def __init__(self, *args: Any, kind: str = "done", limit: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.limit = limit
        self.key = (self.source, self.dest)
        # the graph's conditions are plain functions of the turn: :meth:`run` calls them
        self.direct = all(callable(c.func) for c in self.conditions)

    def execute(self, event_data: Any) -> bool:
        turn = event_data.args[0]
        if self.kind == "done" and turn.output_state != self.source:
            return False  # the guard: no validated output of this state, no transition
        for cond in self.conditions:
            if not cond.check(event_data):
                return False
        return self._take(event_data.model, turn, event_data.event.name)

    def run(self, event: Any, model: Any, turn: Any) -> bool:
        """:meth:`execute` for ``event`` fired with the turn alone (as
        :meth:`GraphMachine.fire` does): the conditions are called as transitions would
        call them (``send_event=False``), without building an ``EventData``."""
        if not self.direct:
            return self.execute(EventData(None, event, event.machine, model, (turn,), {}))
        if self.kind == "done" and turn.output_state != self.source:
            return False  # the guard: no validated output of this state, no transition
        for cond in self.conditions:
            if not cond.func(turn) == cond.target:  # type: ignore[operator]
                return False
        return self._take(model, turn, event.name)

    def _take(self, model: Any, turn: Any, trigger: str) -> bool:
        if self.limit is not None and turn.taken.get(self.key, 0) >= self.limit:
            return False
        turn.on_transition(self.source, self.dest, trigger, self.key)
        model.state = self.dest
        return True


class GraphEvent(Event):
    """``Event.trigger`` without the queue, prepare/finalize hooks and partials we never use.

    The machine is built with none of them (no queue, no ``prepare_event``,
    ``finalize_event`` or ``on_exception``), so this does exactly what the base class
    does for such a machine: find the model's state, try its transitions in order,
    stop at the first that executes.
    """

    def trigger(self, model: Any, *args: Any, **kwargs: Any) -> bool:
        candidates = self.transitions.get(model.state)
        if candidates is None:
            raise MachineError(f"{self.machine.name}Can't trigger event {self.name} "
                               f"from state {model.state}!")
        event_data = EventData(None, self, self.machine, model, args, kwargs)
        for transition in candidates:
            if transition.execute(event_data):
                return True
        return False


class GraphMachine(Machine):
    """A ``transitions.Machine`` holding a :class:`~hermes_fsm.graph.loader.Graph` and no models."""

    transition_cls = GuardedTransition
    event_cls = GraphEvent

    def __init__(self, graph: Graph) -> None:
        super().__init__(
            model=None,
            states=list(graph.states),
            initial=graph.initial,
            auto_transitions=False,
            send_event=False,
            ignore_invalid_triggers=False,
            name=f"{graph.name}: ",
        )
        self.graph = graph
        for t in graph.transitions:
            self.add_transition(
                t.trigger, t.source, t.dest,
                conditions=[c.check for c in t.conditions] or None,
                unless=[c.check for c in t.unless] or None,
                kind=t.trigger, limit=t.limit,
            )
        for spec in graph.states.values():
            if not spec.working:
                continue
            self.add_transition("retry", spec.name, spec.name, kind="retry")
            if spec.on_failure:
                self.add_transition("fail", spec.name, spec.on_failure, kind="fail")
        self.add_transition("abort", self.wildcard_all, graph.initial, kind="abort")
        self._events_by_name = dict(self.events)

    def fire(self, trigger: str, session: Any, turn: Any) -> bool:
        """Fire ``trigger`` for ``session`` (carrying ``.state``); True when a transition ran.

        What ``GraphEvent.trigger(session, turn)`` does, with one call per transition tried.
        """
        event = self._events_by_name[trigger]
        candidates = event.transitions.get(session.state)
        if candidates is None:
            return bool(event.trigger(session, turn))  # raises MachineError
        for transition in candidates:  # all GuardedTransition (our transition_cls)
            if transition.run(event, session, turn):  # type: ignore[attr-defined]
                return True
        return False

    def edges(self) -> list[tuple[str, str, str | None]]:
        """Every ``(trigger, source, dest)`` of the machine, derived ones included."""
        out: list[tuple[str, str, str | None]] = []
        for name, event in self.events.items():
            for source, transitions in event.transitions.items():
                out.extend((name, source, t.dest) for t in transitions)
        return out
