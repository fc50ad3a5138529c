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

Across processes, each version's error rate comes from the experience log: a call of a
canaried tool is logged with the version that ran it, and a rollback as a
``canary_rollback`` entry (:mod:`hermes_fsm.memory.turn_experience`). Given the log
(:attr:`~hermes_fsm.tools.registry.ToolRegistry.canary_log`), the executor calls
:func:`refresh` before a plan's calls (at most once per ``refresh_s``): it reads each
version's last ``window`` calls of every process, applies the same rule, and a rollback
logged by another process holds here too (:meth:`Canary.roll_back`). Outcomes of this
process not yet in the log (a turn logs them when it commits its memory) still count in
process, as before, so one process rolls back as soon as its own calls say so.

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
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Canary", "CanaryChoice", "refresh", "share_of"]

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
    refresh_s: float = 5.0
    rolled_back: str | None = None
    """Why the canary rolled back (``None`` while the candidate still gets its share)."""
    _outcomes: dict[bool, deque[bool]] = field(default_factory=dict, repr=False)
    logged: dict[str, tuple[int, float]] | None = field(default=None, repr=False)
    """Per version (``stable``, ``candidate``) as the experience log has it, when read:
    calls counted and their error rate."""
    read_at: float | None = field(default=None, repr=False)

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
        return self._judge(len(new), new.count(False), len(old), old.count(False), "")

    def _judge(self, new_calls: int, new_failed: int, old_calls: int, old_failed: int,
               where: str) -> str | None:
        if self.rolled_back is not None or new_calls < self.min_calls:
            return None
        new_rate = new_failed / new_calls
        old_rate = old_failed / old_calls if old_calls else 0.0
        if new_rate - old_rate <= self.margin:
            return None
        self.rolled_back = (
            f"{self.candidate} failed {new_rate:.0%} of its last {new_calls} calls against "
            f"{old_rate:.0%} of {old_calls} for {self.stable}{where}, over the margin of "
            f"{self.margin:.0%}: every call goes to {self.stable} again"
        )
        return self.rolled_back

    def judge_logged(self, stable: tuple[int, int], candidate: tuple[int, int]) -> str | None:
        """Apply the rule to the log's ``(calls, failed)`` of each version (the last
        :attr:`window` calls of every process); why it rolls back, when this did it."""
        self.logged = {name: (calls, failed / calls if calls else 0.0)
                       for name, (calls, failed) in (("stable", stable),
                                                     ("candidate", candidate))}
        return self._judge(candidate[0], candidate[1], stable[0], stable[1],
                           " (experience log, all processes)")

    def roll_back(self, why: str) -> bool:
        """Hold a rollback another process decided (and logged); ``True`` when it is new
        here."""
        if self.rolled_back is not None:
            return False
        self.rolled_back = why
        return True

    def error_rates(self) -> dict[str, tuple[int, float]]:
        """Per version (``stable``, ``candidate``): outcomes counted and their error rate."""
        rates = {}
        for name, flag in (("stable", False), ("candidate", True)):
            seen = self._outcomes[flag]
            rates[name] = (len(seen), seen.count(False) / len(seen) if seen else 0.0)
        return rates

    def describe(self, candidate_version: str = "?") -> str:
        """One line for ``tools list``: the share, the rates, and a rollback if any."""
        rates = self.logged or self.error_rates()
        line = (
            f"canary {self.candidate} ({candidate_version}) gets {self.share:.0%} "
            f"by {self.by}; errors{' (experience log)' if self.logged else ''}: stable "
            f"{rates['stable'][1]:.0%} of {rates['stable'][0]}, candidate "
            f"{rates['candidate'][1]:.0%} of {rates['candidate'][0]}"
        )
        return line if self.rolled_back is None else f"{line}; ROLLED BACK: {self.rolled_back}"


async def refresh(canary: Canary, log: Any, stable_version: str, candidate_version: str,
                  clock: Any = time.monotonic) -> str | None:
    """Read ``canary``'s versions from the experience ``log`` (a
    :class:`~hermes_fsm.memory.experience.VersionOutcomes`), at most once per
    :attr:`Canary.refresh_s`; returns why it rolled back when this read made it so —
    a rollback another process logged for this candidate version, or the log's error
    rates over the window. A log that cannot be read changes nothing."""
    now = clock()
    if canary.read_at is not None and now - canary.read_at < canary.refresh_s:
        return None
    canary.read_at = now
    if stable_version == candidate_version:  # the log could not tell them apart
        return None
    try:
        health = await log.version_outcomes(canary.stable, (stable_version, candidate_version),
                                            canary.window)
    except Exception:  # the log is away: what is known holds
        return None
    held = None
    if health.rolled_back is not None and health.rolled_back[0] == candidate_version:
        held = health.rolled_back[1] if canary.roll_back(health.rolled_back[1]) else None
    old, new = health.versions.get(stable_version), health.versions.get(candidate_version)
    judged = canary.judge_logged((old.calls, old.failed) if old else (0, 0),
                                 (new.calls, new.failed) if new else (0, 0))
    return held or judged
