"""Event sinks: where events go besides the session's own log.

A sink is anything with ``emit(event)``; it is called synchronously, in order, for every
event. Sinks must not raise: a failing sink would fail the turn.

A sink may also have ``emit_data(kind, data)`` (:class:`DataSink`): the turn then calls that
instead, with the event's class and its field values (the dict the event object would hold,
``kind`` included, in declared order; read it, never change it), and builds no event object
for it. Building ~30 objects a turn costs more than most sinks' own work; a sink that needs
objects only sometimes (a stream nobody reads, a log level that is off) builds them when it
does: :func:`event_from_data`. An event emitted outside a turn (e.g. a memory commit that
failed in the background) still comes through ``emit``, so a data sink keeps both.

The field dicts are the documented data model here, and they are handled through
pydantic's public API only: :func:`event_json` and :class:`StructlogSink` dump them with
a ``TypeAdapter`` of a ``TypedDict`` made from the event model's ``model_fields`` (the
model's JSON byte for byte, at the cost of the model's own serializer), and
:func:`event_from_data` builds the object with ``model_copy`` of a constructed prototype
(see :func:`hermes_fsm.events.model.make_event`). No pydantic-core schema is read and no
object is assembled by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Protocol, runtime_checkable

import structlog
from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

from hermes_fsm.events.model import Event, make_event

__all__ = ["DataSink", "EventSink", "ListSink", "SinkHost", "StructlogSink", "event_from_data",
           "event_json", "sink_plan"]


@runtime_checkable
class EventSink(Protocol):
    """Receives every event as it is emitted."""

    def emit(self, event: Event) -> None: ...


@runtime_checkable
class DataSink(Protocol):
    """A sink that takes events as field dicts (``emit_data``) when a turn emits them, and as
    objects (``emit``) otherwise."""

    def emit(self, event: Event) -> None: ...

    def emit_data(self, kind: type[Any], data: Mapping[str, Any]) -> None: ...


class SinkHost(Protocol):
    """What sinks are attached to and detached from (an orchestrator is one)."""

    def add_sink(self, sink: EventSink) -> None: ...

    def remove_sink(self, sink: EventSink) -> None: ...


SinkPlan = tuple[bool, tuple[tuple[Any, bool], ...]]
"""Whether any sink takes event objects; each sink with whether it takes field dicts."""

_PLANS: dict[int, tuple[tuple[Any, ...], SinkPlan]] = {}


def sink_plan(sinks: tuple[Any, ...]) -> SinkPlan:
    """How to hand an event to ``sinks``: ``(any takes objects, ((sink, takes data), ...))``.

    Worked out once per tuple of sinks (an orchestrator's sinks are replaced, never changed in
    place), then looked up by the tuple's identity.
    """
    entry = _PLANS.get(id(sinks))
    if entry is not None and entry[0] is sinks:
        return entry[1]
    calls = tuple((sink, callable(getattr(sink, "emit_data", None))) for sink in sinks)
    plan = (not all(takes_data for _, takes_data in calls), calls)
    if len(_PLANS) >= 64:  # tuples come and go (capture_events, apps): keep the cache small
        _PLANS.clear()
    _PLANS[id(sinks)] = (sinks, plan)  # the tuple is kept: its id cannot be reused meanwhile
    return plan


def event_from_data(kind: type[Any], data: Mapping[str, Any]) -> Any:
    """The event object of ``emit_data``'s arguments (the same one ``emit`` would get)."""
    return make_event(kind, data)  # type: ignore[arg-type]


_SERIALIZERS: dict[type[Any], TypeAdapter[Any] | None] = {}


def _serializer(kind: type[Any]) -> TypeAdapter[Any] | None:
    """A ``TypeAdapter`` of ``kind``'s field dicts that dumps them as the model dumps its
    objects (``None`` when the model has computed fields: then the object is built).

    Made from the model's public description, not from pydantic-core's schema: a
    ``TypedDict`` with the model's field names, their annotations (with their
    ``Annotated`` metadata), serialization aliases and exclusions, and the model's config,
    every field required. The same types give the same serializers, so the JSON is the
    model's byte for byte (``tests/test_sinks.py`` checks every event class). Dumped with
    the adapter's ``serializer`` (a documented attribute of ``TypeAdapter``, the
    pydantic-core ``SchemaSerializer`` its ``dump_json`` calls: ~0.5 µs an event less than
    going through ``dump_json``'s keyword arguments).
    """
    try:
        return _SERIALIZERS[kind]
    except KeyError:
        pass
    adapter = None
    if not kind.model_computed_fields:
        fields: dict[str, Any] = {}
        for name, info in kind.model_fields.items():
            extra = [*info.metadata]
            if info.serialization_alias is not None or info.exclude is not None:
                extra.append(Field(serialization_alias=info.serialization_alias,
                                   exclude=info.exclude))
            fields[name] = Annotated[info.annotation, *extra] if extra else info.annotation
        config = ConfigDict(**kind.model_config)  # type: ignore[typeddict-item]
        adapter = TypeAdapter(with_config(config)(TypedDict(  # type: ignore[operator]
            f"{kind.__name__}Fields", fields)))
    _SERIALIZERS[kind] = adapter
    return adapter


def event_json(kind: type[Any], data: Mapping[str, Any]) -> bytes:
    """``data`` as JSON, byte for byte what the event object's model would write."""
    adapter = _SERIALIZERS.get(kind) or _serializer(kind)
    if adapter is None:
        event = make_event(kind, data)  # type: ignore[arg-type]
        return event.model_dump_json().encode()  # type: ignore[no-any-return]
    return adapter.serializer.to_json(data)


def _event_fields(kind: type[Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """``event.model_dump(mode="json", exclude={"kind"})`` of the event of ``data``."""
    adapter = _SERIALIZERS.get(kind) or _serializer(kind)
    if adapter is None:
        event = make_event(kind, data)  # type: ignore[arg-type]
        fields: dict[str, Any] = event.model_dump(mode="json", exclude={"kind"})
        return fields
    dumped: dict[str, Any] = adapter.serializer.to_python(data, mode="json", exclude={"kind"})
    return dumped


class ListSink:
    """Collects events in a list (``.events``)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


class StructlogSink:
    """Logs each event through structlog: one log line per event, the event's fields as keys.

    A data sink: it logs from the event's field values (the same fields, in JSON form, as
    ``event.model_dump(mode="json")`` without ``kind``), no event object built.

    Args:
        logger: a structlog logger (default ``structlog.get_logger("hermes_fsm")``); configure
            structlog for JSON (production) or console rendering as usual.
    """

    _LEVELS: ClassVar[dict[str, str]] = {
        "contract_violation": "warning", "handler_failed": "warning",
        "timed_out": "warning", "route_taken": "warning",
    }

    def __init__(self, logger: Any = None) -> None:
        self.logger = logger or structlog.get_logger("hermes_fsm")

    def emit(self, event: Event) -> None:
        fields = event.model_dump(mode="json", exclude={"kind"})
        level = self._LEVELS.get(event.kind, "info")
        getattr(self.logger, level)(event.kind, **fields)

    def emit_data(self, kind: type[Any], data: Mapping[str, Any]) -> None:
        name = data["kind"]
        getattr(self.logger, self._LEVELS.get(name, "info"))(name, **_event_fields(kind, data))
