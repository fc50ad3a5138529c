"""What a turn carries while it runs, and what it returns.

A :class:`TurnContext` is handed to every handler, condition and ``on_output`` hook. It
holds the user's message, the validated outputs of the states so far, the services
(brain, tools, memory), and emits events with the session's sequence numbers. Where the
events go besides the turn (the orchestrator's sinks, :class:`EventSinks`) is the
engine's: a handler emits, it does not see or change the sinks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from hermes_fsm.brain.protocol import Brain, Repair
from hermes_fsm.contracts.base import Contract
from hermes_fsm.contracts.grounding import FactFigures
from hermes_fsm.conversation.graph import Conversation, ConversationPolicy
from hermes_fsm.engine.session import Session
from hermes_fsm.events.model import (
    EVENT_CLASSES,
    EVENT_TEMPLATES,
    Event,
    EventList,
    StateEntered,
    StateExited,
    StateOutput,
    TurnFinished,
    TurnStarted,
    event_data,
    make_event,
)
from hermes_fsm.events.rows import ENTERED, EXITED, FINISHED, OUTPUT, OUTPUT_JSON, STARTED
from hermes_fsm.events.sinks import EventSink, sink_plan
from hermes_fsm.graph.model import StateSpec
from hermes_fsm.sources import Clock, SystemClock

if TYPE_CHECKING:  # annotations only: loading a graph (its handlers) stays clear of numpy
    from hermes_fsm.memory import Memory
    from hermes_fsm.tools.executor import ToolRunner
    from hermes_fsm.tools.registry import ToolRegistry

__all__ = ["EventSinks", "OutputDump", "Services", "TurnContext", "TurnResult",
           "deliver_late", "number_late"]


@dataclass(slots=True)
class Services:
    """What handlers may use: the brain, the tools and their executor, memory, time, the
    context builder that fits brain requests to the token budget (``None``: off), and the
    conversation layer's policy (:class:`~hermes_fsm.conversation.graph.ConversationPolicy`)."""

    brain: Brain
    tools: ToolRegistry
    executor: ToolRunner
    memory: Memory
    clock: Clock
    context: Any = None
    conversation: ConversationPolicy = field(default_factory=ConversationPolicy)


class OutputDump(NamedTuple):
    """How a state's output of exactly its contract's class is written into its
    ``state_output`` event (worked out once per state by the engine).

    Attributes:
        to_python: ``to_python(output, mode="json")`` is ``output.model_dump(mode="json")``
            (the contract's pydantic serializer's, whose other defaults are
            ``model_dump``'s).
        to_json: ``to_json(output)``, the same data as JSON (``model_dump_json()``).
        finite: the dump can never hold a NaN or ±Infinity float, whatever the values.
    """

    to_python: Callable[..., Any]
    to_json: Callable[[Any], bytes]
    finite: bool


