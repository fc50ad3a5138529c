"""Opening the memory tiers' SQLite files: one way, one error (the experience log and the
archive both use it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from hermes_fsm.errors import MemoryStoreError

__all__ = ["open_sqlite"]


def open_sqlite(
    path: str,
    name: str,
    *,
    pragmas: Sequence[str] = ("journal_mode=WAL",),
    setup: Callable[[sqlite3.Connection], object] | None = None,
) -> sqlite3.Connection:
    """A connection to ``path`` (its directory created; ``":memory:"`` as is) in autocommit
    mode, usable from any thread (callers serialise), with ``pragmas`` applied and then
    ``setup`` (the schema) run on it.

    Raises:
        MemoryStoreError: it cannot be opened or set up ("``name``: cannot open (…)").

    >>> db = open_sqlite(":memory:", "test", setup=lambda db: db.execute("CREATE TABLE t (x)"))
    >>> db.execute("SELECT count(*) FROM t").fetchone()
    (0,)
    """
    db = None
    try:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, timeout=5.0, check_same_thread=False)
        for pragma in pragmas:
            db.execute(f"PRAGMA {pragma}")
        if setup is not None:
            setup(db)
    except (sqlite3.Error, OSError) as exc:
        if db is not None:
            db.close()
        raise MemoryStoreError(
            f"{name}: cannot open ({exc}); check that the directory is writable (memory.data_dir)"
        ) from exc
    return db
