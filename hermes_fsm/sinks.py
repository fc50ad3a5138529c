"""Event sinks: where events go besides the session's own log.

A sink is anything with ``emit(event)``; it is called synchronously, in order, for every
event. Sinks must not raise: a failing sink would fail the turn.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

import structlog

from .events import Event

__all__ = ["EventSink", "ListSink", "StructlogSink"]


@runtime_checkable
class EventSink(Protocol):
    """Receives every event as it is emitted."""

    def emit(self, event: Event) -> None: ...


class ListSink:
    """Collects events in a list (``.events``)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


class StructlogSink:
    """Logs each event through structlog: one log line per event, the event's fields as keys.

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
