"""The experience tier: a causal log of tool outcomes, errors, durations and feedback.

Each :class:`Experience` says which request (the user's message, ``request``) led to
which call (``tool``, ``arguments``) and what came of it (``ok``, ``error_code``,
``duration_ms``), per user, session and turn. Entries are keyed by ``entry_id``: writing
the same entry twice keeps one.

The log feeds back: :class:`ToolOutcomes` is what the tool layer's circuit breaker reads
(``failure_rates``: every tool's calls and failures over a window, across all sessions and
processes writing to the log; see :class:`~hermes_fsm.tools.breaker.ExperienceBreaker`) and what
planning is shown (``similar_outcomes``).
Backends: :mod:`.sqlite_experience` (the embedded default), :mod:`.postgres_experience`.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from hermes_fsm.memory.embedders import Embedder

__all__ = [
    "NOT_CALLED",
    "Experience",
    "ExperienceLog",
    "MentionedOutcomes",
    "ToolHealth",
    "ToolOutcomes",
    "VersionHealth",
    "VersionOutcomes",
    "like_pattern",
    "rank_similar",
    "seen_in_domain",
]

ExperienceKind = Literal["tool_call", "error", "feedback", "memory_commit", "canary_rollback"]

NOT_CALLED = ("CIRCUIT_OPEN", "VALIDATION_FAILED", "UNKNOWN_TOOL", "PERMISSION_DENIED",
              "OUTCOME_UNKNOWN")
"""Error codes of calls refused before the tool ran. Failure rates leave them out: they say
nothing about the tool, and counting a breaker's own refusals would keep it open forever."""


@dataclass(frozen=True, slots=True)
class Experience:
    """One entry of the experience log.

    Attributes:
        entry_id: unique; the idempotency key (e.g. ``{turn}:{call_id}``).
        kind: ``tool_call``, ``error`` (a state failed), ``feedback`` (a correction),
            ``memory_commit`` (a memory update was applied), ``canary_rollback`` (a
            canary's candidate of ``tool``, version ``tool_version``, was rolled back;
            ``detail`` says why).
        request: the user's message that led to it (the cause).
        tool, arguments: the call (the input), for ``tool_call``.
        ok, error_code, detail: what came of it.
        caused_by: the entry or call this one follows from (e.g. the call id).
        event_seq: the session event it was taken from.
        tool_version: the contract version that ran the call, for a call of a tool with a
            canary (:mod:`hermes_fsm.tools.canary`: each version's error rate is read
            from these).
        domain: the memory domain of the session it was committed from (seed 003 §5;
            ``None``: a session of no domain). Recall in a domain reads its entries only
            (see :func:`seen_in_domain`).
    """

    entry_id: str
    kind: str
    user_id: str
    session_id: str
    turn_id: str
    at: datetime
    ok: bool = True
    tool: str | None = None
    request: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None
    detail: Any = None
    duration_ms: float = 0.0
    caused_by: str | None = None
    event_seq: int | None = None
    score: float | None = field(default=None, compare=False)
    tool_version: str | None = None
    domain: str | None = None


def seen_in_domain(entry_domain: str | None, domain: str | None, shared: bool) -> bool:
    """Whether an entry of ``entry_domain`` is seen by a recall in ``domain``: the semantic
    layer's rule (:meth:`~.tiered.TieredMemory.recall`). No ``domain``: every entry; else
    the domain's own, and with ``shared`` also those of no domain.

    >>> seen_in_domain("wealth", None, False), seen_in_domain(None, "wealth", False)
    (True, False)
    >>> seen_in_domain(None, "wealth", True), seen_in_domain("loans", "wealth", True)
    (True, False)
    """
    return domain is None or entry_domain == domain or (shared and entry_domain is None)


@dataclass(frozen=True, slots=True)
class ToolHealth:
    """How a tool fared within a window: ``calls`` made, ``failed`` of them.

    >>> ToolHealth("flaky", calls=4, failed=3).failure_rate
    0.75
    """

    tool: str
    calls: int
    failed: int

    @property
    def failure_rate(self) -> float:
        return self.failed / self.calls if self.calls else 0.0


@runtime_checkable
class ToolOutcomes(Protocol):
    """What the tool layer and planning read from experience.

    Rates count ``tool_call`` entries whose time is in ``(now - window, now]``, of every
    user, session and process writing to the log, except calls refused before the tool
    ran (:data:`NOT_CALLED`).
    """

    async def failure_rate(self, tool: str, window: timedelta,
                           now: datetime | None = None) -> float:
        """Failed calls / calls of ``tool`` within ``window`` before ``now`` (0.0 if none)."""
        ...

    async def failure_rates(self, window: timedelta,
                            now: datetime | None = None) -> dict[str, ToolHealth]:
        """Every tool called within ``window`` before ``now``, by name (one query)."""
        ...

    async def similar_outcomes(self, user_id: str, text: str, k: int = 5, *,
                               domain: str | None = None,
                               shared: bool = False) -> list[Experience]:
        """Past tool outcomes of ``user_id`` whose requests resemble ``text``, best first;
        with ``domain``, of that domain only (``shared``: and of none; :func:`seen_in_domain`).
        The layered recall passes ``domain``/``shared`` only for a session of a domain."""
        ...


