"""Archiving idle sessions: the summary goes to long-term memory, the session is closed.

:func:`archive_idle` (``Orchestrator.archive_idle(older_than)``, or
``hermes-fsm sessions archive --idle 30m``) takes every unarchived session of the store
whose last write is older than ``older_than`` and:

1. leases it (a session with a turn running is skipped: it is not idle) and loads it;
2. summarizes it — its rolling summary plus the messages still in its window (and the
   message of a turn its process never finished) — with the brain's ``summarize``, or the
   extractive summarizer when the brain has none, fails or times out;
3. writes the summary into the user's semantic memory, one item per line (keys
   ``conversation.<session_id>.<n>``, type ``fact``, evidence ``session:<session_id>``;
   at most :data:`MAX_ITEMS`), idempotently: archiving again never writes twice. One item
   per line, not one for the whole summary, because recall ranks by similarity to the new
   message: a short line about the tax report matches "when is the tax report due?",
   where a long summary about many things would be diluted (and would not fit the
   memory part of the context budget);
4. marks the session archived in the store, with its summary.

If the memory write fails, the session is not archived (reported as ``failed``), so the
next run tries again. A turn on an archived session raises
:class:`~hermes_fsm.errors.SessionArchived`; a *new* session of the same user starts from
long-term memory — recall brings the summary back when it is relevant to the message —
not from the old session's messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.engine.durable import DurableSessions
from hermes_fsm.errors import MemoryStoreError, UsageError

__all__ = ["MAX_ITEMS", "ArchivedSession", "archive_idle", "archive_session", "memory_key"]

MAX_ITEMS = 64
"""The most long-term memory items one archived session writes (its summary's first lines)."""


@dataclass(frozen=True, slots=True)
class ArchivedSession:
    """What happened to one idle session.

    Attributes:
        status: ``archived``; ``would_archive`` (a dry run); ``skipped`` (busy, or already
            archived); ``failed`` (the memory write failed: it stays unarchived).
        summary: the summary written (archived) — "" for an empty session.
        summarizer: who wrote it (a brain's name, or ``extractive``).
        summary_error: why the brain's summary was not used, if it was not.
        memory_key: the prefix of the long-term memory items' keys (``conversation.<id>``;
            "" when nothing was written); item ``n`` is ``<memory_key>.<n>``.
        memory_items: how many items were written (one per line of the summary).
        messages: how many messages were summarized.
        detail: why it was skipped or failed.
    """

    session_id: str
    user_id: str
    status: Literal["archived", "would_archive", "skipped", "failed"]
    summary: str = ""
    summarizer: str = ""
    summary_error: str | None = None
    memory_key: str = ""
    memory_items: int = 0
    messages: int = 0
    detail: str = ""


def memory_key(session_id: str) -> str:
    """The prefix of the long-term memory keys of an archived session's summary."""
    return f"conversation.{session_id}"


async def archive_idle(durable: DurableSessions, older_than: timedelta, *,
                       now: datetime | None = None, dry_run: bool = False
                       ) -> list[ArchivedSession]:
    """Archive every session last written before ``now - older_than`` (see module docs).

    Raises:
        UsageError: a negative ``older_than``.
        StoreError: the store failed.
    """
    if older_than < timedelta(0):
        raise UsageError(f"older_than must not be negative (got {older_than}); pass how "
                         "long a session must have been idle, e.g. timedelta(minutes=30)")
    now = now or datetime.now(UTC)
    idle = await durable.store.idle_sessions(now - older_than)
    return [await archive_session(durable, session_id, now=now, dry_run=dry_run)
            for session_id in idle]


async def archive_session(durable: DurableSessions, session_id: str, *,
                          now: datetime | None = None, dry_run: bool = False
                          ) -> ArchivedSession:
    """Summarize one session into long-term memory and archive it (idle or not).

    Raises:
        StoreError: the store failed.
    """
    store, o = durable.store, durable.orchestrator
    now = now or datetime.now(UTC)
    record = await store.get(session_id)
    if record is None or record.archived:
        return ArchivedSession(session_id, record.user_id if record else "", "skipped",
                               detail="already archived" if record else "no such session")
    if dry_run:
        stored = await store.messages(session_id)
        return ArchivedSession(session_id, record.user_id, "would_archive",
                               messages=len(stored))
    hold = await durable.lease.acquire(session_id, 0.0)
    if hold is None:
        return ArchivedSession(session_id, record.user_id, "skipped",
                               detail="a turn is running on it")
    try:
        session, pending = await durable.load(session_id, record.user_id)
        messages = [dict(m) for m in session.history]
        if pending:  # a turn whose process died: its question still counts
            messages.append({"role": "user", "content": str(pending[0]["text"])})
        summary = await o.context.summarize(o.services.brain, record.user_id, session_id,
                                            session.summary, messages)
        lines = [line.strip() for line in summary.text.splitlines() if line.strip()]
        updates = [MemoryUpdate(key=f"{memory_key(session_id)}.{n}", update_type="create",
                                value=line, memory_type="fact", confidence=0.7,
                                evidence_source=f"session:{session_id}")
                   for n, line in enumerate(lines[:MAX_ITEMS], start=1)]
        if updates:
            try:
                await o.services.memory.apply(record.user_id, f"archive:{session_id}",
                                              updates, now)
            except MemoryStoreError as exc:
                return ArchivedSession(session_id, record.user_id, "failed", summary.text,
                                       summary.summarizer, summary.error, "", 0, len(messages),
                                       f"the summary could not be written to memory: {exc}; "
                                       "the session stays unarchived, run again later")
        await store.archive(session_id, summary.text)
        durable.forget_id(session_id)
        return ArchivedSession(session_id, record.user_id, "archived", summary.text,
                               summary.summarizer, summary.error,
                               memory_key(session_id) if updates else "", len(updates),
                               len(messages))
    finally:
        await hold.release()
