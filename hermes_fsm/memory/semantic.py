"""The semantic tier: facts, preferences and profile per user, with vector recall.

:class:`SemanticStore` is what a backend implements; every method takes the user id and
never reads or writes another user's items. :class:`InProcessSemanticStore` keeps items
and vectors in memory (numpy brute force); it is what an ``Orchestrator`` given no memory
uses, and the read index of the Qdrant local-mode store (see :mod:`.qdrant_semantic`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from hermes_fsm.errors import VectorSizeMismatch
from hermes_fsm.memory.items import MemoryItem, Status

__all__ = ["InProcessSemanticStore", "Mark", "SemanticStore"]


@dataclass(frozen=True, slots=True)
class Mark:
    """A status change of items of one user: ``superseded`` (by ``superseded_by``) or
    ``deleted``, at ``at``. Items of other users named in ``item_ids`` are left alone."""

    user_id: str
    item_ids: tuple[str, ...]
    status: Status
    superseded_by: str | None
    at: datetime


@runtime_checkable
class SemanticStore(Protocol):
    """Items with vectors, per user. Writes are upserts by ``item_id`` (idempotent)."""

    name: str

    async def put(self, items: Sequence[MemoryItem],
                  vectors: Sequence[Sequence[float]]) -> None:
        """Insert or replace items (by ``item_id``) with their vectors."""
        ...

    async def get(self, user_id: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        """The items of ``user_id`` among ``item_ids`` (any status)."""
        ...

    async def active(self, user_id: str, key: str, domain: str | None) -> list[MemoryItem]:
        """The active items of ``user_id`` with this key and domain."""
        ...

    async def mark(self, user_id: str, item_ids: Sequence[str], status: Status,
                   superseded_by: str | None, now: datetime) -> None:
        """Set the status (and the superseding item) of items of ``user_id``."""
        ...

    async def write(self, marks: Sequence[Mark], items: Sequence[MemoryItem],
                    vectors: Sequence[Sequence[float]]) -> None:
        """Apply ``marks``, then upsert ``items`` (of any users): one write where the
        backend can (the commits of many turns go through here together)."""
        ...

    async def search(self, user_id: str, vector: Sequence[float],
                     limit: int) -> list[MemoryItem]:
        """Active items of ``user_id`` by cosine similarity, best first (``score`` set)."""
        ...

    async def items(self, user_id: str) -> list[MemoryItem]:
        """Every item of ``user_id`` (any status), oldest first."""
        ...

    async def delete_user(self, user_id: str) -> int:
        """Remove every item of ``user_id``; returns how many."""
        ...

    async def delete(self, user_id: str, item_ids: Sequence[str]) -> int:
        """Remove these items of ``user_id`` (others' are left alone); returns how many."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...


class InProcessSemanticStore:
    """Items and vectors in dicts per user; brute-force cosine with numpy.

    Args:
        dim: the vector size, when known (else taken from the first write).
    """

    name = "in-process semantic store"

    def __init__(self, dim: int | None = None) -> None:
        self.dim = dim
        self._items: dict[str, dict[str, MemoryItem]] = {}
        self._vectors: dict[str, dict[str, np.ndarray]] = {}
        self._index: dict[str, tuple[list[str], np.ndarray]] = {}
        self._by_key: dict[tuple[str, str, str | None], set[str]] = {}  # active ids per key

    def _check(self, vector: Sequence[float]) -> np.ndarray:
        array = np.asarray(vector, dtype=np.float32)
        if self.dim is None:
            self.dim = len(array)
        elif len(array) != self.dim:
            raise VectorSizeMismatch(
                f"{self.name}: holds vectors of size {self.dim}, got one of size {len(array)}; "
                "use the embedder the store was filled with, or start an empty store")
        norm = float(np.linalg.norm(array))
        return array / norm if norm else array

    def _store(self, item: MemoryItem) -> None:
        mine = self._items.setdefault(item.user_id, {})
        old = mine.get(item.item_id)
        if old is not None:
            self._by_key.get((old.user_id, old.key, old.domain), set()).discard(old.item_id)
        mine[item.item_id] = item
        if item.status == "active":
            self._by_key.setdefault((item.user_id, item.key, item.domain), set()).add(item.item_id)

    def load(self, item: MemoryItem, vector: Sequence[float]) -> None:
        """Add one item without the async API (used to fill the index from a durable store)."""
        self._store(item)
        self._vectors.setdefault(item.user_id, {})[item.item_id] = self._check(vector)
        self._index.pop(item.user_id, None)

    async def put(self, items: Sequence[MemoryItem],
                  vectors: Sequence[Sequence[float]]) -> None:
        await self.write((), items, vectors)

    def _check_all(self, vectors: Sequence[Sequence[float]] | np.ndarray) -> Sequence[np.ndarray]:
        """:meth:`_check` of each vector, at once when they are rows of one size."""
        if not len(vectors):
            return []
        try:
            array = np.array(vectors, dtype=np.float32)  # a copy: rows are kept
        except ValueError:  # ragged: say which size is wrong
            return [self._check(v) for v in vectors]
        if array.ndim != 2 or (self.dim is not None and array.shape[1] != self.dim):
            return [self._check(v) for v in vectors]
        if self.dim is None:
            self.dim = array.shape[1]
        norms = np.sqrt(np.einsum("ij,ij->i", array, array))
        norms[norms == 0] = 1.0
        array /= norms[:, None]
        return list(array)

    async def write(self, marks: Sequence[Mark], items: Sequence[MemoryItem],
                    vectors: Sequence[Sequence[float]]) -> None:
        checked = self._check_all(vectors)  # all or nothing
        for mark in marks:
            self._mark(mark)
        for item, vector in zip(items, checked, strict=True):
            self._store(item)
            self._vectors.setdefault(item.user_id, {})[item.item_id] = vector
            self._index.pop(item.user_id, None)

    def vector(self, user_id: str, item_id: str) -> np.ndarray | None:
        """The stored (normalized) vector of an item of ``user_id``."""
        return self._vectors.get(user_id, {}).get(item_id)

    async def get(self, user_id: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        mine = self._items.get(user_id, {})
        return [mine[i] for i in item_ids if i in mine]

    async def active(self, user_id: str, key: str, domain: str | None) -> list[MemoryItem]:
        mine = self._items.get(user_id, {})
        return [mine[i] for i in self._by_key.get((user_id, key, domain), ())]

    async def mark(self, user_id: str, item_ids: Sequence[str], status: Status,
                   superseded_by: str | None, now: datetime) -> None:
        self._mark(Mark(user_id, tuple(item_ids), status, superseded_by, now))

    def _mark(self, mark: Mark) -> None:
        mine = self._items.get(mark.user_id, {})
        for i in mark.item_ids:
            if i in mine:
                self._store(replace(mine[i], status=mark.status,
                                    superseded_by=mark.superseded_by, updated_at=mark.at))
        self._index.pop(mark.user_id, None)

    async def search(self, user_id: str, vector: Sequence[float],
                     limit: int) -> list[MemoryItem]:
        return self.search_now(user_id, vector, limit)

    def search_now(self, user_id: str, vector: Sequence[float], limit: int) -> list[MemoryItem]:
        """:meth:`search` without awaiting (the index is in memory)."""
        if user_id not in self._items:
            return []
        index = self._index.get(user_id)
        if index is None:
            ids = [i for i, item in self._items[user_id].items() if item.status == "active"]
            vectors = self._vectors[user_id]
            matrix = (np.stack([vectors[i] for i in ids]) if ids
                      else np.zeros((0, self.dim or 1), dtype=np.float32))
            index = self._index[user_id] = (ids, matrix)
        ids, matrix = index
        if not ids:
            return []
        # einsum, not BLAS: on a small shared machine BLAS threads made a 10k-item
        # recall wait several times longer than this single-threaded loop takes
        scores = np.einsum("ij,j->i", matrix, self._check(vector))
        limit = min(limit, len(ids))
        top = np.argpartition(-scores, limit - 1)[:limit]
        top = top[np.argsort(-scores[top])]
        mine = self._items[user_id]
        return [replace(mine[ids[t]], score=float(scores[t])) for t in top]

    async def items(self, user_id: str) -> list[MemoryItem]:
        return sorted(self._items.get(user_id, {}).values(), key=lambda i: i.created_at)

    async def delete_user(self, user_id: str) -> int:
        self._vectors.pop(user_id, None)
        self._index.pop(user_id, None)
        for k in [k for k in self._by_key if k[0] == user_id]:
            del self._by_key[k]
        return len(self._items.pop(user_id, {}))

    async def delete(self, user_id: str, item_ids: Sequence[str]) -> int:
        mine = self._items.get(user_id, {})
        removed = 0
        for i in item_ids:
            old = mine.pop(i, None)
            if old is not None:
                removed += 1
                self._by_key.get((old.user_id, old.key, old.domain), set()).discard(i)
                self._vectors.get(user_id, {}).pop(i, None)
        if removed:
            self._index.pop(user_id, None)
        return removed

    async def close(self) -> None:
        return None

    async def count(self, user_id: str) -> int:
        """Items of ``user_id`` held (any status)."""
        return len(self._items.get(user_id, {}))
