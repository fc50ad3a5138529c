"""The memory facade the engine's handlers use: three tiers behind one object.

:class:`TieredMemory` composes a :class:`~.working.WorkingMemory`, a
:class:`~.semantic.SemanticStore` with an :class:`~.embedders.Embedder`, and an
:class:`~.experience.ExperienceLog`. It implements :class:`Memory` (``recall``,
``apply``, ``forget``) and gives the experience log's :class:`~.experience.ToolOutcomes`
to the tool layer.

A commit (``apply``) writes, in order: the semantic items (upserts by deterministic
id: supersessions first, then the new items, so a commit cut short converges when
retried), the experience entries (one transaction, keyed), and the working memory (one
atomic, per-turn idempotent write). A retried or replayed commit writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from ..state_contracts import MemoryUpdate
from .background import BackgroundCommits
from .embedders import Embedder, HashingEmbedder
from .experience import Experience, ExperienceLog
from .items import MemoryItem, Status, WriteOutcome, item_id, item_text
from .recall import RecallPolicy
from .semantic import InProcessSemanticStore, SemanticStore
from .sqlite_experience import SQLiteExperienceLog
from .working import InProcessWorkingMemory, WorkingMemory

__all__ = ["InProcessMemory", "Memory", "TieredMemory"]


@runtime_checkable
class Memory(Protocol):
    """Long-term memory as the engine sees it."""

    async def recall(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
        """Active items of ``user_id`` relevant to ``query``, best first; never another user's."""
        ...

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[MemoryUpdate],
                    now: datetime, **context: Any) -> list[WriteOutcome]:
        """Apply updates idempotently: the same (turn, update) applied twice writes once.

        ``context`` (keyword-only, all optional; ignore what you do not use):
        ``session_id``, ``text`` (the user's message), ``answer``, ``experiences``
        (:class:`~.experience.Experience` entries of the turn), ``domain``, ``event_seq``.
        """
        ...

    async def forget(self, user_id: str) -> int:
        """Remove everything about a user; returns how many records were removed."""
        ...


