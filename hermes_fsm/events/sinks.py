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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import structlog
from pydantic_core import SchemaSerializer, core_schema

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


_SERIALIZERS: dict[type[Any], SchemaSerializer | None] = {}


def _serializer(kind: type[Any]) -> SchemaSerializer | None:
    """A serializer of ``kind``'s field dicts, field by field as the model's own (``None``
    when the model's schema is not a plain one: then the object is built)."""
    try:
        return _SERIALIZERS[kind]
    except KeyError:
        pass
    serializer = None
    schema = getattr(kind, "__pydantic_core_schema__", None)
    if (isinstance(schema, dict) and schema.get("type") == "model"
            and schema["schema"].get("type") == "model-fields"
            and not schema["schema"].get("computed_fields")):
        fields = {}
        for name, field in schema["schema"]["fields"].items():
            fields[name] = core_schema.typed_dict_field(
                field["schema"], required=True,
                serialization_alias=field.get("serialization_alias"),
                serialization_exclude=field.get("serialization_exclude"))
        try:
            serializer = SchemaSerializer(core_schema.typed_dict_schema(
                fields, config=schema.get("config")))
        except Exception:  # e.g. references to definitions: take the object's way
            serializer = None
    _SERIALIZERS[kind] = serializer
    return serializer


def event_json(kind: type[Any], data: Mapping[str, Any]) -> bytes:
    """``data`` as JSON, byte for byte what the event object's model would write."""
    serializer = _SERIALIZERS.get(kind) or _serializer(kind)
    if serializer is None:
        event = make_event(kind, data)  # type: ignore[arg-type]
        return bytes(event.__pydantic_serializer__.to_json(event))
    return serializer.to_json(data)


def _event_fields(kind: type[Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """``event.model_dump(mode="json", exclude={"kind"})`` of the event of ``data``."""
    serializer = _serializer(kind)
    if serializer is None:
        event = make_event(kind, data)  # type: ignore[arg-type]
        fields: dict[str, Any] = event.model_dump(mode="json", exclude={"kind"})
        return fields
    dumped: dict[str, Any] = serializer.to_python(data, mode="json", exclude={"kind"})
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