def like_pattern(text: str) -> str:
    """A ``LIKE`` pattern matching ``text`` anywhere (``%`` and ``_`` in it escaped by
    a backslash: use ``ESCAPE '\\'``)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@runtime_checkable
class MentionedOutcomes(Protocol):
    """What the layered recall reads from experience when the log can search it (both
    backends can): entries naming the conversation's entities."""

    async def mentioning(self, user_id: str, names: Sequence[str], limit: int = 50, *,
                         domain: str | None = None,
                         shared: bool = False) -> list[Experience]:
        """The latest entries of ``user_id`` whose request or arguments contain one of
        ``names``, newest first (a superset: the caller checks each entry itself); with
        ``domain``, of that domain only (``shared``: and of none; :func:`seen_in_domain`)."""
        ...


@dataclass(frozen=True, slots=True)
class VersionHealth:
    """A canaried tool's versions as the log has them: per version, the outcomes of its
    last calls (``ToolHealth`` with the version as ``tool``), and the latest rollback of a
    candidate version (``(version, why)``), if any."""

    versions: dict[str, ToolHealth]
    rolled_back: tuple[str, str] | None = None


@runtime_checkable
class VersionOutcomes(Protocol):
    """What a canary reads from experience (both backends have it): across every process
    writing to the log."""

    async def version_outcomes(self, tool: str, versions: Sequence[str],
                               last: int) -> VersionHealth:
        """The last ``last`` calls of ``tool`` on each of ``versions`` (calls refused
        before the tool ran left out), and the latest rollback of ``tool``'s canary."""
        ...


@runtime_checkable
class ExperienceLog(ToolOutcomes, Protocol):
    """An append-only, idempotent log of experiences."""

    name: str

    async def record(self, entries: Sequence[Experience]) -> int:
        """Write entries in one transaction (all or none); returns how many were new."""
        ...

    async def entries(self, user_id: str, limit: int = 1000) -> list[Experience]:
        """The latest entries of ``user_id``, newest first."""
        ...

    async def forget(self, user_id: str) -> int:
        """Remove every entry of ``user_id``; returns how many."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...


def rank_similar(entries: Sequence[Experience], text: str, embedder: Embedder,
                 k: int) -> list[Experience]:
    """The ``k`` entries whose ``request`` is most similar to ``text`` (score > 0)."""
    by_id = {e.entry_id: e for e in entries}
    best = top_requests([(e.entry_id, e.request) for e in entries], text, embedder, k)
    return [replace(by_id[i], score=s) for i, s in best]


def top_requests(rows: Sequence[tuple[str, str]], text: str, embedder: Embedder,
                 k: int) -> list[tuple[str, float]]:
    """``(entry_id, score)`` of the ``k`` rows ``(entry_id, request)`` most like ``text``.

    Backends rank on these two columns, then load only the winners' rows: building 500
    full entries per PLANNING call made turns slower as the log grew.
    """
    if not rows:
        return []

    requests = [request for _, request in rows]
    unique = list(dict.fromkeys(requests))  # a user's requests often repeat: score each once
    vectors = _vectors(embedder, [text, *unique])
    scored = vectors[1:] @ vectors[0]
    if len(unique) == len(requests):
        scores = scored
    else:
        by_text = dict(zip(unique, scored.tolist(), strict=True))
        scores = np.fromiter((by_text[r] for r in requests), dtype=np.float64,
                             count=len(requests))
    order = np.argsort(-scores, kind="stable")[:k]
    return [(rows[i][0], float(scores[i])) for i in order if scores[i] > 0]


class _VectorTable:
    """An embedder's vectors of texts, as rows of one matrix (grown by doubling)."""

    __slots__ = ("matrix", "rows")

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}  # text → its row
        self.matrix: Any = None  # (capacity, dim) float32, the first len(rows) rows used

    def add(self, texts: Sequence[str], vectors: Any) -> None:
        block = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
        used = len(self.rows)
        if self.matrix is None or used + len(texts) > len(self.matrix):
            grown = np.empty((max(64, 2 * (used + len(texts))), block.shape[1]), np.float32)
            if self.matrix is not None:
                grown[:used] = self.matrix[:used]
            self.matrix = grown
        self.matrix[used:used + len(texts)] = block
        for offset, text in enumerate(texts):
            self.rows[text] = used + offset


_VECTOR_CACHE: weakref.WeakKeyDictionary[Any, _VectorTable] = weakref.WeakKeyDictionary()
_CACHE_LIMIT = 20_000


def _vectors(embedder: Embedder, texts: Sequence[str]) -> Any:
    """The texts' embeddings as one matrix; each text is embedded once per embedder.

    Past requests repeat across PLANNING calls (up to 500 rows a call), and embedding them
    again every time made each turn slower than the one before. They are kept as rows of
    one matrix and gathered by index: stacking 500 cached arrays took longer than the
    query that found them.
    """
    table = _VECTOR_CACHE.get(embedder)
    if table is None:
        table = _VECTOR_CACHE[embedder] = _VectorTable()
    rows = table.rows
    missing = [t for t in dict.fromkeys(texts) if t not in rows]
    if missing:
        if len(rows) + len(missing) > _CACHE_LIMIT:
            table = _VECTOR_CACHE[embedder] = _VectorTable()
            rows = table.rows
            missing = list(dict.fromkeys(texts))
        table.add(missing, embedder.embed(missing))
    return table.matrix[[rows[t] for t in texts]]
