"""Time slots made exact before planning: what the rules brain does with an intent's
``times`` (seed 001 §6.3 — no tool ever sees "明天上午十点", only ``2026-12-02T10:00:00+08:00``).

A slot the resolver cannot make exact is taken out (so no call is planned with it) and
its text kept as ``<slot>_unclear``: the answer asks for the time instead of guessing. So
is an ``instant`` already past ("八点" said at 10:00: tonight, or tomorrow morning?).

>>> from datetime import datetime, UTC
>>> from hermes_fsm.conversation.times import TimeResolver
>>> params = {"text": "call Bob", "due": "tomorrow at 3pm"}
>>> exact_times(TimeResolver("Asia/Shanghai"), {"due": "instant"}, params,
...             datetime(2026, 12, 1, 2, 0, tzinfo=UTC))
>>> params["due"], params["due_text"]
('2026-12-02T15:00:00+08:00', 'tomorrow at 3pm')
>>> params = {"due": "later"}
>>> exact_times(TimeResolver("UTC"), {"due": "instant"}, params, None)
>>> sorted(params)
['due_unclear', 'time_problem']
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from hermes_fsm.brain.rulebook import TimeKind
from hermes_fsm.conversation.times import TimeResolver, UnclearTime

__all__ = ["exact_times"]


def exact_times(resolver: TimeResolver, kinds: Mapping[str, TimeKind], params: dict[str, Any],
                now: datetime | None) -> None:
    """Replace each time slot of ``params`` named in ``kinds`` by its exact value(s), in
    place, relative to ``now`` (the turn's time; ``None``: the resolver's clock)."""
    for slot, kind in kinds.items():
        raw = params.get(slot)
        if not isinstance(raw, str) or not raw.strip():
            continue
        del params[slot]
        try:
            if kind == "reference_day":
                found = resolver.reference_day(raw, base=now)
            else:
                found = resolver.resolve(raw, base=now)
        except UnclearTime as exc:
            params[f"{slot}_unclear"] = raw
            params.setdefault("time_problem", exc.why)
            continue
        if kind == "instant" and found.grain != "minute":
            params[f"{slot}_unclear"] = raw  # a day, not a time: ask for the time
            params.setdefault("time_problem", "it gives a day but no time of day")
            params[f"{slot}_date"] = found.first_day()
            continue
        if kind == "instant" and found.start < resolver.now(now).replace(second=0,
                                                                         microsecond=0):
            params[f"{slot}_unclear"] = raw  # "八点" at 10:00: tonight, or tomorrow?
            params.setdefault("time_problem", "it is already past")
            continue
        if kind in ("day", "reference_day") and found.grain == "span":
            params[f"{slot}_unclear"] = raw
            params.setdefault("time_problem", "it spans several days, not one")
            continue
        params[f"{slot}_text"] = raw
        exact = found.slots(slot)
        if kind in ("day", "reference_day"):
            exact[slot] = found.first_day()
        if kind == "range":
            exact.pop(slot, None)
        params.update(exact)
