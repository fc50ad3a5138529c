"""The memory facade the engine's handlers use: three tiers behind one object.

:class:`TieredMemory` composes a :class:`~.working.WorkingMemory`, a
:class:`~.semantic.SemanticStore` with an :class:`~.embedders.Embedder`, and an
:class:`~.experience.ExperienceLog`. It implements :class:`Memory` (``recall``,
``apply``, ``forget``) and gives the experience log's :class:`~.experience.ToolOutcomes`
to the tool layer.

A commit (``apply``) writes the semantic items (upserts by deterministic id:
supersessions first, then the new items, so a commit cut short converges when retried),
the experience entries (one transaction, keyed) and the working memory (one atomic,
per-turn idempotent write) — the three at once, none waiting for another's disk or
round trip; each is keyed, so when one fails the retry writes the others again harmlessly.
A retried or replayed commit writes nothing twice.

Commits of concurrent turns waiting at the same moment are written together (a group
commit, see :mod:`.commit`): one semantic write, one experience transaction and one
working-memory round trip for the batch, while each caller still awaits its own outcome.
A batch holds at most one commit per user, and one batch is written at a time, so each
commit sees what the user's previous one wrote. A failed batch fails each of its commits
(each is then retried on its own by the caller, see :class:`~.background.BackgroundCommits`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from hermes_fsm._internal.group_commit import GroupCommit
from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.errors import UsageError
from hermes_fsm.memory.archive import SQLiteArchive
from hermes_fsm.memory.background import BackgroundCommits
from hermes_fsm.memory.commit import Commit, Plan, plan, write
from hermes_fsm.memory.embedders import Embedder, HashingEmbedder
from hermes_fsm.memory.experience import (
    Experience,
    ExperienceLog,
    seen_in_domain,
)
from hermes_fsm.memory.items import MemoryItem, WriteOutcome, item_text
from hermes_fsm.memory.recall import RecallPolicy, calibration_for
from hermes_fsm.memory.semantic import InProcessSemanticStore, SemanticStore
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog
from hermes_fsm.memory.working import InProcessWorkingMemory, WorkingMemory

__all__ = ["DomainMemory", "InProcessMemory", "LayeredRecall", "Memory", "TieredMemory"]


@runtime_checkable
class Memory(Protocol):
    """Long-term memory as the engine sees it."""

    async def recall(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
        """Active items of ``user_id`` relevant to ``query``, best first; never another user's.

        The engine may pass ``keys=`` (keyword-only: standing keys whose items are wanted
        whatever the query, see :meth:`TieredMemory.recall`) when the brain names some
        (its ``memory_keys``); a memory that takes no ``keys`` is only called without.
        """
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
        sealed_domains: encrypted domains (:mod:`.sealing`): a commit in one records its
            experience entries without the request, arguments or value.
        shared_domains: memory domains whose recall also finds the user's items of no
            domain (her general profile; configuration's ``memory.shared_domains``); any
            other domain recalls its own items only. Commits stay in their domain either way.
    """

    def __init__(self, *, working: WorkingMemory, semantic: SemanticStore,
                 experience: ExperienceLog, embedder: Embedder,
                 policy: RecallPolicy | None = None,
                 background: BackgroundCommits | None = None, window: int = 20,
                 sealed_domains: frozenset[str] = frozenset(),
                 shared_domains: frozenset[str] = frozenset()) -> None:
        self.working, self.semantic, self.experience = working, semantic, experience
        self.shared_domains = frozenset(shared_domains)
        self.embedder = embedder
        self.policy = policy or RecallPolicy()
        self.calibration = calibration_for(embedder.name)  # unless the policy names one
        self.background = background or BackgroundCommits()
        self.window = window
        self.sealed_domains = sealed_domains  # their commits leave no plaintext in the log
        self._commits: GroupCommit[Commit, list[WriteOutcome]] = GroupCommit(
            self._write_batch, key=lambda c: c.user_id, max_in_flight=1)
        self._forgotten: dict[str, int] = {}  # user → times forgotten (commits carry it)
        self._writing = asyncio.Lock()  # held by a batch's write and by forget

    # --- recall -------------------------------------------------------------------------

    async def recall(self, user_id: str, query: str, k: int | None = None, *,
                     now: datetime | None = None, domain: str | None = None,
                     shared: bool | None = None, keys: Sequence[str] = ()
                     ) -> list[MemoryItem]:
        """Active items of ``user_id`` at or above the threshold of relevance (calibrated
        similarity), best first by relevance with recency as a bounded tie-break
        (:mod:`.recall`), top k.

        Each item's ``score`` is its final score. ``domain`` keeps items of that domain
        only (``shared=True``: and of none; ``None``, the default: shared when the domain
        is one of :attr:`shared_domains`); no ``domain``: every item. ``keys`` are standing keys
        (a brain's ``memory_keys``, e.g. ``preference.store``): the user's active item of
        each is added after the top k whatever its similarity to ``query`` (a preference
        said in another session fills a slot of a message that does not mention it), with
        ``score`` ``None``.
        """
        policy = self.policy
        k = policy.k if k is None else k
        if k <= 0 or not query.strip():
            return []
        if shared is None:
            shared = domain in self.shared_domains
        found = await self._ranked(user_id, query, k, now, domain, shared)
        if keys:
            found += await self._standing(user_id, keys, {i.key for i in found},
                                          now or datetime.now(UTC), domain, shared)
        return found

    async def _standing(self, user_id: str, keys: Sequence[str], have: set[str],
                        now: datetime, domain: str | None,
                        shared: bool) -> list[MemoryItem]:
        """The active items of the standing ``keys`` not already in ``have``."""
        domains = [domain] if domain is None or not shared else [domain, None]
        out: list[MemoryItem] = []
        for key in dict.fromkeys(keys):
            if key in have:
                continue
            for in_domain in domains:
                items = [i for i in await self.semantic.active(user_id, key, in_domain)
                         if i.user_id == user_id and not self.policy.expired(i, now)]
                if items:
                    newest = max(items, key=lambda i: i.created_at)
                    out.append(replace(newest, score=None))
                    break
        return out

    async def _ranked(self, user_id: str, query: str, k: int, now: datetime | None,
                      domain: str | None, shared: bool) -> list[MemoryItem]:
        policy = self.policy
        vector = self.embedder.embed([query])[0]
        candidates = await self.semantic.search(user_id, vector, max(k, policy.candidates))
        now = now or datetime.now(UTC)
        scored = []
        for item in candidates:
            if item.user_id != user_id or item.status != "active":  # belt and braces
                continue
            if domain is not None and item.domain != domain and (
                    not shared or item.domain is not None):
                continue
            if policy.expired(item, now):  # the short-term layer's TTL
                continue
            relevance, score = policy.score(item, item.score or 0.0, now, self.calibration)
            if relevance >= policy.threshold:
                scored.append((score, item))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return [replace(item, score=score) for score, item in scored[:k]]

    async def walk(self, user_id: str, query: str, *, session_id: str | None = None,
                   entities: Sequence[str] = (), k: int | None = None,
                   now: datetime | None = None, domain: str | None = None,
                   shared: bool | None = None, keys: Sequence[str] = ()) -> LayeredRecall:
        """Recall through the layers in order (seed 002 §2.4), one after the other: the
        session's working memory (its recent messages), then the semantic items
        (:meth:`recall`, with ``domain``, ``shared`` and ``keys``), then the experience log
        — the user's entries whose request or arguments name one of ``entities`` (the
        conversation graph's entity values) first, newest first, then the entries most
        similar to ``query`` (searched only when fewer than ``k`` name an entity); ``k`` of
        those (the policy's k by default). With a
        ``domain``, the experience layer holds the entries committed in that domain (of
        any of the user's sessions; ``shared``: and of none), as the semantic layer does.

        This is the engine's recall (:mod:`hermes_fsm.engine.memory_handlers`); the
        result's :attr:`LayeredRecall.order` is the order the layers were read in.
        """
        k = self.policy.k if k is None else k
        order: list[str] = []
        working = await self.working.recent(user_id, session_id) if session_id else []
        order.append("working")
        semantic = await self.recall(user_id, query, k, now=now, domain=domain, shared=shared,
                                     keys=keys)
        order.append("semantic")
        names = [e.casefold() for e in entities if e and e.strip()]
        if shared is None:
            shared = domain in self.shared_domains
        # the experience layer stays in the domain as the semantic one does (passed only
        # for a domain's session: a log of no domains is still asked as before)
        scope: dict[str, Any] = {} if domain is None else {"domain": domain, "shared": shared}
        found_keyed: list[tuple[Experience, str]] = []  # each with what it says (_said)
        if names and k > 0:
            # the newest k that name an entity (the search may hold one that _said does
            # not: then fewer than k are keyed, and the similar entries fill the layer)
            mentioning = getattr(self.experience, "mentioning", None)  # MentionedOutcomes
            found = (await mentioning(user_id, names, limit=k, **scope) if callable(mentioning)
                     else await self.experience.entries(user_id, limit=500))
            for entry in found:
                if entry.user_id == user_id and seen_in_domain(entry.domain, domain, shared):
                    text = _said(entry)
                    if any(n in text for n in names):
                        found_keyed.append((entry, text))
            found_keyed.sort(key=lambda pair: pair[0].at, reverse=True)
        keyed = [entry for entry, _ in found_keyed]
        seen = {e.entry_id for e in keyed}
        # the similar entries only fill what the keyed ones leave of the layer's k: when
        # those fill it, the similarity search (most of a turn's recall) is not made
        similar = ([e for e in await self.experience.similar_outcomes(user_id, query, k,
                                                                      **scope)
                    if e.entry_id not in seen and seen_in_domain(e.domain, domain, shared)]
                   if len(keyed) < k and query.strip() else [])
        order.append("experience")
        return LayeredRecall(working=list(working), semantic=semantic,
                             experience=(keyed + similar)[:k],
                             keyed_by=tuple(n for n in dict.fromkeys(names)
                                            if any(n in text for _, text in found_keyed)),
                             order=tuple(order))

    def in_domain(self, domain: str, *, shared: bool = False) -> DomainMemory:
        """This memory seen from inside ``domain`` (seed 003 §5): what a session of that
        domain is given as its memory (see :class:`DomainMemory`)."""
        return DomainMemory(self, domain, shared=shared)

    def warm(self) -> None:
        """Start loading what the first recall needs (the embedder's model) in the
        background, where the embedder can (:meth:`USEEmbedder.warm`); returns at once."""
        warm = getattr(self.embedder, "warm", None)
        if callable(warm):
            warm()

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
        return await self._commits.submit(Commit(user_id, turn_id, tuple(updates), now,
                                                 context, self._forgotten.get(user_id, 0)))

    async def _write_batch(self, commits: list[Commit]
                           ) -> list[list[WriteOutcome] | BaseException]:
        async with self._writing:
            plans: list[Plan | BaseException] = []
            for commit in commits:
                if commit.generation != self._forgotten.get(commit.user_id, 0):
                    plans.append(Plan(outcomes=[  # made before its user was forgotten
                        WriteOutcome(u.key, u.update_type, "skipped",
                                     "the user was forgotten meanwhile") for u in commit.updates]))
                    continue
                try:
                    made = await plan(commit, self.semantic, self.window)
                    if commit.context.get("domain") in self.sealed_domains:
                        made.entries = [_sealed_entry(e) for e in made.entries]
                    plans.append(made)
                except Exception as exc:  # this commit's own failure; the others go on
                    plans.append(exc)
            await write([p for p in plans if isinstance(p, Plan)], semantic=self.semantic,
                        experience=self.experience, working=self.working,
                        embedder=self.embedder)
            return [p if isinstance(p, BaseException) else p.outcomes for p in plans]

    # --- forgetting and lifecycle ---------------------------------------------------------

    async def forget(self, user_id: str) -> int:
        """Remove everything about ``user_id`` from all three tiers; returns records removed
        (see :meth:`forget_report`)."""
        report = await self.forget_report(user_id)
        return report["semantic"] + report["experience"] + report["working"]

    async def forget_report(self, user_id: str) -> dict[str, int]:
        """Remove everything about ``user_id``: first cancel her commits still retried in
        the background (and wait until they stopped), drop her commits made before now
        and not yet written, wait for a write in progress, then delete her from the
        semantic store, the experience log and working memory. Nothing made before the
        call is written for her after it.

        Returns the records removed per tier and ``pending_commits``, the background
        retries cancelled.
        """
        cancelled = await self.background.cancel_user(user_id)
        # a commit of hers made before now and not yet written is dropped, not written
        self._forgotten[user_id] = self._forgotten.get(user_id, 0) + 1
        async with self._writing:  # a batch being written finishes first
            semantic = await self.semantic.delete_user(user_id)
            experience = await self.experience.forget(user_id)
            working = await self.working.forget(user_id)
        return {"semantic": semantic, "experience": experience, "working": working,
                "pending_commits": cancelled}

    async def forget_matching(self, user_id: str, query: str,
                              now: datetime | None = None) -> list[MemoryItem]:
        """Erase the remembered items of ``user_id`` whose key, value or source message
        contains ``query`` (case-insensitive), of any status: each is rewritten as a
        ``deleted`` record keyed ``forgotten``, with no value and no text (an upsert by
        its id, so a recall never finds it again and nothing of what it said is left).
        The user's other items,
        her sessions and her experience log stay; :meth:`forget_report` removes everything.

        Returns the items as they were before erasing them.
        """
        now = now or datetime.now(UTC)
        async with self._writing:  # not in the middle of a batch's write
            matching = await self.matching(user_id, query)
            if matching:
                erased = [replace(item, key="forgotten", value=None, text="",
                                  status="deleted", updated_at=now, score=None)
                          for item in matching]
                vectors = self.embedder.embed([item_text(item.key, None) for item in erased])
                await self.semantic.put(erased, vectors)
        return matching

    async def matching(self, user_id: str, query: str) -> list[MemoryItem]:
        """The items of ``user_id`` (any status, not yet erased) whose key, value or source
        message contains ``query``, case-insensitive: what :meth:`forget_matching` erases."""
        needle = query.strip().casefold()
        if not needle:
            return []
        return [item for item in await self.semantic.items(user_id)
                if item.user_id == user_id and _mentions(item, needle)]
    # --- archive --------------------------------------------------------------------------

    async def archive_stale(self, user_id: str, archive: SQLiteArchive, *,
                            now: datetime | None = None,
                            stale_after_days: float = 90.0) -> list[MemoryItem]:
        """Move ``user_id``'s stale items to ``archive``: those superseded or deleted more
        than ``stale_after_days`` ago, and those past their type's TTL (the policy's
        ``ttl_days``). The archive is written before the items leave the semantic store
        (a crash between leaves them in both; doing it again converges). Returns them."""
        now = now or datetime.now(UTC)
        async with self._writing:  # not in the middle of a commit batch
            stale = [i for i in await self.semantic.items(user_id)
                     if (i.status != "active" and (now - i.updated_at).total_seconds()
                         > stale_after_days * 86400.0)
                     or (i.status == "active" and self.policy.expired(i, now))]
            if stale:
                await archive.put(stale, now)
                await self.semantic.delete(user_id, [i.item_id for i in stale])
            return stale

    async def restore(self, user_id: str, archive: SQLiteArchive,
                      item_ids: Sequence[str]) -> list[MemoryItem]:
        """Put archived items of ``user_id`` back (embedded again), then drop them from the
        archive. Returns them."""
        wanted = set(item_ids)
        items = [i for i in await archive.items(user_id) if i.item_id in wanted]
        if items:
            vectors = self.embedder.embed([item_text(i.key, i.value, i.text) for i in items])
            async with self._writing:
                await self.semantic.put(items, vectors)
            await archive.remove(user_id, [i.item_id for i in items])
        return items

    async def close(self) -> None:
        """Wait for background commits (bounded), then close every tier."""
        await self.background.drain()
        for tier in (self.working, self.semantic, self.experience):
            await tier.close()


