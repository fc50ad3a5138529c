"""A user's profile as it was at a time, and a rollback to it.

The semantic tier is copy-on-write already: a new value never overwrites an item, it
supersedes it (the old item keeps its value, with ``status`` ``superseded`` and
``updated_at`` the time of the change), and a ``deprecate`` marks the item ``deleted``.
So the profile at time ``T`` is, per key, the item created at or before ``T`` that had not
yet been superseded or deleted at ``T``.

A rollback to ``T`` writes, through the ordinary commit path (idempotent, recorded in the
experience log), a ``modify`` per key whose value at ``T`` differs from today's and a
``deprecate`` per key that had no value at ``T``; nothing is erased, so a rollback can be
rolled back.

>>> from datetime import UTC, datetime, timedelta
>>> t = datetime(2026, 3, 1, tzinfo=UTC)
>>> old = MemoryItem("u", "pref.contact", "email", "preference", 0.9, "superseded", t,
...                  t + timedelta(days=2), "user_message", "t1", item_id="a")
>>> new = MemoryItem("u", "pref.contact", "wechat", "preference", 0.9, "active",
...                  t + timedelta(days=2), t + timedelta(days=2), "user_message", "t2",
...                  item_id="b")
>>> [i.value for i in profile_as_of([old, new], t + timedelta(days=1))]
['email']
>>> [(u.key, u.update_type, u.value) for u in rollback_updates([old, new], t)]
[('pref.contact', 'modify', 'email')]
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.memory.items import MemoryItem

__all__ = ["profile_as_of", "rollback_updates"]


def _active_at(item: MemoryItem, at: datetime) -> bool:
    if item.created_at > at or item.operation == "deprecate":
        return False
    return item.status == "active" or item.updated_at > at


def profile_as_of(items: Sequence[MemoryItem], at: datetime) -> list[MemoryItem]:
    """The items that were active at ``at`` (one per key and domain: the latest), oldest
    first."""
    latest: dict[tuple[str, str | None], MemoryItem] = {}
    for item in sorted(items, key=lambda i: i.created_at):
        if _active_at(item, at):
            latest[(item.key, item.domain)] = item
    return sorted(latest.values(), key=lambda i: i.created_at)


def rollback_updates(items: Sequence[MemoryItem], at: datetime) -> list[MemoryUpdate]:
    """The updates that make today's profile what it was at ``at`` (none when equal)."""
    then = {(i.key, i.domain): i for i in profile_as_of(items, at)}
    now = {(i.key, i.domain): i for i in items if i.status == "active"}
    updates = []
    for key_domain, old in then.items():
        current = now.get(key_domain)
        if current is None or current.value != old.value:
            updates.append(MemoryUpdate(
                key=old.key, update_type="modify", value=old.value,
                memory_type=old.memory_type,  # type: ignore[arg-type]
                confidence=old.confidence, evidence_source="memory"))
    for key_domain, current in now.items():
        if key_domain not in then:
            updates.append(MemoryUpdate(
                key=current.key, update_type="deprecate", value=None,
                memory_type=current.memory_type,  # type: ignore[arg-type]
                confidence=current.confidence, evidence_source="memory"))
    return updates
