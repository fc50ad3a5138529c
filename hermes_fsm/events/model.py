"""Typed events: what every step of a turn leaves behind.

All events are frozen pydantic models in one discriminated union, :data:`Event`, keyed
by ``kind``. The same stream serves as log, recording, live stream and graph overlay.
``seq`` numbers a session's events contiguously from 1; ``at`` comes from the
orchestrator's injectable clock.

Two forms of one event: its *field dict* (every field of the model, defaults filled, in
declared order, ``kind`` included: :func:`event_data`) and its *object*. The field dict
is the data model of the hot path: a turn emits field dicts into an :class:`EventList`
(its own five kinds of events as compact rows, :mod:`hermes_fsm.events.rows`, whose field
dicts are made when read), the session log, durable stores and data sinks
(:mod:`hermes_fsm.events.sinks`) take them as they are, and objects are built from them
only when someone reads them (:func:`make_event`, through pydantic's public API, not
validated again). The JSON of a field dict is the model's JSON, byte for byte.

>>> from datetime import UTC, datetime
>>> ev = TurnStarted(session_id="s1", turn_id="t1", seq=1,
...                  at=datetime(2026, 1, 1, tzinfo=UTC), user_id="u1", text="hi")
>>> EVENT_ADAPTER.validate_json(ev.model_dump_json()) == ev
True
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import to_json

from hermes_fsm._internal.fast_json import orjson as _orjson
from hermes_fsm.events.rows import ROW_KINDS, row_data, rows_json

__all__ = [
    "EVENTS_ADAPTER",
    "EVENT_ADAPTER",
    "BrainCall",
    "ContextBuilt",
    "ContractViolation",
    "Event",
    "EventList",
    "GraphUpdated",
    "HandlerFailed",
    "MemoryCommitFailed",
    "MemoryRecalled",
    "MemoryWrite",
    "PromptLoaded",
    "ResourcesRead",
    "Retry",
    "RouteTaken",
    "StateEntered",
    "StateExited",
    "StateOutput",
    "TimedOut",
    "TokenChunk",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallRetried",
    "ToolCallStarted",
    "ToolCanaryRolledBack",
    "ToolVersionChosen",
    "ToolsOffered",
    "TurnFinished",
    "TurnStarted",
]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    turn_id: str
    seq: int
    at: datetime


class TurnStarted(_Event):
    """A turn began on a session with a user message (``domain``: the session's memory
    domain, ``None`` for none)."""

    kind: Literal["turn_started"] = "turn_started"
    user_id: str
    text: str
    graph: str = ""
    domain: str | None = None


class StateEntered(_Event):
    """The machine entered ``state`` from ``source`` by ``trigger`` (``attempt`` counts from 1)."""

    kind: Literal["state_entered"] = "state_entered"
    state: str
    source: str
    trigger: str
    attempt: int = 1


class StateExited(_Event):
    """The machine left ``state`` by ``trigger`` towards ``dest`` after ``duration_ms`` in it."""

    kind: Literal["state_exited"] = "state_exited"
    state: str
    trigger: str
    dest: str
    duration_ms: float


class StateOutput(_Event):
    """A state's output passed its contract. ``raw`` is what the handler/brain gave."""

    kind: Literal["state_output"] = "state_output"
    state: str
    attempt: int
    contract: str | None
    output: Any
    raw: Any = None


class ContractViolation(_Event):
    """A state's output broke its contract; ``errors`` are pydantic's error dicts."""

    kind: Literal["contract_violation"] = "contract_violation"
    state: str
    attempt: int
    contract: str
    errors: list[dict[str, Any]]
    raw: Any = None


class TimedOut(_Event):
    """A state attempt (``scope='state'``) or the whole turn (``scope='turn'``) ran out of time."""

    kind: Literal["timed_out"] = "timed_out"
    scope: Literal["state", "turn"]
    state: str
    attempt: int
    limit_s: float


class HandlerFailed(_Event):
    """A handler raised. ``retryable`` says whether the engine will try again."""

    kind: Literal["handler_failed"] = "handler_failed"
    state: str
    attempt: int
    error_type: str
    message: str
    retryable: bool


