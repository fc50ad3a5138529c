"""The embedded semantic tier on Qdrant Edge (PyPI ``qdrant-edge-py``, module ``qdrant_edge``).

Qdrant Edge is Qdrant's storage engine in-process: segments, a write-ahead log, payload
indexes, filtered vector search. One shard directory holds every user's items; each
point's payload carries the item and its ``user_id``, and every read and write filters on
it (keyword payload indexes on ``user_id``, ``status``, ``domain`` and ``key`` make the
filtered reads fast), so no query crosses users.

**One process at a time.** Before ``EdgeShard.load`` touches the shard, the store takes an
exclusive ``fcntl.flock`` on ``<shard>.lock`` (beside the shard directory) and writes its
pid there. A second process gets :class:`~hermes_fsm.errors.MemoryStoreInUse` ("memory
store at PATH is in use by pid N") and never opens the shard's files. Without that lock a
second ``EdgeShard.load`` (qdrant-edge-py 0.9.0) fails at the WAL lock but leaves the
holder's payload-index journals broken: its next ``flush()`` fails ("Tracker journal …
is shorter than expected") until it reopens (see tests/memory/test_edge_semantic.py).

**Durability.** ``update()`` appends to the WAL without syncing; ``flush()`` syncs. A
:meth:`write` (one per group-commit batch: the status changes and new items of many
commits) applies its updates, then flushes once: when it returns, the batch survives a
crash of the process and of the machine. A write that fails part way may have applied
part of it; the retry of the commit converges (status changes come first and every write
is keyed by item id).

**Off the event loop.** Every shard call that can take milliseconds (open, search, write
with its flush, scroll) runs in a worker thread (``asyncio.to_thread``); writes, forget
and close take turns under a lock. ``optimize()`` (blocking, holding the GIL, minutes for
large shards) is never run on the turn path: :meth:`optimize` is maintenance
(``hermes-fsm memory optimize``), :meth:`index_status` says how much is left unindexed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from hermes_fsm.errors import MemoryStoreError, MemoryStoreInUse, VectorSizeMismatch
from hermes_fsm.memory.items import MemoryItem, Status
from hermes_fsm.memory.sealing import Sealer
from hermes_fsm.memory.semantic import Mark

__all__ = ["INDEXED_FIELDS", "EdgeSemanticStore"]

INDEXED_FIELDS = ("user_id", "status", "domain", "key")
_PAGE = 1000


class EdgeSemanticStore:
    """Memory items in a Qdrant Edge shard on disk.

    Args:
        dim: the embedder's vector size (checked against an existing shard).
        path: the shard directory (created on first use); the lock file is
            ``<path>.lock`` beside it.
        search_threads: the shard's search thread pool (1 suits a small shared machine).
        embedder: the name of the embedder that makes the vectors: recorded beside the
            shard (``<path>.meta.json``) when it is created, and checked when it is
            opened (two embedders of one size make vectors that cannot be compared).
        sealer: encrypts the items of its domains at rest (:mod:`.sealing`).

    Opened lazily on first use.
    """

    def __init__(self, dim: int, path: str | Path, *, search_threads: int = 1,
                 embedder: str | None = None, sealer: Sealer | None = None) -> None:
        self.dim = dim
        self.sealer = sealer
        self.embedder = embedder
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.meta_path = self.path.with_name(self.path.name + ".meta.json")
        self.search_threads = search_threads
        self.name = f"Qdrant Edge shard at {self.path}"
        self._shard: Any = None
        self._lock_fd: int | None = None
        self._opening = threading.Lock()  # one open at a time, whatever the event loop
        self._locks: tuple[Any, asyncio.Lock] | None = None

    # --- opening ------------------------------------------------------------------------

    def _take_lock(self) -> int:
        """Take the exclusive OS lock beside the shard (before any shard file is read)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise MemoryStoreInUse(
                f"memory store at {self.path} is in use by pid {holder}: one process at a "
                "time opens an embedded store; stop that process, or point memory.data_dir "
                "elsewhere, or use a Qdrant server (memory.qdrant_url)") from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd

    def open_now(self) -> Any:
        """Open (or create) the shard in this thread; returns it. Idempotent."""
        with self._opening:
            if self._shard is not None:
                return self._shard
            import qdrant_edge as qe  # a native module: imported by the process that uses it

            fd = self._take_lock()
            try:
                config_file = self.path / "edge_config.json"
                if config_file.exists():
                    size = _stored_size(config_file)
                    if size != self.dim:
                        raise VectorSizeMismatch(
                            f"{self.name} holds vectors of size {size}, but the embedder "
                            f"makes {self.dim}: configure the embedder the store was filled "
                            "with, or point memory.data_dir at a new directory and let it "
                            "refill")
                self._check_embedder(exists=config_file.exists())
                if config_file.exists():
                    shard = qe.EdgeShard.load(str(self.path), self._config(qe, None))
                else:  # vectors memory-mapped, read when a search touches them
                    shard = qe.EdgeShard.create(str(self.path),
                                                self._config(qe, qe.Memory.Cold))
                indexed = set(shard.info().payload_schema)
                for field in INDEXED_FIELDS:
                    if field not in indexed:
                        shard.update(qe.UpdateOperation.create_field_index(
                            field, qe.PayloadSchemaType.Keyword))
                if len(indexed) < len(INDEXED_FIELDS):
                    shard.flush()
            except (MemoryStoreError, VectorSizeMismatch):
                os.close(fd)
                raise
            except Exception as exc:
                os.close(fd)
                raise MemoryStoreError(
                    f"{self.name}: cannot open ({type(exc).__name__}: {exc}); check the "
                    "directory's permissions and free space, or move it aside to start an "
                    "empty store") from exc
            self._shard, self._lock_fd = shard, fd
            return shard

    def _config(self, qe: Any, memory: Any) -> Any:
        """The shard's configuration; ``memory`` the placement of a new shard's vectors.

        ``Cold`` (not the binding's default, ``Cached``): the vectors stay in their files,
        mapped, and the pages a search reads come from the page cache. A ``Cached`` shard
        reads every vector into memory when it is opened (``MADV_POPULATE_READ`` on each
        32 MB chunk: at 100k items of 512 floats, 200 MB read and held before the first
        recall). A shard made before keeps its placement (``None``: as persisted).
        """
        # the binding refuses a load config without vectors (its stubs allow it)
        params = (qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)
                  if memory is None else
                  qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine,
                                      memory=memory))
        return qe.EdgeConfig(vectors=params, max_search_threads=self.search_threads)

    def _check_embedder(self, *, exists: bool) -> None:
        """Refuse a shard filled by another embedder; record ours on a new one."""
        if self.embedder is None:
            return
        recorded = None
        if exists and self.meta_path.exists():
            with contextlib.suppress(OSError, ValueError):
                recorded = json.loads(self.meta_path.read_text(encoding="utf-8")).get(
                    "embedder")
        if recorded is not None and recorded != self.embedder:
            raise VectorSizeMismatch(
                f"{self.name} was filled by the embedder {recorded!r}, but the configured "
                f"one is {self.embedder!r}: their vectors cannot be compared; configure "
                f"memory.embedder back, or point memory.data_dir at a new directory")
        if recorded is None:
            self.meta_path.write_text(json.dumps({"embedder": self.embedder, "dim": self.dim}),
                                      encoding="utf-8")

    async def _open(self) -> Any:
        if self._shard is not None:
            return self._shard
        return await asyncio.to_thread(self.open_now)

    def _absent(self) -> bool:
        """Nothing stored yet and nothing open: reads answer empty without creating files."""
        return self._shard is None and not (self.path / "edge_config.json").exists()

    def _lock(self) -> asyncio.Lock:
        """One write (or forget, or close) at a time — a lock per event loop."""
        loop = asyncio.get_running_loop()
        if self._locks is None or self._locks[0] is not loop:
            self._locks = (loop, asyncio.Lock())
        return self._locks[1]

    # --- writes -------------------------------------------------------------------------

    async def put(self, items: Sequence[MemoryItem],
                  vectors: Sequence[Sequence[float]]) -> None:
        await self.write((), items, vectors)

    async def mark(self, user_id: str, item_ids: Sequence[str], status: Status,
                   superseded_by: str | None, now: datetime) -> None:
        if item_ids:
            await self.write([Mark(user_id, tuple(item_ids), status, superseded_by, now)],
                             (), ())

    async def write(self, marks: Sequence[Mark], items: Sequence[MemoryItem],
                    vectors: Sequence[Sequence[float]]) -> None:
        """Status changes (of each mark's user's own items), then the new items, then one
        flush — all in a worker thread."""
        for vector in vectors:  # refused whole, before anything is applied
            if len(vector) != self.dim:
                raise VectorSizeMismatch(
                    f"{self.name}: holds vectors of size {self.dim}, got one of size "
                    f"{len(vector)}; use the embedder the store was filled with, or start "
                    "an empty store")
        if not marks and not items:
            return
        async with self._lock():
            shard = await self._open()
            await asyncio.to_thread(self._write_now, shard, marks, items, vectors)

    def _write_now(self, shard: Any, marks: Sequence[Mark], items: Sequence[MemoryItem],
                   vectors: Sequence[Sequence[float]]) -> None:
        import qdrant_edge as qe

        try:
            changed = bool(items)
            for mark in marks:
                records = shard.retrieve(list(mark.item_ids), True, False)
                owned: list[Any] = [str(r.id) for r in records
                                    if (r.payload or {}).get("user_id") == mark.user_id]
                if owned:
                    shard.update(qe.UpdateOperation.set_payload(owned, _status(mark)))
                    changed = True
            if items:
                base = time.time_ns()  # keeps the order of items written at the same time
                seal = self.sealer.seal if self.sealer is not None else _same
                points = [qe.Point(item.item_id, [float(x) for x in vector],
                                   seal({**_payload(item), "written_ns": base + n}))
                          for n, (item, vector) in enumerate(zip(items, vectors, strict=True))]
                shard.update(qe.UpdateOperation.upsert_points(points))
            if changed:
                shard.flush()  # once per batch: the acknowledged write is on disk
        except Exception as exc:
            raise MemoryStoreError(
                f"{self.name}: write failed ({type(exc).__name__}: {exc}); part of it may "
                "have been applied; doing it again converges, as a commit's retry does") from exc

    async def delete_user(self, user_id: str) -> int:
        if self._absent():
            return 0
        async with self._lock():
            shard = await self._open()
            return await asyncio.to_thread(self._delete_now, shard, user_id)

    async def delete(self, user_id: str, item_ids: Sequence[str]) -> int:
        if not item_ids or self._absent():
            return 0
        async with self._lock():
            shard = await self._open()
            return await asyncio.to_thread(self._delete_ids_now, shard, user_id,
                                           list(item_ids))

    def _delete_ids_now(self, shard: Any, user_id: str, item_ids: list[str]) -> int:
        import qdrant_edge as qe

        try:
            owned: list[Any] = [i.item_id for i in _get_now(shard, self.sealer, user_id,
                                                             item_ids, True)]
            if owned:
                shard.update(qe.UpdateOperation.delete_points(owned))
                shard.flush()
            return len(owned)
        except Exception as exc:
            raise MemoryStoreError(f"{self.name}: delete failed ({type(exc).__name__}: {exc});"
                                   " doing it again converges") from exc

    def _delete_now(self, shard: Any, user_id: str) -> int:
        import qdrant_edge as qe

        try:
            flt = _filter(user_id)
            removed = int(shard.count(qe.CountRequest(exact=True, filter=flt)))
            if removed:
                shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
                shard.flush()
            return removed
        except Exception as exc:
            raise MemoryStoreError(f"{self.name}: delete failed ({type(exc).__name__}: {exc});"
                                   " doing it again converges") from exc

    # --- reads --------------------------------------------------------------------------

    async def _read(self, what: str, call: Any, *args: Any) -> Any:
        shard = await self._open()
        try:
            return await asyncio.to_thread(call, shard, *args)
        except MemoryStoreError:
            raise
        except Exception as exc:
            raise MemoryStoreError(f"{self.name}: {what} failed ({type(exc).__name__}: {exc})"
                                   "; nothing was changed") from exc

    async def get(self, user_id: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids or self._absent():
            return []
        return list(await self._read("read", _get_now, self.sealer, user_id, list(item_ids)))

    async def active(self, user_id: str, key: str, domain: str | None) -> list[MemoryItem]:
        if self._absent():
            return []
        stored_key = (self.sealer.key_tag(domain, key)
                      if self.sealer is not None and domain is not None
                      and self.sealer.sealed(domain) else key)
        items = await self._read("read", _scroll_now, self.sealer, user_id,
                                 (("key", stored_key), ("status", "active")), False, True)
        return [i for i in items if i.domain == domain]

    async def search(self, user_id: str, vector: Sequence[float],
                     limit: int) -> list[MemoryItem]:
        if self._absent() or limit <= 0:
            return []
        if len(vector) != self.dim:
            raise VectorSizeMismatch(f"{self.name}: holds vectors of size {self.dim}, got a "
                                     f"query of size {len(vector)}")
        return list(await self._read("search", _search_now, self.sealer, user_id,
                                     [float(x) for x in vector], limit))

    def search_now(self, user_id: str, vector: Sequence[float], limit: int) -> list[MemoryItem]:
        """:meth:`search` in the calling thread (for benchmarks and tools)."""
        if self._absent() or limit <= 0:
            return []
        return _search_now(self.open_now(), self.sealer, user_id, [float(x) for x in vector],
                           limit)

    async def items(self, user_id: str) -> list[MemoryItem]:
        if self._absent():
            return []
        records = await self._read("read", _scroll_now, self.sealer, user_id, (), True)
        records.sort(key=lambda r: (r[0].created_at, r[1]))
        return [item for item, _ in records]

    async def count(self, user_id: str) -> int:
        """Points of ``user_id`` in the shard (any status)."""
        if self._absent():
            return 0
        import qdrant_edge as qe

        return int(await self._read("count", lambda shard: shard.count(
            qe.CountRequest(exact=True, filter=_filter(user_id)))))

    async def optimize(self) -> bool:
        """Run Qdrant's segment optimizers: merge the segments and build their HNSW
        index, so a search no longer scans a large user's points one by one (measured
        here: one user holding 20k items, recall 36 → 2.6 ms). Blocking, and it holds the
        GIL (qdrant-edge-py 0.9: a thread running it stops the event loop), seconds to
        minutes for a large shard: maintenance only, never on a turn's path — run
        ``hermes-fsm memory optimize`` at a quiet moment (the store's lock keeps it out
        while a server holds the store). Returns whether anything changed."""
        async with self._lock():
            shard = await self._open()
            return bool(await asyncio.to_thread(shard.optimize))

    async def index_status(self) -> dict[str, int]:
        """``points``, ``indexed`` (vectors in an HNSW index) and ``segments`` of the shard:
        ``points - indexed`` is what a search scans by brute force until :meth:`optimize`."""
        if self._absent():
            return {"points": 0, "indexed": 0, "segments": 0}
        info = await self._read("info", lambda shard: shard.info())
        return {"points": int(info.points_count), "indexed": int(info.indexed_vectors_count),
                "segments": int(info.segments_count)}

    # --- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        if self._shard is None:
            return
        async with self._lock():  # after the write in progress, if any
            await asyncio.to_thread(self.close_now)

    def close_now(self) -> None:
        """Flush and close the shard, then release the OS lock (in the calling thread)."""
        with self._opening:
            shard, self._shard = self._shard, None
            fd, self._lock_fd = self._lock_fd, None
            try:
                if shard is not None:
                    with contextlib.suppress(Exception):
                        shard.flush()
                    shard.close()
            finally:
                if fd is not None:
                    os.close(fd)  # releases the flock


def _stored_size(config_file: Path) -> int | None:
    """The dense vector size recorded in a shard's ``edge_config.json``."""
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
        return int(data["vectors"][""]["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _filter(user_id: str, *matches: tuple[str, str]) -> Any:
    import qdrant_edge as qe

    return qe.Filter(must=[qe.FieldCondition(key, match=qe.MatchValue(value))
                           for key, value in (("user_id", user_id), *matches)])


def _same(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


def _item(payload: dict[str, Any] | None, sealer: Sealer | None = None,
          raw: bool = False) -> MemoryItem | None:
    """The item of a payload (``None``: sealed, and its domain's key is absent); ``raw``:
    as stored, sealed fields left out (for deleting what cannot be read)."""
    data: dict[str, Any] | None = dict(payload or {})
    assert data is not None
    data.pop("written_ns", None)
    if "sealed" in data:
        opened = sealer.open(data) if sealer is not None else None
        if opened is None:
            if not raw:
                return None
            data.pop("sealed")
            opened = {"value": None, "text": "", "evidence": "sealed", **data}
        data = opened
    return MemoryItem.from_payload(data)


def _written(payload: dict[str, Any] | None) -> int:
    return int((payload or {}).get("written_ns") or 0)


def _get_now(shard: Any, sealer: Sealer | None, user_id: str, item_ids: list[str],
             raw: bool = False) -> list[MemoryItem]:
    try:
        records = shard.retrieve(item_ids, True, False)
    except ValueError:  # an id that is not a UUID names no item of ours
        records = []
        for one in item_ids:
            with contextlib.suppress(ValueError):
                records.extend(shard.retrieve([one], True, False))
    items = [_item(r.payload, sealer, raw) for r in records
             if (r.payload or {}).get("user_id") == user_id]
    return [i for i in items if i is not None]


def _scroll_now(shard: Any, sealer: Sealer | None, user_id: str,
                matches: tuple[tuple[str, str], ...], written: bool = False,
                raw: bool = False) -> list[Any]:
    """The user's items matching ``matches`` (with their write order when ``written``)."""
    import qdrant_edge as qe

    out: list[Any] = []
    offset = None
    while True:
        records, offset = shard.scroll(qe.ScrollRequest(
            offset=offset, limit=_PAGE, filter=_filter(user_id, *matches), with_payload=True,
            with_vector=False))
        for r in records:
            item = _item(r.payload, sealer, raw)
            if item is not None:
                out.append((item, _written(r.payload)) if written else item)
        if offset is None:
            return out


def _search_now(shard: Any, sealer: Sealer | None, user_id: str, vector: list[float],
                limit: int) -> list[MemoryItem]:
    import qdrant_edge as qe

    points = shard.query(qe.QueryRequest(
        limit=limit, query=qe.Query.Nearest(vector), with_payload=True, with_vector=False,
        filter=_filter(user_id, ("status", "active"))))
    found = [(_item(p.payload, sealer), p.score) for p in points]
    return [replace(item, score=float(score)) for item, score in found if item is not None]


def _status(mark: Mark) -> dict[str, Any]:
    """The payload fields a mark changes."""
    return {"status": mark.status, "superseded_by": mark.superseded_by,
            "updated_at": mark.at.isoformat(), "updated_ts": mark.at.timestamp()}


def _payload(item: MemoryItem) -> dict[str, Any]:
    """The payload of an item's point."""
    return {**item.to_payload(), "updated_ts": item.updated_at.timestamp()}
