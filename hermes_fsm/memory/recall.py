"""Recall scoring and formatting: calibrated similarity, recency as a bounded tie-break, a
dated background block.

Raw cosine similarity means different things for different embedders (the hashing
embedder's unrelated texts sit near 0, USE's near 0.2, e5's in 0.75–0.85), so each
embedder has a :class:`Calibration`, measured on the bilingual eval (``bench/memory.py
--calibrate``): ``floor`` maps to 0 (below it nothing is relevant enough to recall) and
``ceil`` to 1 (a clear match). The threshold is on that normalised relevance, so one
setting holds for any embedder.

Recency never outweighs relevance: an item's final score is its relevance plus at most
``recency_band`` (times its time decay, 1.0 when new): a newer item outranks an older
one only when their relevance is within the band. Superseded and deleted items are
filtered out before scoring (supersession is a filter, not a weight).

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

__all__ = ["CALIBRATIONS", "DEFAULT_HALF_LIFE_DAYS", "DEFAULT_TTL_DAYS", "Calibration",
           "RecallPolicy",
           "calibration_for", "estimate_tokens", "format_recall"]

DEFAULT_HALF_LIFE_DAYS: Mapping[str, float] = {
    "preference": 180.0, "fact": 365.0, "progress": 7.0, "correction": 90.0,
}
#: Per memory type, the age after which an item is not recalled any more (the short-term
#: layer: what the user is doing now; the profile — preferences, facts — never expires).
DEFAULT_TTL_DAYS: Mapping[str, float] = {"progress": 30.0}


@dataclass(frozen=True, slots=True)
class Calibration:
    """An embedder's similarity scale: ``floor`` (raw cosine) is relevance 0, ``ceil`` 1.

    >>> Calibration(0.15, 0.65).relevance(0.4)
    0.5
    """

    floor: float = 0.0
    ceil: float = 1.0

    def relevance(self, similarity: float) -> float:
        """``(similarity - floor) / (ceil - floor)`` (not clipped: order is kept)."""
        return round((similarity - self.floor) / ((self.ceil - self.floor) or 1.0), 6)


#: Measured on tests/data/memory_bilingual.json (2026-12, ``bench/memory.py --calibrate``):
#: ``floor`` keeps about 98 % of the relevant items' similarities above it (the rest are
#: queries the embedder cannot match anyway), ``ceil`` is about the 95th percentile of a
#: relevant item's similarity. Keyed by embedder name (a prefix for ``hashing-<dim>``).
CALIBRATIONS: Mapping[str, Calibration] = {
    "hashing": Calibration(floor=0.05, ceil=0.50),
    "use-multilingual-v3": Calibration(floor=0.12, ceil=0.65),
    "all-MiniLM-L6-v2-int8": Calibration(floor=0.10, ceil=0.70),
}


def calibration_for(embedder_name: str) -> Calibration:
    """The calibration of an embedder by name (raw cosine, floor 0, for an unknown one)."""
    if embedder_name in CALIBRATIONS:
        return CALIBRATIONS[embedder_name]
    return CALIBRATIONS.get(embedder_name.split("-", 1)[0], Calibration())


@dataclass(frozen=True, slots=True)
class RecallPolicy:
    """How recall ranks and cuts.

    Attributes:
        k: how many items at most.
        threshold: the lowest relevance (calibrated similarity, 0 at the embedder's floor)
            recalled.
        half_life_days: per memory type, the age at which an item's recency weight halves.
        candidates: how many nearest items to re-rank (at least ``k``).
        calibration: the embedder's scale (``None``: looked up by the embedder's name).
        recency_band: the most recency adds to a relevance (a tie-break within the band).
        ttl_days: per memory type, the age after which an item is not recalled.
    """

    k: int = 5
    threshold: float = 0.0
    half_life_days: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_HALF_LIFE_DAYS))
    candidates: int = 50
    calibration: Calibration | None = None
    recency_band: float = 0.05
    ttl_days: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TTL_DAYS))

    def expired(self, item: MemoryItem, now: datetime) -> bool:
        """Whether ``item`` is older than its type's TTL (never, for a type without one)."""
        ttl = self.ttl_days.get(item.memory_type)
        return ttl is not None and (now - item.created_at).total_seconds() > ttl * 86400.0

    def score(self, item: MemoryItem, similarity: float, now: datetime,
              calibration: Calibration) -> tuple[float, float]:
        """``(relevance, final score)`` of an item: the final score adds at most
        ``recency_band`` (times :meth:`decay`) to the relevance."""
        relevance = (self.calibration or calibration).relevance(similarity)
        return relevance, relevance + self.recency_band * self.decay(item, now)

    def decay(self, item: MemoryItem, now: datetime) -> float:
        """The recency of an item of this age: ``0.5 ** (age / half_life)`` (1.0 when new)."""
        half_life = self.half_life_days.get(item.memory_type)
        if not half_life:
            return 1.0
        age_days = max(0.0, (now - item.created_at).total_seconds() / 86400.0)
        return math.pow(0.5, age_days / half_life)


def format_recall(items: Sequence[MemoryItem]) -> str:
    """Recalled items as a dated background block for a prompt ("" when none).

    Brains put it next to their system prompt, before the conversation. An item without
    a value (``None`` or "") is left out: it names a key and says nothing, and "A1002:
    None (confidence 0.80)" is what SmolLM2 then wrote as its answer in 4 of 40 turns of
    ``bench/real_model.py`` (its own MEMORY_COMMIT had created the key with a null value).

    >>> t = datetime(2026, 3, 1)
    >>> format_recall([MemoryItem("u1", "A1002", None, "fact", 0.8, "active", t, t,
    ...                           "user_message", "turn-1")])
    ''
    """
    items = [item for item in items if item.value is not None and item.value != ""]
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
