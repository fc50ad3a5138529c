"""The event log: one discriminated union of frozen events and its five uses.

- :mod:`~hermes_fsm.events.model`: the events, :data:`EVENT_ADAPTER`, :class:`EventList`;
- :mod:`~hermes_fsm.events.sinks`: where events go (lists, structlog, data sinks);
- :mod:`~hermes_fsm.events.recording`: the JSONL recording format replay reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.events.model import EVENT_ADAPTER, Event, EventList
    from hermes_fsm.events.recording import Recording, RecordingError, load_recording
    from hermes_fsm.events.sinks import DataSink, EventSink, ListSink, StructlogSink

__all__ = ["EVENT_ADAPTER", "DataSink", "Event", "EventList", "EventSink", "ListSink",
           "Recording", "RecordingError", "StructlogSink", "load_recording"]

__getattr__, __dir__ = lazy_face(__name__, {
    "DataSink": "hermes_fsm.events.sinks",
    "EVENT_ADAPTER": "hermes_fsm.events.model",
    "Event": "hermes_fsm.events.model",
    "EventList": "hermes_fsm.events.model",
    "EventSink": "hermes_fsm.events.sinks",
    "ListSink": "hermes_fsm.events.sinks",
    "Recording": "hermes_fsm.events.recording",
    "RecordingError": "hermes_fsm.events.recording",
    "StructlogSink": "hermes_fsm.events.sinks",
    "load_recording": "hermes_fsm.events.recording",
})
