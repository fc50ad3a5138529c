"""A turn's experiences, read from its events: tool outcomes and state failures.

Each ``tool_call_finished`` becomes a ``tool_call`` entry (with the arguments of its
``tool_call_started`` and the turn's message as the request that caused it); each
``handler_failed`` an ``error`` entry. A call of a canaried tool carries the version that
ran it (its ``tool_version_chosen``), and a ``tool_canary_rolled_back`` becomes a
``canary_rollback`` entry, so every process reading the log routes alike. Entry ids are
``{turn}:{call_id}``, ``{turn}:error:{seq}`` and ``{turn}:rollback:{seq}``, so recording
a turn twice keeps one copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hermes_fsm.memory.experience import Experience

__all__ = ["experiences_of"]


def experiences_of(events: Iterable[Any], user_id: str, text: str) -> list[Experience]:
    """The experience entries of one turn's events."""
    arguments: dict[str, dict[str, Any]] = {}
    versions: dict[str, str] = {}  # call id → the canaried tool's version that ran it
    out: list[Experience] = []
    for event in events:
        kind = event.kind
        if kind == "tool_call_started":
            arguments[event.call_id] = dict(event.arguments)
        elif kind == "tool_version_chosen":
            versions[event.call_id] = event.version
        elif kind == "tool_canary_rolled_back":
            out.append(Experience(
                entry_id=f"{event.turn_id}:rollback:{event.seq}", kind="canary_rollback",
                user_id=user_id, session_id=event.session_id, turn_id=event.turn_id,
                at=event.at, ok=False, tool=event.tool, request=text,
                detail=event.reason, caused_by=event.call_id, event_seq=event.seq,
                tool_version=getattr(event, "version", None) or versions.get(event.call_id)))
        elif kind == "tool_call_finished":
            error = event.error or {}
            out.append(Experience(
                entry_id=f"{event.turn_id}:{event.call_id}", kind="tool_call", user_id=user_id,
                session_id=event.session_id, turn_id=event.turn_id, at=event.at, ok=event.ok,
                tool=event.tool, request=text, arguments=arguments.get(event.call_id, {}),
                error_code=error.get("error_code") or error.get("code"),
                detail=error.get("message") if not event.ok else None,
                duration_ms=event.duration_ms, caused_by=event.call_id, event_seq=event.seq,
                tool_version=versions.get(event.call_id)))
        elif kind == "handler_failed":
            out.append(Experience(
                entry_id=f"{event.turn_id}:error:{event.seq}", kind="error", user_id=user_id,
                session_id=event.session_id, turn_id=event.turn_id, at=event.at, ok=False,
                request=text, error_code=event.error_type, detail=event.message,
                caused_by=event.state, event_seq=event.seq))
    return out
