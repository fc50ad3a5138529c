"""Memory items: what is remembered about a user, and what happened to one update."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "MemoryItem",
    "MemoryType",
    "Operation",
    "Status",
    "WriteOutcome",
    "item_id",
    "item_text",
]

Status = Literal["active", "superseded", "deleted"]
MemoryType = Literal["preference", "fact", "progress", "correction"]
Operation = Literal["create", "modify", "deprecate"]

_NAMESPACE = uuid.UUID("6b1f5e9e-4c1e-4f7a-9a55-6d0c6f1b2a10")


def item_id(user_id: str, turn_id: str, index: int) -> str:
    """The id of the item written by update ``index`` of ``turn_id`` for ``user_id``.

    Deterministic, so a retried or replayed commit writes the same item, never a second one.

    >>> item_id("u1", "turn-1", 0) == item_id("u1", "turn-1", 0) != item_id("u2", "turn-1", 0)
    True
    """
    return str(uuid.uuid5(_NAMESPACE, f"{len(user_id)}:{user_id}|{len(turn_id)}:{turn_id}|{index}"))


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One remembered thing about a user.

    Attributes:
        item_id: deterministic id (see :func:`item_id`).
        user_id, domain: the namespace; no query ever crosses users.
        key: the dimension a newer value supersedes (``preference.contact_channel``).
        value: the remembered value (JSON-able).
        memory_type: preference, fact, progress or correction.
        status: active, superseded (by ``superseded_by``) or deleted.
        confidence: how sure the brain was (0..1).
        created_at, updated_at: when written and last changed.
        evidence: where it came from (``user_message``, a fact id).
        turn_id, event_seq: the turn (and event) it came from.
        operation: the update that wrote it; a ``deprecate`` leaves a deleted record.
        text: the user's message it was taken from (embedded with key and value).
        score: the recall score, when the item comes from a recall.
    """

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
    item_id: str = ""
    domain: str | None = None
    event_seq: int | None = None
    operation: Operation = "create"
    text: str = ""
    score: float | None = field(default=None, compare=False)

    def to_payload(self) -> dict[str, Any]:
        """The item as a JSON-able dict (times as ISO strings; no score)."""
        return {
            "item_id": self.item_id, "user_id": self.user_id, "domain": self.domain,
            "key": self.key, "value": self.value, "memory_type": self.memory_type,
            "confidence": self.confidence, "status": self.status,
            "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat(),
            "evidence": self.evidence, "turn_id": self.turn_id, "event_seq": self.event_seq,
            "superseded_by": self.superseded_by, "operation": self.operation, "text": self.text,
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> MemoryItem:
        """The inverse of :meth:`to_payload`."""
        data = dict(payload)
        data["created_at"] = datetime.fromisoformat(data["created_at"])
        data["updated_at"] = datetime.fromisoformat(data["updated_at"])
        data.pop("updated_ts", None)
        return cls(**data)


def item_text(key: str, value: Any, text: str = "") -> str:
    """What is embedded for an item: its key's words, and the user's statement (with the
    value when the statement does not contain it), or the value when there is none.

    The key's first dotted part is its namespace (``preference``, ``profile``), shared by
    many items of a user: it says nothing about which of them a query is after, and it is
    left out (on the dev split of the recall eval it pulled every item of a namespace
    together: recall@1 with USE 0.84 with it, 0.92 without). The statement is embedded
    once; the normalised value is added only when the statement does not say it already.

    >>> item_text("preference.contact_channel", "email")
    'contact channel: email'
    >>> item_text("preference.contact_channel", "email", "Please contact me by email")
    'contact channel. Please contact me by email'
    >>> item_text("preference.notify", "email", "我更喜欢用邮件接收通知")
    'notify. 我更喜欢用邮件接收通知 (email)'
    """
    parts = key.split(".")
    words = " ".join(parts[1:] if len(parts) > 1 else parts)
    words = words.replace("_", " ").replace("-", " ").strip()
    if not text:
        return f"{words}: {value}" if value is not None else words
    shown = "" if value is None else str(value)
    if shown and shown.casefold() not in text.casefold():
        return f"{words}. {text} ({shown})"
    return f"{words}. {text}"


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What happened to one update: ``applied`` or ``skipped`` (with why)."""

    key: str
    update_type: str
    status: Literal["applied", "skipped"]
    detail: str = ""
    item_id: str = ""