class Retry(_Event):
    """The state will be attempted again after ``delay_s`` because of ``reason``."""

    kind: Literal["retry"] = "retry"
    state: str
    attempt: int
    reason: Literal["violation", "timeout", "error"]
    delay_s: float


class RouteTaken(_Event):
    """Retries are exhausted (or the error was not retryable): the failure route was taken."""

    kind: Literal["route_taken"] = "route_taken"
    state: str
    dest: str
    reason: str
    attempts: int


class BrainCall(_Event):
    """A brain was asked for a state's output (token usage when the brain reports it)."""

    kind: Literal["brain_call"] = "brain_call"
    state: str
    attempt: int
    brain: str
    duration_ms: float
    usage: dict[str, int] = Field(default_factory=dict)
    usage_source: str | None = Field(
        default=None, description="where usage came from: server (reported), tokenizer "
        "(counted with the server's tokenizer), estimated:METHOD; null without usage")


class ContextBuilt(_Event):
    """What a brain request was given, within the token budget (see
    :mod:`hermes_fsm.engine.context`).

    One per brain request (state attempt that asks the brain), just before ``brain_call``.
    ``parts`` are tokens per part as sent (``system``, ``summary``, ``history``,
    ``memory``, ``resources``, ``tools``, ``steps``, ``input``), measured by ``counter``;
    ``resources`` names the MCP resources read into the request, with their tokens; ``caps`` are
    the tokens each trimmable part was allowed this time (``summary`` + ``history`` share
    the ``history`` cap); ``budget`` is ``window - reserved_output``. ``dropped`` counts
    what this request left out per part (history messages, memory lines, tools — named in
    ``dropped_tools``); ``truncated`` names parts cut mid-text. ``folded`` messages left
    the window for the rolling ``summary`` (set only when this build changed it), written
    by ``summarizer`` (a brain's name, or ``extractive`` — with ``summary_error`` saying
    why the brain's was not used). ``overflow`` is what nothing could cut (the system
    prompt and this turn's earlier outputs alone were over the budget). ``tools_saved``
    is the tool tokens the turn's toolsets kept out of the request (every permitted
    tool's schemas less the offered ones', as ``tools_offered`` says; 0 without toolsets).
    """

    kind: Literal["context_built"] = "context_built"
    state: str
    attempt: int = 1
    counter: str
    window: int
    reserved_output: int
    budget: int
    used: int
    parts: dict[str, int]
    caps: dict[str, int] = Field(default_factory=dict)
    dropped: dict[str, int] = Field(default_factory=dict)
    dropped_tools: list[str] = Field(default_factory=list)
    truncated: list[str] = Field(default_factory=list)
    folded: int = 0
    summary: str | None = None
    summarizer: str | None = None
    summary_error: str | None = None
    overflow: int = 0
    tools_saved: int = 0
    resources: dict[str, int] = Field(default_factory=dict)


class ToolsOffered(_Event):
    """Which tools a planning request carried when toolsets are configured
    (:mod:`hermes_fsm.tools.toolsets`): the ``toolsets`` chosen for the ``intent`` (or,
    when none serves it, for the session's pending task, whose id ``pending_task`` is), the
    tools ``offered``, how many were ``left_out``, and the tools block's tokens with them
    (``tokens``) and with every tool (``tokens_all``); ``tokens_saved`` is the difference.
    Emitted just before the request's ``context_built``."""

    kind: Literal["tools_offered"] = "tools_offered"
    state: str
    intent: str | None = None
    pending_task: str | None = None  # set when the pending task's intent chose the toolsets
    toolsets: list[str] = Field(default_factory=list)
    offered: list[str] = Field(default_factory=list)
    left_out: int = 0
    tokens: int = 0
    tokens_all: int = 0
    tokens_saved: int = 0


class PromptLoaded(_Event):
    """An MCP server's prompt template was loaded into a brain request because the turn's
    ``intent`` matched it (:mod:`hermes_fsm.tools.server_prompts`): its ``arguments``, the
    ``text``'s ``tokens`` (counted as part of the request's memory block), or the
    ``error`` that kept it out."""

    kind: Literal["prompt_loaded"] = "prompt_loaded"
    state: str
    prompt: str
    intent: str | None = None
    arguments: dict[str, str] = Field(default_factory=dict)
    tokens: int = 0
    error: str | None = None


