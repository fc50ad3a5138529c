"""One SQLite transaction per write in qdrant-client local mode on disk.

Local mode keeps a collection in ``<path>/collection/<name>/storage.sqlite`` and commits
once per point: ``CollectionPersistence.persist`` (and ``delete``) run inside
``with connection:``. Each commit is a journal write and several fsyncs, so an upsert of
ten points cost ten of them (about 40 memory updates/s on this kind of machine).
:func:`one_transaction` defers those per-point commits to one commit at the end of the
write: same statements, same rows, one transaction.

Why this is safe:

- the directory is locked to one process (qdrant-client's lock file) and this store is the
  only user of its client; the local client's async methods run straight through (they
  never suspend), so no other coroutine uses the connection while a write is open;
- every statement still runs; only the commits are merged, so after the write the file
  holds all of its points or (on failure, rolled back) none of them — SQLite's atomic
  commit, at the granularity of the whole write instead of each point;
- qdrant-client applies a point in memory right after storing it, so a write that fails
  half-way leaves its in-memory copy ahead of the file: the caller must then drop the
  client (:meth:`QdrantSemanticStore.write` closes it) so the next use reloads the file.

The layout is checked on every write (``collections[name].storage.storage`` must be a
``sqlite3.Connection``); with any other layout (a server, ``":memory:"``, another
qdrant-client version) writes go point by point as before: correct, only slower.
``tests/memory/test_qdrant_local.py`` fails if the installed qdrant-client stops matching.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["one_transaction", "persistence_of"]


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
