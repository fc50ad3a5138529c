"""Writes to qdrant-client local mode on disk: one SQLite transaction each, and a batched path.

Local mode keeps a collection in ``<path>/collection/<name>/storage.sqlite`` (table
``points``: a pickled ``PointStruct`` per row) plus an in-memory copy (ids, payloads, a
matrix of normalized vectors). Through the public API, each point is validated, pickled,
stored and committed (``with connection:``) on its own, then applied in memory; a status
change re-validates the point's 512 floats with pydantic. Two ways around that cost:

:func:`one_transaction` defers the per-point commits of public API calls to one commit
at the end of the write: same statements, same rows, one transaction. Used by forget, and
by writes when :class:`DirectWriter` does not apply.

:class:`DirectWriter` writes a batch (status changes and upserts of many commits) itself:
it validates the batch as qdrant-client would (point ids, vector sizes, no NaN, payloads
as JSON), pickles each point exactly as ``CollectionPersistence.persist`` does (the same
rows: a plain ``QdrantClient(path=...)`` reads them back), stores them with one
``executemany`` and one commit — which may run in a worker thread, as ``sqlite3`` releases
the GIL while SQLite writes and syncs — and only then applies the batch to the in-memory
copy, with the same arithmetic as ``LocalCollection._add_point`` / ``_update_point`` /
``set_payload``. A failed store leaves memory as it was (nothing to reload).

Why this is safe:

- the directory is locked to one process (qdrant-client's lock file) and the store is the
  only user of its client; it holds its own lock across a write, so nothing else uses the
  connection or the collection between prepare, store and apply;
- SQLite's atomic commit makes the whole batch all or nothing on disk;
- it relies on internals, so it checks them first: the qdrant-client version must be one
  it was verified against, and the collection must have exactly the fields, the vector
  layout (one unnamed dense vector, cosine) and the persistence it expects. Anything else
  (another version, a server, ``":memory:"``, named/sparse vectors, legacy row keys, a
  point missing or deleted) makes :meth:`DirectWriter.of` / :meth:`DirectWriter.prepare`
  answer ``None`` and the caller writes through the public API, as before: correct, slower.

``tests/memory/test_qdrant_local.py`` fails loudly if the installed qdrant-client stops
matching: it checks the direct path is taken, writes the same batches through it and
through the public API and compares rows, payloads and vectors bit for bit, and reopens
the store with a plain client.
"""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["DirectWriter", "Prepared", "one_transaction", "persistence_of"]

VERIFIED_VERSIONS = frozenset({"1.20.0"})
"""qdrant-client versions :class:`DirectWriter` was checked against (see the tests)."""

COLLECTION_FIELDS = frozenset({
    "vectors_config", "multivectors_config", "vectors", "sparse_vectors",
    "sparse_vectors_idf", "multivectors", "payload", "text_indexes", "deleted",
    "_all_vectors_keys", "deleted_per_vector", "ids", "ids_inv", "persistent", "storage",
    "config"})
"""The instance fields of ``LocalCollection`` in those versions: a new one may hold
per-point state this writer would not keep up to date, so it falls back."""

PERSISTENCE_FIELDS = frozenset({"location", "storage", "_legacy_keys"})

_SCALARS = (str, int, float, bool)