def _said(entry: Experience) -> str:
    """What an experience entry says (its request and arguments), casefolded."""
    return " ".join([entry.request, *map(str, entry.arguments.values())]).casefold()


def _mentions(item: MemoryItem, needle: str) -> bool:
    if item.status == "deleted" and item.value is None and not item.text:
        return False  # erased already
    return any(needle in part.casefold() for part in (item.key, item.text)
               ) or (item.value is not None and needle in str(item.value).casefold())
def _sealed_entry(entry: Experience) -> Experience:
    """An experience entry of a commit in an encrypted domain, without its plaintext (the
    request, the arguments, the remembered value): what is left says what happened when."""
    detail = entry.detail
    if isinstance(detail, dict):
        detail = {k: v for k, v in detail.items() if k in ("update_type",)}
    elif detail is not None:
        detail = "sealed"
    return replace(entry, request="", arguments={}, detail=detail)


@dataclass(frozen=True, slots=True)
class LayeredRecall:
    """What :meth:`TieredMemory.walk` found, layer by layer, in the order walked.

    ``keyed_by``: the entity values that matched experience entries (the keyed part of
    ``experience`` comes first); ``order``: the layers in the order they were read.
    """

    working: list[dict[str, Any]]
    semantic: list[MemoryItem]
    experience: list[Experience]
    keyed_by: tuple[str, ...] = ()
    order: tuple[str, ...] = ("working", "semantic", "experience")