class ResourcesRead(_Event):
    """MCP resources read into a brain request because the turn's toolset names them
    (:mod:`hermes_fsm.tools.toolsets`): their ``tokens`` by URI (the request's
    ``resources`` part of the budget, as its ``context_built`` says), and per URI the
    ``errors`` that kept one out."""

    kind: Literal["resources_read"] = "resources_read"
    state: str
    toolsets: list[str] = Field(default_factory=list)
    tokens: dict[str, int] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)


class TokenChunk(_Event):
    """A piece of streamed answer text."""

    kind: Literal["token_chunk"] = "token_chunk"
    state: str
    text: str


class ToolCallStarted(_Event):
    """A tool call began."""

    kind: Literal["tool_call_started"] = "tool_call_started"
    call_id: str
    tool: str
    arguments: dict[str, Any]
    caller: str = ""


class ToolCallFinished(_Event):
    """A tool call ended: ``ok`` with ``output``, or an error envelope in ``error``.

    The audit record of the call: who called (``caller``), which tool from which
    ``source`` (``local`` or ``mcp:<server>``), its ``arguments``, the full output (the
    model may have seen it ``truncated``), how many ``attempts`` it took, the output
    contract problem (``output_violation``) and the tool that stood in (``fallback``).
    """

    kind: Literal["tool_call_finished"] = "tool_call_finished"
    call_id: str
    tool: str
    ok: bool
    output: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 1
    duration_ms: float
    caller: str = ""
    source: str = "local"
    arguments: dict[str, Any] = Field(default_factory=dict)
    truncated: bool = False
    output_violation: str | None = None
    fallback: str | None = None


class ToolVersionChosen(_Event):
    """A call of a tool with a canary was routed (:mod:`hermes_fsm.tools.canary`): which
    registered tool ran it (``runs``), its contract ``version``, whether it is the
    ``candidate``."""

    kind: Literal["tool_version_chosen"] = "tool_version_chosen"
    call_id: str
    tool: str
    runs: str
    version: str
    candidate: bool


class ToolCanaryRolledBack(_Event):
    """A canary's candidate failed too often: every later call goes to the stable tool."""

    kind: Literal["tool_canary_rolled_back"] = "tool_canary_rolled_back"
    call_id: str
    tool: str
    candidate: str
    reason: str
    version: str | None = None  # the candidate's contract version (the experience log's key)


class ToolCallProgress(_Event):
    """A running tool call reported progress (MCP ``notifications/progress``)."""

    kind: Literal["tool_call_progress"] = "tool_call_progress"
    call_id: str
    tool: str
    progress: float
    total: float | None = None
    message: str | None = None


class ToolCallRetried(_Event):
    """A tool call failed with a retryable error and will be made again after ``delay_s``."""

    kind: Literal["tool_call_retried"] = "tool_call_retried"
    call_id: str
    tool: str
    attempt: int
    error_code: str
    message: str
    delay_s: float


class MemoryWrite(_Event):
    """A memory update was applied (or skipped, with ``status`` saying why)."""

    kind: Literal["memory_write"] = "memory_write"
    key: str
    update_type: str
    value: Any = None
    status: Literal["applied", "skipped", "failed"]
    detail: str = ""


class MemoryRecalled(_Event):
    """Memory was recalled for a state: the items (with scores) and the block's token cost.

    ``layers`` are the memory layers in the order the recall walked them (seed 002 §2.4:
    ``working``, ``semantic``, ``experience``), each with what it ``found`` (the experience
    layer also ``keyed_by``, the conversation entities that matched, and its ``entries``);
    empty for a memory that does not walk layers. ``tokens`` is the background block's size
    by the token counter the context builder uses (the one ``context_built`` counts with;
    with no context builder, one per CJK character and one per four other characters);
    ``error`` says why recall failed (the turn goes on without it).
    """

    kind: Literal["memory_recalled"] = "memory_recalled"
    state: str
    items: list[dict[str, Any]] = Field(default_factory=list)
    tokens: int = 0
    error: str | None = None
    layers: list[dict[str, Any]] = Field(default_factory=list)