class EventSinks:
    """The sinks an orchestrator's events go to, besides each turn's own log.

    Changed through ``Orchestrator.add_sink``/``remove_sink``; turns read :attr:`current`
    at every event, so a change takes effect at the next event, also in a turn that is
    running (an added sink sees the rest of that turn, a removed one nothing more). The
    tuple is replaced, never changed in place (:func:`~hermes_fsm.events.sinks.sink_plan`
    caches its plan per tuple). Change it from the event loop's thread.
    """

    __slots__ = ("current",)

    def __init__(self, sinks: Iterable[EventSink] = ()) -> None:
        self.current: tuple[EventSink, ...] = tuple(sinks)

    def add(self, sink: EventSink) -> None:
        """Send events to ``sink`` too (once: adding a sink that is there already is a no-op)."""
        if not any(s is sink for s in self.current):
            self.current = (*self.current, sink)

    def remove(self, sink: EventSink) -> None:
        """Send ``sink`` no more events (a no-op for a sink that is not there)."""
        self.current = tuple(s for s in self.current if s is not sink)

    def __iter__(self) -> Iterator[EventSink]:
        return iter(self.current)

    def __len__(self) -> int:
        return len(self.current)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of one turn.

    Attributes:
        status: ``completed``, ``degraded`` (a failure route was taken) or ``partial``
            (the turn budget ran out).
        answer: the answer text.
        path: the states visited, in order, ending with the initial state.
        events: this turn's events.
    """

    session_id: str
    turn_id: str
    status: str
    answer: str
    path: list[str]
    events: Sequence[Event]
    duration_ms: float

    @property
    def outputs(self) -> dict[str, Any]:
        """Validated outputs by state (the last one of each state)."""
        return {e.state: e.output for e in self.events if e.kind == "state_output"}


class TurnContext:
    """The running turn, as handlers, conditions and hooks see it.

    Attributes:
        session_id, user_id, turn_id, text: who asks what, in which turn.
        state: the spec of the state being worked on.
        attempt: 1 on the first try of the current state, higher on retries.
        repair: on a retry, why the previous attempt was refused (a :class:`Repair`).
        outputs: validated outputs of this turn by state name (latest).
        by_contract: the same, by contract name.
        output: the current state's validated output (conditions read it).
        services: brain, tools, memory, clock.
        journal: the effects journal of a durable session (``None`` in-process).
        late: where :meth:`emit_late` hands late events (a durable session's writer;
            ``None`` in-process: the session numbers them itself).
        flushed: how many of ``events`` are stored durably (a durable session's).
        taken: how often each transition that a graph edge limits (``limit``) was taken
            this turn, by ``(source, dest)``.
        awaiting: set by a handler whose turn ends waiting for the user
            (``awaiting_input``, ``awaiting_approval``): the turn's status.
    """

    __slots__ = (
        "_add_data", "_answer", "_context", "_entered", "_mixed", "_now", "_sinks", "_stamp",
        "_unchecked",
        "attempt",
        "awaiting", "by_contract", "events", "flushed",
        "history", "journal", "late", "memory", "output", "output_state", "outputs", "path",
        "repair",
        "routes", "services", "session", "session_id", "state", "taken", "text", "turn_id",
        "user_id", "walked",
    )

    def __init__(self, session: Session, turn_id: str, user_id: str, text: str,
                 services: Services, sinks: EventSinks) -> None:
        self.session = session
        self.session_id = session.session_id
        self.turn_id = turn_id
        self.user_id = user_id
        self.text = text
        self.services = services
        self._sinks = sinks
        self.state: StateSpec | None = None
        self.attempt = 1
        self.repair: Repair | None = None
        self.outputs: dict[str, Contract] = {}
        self.by_contract: dict[str, Contract] = {}
        self.output: Any = None
        self.output_state: str | None = None
        self.taken: dict[object, int] = {}
        self.path: list[str] = [session.state]
        self.events = EventList()
        self._add_data = self.events.appender()
        self._unchecked = self.events.unchecked.append
        clock = services.clock
        self._now = _utc_now if type(clock) is SystemClock else clock.now
        # what a row keeps as its `at` (see events.rows): the system clock's time_ns
        self._stamp = time.time_ns if type(clock) is SystemClock else clock.now
        # a field dict among the turn's events: from then on its own events are field dicts
        # too, not rows (hermes_fsm.events.rows): the batch is written from field dicts
        # anyway, and rows would only be made into dicts again. They are rows while no
        # sink takes them as they happen and this is False
        self._mixed = False
        self.flushed = 0
        self.journal: Any = None
        self.late: Callable[[Session, type[Event], dict[str, Any]], None] | None = None
        self.routes = 0
        self.awaiting: str | None = None
        self.memory: str | None = None
        self.walked: Any = None  # the memory's layered recall of this turn (LayeredRecall)
        self.history = tuple(session.history)  # a snapshot: the turn appends later
        self._entered = time.perf_counter()
        self._answer: str | None = None
        self._context: dict[str, Any] = {"tool_catalog": services.tools.catalog_for(user_id),
                                         "fact_ids": set(),
                                         "conversation": session.conversation}

    # --- events -----------------------------------------------------------------------

    def emit(self, kind: type[Event], **fields: Any) -> None:
        """Build an event of ``kind`` for this turn, log it on the turn, send it to sinks.

        This runs ~20 times a turn, so it is written out flat (see ``events.event_data``
        for the same steps as a function).
        """
        template = EVENT_TEMPLATES.get(kind)
        if template is None:
            event_data(kind, {})  # builds the template
            template = EVENT_TEMPLATES[kind]
        data = template[0].copy()
        data.update(fields)
        if len(data) != template[2]:
            event_data(kind, fields)  # raises TypeError naming the unknown field
        session = self.session
        seq = session.seq = session.seq + 1
        data["session_id"] = self.session_id
        data["turn_id"] = self.turn_id
        data["seq"] = seq
        if data["at"] is None:
            data["at"] = self._now()
        if self._sinks.current:  # data sinks take the field dict; objects only for the others
            self._deliver(kind, data)
        else:
            self._mixed = True
            if EVENT_CLASSES.get(data["kind"]) is kind:
                self._add_data(data)
                self._unchecked(data)  # checked for NaN and ±Infinity as the log is written
            else:
                self.events.add(kind, data)

    def emit_late(self, kind: type[Event], **fields: Any) -> None:
        """Emit an event of this turn after it ended (e.g. a memory commit retried in the
        background), in order: it gets its seq only when no turn of the session is running.

        With a durable store (:attr:`late` set) the durable layer queues it and writes it
        under the session's lease; without one it is numbered now if the session is idle,
        else as soon as the running turn ends — then it goes to the session's log and the
        sinks (as an object: no turn is running to take field dicts).
        """
        fields.update(session_id=self.session_id, turn_id=self.turn_id, seq=0,
                      at=self.services.clock.now())
        data = event_data(kind, fields)  # a wrong field raises here, in the caller
        session = self.session
        if self.late is not None:
            self.late(session, kind, data)
            return
        if session.late is None:
            session.late = []
        session.late.append((kind, data))
        if not session.busy:
            deliver_late(session, self._sinks.current)

    def _deliver(self, kind: type[Event], data: dict[str, Any], scalars: bool = False) -> None:
        """Log a numbered event on the turn and hand it to the sinks (there are some);
        ``scalars``: as :meth:`EventList.add` takes it."""
        objects, calls = sink_plan(self._sinks.current)
        event = make_event(kind, data) if objects else None
        self.events.add(kind, data, event, scalars=scalars)
        for sink, takes_data in calls:
            if takes_data:
                sink.emit_data(kind, data)
            else:
                sink.emit(event)

    def on_transition(self, source: str, dest: str, trigger: str, key: object) -> None:
        """Called by the machine as a transition fires: exit/entry events, counters.

        ``key`` identifies the transition for per-turn limits (``None``: no edge limits
        it, so it is not counted in :attr:`taken`). The two events are rows
        (:mod:`hermes_fsm.events.rows`) when no sink takes them now, else the field dicts
        :meth:`emit` builds (in the models' field order: ``tests/test_emit_fast_path.py``
        holds both to :func:`event_data`), written out here as this runs at every
        transition.
        """
        now = _perf_counter()
        session = self.session
        seq = session.seq = session.seq + 1
        duration_ms = (now - self._entered) * 1000.0
        rows = not (self._sinks.current or self._mixed)  # both events alike
        if rows:
            at = self._stamp()  # leaving one state and entering the next: one instant
            self._add_data((EXITED, self.session_id, self.turn_id, seq, at, source, trigger,
                            dest, duration_ms))
        else:
            at = self._now()
            self._write(StateExited, {
                "session_id": self.session_id, "turn_id": self.turn_id, "seq": seq,
                "at": at, "kind": "state_exited", "state": source, "trigger": trigger,
                "dest": dest, "duration_ms": duration_ms}, True)
        self._entered = now
        if key is not None:
            taken = self.taken
            taken[key] = taken.get(key, 0) + 1
        if trigger == "retry":
            self.attempt += 1
        else:
            self.attempt = 1
            self.repair = None
        self.output = None
        self.output_state = None
        self.path.append(dest)
        seq = session.seq = session.seq + 1
        if rows:
            self._add_data((ENTERED, self.session_id, self.turn_id, seq, at, dest, source,
                            trigger, self.attempt))
        else:
            self._write(StateEntered, {
                "session_id": self.session_id, "turn_id": self.turn_id, "seq": seq,
                "at": at, "kind": "state_entered", "state": dest,
                "source": source, "trigger": trigger, "attempt": self.attempt}, True)

    def emit_started(self, graph: str, domain: str | None) -> None:
        """Emit ``turn_started`` for this turn's user and text (what ``emit(TurnStarted,
        ...)`` does, written out: it runs at every turn; a row when no sink takes it now
        and both are strings)."""
        session = self.session
        seq = session.seq = session.seq + 1
        user_id, text = self.user_id, self.text
        scalars = type(user_id) is str and type(text) is str
        if scalars and not (self._sinks.current or self._mixed):
            self._add_data((STARTED, self.session_id, self.turn_id, seq, self._stamp(),
                            user_id, text, graph, domain))
            return
        data = {"session_id": self.session_id, "turn_id": self.turn_id, "seq": seq,
                "at": self._now(), "kind": "turn_started", "user_id": user_id,
                "text": text, "graph": graph, "domain": domain}
        self._write(TurnStarted, data, scalars)

    def emit_finished(self, status: str, answer: str, duration_ms: float) -> None:
        """Emit ``turn_finished`` with the turn's :attr:`path` (what ``emit(TurnFinished,
        ...)`` does, written out: it runs at every turn; a row when no sink takes it now
        and ``answer`` is a string). ``duration_ms`` is measured by the engine (finite),
        the path holds state names: only a non-str ``answer`` is left for the log's
        writer to check for NaN."""
        session = self.session
        seq = session.seq = session.seq + 1
        scalars = type(answer) is str and type(duration_ms) is float
        if scalars and not (self._sinks.current or self._mixed):
            self._add_data((FINISHED, self.session_id, self.turn_id, seq, self._stamp(),
                            status, answer, duration_ms, *self.path))
            return
        data = {"session_id": self.session_id, "turn_id": self.turn_id, "seq": seq,
                "at": self._now(), "kind": "turn_finished", "status": status,
                "answer": answer, "duration_ms": duration_ms, "path": self.path}
        self._write(TurnFinished, data, scalars)

    def _write(self, kind: type[Event], data: dict[str, Any], scalars: bool) -> None:
        """Deliver or log an event built here; ``scalars``: no value to check for NaN."""
        if self._sinks.current:
            self._deliver(kind, data, scalars=scalars)
        else:
            self._mixed = True
            self._add_data(data)
            if not scalars:
                self._unchecked(data)

    def emit_output(self, state: str, contract: str | None, output: Any, raw: Any,
                    dump: OutputDump | None = None) -> None:
        """Emit ``state_output`` (what ``emit(StateOutput, ...)`` does, written out: it runs
        at every state) for the state's validated ``output``, with its contract's ref.

        ``dump``: how to write ``output``, an object of exactly its state's contract class
        (the engine works it out once per state, :class:`OutputDump`); ``None``: ``output``
        is JSON-able data already. With a dump, no sink taking the event now and ``raw``
        a string or ``None``, the event is a row holding the output's JSON, or its data
        where the dump may hold a NaN or ±Infinity float (JSON has none; the batch's writer
        checks it, as it checks a field dict's).
        """
        session = self.session
        seq = session.seq = session.seq + 1
        finite_dump = False
        if dump is not None:
            to_python, to_json, finite_dump = dump
            if (raw is None or type(raw) is str) and not (self._sinks.current or self._mixed):
                if finite_dump:  # no NaN or ±Infinity: its JSON is the same data
                    dumped = to_json(output)
                    if OUTPUT_JSON is not None:
                        dumped = OUTPUT_JSON(dumped)
                else:  # its data, checked for NaN if and when the batch is written
                    dumped = to_python(output, mode="json")
                    self._unchecked(dumped)
                self._add_data((OUTPUT, self.session_id, self.turn_id, seq, self._stamp(),
                                state, self.attempt, contract, dumped, raw))
                return
            output = to_python(output, mode="json")
        data = {"session_id": self.session_id, "turn_id": self.turn_id, "seq": seq,
                "at": self._now(), "kind": "state_output", "state": state,
                "attempt": self.attempt, "contract": contract, "output": output, "raw": raw}
        if self._sinks.current:
            self._deliver(StateOutput, data,
                          scalars=finite_dump and (raw is None or type(raw) is str))
        else:
            self._mixed = True
            self._add_data(data)
            if not finite_dump:
                self._unchecked(output)  # the rest: str, int, datetime (and raw: str or None)
            if raw is not None and type(raw) is not str:
                self._unchecked(raw)

    # --- what handlers use --------------------------------------------------------------

    def validation_context(self) -> Mapping[str, Any]:
        """What contracts may check references against.

        ``tool_catalog``: the tools (the Plan contract checks calls against it);
        ``fact_ids``: the ids of the facts established so far this turn (any output with a
        ``facts`` list of items with an ``id`` establishes facts); ``fact_figures``: each
        fact's numbers, a :class:`~hermes_fsm.contracts.grounding.FactFigures` mapping
        that works them out when read (the Response contract: an answer citing it states
        one);
        ``conversation``: the session's conversation graph (``None`` before it has one).
        """
        return self._context

    def conversation(self) -> Conversation:
        """The session's conversation graph (made empty on first use); contracts check
        node references against it (``validation_context()["conversation"]``)."""
        conv = self.session.conversation
        if conv is None:
            conv = self.session.conversation = Conversation()
        self._context["conversation"] = conv
        return conv

    def accept(self, output: Any) -> None:
        """Record the current state's validated output (done by the engine after the guard)."""
        assert self.state is not None
        self.output = output
        name = self.output_state = self.state.name
        self.outputs[name] = output
        fields = _FIELDS.get(type(output))
        if fields is None:
            fields = _fields_of(type(output))
        contract, text, facts = fields
        if not contract:
            return
        self.by_contract[output.contract_name] = output
        if text and isinstance(output.text, str):
            self._answer = output.text
        if facts:
            self._context["fact_ids"] = {getattr(f, "id", None) for f in output.facts}
            # an answer citing one states a figure of it (worked out when it is read)
            self._context["fact_figures"] = FactFigures(output.facts)

    def answer(self) -> str | None:
        """The ``text`` of the latest output that has one (the default graph: RESPONSE)."""
        return self._answer


def number_late(session: Session, pending: Sequence[tuple[type[Event], dict[str, Any]]]
                ) -> EventList:
    """Give late events the session's next seqs (it must not be running a turn)."""
    batch = EventList()
    seq = session.seq
    for kind, data in pending:
        seq += 1
        numbered = {**data, "seq": seq}
        batch.add(kind, numbered, make_event(kind, numbered))
    return batch


def deliver_late(session: Session, sinks: Sequence[EventSink]) -> None:
    """Number the session's waiting late events, log them and send them to ``sinks``
    (in-process sessions; the session must not be running a turn)."""
    pending, session.late = session.late, None
    if not pending:
        return
    batch = number_late(session, pending)
    session.seq = batch.last_seq()
    session.record(batch)
    for event in batch:
        for sink in sinks:
            sink.emit(event)


_perf_counter = time.perf_counter  # read at every transition: one global, no attribute

_utc_now = partial(datetime.now, UTC)
"""``SystemClock().now`` without a Python frame (events read the clock ~20 times a turn)."""

_FIELDS: dict[type, tuple[bool, bool, bool]] = {}
"""Per output class: whether it is a Contract, has a ``text`` and a ``facts`` field
(:meth:`TurnContext.accept` reads it at every state)."""


def _fields_of(cls: type) -> tuple[bool, bool, bool]:
    """Whether an output class is a Contract, has a ``text`` and a ``facts`` field (kept in
    ``_FIELDS``)."""
    if isinstance(cls, type) and issubclass(cls, Contract):
        names = cls.model_fields
        found = (True, "text" in names, "facts" in names)
    else:
        found = (False, False, False)
    _FIELDS[cls] = found
    return found
