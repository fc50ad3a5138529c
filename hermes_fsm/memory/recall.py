"""Recall scoring and formatting: similarity × time decay, a dated background block.

>>> from datetime import UTC, datetime
>>> t = datetime(2026, 3, 1, tzinfo=UTC)
>>> item = MemoryItem("u1", "preference.contact", "email", "preference", 0.9, "active",
...                   t, t, "user_message", "turn-1")
>>> print(format_recall([item]))
Background (from memory; may be outdated):
- [2026-03-01] preference.contact: email (confidence 0.90)
>>> estimate_tokens("I prefer email"), estimate_tokens("我喜欢邮件")
(4, 5)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from hermes_fsm.memory.items import MemoryItem

__all__ = ["DEFAULT_HALF_LIFE_DAYS", "RecallPolicy", "estimate_tokens", "format_recall"]

DEFAULT_HALF_LIFE_DAYS: Mapping[str, float] = {
    "preference": 180.0, "fact": 365.0, "progress": 7.0, "correction": 90.0,
}


@dataclass(frozen=True, slots=True)
class RecallPolicy:
    """How recall ranks and cuts.

    Attributes:
        k: how many items at most.
        threshold: the lowest final score (similarity × decay) recalled.
        half_life_days: per memory type, the age at which an item's weight halves.
        candidates: how many nearest items to re-rank (at least ``k``).
    """

    k: int = 5
    threshold: float = 0.12
    half_life_days: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_HALF_LIFE_DAYS))
    candidates: int = 50

    def decay(self, item: MemoryItem, now: datetime) -> float:
        """The weight of an item of this age: ``0.5 ** (age / half_life)`` (1.0 when new)."""
        half_life = self.half_life_days.get(item.memory_type)
        if not half_life:
            return 1.0
        age_days = max(0.0, (now - item.created_at).total_seconds() / 86400.0)
        return math.pow(0.5, age_days / half_life)


def format_recall(items: Sequence[MemoryItem]) -> str:
    """Recalled items as a dated background block for a prompt ("" when none).

    Brains put it next to their system prompt, before the conversation.
    """
    if not items:
        return ""
    lines = ["Background (from memory; may be outdated):"]
    for item in items:
        lines.append(f"- [{item.created_at:%Y-%m-%d}] {item.key}: {item.value} "
                     f"(confidence {item.confidence:.2f})")
    return "\n".join(lines)


def estimate_tokens(text: str) -> int:
    """A model-free token estimate: one per CJK character, one per four other characters."""
    cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff")
    return cjk + math.ceil((len(text) - cjk) / 4)