class MemoryCommitFailed(_Event):
    """A memory commit failed; ``final`` says whether background retries are exhausted.

    The answer was already given: a failed commit never fails the turn. With
    ``final=False`` it is retried in the background; with ``final=True`` the updates
    (``keys``) were not written after ``attempts`` tries.
    """

    kind: Literal["memory_commit_failed"] = "memory_commit_failed"
    attempts: int
    error: str
    final: bool
    keys: list[str] = Field(default_factory=list)


class GraphUpdated(_Event):
    """The session's conversation graph changed: ``ops`` is the diff, folded in order by
    :func:`hermes_fsm.conversation.graph.apply_ops` (entity and intent nodes, edges,
    pending tasks). The graph is the fold of these events (and a checkpoint's copy)."""

    kind: Literal["graph_updated"] = "graph_updated"
    state: str
    ops: list[dict[str, Any]]


class TurnFinished(_Event):
    """The turn is over and the session is back in its initial state.

    ``status``: ``completed`` (every state succeeded), ``degraded`` (a failure route was
    taken), ``partial`` (the turn budget ran out), ``awaiting_input`` (a clarification
    asks for a slot; the task waits in the session), ``awaiting_approval`` (a plan waits
    for the user's yes).
    """

    kind: Literal["turn_finished"] = "turn_finished"
    status: Literal["completed", "degraded", "partial", "awaiting_input", "awaiting_approval"]
    answer: str
    duration_ms: float
    path: list[str]


