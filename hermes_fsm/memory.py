"""The memory seam: what handlers ask of long-term memory.

:class:`Memory` is the protocol the engine's handlers use; :class:`InProcessMemory` is
the embedded default (a per-user dict with supersession, and word-overlap recall). The
real tiers (Redis working memory, Qdrant semantic recall, PostgreSQL experience log)
implement the same protocol.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from .state_contracts import MemoryUpdate

__all__ = ["InProcessMemory", "Memory", "MemoryItem", "WriteOutcome"]

Status = Literal["active", "superseded", "deleted"]


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One remembered thing about a user."""

    user_id: str
    key: str
    value: Any
    memory_type: str
    confidence: float
    status: Status
    created_at: datetime
    updated_at: datetime
    evidence: str
    turn_id: str
    superseded_by: str | None = None


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What happened to one update: ``applied`` or ``skipped`` (with why)."""

    key: str
    update_type: str
    status: Literal["applied", "skipped"]
    detail: str = ""


@runtime_checkable
class Memory(Protocol):
    """Long-term memory as the engine sees it."""

    async def recall(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
        """Active items of ``user_id`` relevant to ``query``, best first; never another user's."""
        ...

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[MemoryUpdate],
                    now: datetime) -> list[WriteOutcome]:
        """Apply updates idempotently: the same (turn, update) applied twice writes once."""
        ...

    async def forget(self, user_id: str) -> int:
        """Remove everything about a user; returns how many items were removed."""
        ...


_WORD = re.compile(r"\w+", re.UNICODE)


def _terms(text: str) -> set[str]:
    words = {w.lower() for w in _WORD.findall(text)}
    cjk = {ch for ch in text if "\u4e00" <= ch <= "\u9fff"}
    return words | cjk


@dataclass
class InProcessMemory:
    """The embedded default: items per user in a dict; recall by word overlap."""

    items: dict[str, list[MemoryItem]] = field(default_factory=dict)
    applied: set[tuple[str, str, int]] = field(default_factory=set)

    async def recall(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
        wanted = _terms(query)
        scored = []
        for item in self.items.get(user_id, ()):
            if item.status != "active":
                continue
            overlap = len(wanted & _terms(f"{item.key} {item.value}"))
            if overlap:
                scored.append((overlap, item.updated_at, item))
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [item for _, _, item in scored[:k]]

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[MemoryUpdate],
                    now: datetime) -> list[WriteOutcome]:
        outcomes = []
        mine = self.items.setdefault(user_id, [])
        for index, update in enumerate(updates):
            token = (user_id, turn_id, index)
            if token in self.applied:
                outcomes.append(WriteOutcome(update.key, update.update_type, "skipped",
                                             "already applied by this turn"))
                continue
            current = [i for i, item in enumerate(mine)
                       if item.key == update.key and item.status == "active"]
            if update.update_type == "deprecate":
                for i in current:
                    mine[i] = replace(mine[i], status="deleted", updated_at=now)
            else:
                for i in current:
                    mine[i] = replace(mine[i], status="superseded", updated_at=now,
                                      superseded_by=turn_id)
                mine.append(MemoryItem(user_id, update.key, update.value, update.memory_type,
                                       update.confidence, "active", now, now, update.evidence,
                                       turn_id))
            self.applied.add(token)
            outcomes.append(WriteOutcome(update.key, update.update_type, "applied"))
        return outcomes

    async def forget(self, user_id: str) -> int:
        removed = len(self.items.pop(user_id, []))
        self.applied = {t for t in self.applied if t[0] != user_id}
        return removed


def format_recall(items: Sequence[MemoryItem]) -> str:
    """Recalled items as a dated background block for a prompt ("" when none)."""
    if not items:
        return ""
    lines = ["Background (from memory; may be outdated):"]
    for item in items:
        lines.append(f"- [{item.updated_at:%Y-%m-%d}] {item.key}: {item.value} "
                     f"(confidence {item.confidence:.2f})")
    return "\n".join(lines)
