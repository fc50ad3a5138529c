"""Canary versions of a tool (seed 003 §4, end): a share of calls goes to a new version.

A :class:`Canary` pairs the tool a plan names (the *stable* version) with a *candidate*
registered under another name (a local tool or an MCP tool — its own contract, its own
version). The candidate is never offered to a brain; the executor routes each call of the
stable name through :meth:`Canary.choose`, which sends ``share`` of the calls to the
candidate by a stable hash of the request (``<session_id>/<call_id>`` by default, or the
session, or the user), so the same request always reaches the same version — on any
process, and when a turn is resumed or replayed.

Each call's outcome is recorded per version (:meth:`Canary.record`). When, over the last
``window`` calls of each version (at least ``min_calls`` of the candidate), the
candidate's error rate exceeds the stable version's by more than ``margin``, the canary
*rolls back*: every later call goes to the stable version, and the executor emits
:class:`~hermes_fsm.events.model.ToolCanaryRolledBack`. Setting ``share: 0`` in the
configuration rolls back by hand. Which version ran is an event of its own
(:class:`~hermes_fsm.events.model.ToolVersionChosen`), one per routed call.

Only idempotent tools may be canaried unless ``allow_writes`` says otherwise: a write
routed to a broken version has effects the rollback cannot take back.

>>> canary = Canary("lookup", "lookup_v2", share=0.5)
>>> canary.choose("s1/t1-s3-c0") == canary.choose("s1/t1-s3-c0")   # stable by request
True
>>> sum(canary.choose(f"s1/t{i}-s3-c0").candidate for i in range(1000))   # about half
517
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Canary", "CanaryChoice", "share_of"]

RouteBy = Literal["request", "session", "user"]

_SCALE = float(1 << 64)


def share_of(key: str) -> float:
    """Where ``key`` falls in [0, 1): a stable hash (BLAKE2b), the same in every process."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


@dataclass(frozen=True, slots=True)
class CanaryChoice:
    """Where a call was routed: the registered tool that runs (the stable name or the
    candidate's), and whether it is the candidate."""

    tool: str
    candidate: bool


@dataclass(slots=True)
class Canary:
    """Routing between a tool's stable version and a candidate (see the module docs).

    Args:
        stable: the tool name plans use.
        candidate: the registered name of the new version.
        share: the fraction of calls routed to the candidate, in [0, 1].
        margin: how much higher the candidate's error rate may be before it rolls back.
        window: outcomes kept per version.
        min_calls: candidate outcomes needed before a rollback is considered.
        by: what the routing hash is of: ``request`` (session and call id), ``session``
            or ``user``.
        allow_writes: whether a tool that is not idempotent may be canaried.
    """

    stable: str
    candidate: str
    share: float
    margin: float = 0.1
    window: int = 200
    min_calls: int = 20
    by: RouteBy = "request"
    allow_writes: bool = False
    rolled_back: str | None = None
    """Why the canary rolled back (``None`` while the candidate still gets its share)."""
    _outcomes: dict[bool, deque[bool]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"canary of {self.stable}: share {self.share} is not in [0, 1]")
        self._outcomes = {False: deque(maxlen=self.window), True: deque(maxlen=self.window)}

    def key(self, session_id: str | None, call_id: str, caller: str) -> str:
        """The routing key of a call, by :attr:`by`."""
        if self.by == "user":
            return f"{self.stable}/{caller}"
        if self.by == "session":
            return f"{self.stable}/{session_id or caller}"
        return f"{self.stable}/{session_id or ''}/{call_id}"

    def choose(self, key: str) -> CanaryChoice:
        """The version for the call of routing ``key`` (the stable one after a rollback)."""
        if self.rolled_back is None and self.share > 0.0 and share_of(key) < self.share:
            return CanaryChoice(self.candidate, True)
        return CanaryChoice(self.stable, False)

    def record(self, candidate: bool, ok: bool) -> str | None:
        """Count a call's outcome; returns why the canary rolls back when this call made it
        (``None`` otherwise, and always once it has rolled back)."""
        self._outcomes[candidate].append(ok)
        if self.rolled_back is not None or not candidate:
            return None
        new, old = self._outcomes[True], self._outcomes[False]
        if len(new) < self.min_calls:
            return None
        new_rate = new.count(False) / len(new)
        old_rate = old.count(False) / len(old) if old else 0.0
        if new_rate - old_rate <= self.margin:
            return None
        self.rolled_back = (
            f"{self.candidate} failed {new_rate:.0%} of its last {len(new)} calls against "
            f"{old_rate:.0%} of {len(old)} for {self.stable}, over the margin of "
            f"{self.margin:.0%}: every call goes to {self.stable} again"
        )
        return self.rolled_back

    def error_rates(self) -> dict[str, tuple[int, float]]:
        """Per version (``stable``, ``candidate``): outcomes counted and their error rate."""
        rates = {}
        for name, flag in (("stable", False), ("candidate", True)):
            seen = self._outcomes[flag]
            rates[name] = (len(seen), seen.count(False) / len(seen) if seen else 0.0)
        return rates

    def describe(self, candidate_version: str = "?") -> str:
        """One line for ``tools list``: the share, the rates, and a rollback if any."""
        rates = self.error_rates()
        line = (
            f"canary {self.candidate} ({candidate_version}) gets {self.share:.0%} "
            f"by {self.by}; errors: stable {rates['stable'][1]:.0%} of "
            f"{rates['stable'][0]}, candidate {rates['candidate'][1]:.0%} of "
            f"{rates['candidate'][0]}"
        )
        return line if self.rolled_back is None else f"{line}; ROLLED BACK: {self.rolled_back}"
