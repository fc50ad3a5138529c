"""Session stores: where sessions, messages, the event log and checkpoints live.

- :class:`InMemoryStore`: this process only (tests);
- :class:`SQLiteStore`: one file, the embedded default;
- :class:`PostgresStore`: PostgreSQL, for real use and scale-out (``postgres`` extra).

All implement :class:`SessionStore`; one conformance suite runs against all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm.store.memory import InMemoryStore
from hermes_fsm.store.protocol import (
    Append,
    Checkpoint,
    Effect,
    Message,
    SessionRecord,
    SessionStore,
)
from hermes_fsm.store.sqlite import SQLiteStore

if TYPE_CHECKING:  # imported on first use (psycopg is an extra); typed for checkers
    from hermes_fsm.store.postgres import PostgresStore

__all__ = ["Append", "Checkpoint", "Effect", "InMemoryStore", "Message", "PostgresStore",
           "SQLiteStore", "SessionRecord", "SessionStore"]


def __getattr__(name: str) -> object:
    if name == "PostgresStore":  # psycopg is an extra: imported only when asked for
        from hermes_fsm.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
