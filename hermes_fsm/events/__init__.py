"""The event log: one discriminated union of frozen events and its five uses.

- :mod:`~hermes_fsm.events.model`: the events, :data:`EVENT_ADAPTER`, :class:`EventList`;
- :mod:`~hermes_fsm.events.sinks`: where events go (lists, structlog, data sinks);
- :mod:`~hermes_fsm.events.recording`: the JSONL recording format replay reads.
"""

from __future__ import annotations

from hermes_fsm.events.model import EVENT_ADAPTER, Event, EventList
from hermes_fsm.events.recording import Recording, RecordingError, load_recording
from hermes_fsm.events.sinks import DataSink, EventSink, ListSink, StructlogSink

__all__ = ["EVENT_ADAPTER", "DataSink", "Event", "EventList", "EventSink", "ListSink",
           "Recording", "RecordingError", "StructlogSink", "load_recording"]