class DomainMemory:
    """A :class:`TieredMemory` bound to one memory domain: every commit is written in
    ``domain`` (whatever the turn's context says) and recall returns items of ``domain``
    only — with ``shared=True``, also the items of no domain (the user's general profile).
    Anything else (``experience``, ``background``, ``close``, ``forget`` …) is the
    underlying memory's, so an orchestrator can be given it as its memory.

    Recall filters the nearest candidates (``RecallPolicy.candidates``, 50 by default) of
    all the user's domains: a user with far more items in other domains than that can see
    fewer than ``k`` of this one's.
    """

    def __init__(self, memory: TieredMemory, domain: str, *, shared: bool = False) -> None:
        if not domain or not domain.strip():
            raise ValueError("a memory domain needs a name (got an empty one)")
        self.memory, self.domain, self.shared = memory, domain, shared

    async def recall(self, user_id: str, query: str, k: int | None = None, *,
                     now: datetime | None = None, domain: str | None = None,
                     keys: Sequence[str] = ()) -> list[MemoryItem]:
        """:meth:`TieredMemory.recall` inside the domain (``domain``, when the engine
        passes a session's, must be this one).

        Raises:
            UsageError: ``domain`` is another domain.
        """
        self._same(domain)
        return await self.memory.recall(user_id, query, k, now=now, domain=self.domain,
                                        shared=self.shared, keys=keys)

    async def walk(self, user_id: str, query: str, *, domain: str | None = None,
                   **kwargs: Any) -> LayeredRecall:
        """:meth:`TieredMemory.walk` inside the domain."""
        self._same(domain)
        return await self.memory.walk(user_id, query, domain=self.domain,
                                      shared=self.shared, **kwargs)

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[MemoryUpdate],
                    now: datetime, **context: Any) -> list[WriteOutcome]:
        """:meth:`TieredMemory.apply`, written in the domain.

        Raises:
            UsageError: the context's ``domain`` is another domain.
        """
        self._same(context.get("domain"))
        return await self.memory.apply(user_id, turn_id, updates, now,
                                       **{**context, "domain": self.domain})

    def _same(self, domain: str | None) -> None:
        if domain is not None and domain != self.domain:
            raise UsageError(f"this memory is bound to domain {self.domain!r}; a session of "
                             f"domain {domain!r} cannot use it (give the orchestrator the "
                             "whole memory: sessions declare their domain)")

    async def items(self, user_id: str) -> list[MemoryItem]:
        """The user's items of the domain (and of none, when shared), any status."""
        return [i for i in await self.memory.items(user_id)
                if i.domain == self.domain or (self.shared and i.domain is None)]

    def __getattr__(self, name: str) -> Any:
        if name == "memory":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.memory, name)


class InProcessMemory(TieredMemory):
    """Every tier in this process: what an ``Orchestrator`` uses when given no memory.

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
