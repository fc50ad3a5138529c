"""Events as a person reads them on a terminal (what ``hermes-fsm run`` prints live).

>>> from datetime import UTC, datetime
>>> from hermes_fsm.events.model import StateEntered
>>> format_event(StateEntered(session_id="s", turn_id="t", seq=3, at=datetime(2026, 1, 1,
...     tzinfo=UTC), state="INTENT", source="IDLE", trigger="start"))
'  → INTENT  (start from IDLE)'
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from hermes_fsm.events.model import Event

__all__ = ["ConsolePrinter", "format_event"]


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_event(event: Event) -> str | None:
    """One line (or ``None`` for events not worth a line) describing ``event``."""
    e: Any = event
    kind = e.kind
    if kind == "turn_started":
        return f"▶ turn {e.turn_id} on session {e.session_id} (user {e.user_id}): {e.text}"
    if kind == "state_entered":
        again = f", attempt {e.attempt}" if e.attempt > 1 else ""
        return f"  → {e.state}  ({e.trigger} from {e.source}{again})"
    if kind == "state_output":
        contract = e.contract or "no contract"
        return f"    ✓ {contract}: {_short(e.output)}"
    if kind == "contract_violation":
        first = e.errors[0] if e.errors else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
        return (f"    ✗ {e.contract} refused attempt {e.attempt}: {where}: "
                f"{first.get('msg', '?')} ({len(e.errors)} error(s))")
    if kind == "retry":
        return (f"    ↻ retry {e.state} (attempt {e.attempt}) after {e.reason}, "
                f"wait {e.delay_s:.2f}s")
    if kind == "route_taken":
        return f"    ⤳ {e.state} gave up after {e.attempts} attempt(s) ({e.reason}) → {e.dest}"
    if kind == "timed_out":
        return f"    ⏱ {e.scope} timeout in {e.state} after {e.limit_s:g}s"
    if kind == "handler_failed":
        retry = "will retry" if e.retryable else "not retryable"
        return f"    ! {e.state}: {e.error_type}: {e.message} ({retry})"
    if kind == "tool_call_started":
        return f"    ⚙ {e.tool}({_short(e.arguments, 120)})"
    if kind == "tool_call_finished":
        if e.ok:
            return f"    ⚙ {e.tool} → {_short(e.output, 140)}  [{e.duration_ms:.1f} ms]"
        return f"    ⚙ {e.tool} ✗ {e.error['error_code']}: {e.error['message']}"
    if kind == "memory_write":
        return f"    ✎ memory {e.update_type} {e.key} = {_short(e.value, 80)} ({e.status})"
    if kind == "context_built":  # a line only when the budget changed something
        notes = [f"folded {e.folded} message(s) into the summary ({e.summarizer})"] \
            if e.summary is not None else []
        if e.summary_error:
            notes.append(f"brain summary failed: {e.summary_error}")
        notes += [f"dropped {n} {part}" + (f" ({', '.join(e.dropped_tools)})"
                                           if part == "tools" and e.dropped_tools else "")
                  for part, n in sorted(e.dropped.items())]
        notes += [f"cut {part}" for part in e.truncated]
        if e.overflow:
            notes.append(f"{e.overflow} token(s) over budget")
        if e.resources:  # MCP resources read into the request: a part of their own
            notes.append("resources " + ", ".join(f"{uri} ({n} tokens)"
                                                  for uri, n in e.resources.items()))
        if e.tools_saved:
            notes.append(f"toolsets saved {e.tools_saved} tool tokens")
        return (f"    ⧉ context {e.used}/{e.budget} tokens: {'; '.join(notes)}"
                if notes else None)
    if kind == "turn_finished":
        return f"■ {e.status} in {e.duration_ms:.1f} ms via {' → '.join(e.path)}"
    return None


class ConsolePrinter:
    """A sink that prints events as they happen: human lines, or JSON lines with ``as_json``."""

    def __init__(self, out: TextIO, as_json: bool = False) -> None:
        self.out = out
        self.as_json = as_json
        self.reader_gone = False  # the pipe was closed (``| head -1``): print nothing more

    def emit(self, event: Event) -> None:
        if self.reader_gone:
            return
        try:
            if self.as_json:
                self.out.write(event.model_dump_json() + "\n")
            else:
                line = format_event(event)
                if line is None:
                    return
                self.out.write(line + "\n")
            self.out.flush()
        except BrokenPipeError:  # the turn goes on; the CLI exits quietly after it
            self.reader_gone = True