class _DeferredCommits:
    """Stands in for the persistence's connection during a write: statements run on the
    real connection; ``with connection:`` (the per-point commit) does nothing."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> _DeferredCommits:
        return self

    def __exit__(self, *exc: object) -> None:
        return None  # neither commit nor roll back here: the whole write does, once

    def execute(self, *args: Any) -> sqlite3.Cursor:
        return self.connection.execute(*args)

    def cursor(self) -> sqlite3.Cursor:
        return self.connection.cursor()

    def commit(self) -> None:
        return None

    def close(self) -> None:
        self.connection.close()


def persistence_of(client: Any, collection: str) -> Any:
    """The SQLite persistence of a local-mode collection on disk, or ``None``."""
    local = getattr(client, "_client", None)
    collections = getattr(local, "collections", None)
    if not isinstance(collections, dict):
        return None
    persistence = getattr(collections.get(collection), "storage", None)
    if not isinstance(getattr(persistence, "storage", None), sqlite3.Connection):
        return None
    return persistence


@contextmanager
def one_transaction(client: Any, collection: str) -> Iterator[bool]:
    """Within the block, the collection's point writes are one SQLite transaction.

    Yields whether they are (``False``: not local mode on disk, or an unknown layout).
    Commits when the block ends; rolls back and re-raises when it raises.
    """
    persistence = persistence_of(client, collection)
    if persistence is None:
        yield False
        return
    connection: sqlite3.Connection = persistence.storage
    persistence.storage = _DeferredCommits(connection)
    try:
        yield True
        persistence.storage = connection
        connection.commit()
    except BaseException:
        persistence.storage = connection
        connection.rollback()
        raise


@lru_cache(maxsize=1)
def _qdrant() -> tuple[str, Any] | None:
    """The installed qdrant-client's version and the helpers of its local mode, or ``None``."""
    try:
        from importlib.metadata import version

        from qdrant_client._pydantic_compat import construct
        from qdrant_client.common.client_warnings import show_warning_once
        from qdrant_client.http import models
        from qdrant_client.local import local_collection
        from qdrant_client.local.payload_value_setter import merge_payload
        from qdrant_client.local.persistence import CollectionPersistence
        from qdrant_client.local.utils import normalize_point_id

        helpers = _Helpers(
            construct=construct, point=models.PointStruct, cosine=models.Distance.COSINE,
            collection=local_collection.LocalCollection, persistence=CollectionPersistence,
            to_jsonable=local_collection.to_jsonable_python, merge=merge_payload,
            normalize_id=normalize_point_id, default_name=local_collection.DEFAULT_VECTOR_NAME,
            epsilon=local_collection.EPSILON, warn_once=show_warning_once)
        return version("qdrant-client"), helpers
    except Exception:  # moved or renamed: the public API it is
        return None


@dataclass(frozen=True, slots=True)
class _Helpers:
    construct: Any
    point: Any
    cosine: Any
    collection: Any
    persistence: Any
    to_jsonable: Any
    merge: Any
    normalize_id: Any
    default_name: str
    epsilon: float
    warn_once: Any


@dataclass(slots=True)
class Prepared:
    """A batch ready to store (``rows``) and then to apply to the collection's memory."""

    rows: list[tuple[str, bytes]] = field(default_factory=list)
    marked: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # idx, payload
    replaced: list[tuple[int, list[float], dict[str, Any]]] = field(default_factory=list)
    added_ids: list[str] = field(default_factory=list)
    added_payloads: list[dict[str, Any]] = field(default_factory=list)
    added_vectors: Any = None  # float32 [new points, dim], as given (not normalized)
    start: int = 0  # points the collection held when prepared