class TieredMemory:
    """Working, semantic and experience memory behind the :class:`Memory` protocol.

    Args:
        working, semantic, experience: the tier backends.
        embedder: embeds items and queries (its size must fit the semantic store).
        policy: recall ranking (k, threshold, half-lives).
        background: retries of commits that failed (default: 3 attempts, 0.5 s doubling).
        window: recent messages kept in working memory per session.
    """

    def __init__(self, *, working: WorkingMemory, semantic: SemanticStore,
                 experience: ExperienceLog, embedder: Embedder,
                 policy: RecallPolicy | None = None,
                 background: BackgroundCommits | None = None, window: int = 20) -> None:
        self.working, self.semantic, self.experience = working, semantic, experience
        self.embedder = embedder
        self.policy = policy or RecallPolicy()
        self.background = background or BackgroundCommits()
        self.window = window

    # --- recall -------------------------------------------------------------------------

    async def recall(self, user_id: str, query: str, k: int | None = None, *,
                     now: datetime | None = None, domain: str | None = None) -> list[MemoryItem]:
        """Active items of ``user_id`` by similarity × time decay, above the threshold, top k.

        Each item's ``score`` is its final score. ``domain`` keeps items of that domain
        and of none.
        """
        policy = self.policy
        k = policy.k if k is None else k
        if k <= 0 or not query.strip():
            return []
        vector = self.embedder.embed([query])[0]
        candidates = await self.semantic.search(user_id, vector, max(k, policy.candidates))
        now = now or datetime.now(UTC)
        scored = []
        for item in candidates:
            if item.user_id != user_id or item.status != "active":  # belt and braces
                continue
            if domain is not None and item.domain not in (None, domain):
                continue
            score = (item.score or 0.0) * policy.decay(item, now)
            if score >= policy.threshold:
                scored.append(replace(item, score=score))
        scored.sort(key=lambda i: i.score or 0.0, reverse=True)
        return scored[:k]

    async def items(self, user_id: str) -> list[MemoryItem]:
        """Every item of ``user_id`` (any status), oldest first."""
        return await self.semantic.items(user_id)

    # --- commit -------------------------------------------------------------------------

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[MemoryUpdate],
                    now: datetime, **context: Any) -> list[WriteOutcome]:
        """Apply a turn's memory updates to every tier; see the module docstring.

        Raises:
            MemoryStoreError: a store failed; what was written is safe to write again.
        """
        session_id = str(context.get("session_id") or "")
        text = str(context.get("text") or "")
        domain = context.get("domain")
        outcomes = await self._apply_semantic(user_id, turn_id, updates, now, text, domain,
                                              context.get("event_seq"))
        entries = list(context.get("experiences") or ())
        for index, update in enumerate(updates):
            entries.append(Experience(
                entry_id=item_id(user_id, turn_id, index), at=now,
                kind="feedback" if update.memory_type == "correction" else "memory_commit",
                user_id=user_id, session_id=session_id, turn_id=turn_id, request=text,
                detail={"key": update.key, "update_type": update.update_type,
                        "value": update.value}))
        await self.experience.record(entries)
        if session_id:
            messages = [{"role": "user", "content": text}] if text else []
            if context.get("answer"):
                messages.append({"role": "assistant", "content": str(context["answer"])})
            slots = {u.key: u.value for u in updates
                     if u.memory_type == "progress" and u.update_type != "deprecate"}
            await self.working.record_turn(user_id, session_id, turn_id, messages, slots,
                                           self.window)
        return outcomes

    async def _apply_semantic(self, user_id: str, turn_id: str, updates: Sequence[MemoryUpdate],
                              now: datetime, text: str, domain: str | None,
                              event_seq: int | None) -> list[WriteOutcome]:
        ids = [item_id(user_id, turn_id, i) for i in range(len(updates))]
        done = {i.item_id for i in await self.semantic.get(user_id, ids)} if ids else set()
        outcomes: list[WriteOutcome] = []
        pending: dict[str, MemoryItem] = {}  # key -> new item of this commit, not yet written
        written: list[MemoryItem] = []
        marks: list[tuple[list[str], Status, str | None]] = []
        for index, update in enumerate(updates):
            new_id = ids[index]
            if new_id in done:
                outcomes.append(WriteOutcome(update.key, update.update_type, "skipped",
                                             "already applied by this turn", new_id))
                continue
            earlier = pending.pop(update.key, None)
            if earlier is not None:
                status: Status = ("deleted" if update.update_type == "deprecate"
                                  else "superseded")
                written[written.index(earlier)] = replace(
                    earlier, status=status,
                    superseded_by=None if status == "deleted" else new_id)
                current: list[str] = []
            else:
                current = [i.item_id for i in await self.semantic.active(user_id, update.key,
                                                                         domain)
                           if i.item_id != new_id]
            deprecate = update.update_type == "deprecate"
            if current:
                marks.append((current, "deleted" if deprecate else "superseded",
                              None if deprecate else new_id))
            item = MemoryItem(
                user_id=user_id, key=update.key, value=update.value,
                memory_type=update.memory_type, confidence=update.confidence,
                status="deleted" if deprecate else "active", created_at=now, updated_at=now,
                evidence=update.evidence, turn_id=turn_id, item_id=new_id, domain=domain,
                event_seq=event_seq, operation=update.update_type, text=text)
            written.append(item)
            if not deprecate:
                pending[update.key] = item
            detail = (f"{'deleted' if deprecate else 'superseded'} {len(current)} item(s)"
                      if current else ("nothing active to deprecate" if deprecate else ""))
            outcomes.append(WriteOutcome(update.key, update.update_type, "applied", detail,
                                         new_id))
        for item_ids, status, by in marks:  # supersede first: a cut-short commit converges
            await self.semantic.mark(user_id, item_ids, status, by, now)
        if written:
            vectors = self.embedder.embed([item_text(i.key, i.value, i.text) for i in written])
            await self.semantic.put(written, vectors)
        return outcomes

    # --- forgetting and lifecycle ---------------------------------------------------------

    async def forget(self, user_id: str) -> int:
        """Remove everything about ``user_id`` from all three tiers; returns records removed."""
        removed = await self.semantic.delete_user(user_id)
        removed += await self.experience.forget(user_id)
        removed += await self.working.forget(user_id)
        return removed

    async def close(self) -> None:
        """Wait for background commits (bounded), then close every tier."""
        await self.background.drain()
        for tier in (self.working, self.semantic, self.experience):
            await tier.close()


class InProcessMemory(TieredMemory):
    """Every tier in this process: what ``Orchestrator()`` uses when given no memory.

    In-process working memory (TTL honoured), an in-process semantic store with the
    hashing embedder, an in-memory SQLite experience log. Nothing touches the disk.
    """

    def __init__(self, *, embedder: Embedder | None = None,
                 policy: RecallPolicy | None = None, ttl_s: float = 900.0) -> None:
        embedder = embedder or HashingEmbedder()
        super().__init__(working=InProcessWorkingMemory(ttl_s=ttl_s),
                         semantic=InProcessSemanticStore(embedder.dim),
                         experience=SQLiteExperienceLog(":memory:", embedder),
                         embedder=embedder, policy=policy)
