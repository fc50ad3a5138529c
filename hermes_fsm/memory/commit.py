"""Memory commits: what one turn's updates change in each tier, and the write of many at once.

:func:`plan` reads (which updates were applied already, which items a new value
supersedes) and decides; :func:`write` writes the plans of several turns together: one
semantic write with all their points, one experience transaction, one working-memory
round trip. :class:`~.tiered.TieredMemory` feeds commits waiting at the same moment to
``write`` as one batch (a group commit); commits of one user never share a batch, so each
plan reads what the user's previous commit wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.memory.embedders import Embedder
from hermes_fsm.memory.experience import Experience, ExperienceLog
from hermes_fsm.memory.items import MemoryItem, Status, WriteOutcome, item_id, item_text
from hermes_fsm.memory.semantic import Mark, SemanticStore
from hermes_fsm.memory.working import TurnWrite, WorkingMemory

__all__ = ["Commit", "Plan", "plan", "write"]


@dataclass(frozen=True, slots=True)
class Commit:
    """One ``apply`` call: a turn's updates for a user, and its context."""

    user_id: str
    turn_id: str
    updates: Sequence[MemoryUpdate]
    now: datetime
    context: Mapping[str, Any]
    generation: int = 0  # the user's forget count when it was made (see TieredMemory.forget)


@dataclass(slots=True)
class Plan:
    """What a commit writes: status changes, new items, experience entries, a turn."""

    outcomes: list[WriteOutcome] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    items: list[MemoryItem] = field(default_factory=list)
    entries: list[Experience] = field(default_factory=list)
    turn: TurnWrite | None = None


async def plan(commit: Commit, semantic: SemanticStore, window: int) -> Plan:
    """Decide a commit's writes (reads the semantic store; writes nothing)."""
    user_id, turn_id, updates, now = commit.user_id, commit.turn_id, commit.updates, commit.now
    context = commit.context
    session_id = str(context.get("session_id") or "")
    text = str(context.get("text") or "")
    domain = context.get("domain")
    ids = [item_id(user_id, turn_id, i) for i in range(len(updates))]
    # the turn's entries are written in the session's domain, as its items are
    out = Plan(entries=[e if e.domain == domain else replace(e, domain=domain)
                        for e in context.get("experiences") or ()])
    _plan_semantic(out, commit, ids, await _known(semantic, commit, ids), text)
    for index, update in enumerate(updates):
        out.entries.append(Experience(
            entry_id=ids[index], at=now,
            kind="feedback" if update.memory_type == "correction" else "memory_commit",
            user_id=user_id, session_id=session_id, turn_id=turn_id, request=text,
            detail={"key": update.key, "update_type": update.update_type,
                    "value": update.value}, domain=domain))
    if session_id:
        messages = [{"role": "user", "content": text}] if text else []
        if context.get("answer"):
            messages.append({"role": "assistant", "content": str(context["answer"])})
        slots = {u.key: u.value for u in updates
                 if u.memory_type == "progress" and u.update_type != "deprecate"}
        out.turn = TurnWrite(user_id, session_id, turn_id, messages, slots, window)
    return out


async def _known(semantic: SemanticStore, commit: Commit,
                 ids: list[str]) -> tuple[set[str], dict[str, list[str]]]:
    """Of ``ids``, those written already; per key updated, the ids of its active items."""
    done = {i.item_id for i in await semantic.get(commit.user_id, ids)} if ids else set()
    domain = commit.context.get("domain")
    active: dict[str, list[str]] = {}
    for update in commit.updates:
        if update.key not in active:
            active[update.key] = [i.item_id for i in await semantic.active(
                commit.user_id, update.key, domain)]
    return done, active


def _plan_semantic(out: Plan, commit: Commit, ids: list[str],
                   known: tuple[set[str], dict[str, list[str]]], text: str) -> None:
    user_id, turn_id, now = commit.user_id, commit.turn_id, commit.now
    done, active = known
    domain = commit.context.get("domain")
    pending: dict[str, MemoryItem] = {}  # key -> new item of this commit, not yet written
    for index, update in enumerate(commit.updates):
        new_id = ids[index]
        if new_id in done:
            out.outcomes.append(WriteOutcome(update.key, update.update_type, "skipped",
                                             "already applied by this turn", new_id))
            continue
        deprecate = update.update_type == "deprecate"
        earlier = pending.pop(update.key, None)
        current: list[str] = []
        if earlier is not None:
            status: Status = "deleted" if deprecate else "superseded"
            out.items[out.items.index(earlier)] = replace(
                earlier, status=status, superseded_by=None if deprecate else new_id)
        else:
            current = [i for i in active.get(update.key, ()) if i != new_id]
            active[update.key] = []  # superseded now, whatever comes next in this commit
        if current:
            out.marks.append(Mark(user_id, tuple(current), "deleted" if deprecate else
                                  "superseded", None if deprecate else new_id, now))
        item = MemoryItem(
            user_id=user_id, key=update.key, value=update.value,
            memory_type=update.memory_type, confidence=update.confidence,
            status="deleted" if deprecate else "active", created_at=now, updated_at=now,
            evidence=update.evidence_source, turn_id=turn_id, item_id=new_id, domain=domain,
            event_seq=commit.context.get("event_seq"), operation=update.update_type,
            text=text)
        out.items.append(item)
        if not deprecate:
            pending[update.key] = item
        detail = (f"{'deleted' if deprecate else 'superseded'} {len(current)} item(s)"
                  if current else ("nothing active to deprecate" if deprecate else ""))
        out.outcomes.append(WriteOutcome(update.key, update.update_type, "applied", detail,
                                         new_id))


async def write(plans: Sequence[Plan], *, semantic: SemanticStore, experience: ExperienceLog,
                working: WorkingMemory, embedder: Embedder) -> None:
    """Write the plans of several commits: the semantic store (status changes, then new
    items: a write cut short converges when retried), the experience entries and working
    memory, the three at once — each write is keyed, so when one fails, writing the
    others again (the retry) changes nothing, and none waits for another's disk or round
    trip (the embedded semantic store syncs its file off the event loop meanwhile).

    Raises:
        MemoryStoreError: a store failed; what was written is safe to write again.
    """
    marks = [m for p in plans for m in p.marks]
    items = [i for p in plans for i in p.items]
    entries = [e for p in plans for e in p.entries]
    turns = [p.turn for p in plans if p.turn is not None]
    writes: list[Awaitable[object]] = []
    if marks or items:
        vectors = embedder.embed([item_text(i.key, i.value, i.text) for i in items]) \
            if items else []
        writes.append(semantic.write(marks, items, vectors))
    if entries:
        writes.append(experience.record(entries))
    if turns:
        writes.append(working.record_turns(turns))
    for result in await asyncio.gather(*writes, return_exceptions=True):
        if isinstance(result, BaseException):
            raise result  # the first failed store's, in this order