class DirectWriter:
    """The batched write path into one local-mode collection on disk (see the module doc).

    Not thread-safe: the caller serializes writes (prepare, store, apply) per collection.
    """

    def __init__(self, collection: Any, persistence: Any, helpers: _Helpers) -> None:
        self.collection, self.persistence, self._h = collection, persistence, helpers
        # qdrant-client opened the connection with check_same_thread=CHECK_SAME_THREAD
        self.threadable = persistence.CHECK_SAME_THREAD is False

    @classmethod
    def of(cls, client: Any, name: str, dim: int) -> DirectWriter | None:
        """The writer for collection ``name`` of ``client``, or ``None`` when the installed
        qdrant-client or the collection is not the layout this writer knows."""
        found = _qdrant()
        if found is None or found[0] not in VERIFIED_VERSIONS:
            return None
        h = found[1]
        local = getattr(client, "_client", None)
        collections = getattr(local, "collections", None)
        if not isinstance(collections, dict) or getattr(local, "closed", True):
            return None
        collection: Any = collections.get(name)
        if type(collection) is not h.collection or set(vars(collection)) != COLLECTION_FIELDS:
            return None
        persistence = collection.storage
        if (type(persistence) is not h.persistence
                or set(vars(persistence)) != PERSISTENCE_FIELDS
                or not isinstance(persistence.storage, sqlite3.Connection)
                or not isinstance(persistence._legacy_keys, dict)):
            return None
        d = h.default_name
        vectors = collection.vectors
        if (list(vectors) != [d] or collection.sparse_vectors or collection.multivectors
                or list(collection.deleted_per_vector) != [d]
                or collection._all_vectors_keys != [d]):
            return None
        params = collection.vectors_config.get(d)
        if params is None or params.size != dim or params.distance != h.cosine:
            return None
        matrix = vectors[d]  # float32; float64 once loaded from disk (np.array of lists)
        if (not isinstance(matrix, np.ndarray)
                or matrix.dtype not in (np.dtype(np.float32), np.dtype(np.float64))
                or matrix.ndim != 2 or matrix.shape[1] != dim
                or not len(collection.ids_inv) == len(collection.payload) == len(collection.ids)):
            return None
        return cls(collection, persistence, h)

    def prepare(self, marks: Sequence[tuple[Sequence[str], Mapping[str, Any]]],
                points: Sequence[tuple[str, list[float], Mapping[str, Any]]],
                array: np.ndarray | None = None) -> Prepared | None:
        """Validate and pickle a batch: ``marks`` (point ids, payload fields to set), then
        ``points`` (id, vector, payload) to upsert. Changes nothing. ``array``: the points'
        vectors as float32 rows, if the caller has them already.

        ``None``: something this writer leaves to the public API (a marked point missing or
        without a vector, a legacy row key, an id twice among the points, NaN in a vector).

        Raises:
            ValueError: a point id that is not a UUID (as the public API does).
        """
        h, collection = self._h, self.collection
        d, ids, legacy = h.default_name, collection.ids, self.persistence._legacy_keys
        deleted, deleted_vector = collection.deleted, collection.deleted_per_vector[d]
        matrix, stored = collection.vectors[d], collection.payload
        encode, dumps, construct, point = (self.persistence.encode_key, pickle.dumps,
                                           h.construct, h.point)
        out = Prepared(start=len(ids))
        rows = out.rows
        marked: dict[int, int] = {}  # idx -> position in out.marked
        for mark_ids, fields in marks:
            base = h.to_jsonable(dict(fields))
            # a copy per point (set_payload deep-copies); of scalars, a dict is one
            flat = all(v is None or type(v) in _SCALARS for v in base.values())
            for raw in mark_ids:
                point_id = h.normalize_id(raw)
                idx = ids.get(point_id)
                if (idx is None or deleted[idx] or deleted_vector[idx]
                        or point_id in legacy):
                    return None
                at = marked.get(idx)
                current = stored[idx] if at is None else out.marked[at][1]
                payload = h.merge(dict(current), dict(base) if flat else deepcopy(base))
                rows.append((encode(point_id), dumps(construct(
                    point, id=point_id, vector=matrix[idx].tolist(), payload=payload))))
                if at is None:
                    marked[idx] = len(out.marked)
                    out.marked.append((idx, payload))
                else:
                    out.marked[at] = (idx, payload)
        if not points:
            return out
        dim = matrix.shape[1]
        try:
            vectors = (np.array([p[1] for p in points], dtype=np.float32) if array is None
                       else array)
        except (ValueError, TypeError):
            return None
        if (vectors.dtype != np.float32 or vectors.shape != (len(points), dim)
                or np.isnan(vectors).any()):
            return None
        payloads = h.to_jsonable([dict(p[2]) for p in points])
        seen: set[str] = set()
        added: list[int] = []
        for n, ((raw, vector, _), payload) in enumerate(zip(points, payloads, strict=True)):
            point_id = h.normalize_id(raw, validate=True)
            if point_id in seen or point_id in legacy or not isinstance(vector, list):
                return None
            seen.add(point_id)
            rows.append((encode(point_id), dumps(construct(
                point, id=point_id, vector=vector, payload=payload))))
            idx = ids.get(point_id)
            if idx is None:
                added.append(n)
                out.added_ids.append(point_id)
                out.added_payloads.append(payload)
            else:
                out.replaced.append((idx, vector, payload))
        out.added_vectors = vectors[added] if len(added) < len(points) else vectors
        return out

    def store(self, prepared: Prepared) -> None:
        """Write the batch's rows as one transaction (commits, or rolls back and raises).

        Touches only the SQLite connection: may run in a worker thread when
        :attr:`threadable`, while nothing else uses the collection."""
        connection: sqlite3.Connection = self.persistence.storage
        if not prepared.rows:
            return
        try:
            connection.executemany("INSERT OR REPLACE INTO points VALUES (?, ?)",
                                   prepared.rows)
            connection.commit()
        except BaseException:
            connection.rollback()
            raise

    def apply(self, prepared: Prepared) -> None:
        """Apply a stored batch to the collection's memory, as qdrant-client would have."""
        h, collection = self._h, self.collection
        d = h.default_name
        if len(collection.ids) != prepared.start:
            raise RuntimeError("the collection changed between prepare and apply")
        payloads = collection.payload
        for idx, payload in prepared.marked:  # LocalCollection.set_payload
            payloads[idx] = payload
        matrix = collection.vectors[d]
        for idx, vector, payload in prepared.replaced:  # LocalCollection._update_point
            payloads[idx] = payload
            norm = np.linalg.norm(vector)
            matrix[idx] = np.array(vector) / norm if norm > h.epsilon else vector
            collection.deleted_per_vector[d][idx] = 0
            collection.deleted[idx] = 0
        new = len(prepared.added_ids)
        if not new:
            return
        # LocalCollection._add_point, for the new points at once
        start = prepared.start
        capacity = matrix.shape[0]
        for idx in range(start, start + new):  # the same growth as point by point
            if capacity <= idx:
                capacity = idx * 2 + 1
        if capacity != matrix.shape[0]:  # rows past the points are never read: no np.resize
            grown = np.zeros((capacity, matrix.shape[1]), dtype=matrix.dtype)
            grown[:start] = matrix[:start]
            matrix = grown
        vectors = prepared.added_vectors
        for n in range(new):
            vector = vectors[n]
            norm = np.sqrt(vector.dot(vector))  # np.linalg.norm of a float32 vector, bit for bit
            matrix[start + n] = vector / norm if norm > h.epsilon else vector
        ids, ids_inv = collection.ids, collection.ids_inv
        for n, point_id in enumerate(prepared.added_ids):
            ids[point_id] = start + n
        ids_inv.extend(prepared.added_ids)
        payloads.extend(prepared.added_payloads)
        zeros = [0] * new  # np.append(deleted, 0) per point: the same values and dtype
        collection.deleted = np.append(collection.deleted, zeros)
        collection.deleted_per_vector[d] = np.append(collection.deleted_per_vector[d], zeros)
        collection.vectors[d] = matrix
        threshold = getattr(collection, "LARGE_DATA_THRESHOLD", None)
        if isinstance(threshold, int) and len(ids) > threshold:  # as LocalCollection.upsert
            h.warn_once(
                f"Local mode is not recommended for collections with more than "
                f"{threshold:,} points. Current collection contains {len(ids)} points. "
                "Consider using Qdrant in Docker or Qdrant Cloud for better performance "
                "with large datasets.", category=UserWarning, idx="large-local-collection",
                stacklevel=6)
