"""Comparing a rerun turn's events with its recording: the first divergence, as a value.

Recorded and rerun events are compared as field dicts (the recording's JSON, the engine's
event data), on every field but the volatile ones (times, ids, costs); no event object is
built on either side. :func:`first_divergence` returns the first event where they differ,
with a readable diff (a :class:`Divergence`), or ``None``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, get_args

from hermes_fsm.events.model import Event, EventList, event_data

__all__ = ["NOT_COMPARED", "Divergence", "event_fields", "first_divergence"]

# Fields that differ between runs and say nothing about the turn's behaviour: times, ids,
# which brain answered and what it cost, how long a backoff waited.
# ``tokens`` (memory_recalled): counted by the configured token counter, which may differ
# between the recording process and this one (a tokenizer file, a calibrated ratio)
_VOLATILE = frozenset({"session_id", "turn_id", "seq", "at", "duration_ms", "brain", "usage",
                       "usage_source", "delay_s", "tokens"})

# Event kinds a rerun does not compare. ``context_built`` records what the recording
# process's budget and token counter made of each brain request; the replay brain answers
# from the recording whatever its context, and the counts depend on that process's
# settings (window, tokenizer, calibration), so comparing them would report settings,
# not behaviour. Their recorded lines are not even parsed, and a rerun builds no contexts
# unless asked (``Replayer(build_contexts=True)``).
# ``tool_version_chosen`` / ``tool_canary_rolled_back``: a rerun answers calls from the
# recorded outputs, whichever version made them; no canary routes them again.
# ``tools_offered`` / ``prompt_loaded`` / ``resources_read`` say what a brain request was
# given (toolsets, MCP prompts and resources), as ``context_built`` does: the replay brain
# answers from the recording whatever it is given, and a rerun reaches no MCP server.
# ``token_chunk``: how a streamed answer arrived, piece by piece; the replay brain answers
# with the recorded output at once, and the answer itself is compared (``state_output``).
NOT_COMPARED = frozenset({"context_built", "tool_version_chosen", "tool_canary_rolled_back",
                          "tools_offered", "prompt_loaded", "resources_read", "token_chunk"})


@dataclass(frozen=True)
class Divergence:
    """The first point where a rerun turn differs from its recording."""

    source: str
    turn_id: str
    seq: int  # the recorded event's sequence number (or the last one + 1)
    reason: str
    expected: dict[str, Any] | None
    actual: dict[str, Any] | None
    diff: str

    def describe(self) -> str:
        return f"{self.source} turn {self.turn_id} at seq {self.seq}: {self.reason}\n{self.diff}"


def event_fields(event: Any) -> Mapping[str, Any]:
    """An event's fields: a raw event as is, a typed one's values."""
    return event if isinstance(event, Mapping) else event.__dict__


_EVENT_CLASSES: dict[str, Any] = {cls.model_fields["kind"].default: cls
                                  for cls in get_args(get_args(Event)[0])}


def _normal(data: Mapping[str, Any]) -> dict[str, Any]:
    """An event's fields without the volatile ones (times, ids, costs)."""
    return {k: v for k, v in data.items() if k not in _VOLATILE}


_Comparison = tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any], frozenset[str]]
_COMPARED: dict[str, _Comparison] = {}


def _comparison(kind: str) -> _Comparison | None:
    """For events of ``kind``: a getter of the fields a rerun compares (all but the
    volatile ones), the event's defaults, and its field names; ``None`` for no such kind."""
    found = _COMPARED.get(kind)
    if found is None:
        cls = _EVENT_CLASSES.get(kind)
        if cls is None:
            return None
        fields = [n for n in cls.model_fields if n not in _VOLATILE]
        defaults = dict(event_data(cls, {}))
        getter: Callable[[Mapping[str, Any]], Any] = itemgetter(*fields)
        if kind == "graph_updated":  # the graph's diff is compared, the times in it are not
            getter = _graph_diff
        found = _COMPARED[kind] = (getter, defaults, frozenset(defaults))
    return found


_GRAPH_TIMES = frozenset({"at", "created_at", "seen_at", "deprecated_at", "expires_at"})
"""Times inside a ``graph_updated`` diff (from the clock: volatile, like an event's ``at``)."""


