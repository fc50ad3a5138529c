"""Session stores: where sessions, messages, the event log and checkpoints live.

- :class:`InMemoryStore`: this process only (tests);
- :class:`SQLiteStore`: one file, the embedded default;
- :class:`PostgresStore`: PostgreSQL, for real use and scale-out (``postgres`` extra).

All implement :class:`SessionStore`; one conformance suite runs against all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy; psycopg is an extra)
    from hermes_fsm.store.memory import InMemoryStore
    from hermes_fsm.store.postgres import PostgresStore
    from hermes_fsm.store.protocol import (
        Append,
        Checkpoint,
        Effect,
        Message,
        SessionRecord,
        SessionStore,
    )
    from hermes_fsm.store.sqlite import SQLiteStore

__all__ = ["Append", "Checkpoint", "Effect", "InMemoryStore", "Message", "PostgresStore",
           "SQLiteStore", "SessionRecord", "SessionStore"]

__getattr__, __dir__ = lazy_face(__name__, {
    **dict.fromkeys(["Append", "Checkpoint", "Effect", "Message", "SessionRecord",
                     "SessionStore"], "hermes_fsm.store.protocol"),
    "InMemoryStore": "hermes_fsm.store.memory",
    "PostgresStore": "hermes_fsm.store.postgres",
    "SQLiteStore": "hermes_fsm.store.sqlite",
})