Event = Annotated[
    TurnStarted
    | StateEntered
    | StateExited
    | StateOutput
    | ContractViolation
    | TimedOut
    | HandlerFailed
    | Retry
    | RouteTaken
    | BrainCall
    | ContextBuilt
    | ToolsOffered
    | PromptLoaded
    | ResourcesRead
    | TokenChunk
    | ToolCallStarted
    | ToolCallFinished
    | ToolCallRetried
    | ToolCallProgress
    | ToolVersionChosen
    | ToolCanaryRolledBack
    | MemoryWrite
    | MemoryRecalled
    | MemoryCommitFailed
    | GraphUpdated
    | TurnFinished,
    Field(discriminator="kind"),
]
"""Any event; parse one with ``EVENT_ADAPTER.validate_json(line)``."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENTS_ADAPTER: TypeAdapter[list[Event]] = TypeAdapter(list[Event])
"""Parses a JSON array of events (a turn's batch in the session log)."""

EVENT_CLASSES: dict[str, type[_Event]] = {
    cls.model_fields["kind"].default: cls for cls in get_args(get_args(Event)[0])}
"""Each event class of :data:`Event` by its ``kind``."""

EVENT_TEMPLATES: dict[type[BaseModel], tuple[dict[str, Any], set[str], int]] = {}
"""Per event class: its field values with defaults (in order), its field names, how many
(filled by :func:`event_data`; the turn reads it to emit without a call; never change it)."""
_PROTOTYPES: dict[type[BaseModel], BaseModel] = {}
"""Per event class: an event of it (defaults, ``None`` for the rest) that :func:`make_event`
copies."""


def event_data(kind: type[_Event], fields: dict[str, Any]) -> dict[str, Any]:
    """The field values of an event of ``kind``: defaults filled, in declared order.

    Raises:
        TypeError: a field the event does not have (a bug in the emitting code).
    """
    template = EVENT_TEMPLATES.get(kind)
    if template is None:
        values = {name: (None if info.is_required()
                         else info.get_default(call_default_factory=True))
                  for name, info in kind.model_fields.items()}
        template = EVENT_TEMPLATES[kind] = (values, set(values), len(values))
    values = template[0]
    data = values.copy()
    data.update(fields)
    if len(data) != len(values):
        unknown = sorted(set(fields) - template[1])
        raise TypeError(f"{kind.__name__} has no field(s) {unknown}")
    return data


def make_event(kind: type[_Event], data: dict[str, Any]) -> Any:
    """An event object with the field values ``data`` (every field, as :func:`event_data`
    gives them), not validated again.

    Built through pydantic's public API for trusted data: ``model_copy(update=data)`` of a
    prototype of the class (made once with ``model_construct``); both document that the
    values are not validated. Validating would copy containers and could coerce values
    (an ``int`` into a ``float`` field), so the object would no longer match the field dict
    the session log and data sinks have; the fields come from our own code, and the test
    suite checks that every event a turn emits validates against its model
    (``EVENT_ADAPTER``). A copy costs ~2–3 µs (``model_construct`` itself: ~4–7 µs), which
    is why a turn keeps field dicts and builds objects only for those who read them.
    """
    prototype = _PROTOTYPES.get(kind)
    if prototype is None:
        prototype = _PROTOTYPES[kind] = kind.model_construct(**event_data(kind, {}))
    return prototype.model_copy(update=data)


class EventList(Sequence[Any]):
    """A turn's events, kept as rows or field dicts and made into event objects on first read.

    Most events of a busy service are written and never read back as objects; building
    each one costs more than the rest of a state's work, so it happens only when needed
    (a sink, or someone reading the list). The engine's own events come as compact rows
    (:mod:`hermes_fsm.events.rows`) when no sink takes them as they happen: their field
    dicts are made on first read too (:attr:`data`, :meth:`pairs`, iterating), and a batch
    made only of rows can be kept as its rows (:meth:`rows`). :meth:`to_json` writes the
    whole batch at once.

    Attributes:
        unchecked: the field dicts (or the field values) that may hold a non-finite float
            (NaN, ±Infinity), to be checked (:func:`finite_items`) when the batch is
            written: :func:`write_json` uses its fast writer only if none does.
            :meth:`add` puts each event there unless told it holds only finite scalars;
            whoever adds events through :meth:`appender` appends to it each dict, or each
            value, that is not such a scalar (a row never is).
    """

    __slots__ = ("_checked_upto", "_classes", "_data", "_json", "_json_upto", "_objects",
                 "unchecked")

    def __init__(self) -> None:
        # by index: the class of an event whose kind does not name it in EVENT_CLASSES
        # (none for the engine's events: a class is looked up by kind when it is needed)
        self._classes: dict[int, type[_Event]] = {}
        # each event: its field dict, or its row until its dict is made (in its place)
        self._data: list[Any] = []
        self._objects: dict[int, Any] = {}  # by index: the events built so far
        self._json: list[bytes] = []  # JSON arrays of the events [0, _json_upto), in order
        self._json_upto = 0
        self.unchecked: list[Any] = []
        self._checked_upto = 0  # unchecked[:_checked_upto]: in the kept arrays already

    def add(self, kind: type[_Event], data: dict[str, Any], event: Any = None, *,
            scalars: bool = False) -> None:
        """Append an event given as its kind and field dict (and its object, if built).

        ``scalars``: nothing in it can be a non-finite float (its values are str, int,
        bool, None, datetimes, finite floats, or lists of str: nothing to check for
        :func:`write_json`).
        """
        if EVENT_CLASSES.get(data["kind"]) is not kind:
            self._classes[len(self._data)] = kind
        self._data.append(data)
        if event is not None:
            self._objects[len(self._data) - 1] = event
        if not scalars:
            self.unchecked.append(data)

    def appender(self) -> Callable[[Any], None]:
        """A function that adds an event with no object yet, given its field dict, whose
        ``kind`` names its class in :data:`EVENT_CLASSES`, or its row
        (:mod:`hermes_fsm.events.rows`): what :meth:`add` does, without a Python frame
        per event (the engine's turn uses it; an event of another class goes through
        :meth:`add`). A dict with anything but finite scalars goes to :attr:`unchecked`
        as well."""
        return self._data.append

    def _dicts(self) -> list[dict[str, Any]]:
        """The field dicts of every event (those of rows made now, in the rows' places)."""
        _make_rows(self._data)
        return self._data

    def _kind(self, index: int) -> str:
        entry = self._data[index]
        return ROW_KINDS[entry[0]] if type(entry) is tuple else entry["kind"]

    def _class(self, index: int) -> type[_Event]:
        cls = self._classes.get(index)
        return EVENT_CLASSES[self._kind(index)] if cls is None else cls

    def _build(self, index: int) -> Any:
        event = self._objects.get(index)
        if event is None:
            event = self._objects[index] = make_event(self._class(index), self._one(index))
        return event

    def _one(self, index: int) -> dict[str, Any]:
        """The field dict of one event, made (in its row's place) for it alone: reading a
        few events makes no dicts for the others."""
        entry = self._data[index]
        if type(entry) is tuple:
            entry = self._data[index] = row_data(entry)
        return entry  # type: ignore[no-any-return]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._build(i) for i in range(*index.indices(len(self._data)))]
        if index < 0:
            index += len(self._data)
        if not 0 <= index < len(self._data):
            raise IndexError("event index out of range")
        return self._build(index)

    def __len__(self) -> int:
        return len(self._data)

    def pairs(self, start: int = 0) -> list[tuple[type[_Event], dict[str, Any]]]:
        """The events from ``start`` on as ``(event class, field dict)`` pairs, no object
        built (read the dicts, never change them)."""
        data = self._dicts()
        if not self._classes:
            return [(EVENT_CLASSES[d["kind"]], d) for d in data[start:]]
        return [(self._class(i), data[i]) for i in range(start, len(data))]

    @property
    def data(self) -> Sequence[dict[str, Any]]:
        """The events' field dicts, in order, no object built (read them, never change them)."""
        return self._dicts()

    def rows(self) -> tuple[Any, ...] | None:
        """The events as their rows, when every one of them is a row whose dict nobody
        made yet (else ``None``; see :mod:`hermes_fsm.events.rows`)."""
        entries = self._data
        for entry in entries:
            if type(entry) is not tuple:
                return None
        return tuple(entries)

    def log_json(self) -> tuple[bytes, bool]:
        """The batch's JSON for a session's log, and whether it is its rows' compact JSON
        (:func:`~hermes_fsm.events.rows.rows_json`): the arrays a durable turn's steps
        wrote, joined (serialized once); else the rows' compact JSON when every event is
        a row and none holds a NaN or ±Infinity float; else :meth:`to_json`."""
        if not self._json:
            rows = self.rows()
            if rows is not None and finite_items(self.unchecked):
                return rows_json(rows), True
        return self.to_json(), False

    def first_seq(self) -> int:
        """The sequence number of the first event (0 for none), no dict made."""
        return _seq(self._data[0]) if self._data else 0

    def last_seq(self) -> int:
        """The sequence number of the last event (0 for none), no object built."""
        return _seq(self._data[-1]) if self._data else 0

    def at(self, index: int) -> datetime:
        """The ``at`` of one event, no dict made for the others."""
        return self._one(index)["at"]  # type: ignore[no-any-return]

    def of_kinds(self, kinds: Container[str]) -> list[Any]:
        """The events whose ``kind`` is in ``kinds``, as objects (only those are built)."""
        return [self._build(i) for i, e in enumerate(self._data)
                if (ROW_KINDS[e[0]] if type(e) is tuple else e["kind"]) in kinds]

    def __iter__(self) -> Any:
        for i in range(len(self._data)):
            yield self._build(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"EventList({list(self)!r})"

    def to_json(self) -> bytes:
        """The batch as one JSON array (the same JSON each event's model would write)."""
        if not self._json:
            return self._write(0, finite_items(self.unchecked))
        if self._json_upto < len(self._data):
            self.json_from(self._json_upto)
        if len(self._json) == 1:
            return self._json[0]
        return b"[" + b",".join(c[1:-1] for c in self._json if len(c) > 2) + b"]"

    def json_from(self, start: int) -> bytes:
        """The events from ``start`` on as one JSON array (a durable step's write).

        Serialized once: when ``start`` is where the previous call ended, the array is
        kept and :meth:`to_json` joins the kept arrays rather than serialize again.
        """
        if start == self._json_upto:  # what was added since the last call
            fresh = finite_items(self.unchecked[self._checked_upto:])
        else:
            fresh = finite_items(self.unchecked)
        blob = self._write(start, fresh)
        if start == self._json_upto:
            self._checked_upto = len(self.unchecked)
            self._json.append(blob)
            self._json_upto = len(self._data)
        return blob

    def _write(self, start: int, finite_floats: bool) -> bytes:
        """:func:`write_json` of the events from ``start`` on, with no row's output parsed
        only to be written again: orjson embeds its JSON as it is (the dicts made for
        writing rows are not kept)."""
        batch = self._data[start:]
        if finite_floats and _orjson is not None:
            _make_rows(batch, written=True)
            try:
                return _orjson.dumps(batch, default=_unknown, option=_ORJSON_OPTIONS)
            except TypeError:  # orjson.JSONEncodeError: a type it does not write as pydantic
                pass
        return to_json(self._dicts()[start:], serialize_unknown=True)


def _make_rows(entries: list[Any], *, written: bool = False) -> None:
    """Put each row's field dict in its place in ``entries`` (``written``: the dict made
    only for orjson to write, :func:`~hermes_fsm.events.rows.row_data`). Rows are found
    by C-level scans (a turn holds a few rows among many dicts, or only rows): no Python
    step per entry that is a dict already."""
    kinds = list(map(type, entries))
    if tuple not in kinds:
        return
    index = kinds.index(tuple)
    while True:
        entries[index] = row_data(entries[index], written=written)
        try:
            index = kinds.index(tuple, index + 1)
        except ValueError:
            return


def _seq(entry: Any) -> int:
    """The ``seq`` of an event given as its field dict or its row."""
    seq: int = entry[3] if type(entry) is tuple else entry["seq"]
    return seq


def finite(value: Any) -> bool:
    """Whether ``value`` (field data: dicts, lists, tuples, scalars) holds no NaN or
    ±Infinity float anywhere (what decides whether :func:`write_json` may use its fast
    writer)."""
    return finite_items((value,))


def finite_items(values: Any) -> bool:
    """:func:`finite` for each of ``values`` (an event batch's :attr:`EventList.unchecked`
    dicts are checked with it as the batch is written: no Python frame per scalar)."""
    for v in values:
        t = type(v)
        if t is str or v is None or t is int or t is bool or t is datetime:
            continue
        if t is float:
            if v - v:  # NaN for NaN and ±Infinity (true), 0.0 otherwise
                return False
        elif t is dict:
            if not finite_items(v.values()):
                return False
        elif t is list or t is tuple:
            if not finite_items(v):
                return False
        elif isinstance(v, float):
            if v - v:
                return False
        elif isinstance(v, dict):
            if not finite_items(v.values()):
                return False
        elif isinstance(v, list | tuple):
            if not finite_items(v):
                return False
    return True


def _unknown(value: Any) -> Any:
    raise TypeError(type(value).__name__)  # the fast writer gives up; pydantic writes it


_ORJSON_OPTIONS = (0 if _orjson is None else _orjson.OPT_UTC_Z
                   | _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_SUBCLASS)


def write_json(data: Any, finite_floats: bool = False) -> bytes:
    """``pydantic_core.to_json(data, serialize_unknown=True)``: the JSON of event field
    data, byte for byte; faster when orjson is installed (``hermes-fsm[fast]``).

    orjson writes the same bytes as pydantic for the types it knows natively (str, int,
    bool, None, float, dict with str keys, list, tuple, datetime, date, time, UUID, enum)
    but ``null`` for NaN and ±Infinity, where pydantic writes ``NaN``/``Infinity``; so it
    is used only with ``finite_floats`` (the caller checked: :func:`finite`). Anything
    else (a model, a dataclass, a subclass of str/int/dict/list, a set, bytes, Decimal,
    a non-str key, an int beyond 64 bits) makes orjson give up and pydantic write the
    whole of it. ``tests/test_event_json.py`` holds the two writers to the same bytes.
    """
    if finite_floats and _orjson is not None:
        try:
            return _orjson.dumps(data, default=_unknown, option=_ORJSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: a type it does not write as pydantic
            pass
    return to_json(data, serialize_unknown=True)
