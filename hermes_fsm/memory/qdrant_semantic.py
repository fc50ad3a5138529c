"""The semantic tier on Qdrant: a server (``url=``) or qdrant-client local mode (``path=``).

One collection holds every user's items; each point's payload carries the item and its
``user_id``, and every read and write filters on it, so no query crosses users.

Local mode (``path=`` or ``":memory:"``) is brute force in Python and ignores payload
indexes: a filtered query over 10k points takes about half a second. Since ``path=``
locks the store to one process, nothing else can write to it, so this store keeps an
in-memory index (:class:`InProcessSemanticStore`) loaded at open and written through:
Qdrant stays the store of record, recall reads the index. In local mode a write (status
changes and new items of any number of commits) names points by id — no filter scans
every point — and is one ``batch_update_points`` call: every point is validated before
any is written, then qdrant-client stores each point (its own SQLite commit) before it
applies it in memory. A write that fails part way may leave part of it stored: the store
then re-reads what qdrant holds (its index never stays ahead of or behind the store of
record), and the commit's retry converges (status changes come first and every write is
keyed). Writes (and forget, and close) take turns.

Only qdrant-client's public API is used.

Requires qdrant-client (a core dependency: it is the embedded default).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from qdrant_client import AsyncQdrantClient, models

from hermes_fsm._internal.redact import redact_url, register_secret, register_url
from hermes_fsm.errors import MemoryStoreError, VectorSizeMismatch
from hermes_fsm.memory.items import MemoryItem, Status
from hermes_fsm.memory.semantic import InProcessSemanticStore, Mark

__all__ = ["QdrantSemanticStore"]


class QdrantSemanticStore:
    """Memory items in a Qdrant collection.

    Args:
        dim: the embedder's vector size (checked against an existing collection).
        url: a Qdrant server (``http://host:6333``); or
        path: a directory for local mode on disk (``":memory:"`` for no disk).
        collection: the collection name.
        api_key: for a server that needs one.
        timeout_s: request timeout for a server.

    Opened lazily on first use.
    """

    def __init__(self, dim: int, *, url: str | None = None, path: str | None = None,
                 collection: str = "hermes_memory", api_key: str | None = None,
                 timeout_s: float = 10.0) -> None:
        if (url is None) == (path is None):
            raise MemoryStoreError("QdrantSemanticStore needs exactly one of url= (a server) "
                                   "or path= (local mode; ':memory:' for no disk)")
        self.dim = dim
        self.url, self.path, self.collection = url, path, collection
        self.local = url is None
        register_url(url)
        register_secret(api_key)  # neither shown in a message or an event
        self.name = (f"Qdrant collection {collection!r} at "
                     f"{redact_url(url) if url else 'local mode ' + str(path)}")
        self._api_key, self._timeout = api_key, timeout_s
        self._client: Any = None
        self._index: InProcessSemanticStore | None = None
        self._locks: tuple[Any, asyncio.Lock] | None = None  # (its event loop, the lock)
        self._tasks: set[asyncio.Task[None]] = set()

    async def _open(self) -> Any:
        if self._client is not None:
            return self._client
        try:
            if self.local:
                client = (AsyncQdrantClient(location=":memory:") if self.path == ":memory:"
                          else AsyncQdrantClient(path=self.path))
            else:
                client = AsyncQdrantClient(url=self.url, api_key=self._api_key,
                                           timeout=int(self._timeout))
            if await client.collection_exists(self.collection):
                info = await client.get_collection(self.collection)
                vectors = info.config.params.vectors
                size = vectors.size if isinstance(vectors, models.VectorParams) else None
                if size != self.dim:
                    await client.close()
                    raise VectorSizeMismatch(
                        f"{self.name} holds vectors of size {size}, but the embedder makes "
                        f"{self.dim}: configure the embedder the collection was filled with, "
                        "or a new collection (memory.qdrant_collection) and let it refill")
            else:
                await client.create_collection(
                    self.collection, vectors_config=models.VectorParams(
                        size=self.dim, distance=models.Distance.COSINE))
                if not self.local:
                    for field in ("user_id", "status", "key"):
                        await client.create_payload_index(
                            self.collection, field, models.PayloadSchemaType.KEYWORD)
        except (VectorSizeMismatch, MemoryStoreError):
            raise
        except RuntimeError as exc:  # local mode: "already accessed by another instance"
            raise MemoryStoreError(
                f"{self.name}: {exc}; local mode lets one process use a directory at a time: "
                "stop the other hermes-fsm process, or point memory.data_dir elsewhere, or "
                "use a Qdrant server (HERMES_QDRANT_URL)") from exc
        except Exception as exc:
            raise MemoryStoreError(f"{self.name}: cannot open ({type(exc).__name__}: {exc}); "
                                   "check the URL/path and that the server is up") from exc
        self._client = client
        if self.local:
            self._index = await self._load_index(client)
        return client

    async def _load_index(self, client: Any) -> InProcessSemanticStore:
        """The in-memory index of every point the collection holds (local mode)."""
        index = InProcessSemanticStore(self.dim)
        offset = None
        while True:
            points, offset = await client.scroll(self.collection, limit=1000, offset=offset,
                                                 with_payload=True, with_vectors=True)
            for point in points:
                if point.payload is None or not isinstance(point.vector, list):
                    continue  # not a point of ours (no payload, or a named vector)
                index.load(MemoryItem.from_payload(point.payload), point.vector)
            if offset is None:
                return index

    def _absent(self) -> bool:
        """Local mode on a directory that does not exist yet: nothing to read, nothing to open.

        Reads then answer empty without importing qdrant-client (seconds on a cold start).
        """
        return (self._client is None and self.local and self.path != ":memory:"
                and not (Path(str(self.path)) / "collection").exists())

    @staticmethod
    def _user_filter(user_id: str, *more: Any) -> Any:
        return models.Filter(must=[
            models.FieldCondition(key="user_id", match=models.MatchValue(value=user_id)),
            *more])

    async def put(self, items: Sequence[MemoryItem],
                  vectors: Sequence[Sequence[float]]) -> None:
        await self.write((), items, vectors)

    async def write(self, marks: Sequence[Mark], items: Sequence[MemoryItem],
                    vectors: Sequence[Sequence[float]]) -> None:
        client = await self._open()
        for vector in vectors:
            if len(vector) != self.dim:
                raise VectorSizeMismatch(f"{self.name}: holds vectors of size {self.dim}, "
                                         f"got one of size {len(vector)}")
        if self._index is not None:  # local mode: one writer at a time, marks by id
            if len(items) != len(vectors):
                raise ValueError("write: one vector per item")
            await self._write_local_batch(marks, items, vectors)
            return
        points = [_point(item, list(vector)) for item, vector in zip(items, vectors,
                                                                      strict=True)]
        for mark in marks:
            await self._call(client.set_payload(
                self.collection, payload=_status(mark), wait=True, points=self._user_filter(
                    mark.user_id, models.HasIdCondition(has_id=list(mark.item_ids)))),
                "status update")
        if points:
            await self._call(client.upsert(self.collection, points=points, wait=True), "write")

    async def _write_local_batch(self, marks: Sequence[Mark], items: Sequence[MemoryItem],
                                 vectors: Sequence[Sequence[float]]) -> None:
        """A write of the local store: status changes (of the user's own items, by id — no
        filter scans every point) and new items, one ``batch_update_points`` call, then the
        index."""
        async with self._lock():
            client, index = await self._open(), self._index
            assert index is not None
            owned = [(mark, [i.item_id for i in await index.get(mark.user_id, mark.item_ids)])
                     for mark in marks]  # the user's items only
            operations: list[Any] = [
                models.SetPayloadOperation(set_payload=models.SetPayload(
                    payload=_status(mark), points=list(ids)))
                for mark, ids in owned if ids]
            if items:
                operations.append(models.UpsertOperation(upsert=models.PointsList(points=[
                    _point(item, list(vector))
                    for item, vector in zip(items, vectors, strict=True)])))
            if not operations:
                return
            await self._write_local("write", lambda: client.batch_update_points(
                self.collection, operations, wait=True))
            await index.write(marks, items, vectors)

    def _lock(self) -> asyncio.Lock:
        """Local mode: one write (or forget, or close) at a time — a lock per event loop."""
        loop = asyncio.get_running_loop()
        if self._locks is None or self._locks[0] is not loop:
            self._locks = (loop, asyncio.Lock())
        return self._locks[1]

    async def _write_local(self, what: str, call: Callable[[], Awaitable[Any]]) -> None:
        """``call()``, a write of the local store (the caller holds the lock).

        When it fails (or is cancelled), part of it may be stored: the index is re-read
        from what qdrant holds, so it never disagrees with the store of record."""
        try:
            await call()
        except BaseException as exc:
            await self._reread()
            if not isinstance(exc, Exception):
                raise
            raise MemoryStoreError(
                f"{self.name}: {what} failed ({type(exc).__name__}: {exc}); part of it may "
                "have been stored (the store re-reads what it holds); doing it again "
                "converges, as a commit's retry does") from exc

    async def _reread(self) -> None:
        """After a failed local write: on disk, drop the client (the next use reopens the
        directory and reloads the index from the file); in memory, reload the index from
        the client (closing it would lose the collection)."""
        if self.path != ":memory:":
            await self._close_now()
        elif self._client is not None:
            self._index = await self._load_index(self._client)

    async def _call(self, coro: Any, what: str) -> Any:
        try:
            return await coro
        except MemoryStoreError:
            raise
        except Exception as exc:
            raise MemoryStoreError(f"{self.name}: {what} failed ({type(exc).__name__}: {exc}); "
                                   "nothing else was changed; the commit will be retried") from exc

    async def get(self, user_id: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids or self._absent():
            return []
        await self._open()
        if self._index is not None:
            return await self._index.get(user_id, item_ids)
        points, _ = await self._call(self._client.scroll(
            self.collection, scroll_filter=self._user_filter(
                user_id, models.HasIdCondition(has_id=list(item_ids))),
            limit=max(1, len(item_ids)), with_payload=True), "read")
        return [MemoryItem.from_payload(p.payload) for p in points]

    async def active(self, user_id: str, key: str, domain: str | None) -> list[MemoryItem]:
        if self._absent():
            return []
        await self._open()
        if self._index is not None:
            return await self._index.active(user_id, key, domain)
        points, _ = await self._call(self._client.scroll(
            self.collection, scroll_filter=self._user_filter(
                user_id,
                models.FieldCondition(key="key", match=models.MatchValue(value=key)),
                models.FieldCondition(key="status", match=models.MatchValue(value="active"))),
            limit=1000, with_payload=True), "read")
        items = [MemoryItem.from_payload(p.payload) for p in points]
        return [i for i in items if i.domain == domain]

    async def mark(self, user_id: str, item_ids: Sequence[str], status: Status,
                   superseded_by: str | None, now: datetime) -> None:
        if item_ids:
            await self.write([Mark(user_id, tuple(item_ids), status, superseded_by, now)],
                             (), ())

    async def search(self, user_id: str, vector: Sequence[float],
                     limit: int) -> list[MemoryItem]:
        if self._absent():
            return []
        client = await self._open()
        if self._index is not None:
            return self._index.search_now(user_id, vector, limit)
        result = await self._call(client.query_points(
            self.collection, query=list(vector), limit=limit, with_payload=True,
            query_filter=self._user_filter(
                user_id,
                models.FieldCondition(key="status", match=models.MatchValue(value="active")))),
            "search")
        return [replace(MemoryItem.from_payload(p.payload), score=p.score)
                for p in result.points]

    async def items(self, user_id: str) -> list[MemoryItem]:
        if self._absent():
            return []
        client = await self._open()
        if self._index is not None:
            return await self._index.items(user_id)
        out: list[MemoryItem] = []
        offset = None
        while True:
            points, offset = await self._call(client.scroll(
                self.collection, scroll_filter=self._user_filter(user_id), limit=1000,
                offset=offset, with_payload=True), "read")
            out.extend(MemoryItem.from_payload(p.payload) for p in points)
            if offset is None:
                return sorted(out, key=lambda i: i.created_at)

    async def count(self, user_id: str) -> int:
        """Points of ``user_id`` in the collection itself (not the index)."""
        if self._absent():
            return 0
        client = await self._open()
        result = await client.count(self.collection, count_filter=self._user_filter(user_id),
                                    exact=True)
        return int(result.count)

    async def delete_user(self, user_id: str) -> int:
        if self._absent():
            return 0
        client = await self._open()
        if self._index is not None:  # local mode: by id
            async with self._lock():
                client, index = await self._open(), self._index
                assert index is not None
                ids = [i.item_id for i in await index.items(user_id)]
                if ids:
                    await self._write_local("delete", lambda: client.delete(
                        self.collection, points_selector=models.PointIdsList(points=ids),
                        wait=True))
                await index.delete_user(user_id)
                return len(ids)
        removed = await self.count(user_id)
        await self._call(client.delete(
            self.collection, points_selector=models.FilterSelector(
                filter=self._user_filter(user_id)), wait=True), "delete")
        return removed

    async def delete(self, user_id: str, item_ids: Sequence[str]) -> int:
        """Remove these items of ``user_id`` (by id, after checking they are hers)."""
        if not item_ids or self._absent():
            return 0
        async with self._lock():
            client = await self._open()
            owned = [i.item_id for i in await self.get(user_id, item_ids)]
            if not owned:
                return 0
            selector = models.PointIdsList(points=owned)
            if self._index is not None:  # local mode: the index follows
                await self._write_local("delete", lambda: client.delete(
                    self.collection, points_selector=selector, wait=True))
                index = self._index
                if index is not None:
                    await index.delete(user_id, owned)
            else:
                await self._call(client.delete(self.collection, points_selector=selector,
                                               wait=True), "delete")
            return len(owned)

    async def close(self) -> None:
        if not self.local:
            await self._close_now()
            return
        async with self._lock():  # after the write in progress, if any
            await self._close_now()

    async def _close_now(self) -> None:
        if self._client is not None:
            client, self._client, self._index = self._client, None, None
            await client.close()


def _status(mark: Mark) -> dict[str, Any]:
    """The payload fields a mark changes."""
    return {"status": mark.status, "superseded_by": mark.superseded_by,
            "updated_at": mark.at.isoformat(), "updated_ts": mark.at.timestamp()}


def _payload(item: MemoryItem) -> dict[str, Any]:
    """The payload of an item's point."""
    return {**item.to_payload(), "updated_ts": item.updated_at.timestamp()}


def _point(item: MemoryItem, vector: list[float]) -> Any:
    """A point of an item (built unvalidated: Qdrant validates the points it is sent, and
    pydantic checking 512 floats a point cost as much as the write itself)."""
    return models.PointStruct.model_construct(id=item.item_id, vector=vector,
                                              payload=_payload(item))
