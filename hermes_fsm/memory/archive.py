"""Cold storage for stale memory items (seed 001 §5.4): the vector index does not grow
without bound, and an archived item can be restored.

:class:`SQLiteArchive` keeps archived items' payloads (not their vectors: a restore embeds
them again, with the embedder of the day) in a SQLite table keyed by item id.
:meth:`~hermes_fsm.memory.tiered.TieredMemory.archive_stale` writes the archive first and
then deletes the items from the semantic store, so a crash between the two leaves an item
in both, and running it again converges.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory.items import MemoryItem
from hermes_fsm.memory.sqlite_files import open_sqlite

__all__ = ["SQLiteArchive"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hermes_archive (
    item_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, archived_at REAL NOT NULL,
    payload TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS hermes_archive_user ON hermes_archive (user_id, archived_at);
"""


class SQLiteArchive:
    """Archived memory items in a SQLite file (or ``":memory:"``); calls run in a worker
    thread.

    Args:
        path: the database file (its directory is created).
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self.name = f"memory archive at {self.path}"
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_sqlite(self.path, self.name,
                                   setup=lambda db: db.executescript(_SCHEMA))
        return self._db

    async def _run(self, what: str, sql: str, rows: Sequence[tuple[object, ...]] = ()
                   ) -> list[tuple[object, ...]]:
        def call() -> list[tuple[object, ...]]:
            with self._lock:
                db = self._conn()
                try:
                    if rows:
                        db.execute("BEGIN")
                        db.executemany(sql, rows)
                        db.execute("COMMIT")
                        return []
                    return list(db.execute(sql).fetchall())
                except sqlite3.Error as exc:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise MemoryStoreError(f"{self.name}: {what} failed ({exc}); nothing was "
                                           "changed; doing it again converges") from exc

        return await asyncio.to_thread(call)

    async def put(self, items: Sequence[MemoryItem], at: datetime) -> None:
        """Archive ``items`` (an upsert by item id)."""
        if items:
            await self._run("archive", "INSERT INTO hermes_archive VALUES (?, ?, ?, ?) ON "
                            "CONFLICT (item_id) DO UPDATE SET payload = excluded.payload",
                            [(i.item_id, i.user_id, at.timestamp(),
                              json.dumps(i.to_payload(), ensure_ascii=False, default=str))
                             for i in items])

    async def items(self, user_id: str) -> list[MemoryItem]:
        """The archived items of ``user_id``, oldest first."""
        def read() -> list[tuple[object, ...]]:
            with self._lock:
                return list(self._conn().execute(
                    "SELECT payload FROM hermes_archive WHERE user_id = ? ORDER BY "
                    "archived_at, item_id", (user_id,)).fetchall())

        rows = await asyncio.to_thread(read)
        items = [MemoryItem.from_payload(json.loads(str(r[0]))) for r in rows]
        return sorted(items, key=lambda i: i.created_at)

    async def remove(self, user_id: str, item_ids: Sequence[str]) -> None:
        """Drop these archived items of ``user_id`` (after a restore)."""
        if item_ids:
            await self._run("remove", "DELETE FROM hermes_archive WHERE item_id = ? AND "
                            "user_id = ?", [(i, user_id) for i in item_ids])

    async def close(self) -> None:
        """Close the file."""
        if self._db is not None:
            db, self._db = self._db, None
            db.close()