def _graph_diff(data: Mapping[str, Any]) -> Any:
    """A ``graph_updated`` event's state and ops without their times (a deprecation stays
    a deprecation: ``deprecated_at`` is compared as set or not)."""
    def timeless(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: (v is not None if k == "deprecated_at" else timeless(v))
                    for k, v in value.items() if k not in _GRAPH_TIMES or k == "deprecated_at"}
        if isinstance(value, list):
            return [timeless(v) for v in value]
        return value

    return data["state"], timeless(data["ops"])


def _recorded(event: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded event as its typed event's fields: defaults filled (for an event recorded
    before a field with a default was added), unknown fields left out."""
    comparison = _comparison(event["kind"])
    if comparison is None:
        return dict(event)
    _, defaults, names = comparison
    data = defaults.copy()
    data.update((k, v) for k, v in event.items() if k in names)
    return data


def _reason(expected: Mapping[str, Any] | None, actual: Mapping[str, Any] | None) -> str:
    if actual is None:
        return "the rerun turn ended early"
    if expected is None:
        return "the rerun turn went on past the recorded end"
    ek, ak = expected.get("kind"), actual.get("kind")
    if ek == ak == "state_exited":
        return (f"a different transition out of {expected.get('state')}: recorded "
                f"{expected.get('trigger')} → {expected.get('dest')}, now "
                f"{actual.get('trigger')} → {actual.get('dest')}")
    if ek == ak == "state_entered":
        return (f"a different transition: recorded {expected.get('trigger')} → "
                f"{expected.get('state')}, now {actual.get('trigger')} → {actual.get('state')}")
    if ek == ak == "tool_call_started":
        if expected.get("tool") != actual.get("tool"):
            return (f"a different tool call: recorded {expected.get('tool')}, "
                    f"now {actual.get('tool')}")
        return f"different arguments for {actual.get('tool')}"
    if ek in ("state_output", "graph_updated") and ak == "contract_violation":
        # (an output's graph update is recorded just before the output itself)
        return (f"the recorded output of {expected.get('state')} no longer validates "
                f"against {actual.get('contract')}")
    if ek == ak == "state_output":
        return f"a different output of {expected.get('state')}"
    return f"a different event: recorded {ek}, now {ak}"


def first_divergence(source: str, recorded: Sequence[Any],
                     actual: Sequence[Any]) -> Divergence | None:
    """The first event where a rerun turn differs from its recording, on every field but
    the volatile ones; ``None`` when they agree. Events are compared as field dicts (the
    recording's raw JSON, the rerun's event data): no event object is built."""
    actual_data = (actual.data if isinstance(actual, EventList)  # compare its field dicts
                   else [event_fields(e) for e in actual])
    if recorded and type(recorded[0]) is not dict:
        recorded = [event_fields(e) for e in recorded]
    skip = NOT_COMPARED
    rec_events = [e for e in recorded if e["kind"] not in skip]
    act_events = [d for d in actual_data if d["kind"] not in skip]
    compared = _COMPARED
    for rec, act in zip(rec_events, act_events, strict=False):
        kind = act["kind"]
        if rec["kind"] == kind:
            comparison = compared.get(kind) or _comparison(kind)
            if comparison is not None:
                get = comparison[0]
                try:
                    if get(rec) == get(act):
                        continue
                except KeyError:  # recorded before a field was added: compare its default
                    if get(_recorded(rec)) == get(act):
                        continue
        return _divergence(source, rec_events, rec, act)
    if len(rec_events) == len(act_events):
        return None
    if len(rec_events) > len(act_events):
        return _divergence(source, rec_events, rec_events[len(act_events)], None)
    return _divergence(source, rec_events, None, act_events[len(rec_events)])


def _divergence(source: str, recorded: Sequence[Mapping[str, Any]],
                rec: Mapping[str, Any] | None, act: Mapping[str, Any] | None) -> Divergence:
    """The divergence at ``rec`` (the recorded event, ``None`` past the recorded end) and
    ``act`` (the rerun's, ``None`` past the rerun's end), with a readable diff."""
    exp = _normal(_recorded(rec)) if rec is not None else None
    now = _normal(act) if act is not None else None
    seq = rec["seq"] if rec is not None else recorded[-1]["seq"] + 1
    diff = "\n".join(difflib.unified_diff(
        _pretty(exp), _pretty(now), fromfile=f"recorded seq {seq}", tofile="rerun",
        lineterm=""))
    return Divergence(source, recorded[0]["turn_id"], seq, _reason(exp, now), exp, now, diff)


def _pretty(data: Mapping[str, Any] | None) -> list[str]:
    if data is None:
        return ["(no event)"]
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False,
                      default=str).splitlines()

