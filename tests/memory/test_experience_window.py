"""similar_outcomes keeps each user's latest tool calls in the process (``_Window``) and
reads only the rows added since: these hold the kept candidates to what a fresh read of
the log gives, through every way the log changes — this process's writes, another
connection's inserts, deletes, updates, ``INSERT OR REPLACE`` and ``VACUUM``, ``forget``,
ties on ``at``, rows older than the window, domains — and the cache to its bound."""

from __future__ import annotations

import random
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_fsm.memory import HashingEmbedder, sqlite_experience
from hermes_fsm.memory.experience import Experience
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog

T0 = datetime(2026, 1, 1, tzinfo=UTC)
USERS = ("u1", "u2", "u3")
SCOPES = ((None, False), ("a", False), ("a", True), ("b", False))
REQUESTS = ("stock of A1001", "where is B2002", "reorder C3003", "price of A1001")


def entry(n: int, user: str, minutes: int, domain: str | None, kind: str = "tool_call",
          request: str | None = None) -> Experience:
    return Experience(entry_id=f"e{n:05d}", kind=kind, user_id=user, session_id="s",
                      turn_id=f"t{n}", at=T0 + timedelta(minutes=minutes), ok=True,
                      tool="inventory_lookup", request=request or REQUESTS[n % len(REQUESTS)],
                      arguments={}, duration_ms=1.0, domain=domain)


def fresh(db: sqlite3.Connection, user: str, domain: str | None, shared: bool
          ) -> list[tuple[str, str]]:
    """The candidates as a read of the whole log gives them (no cache)."""
    where, params = sqlite_experience._in_domain(domain, shared)
    return [(e, r) for e, r in db.execute(
        "SELECT entry_id, request FROM hermes_experience WHERE user_id = ? AND kind = "
        f"'tool_call'{where} ORDER BY at DESC, entry_id DESC "
        f"LIMIT {sqlite_experience.WINDOW_ROWS}", (user, *params))]


def other_insert(db: sqlite3.Connection, n: int, user: str, minutes: int,
                 domain: str | None, verb: str = "INSERT") -> None:
    db.execute(f"{verb} INTO hermes_experience (entry_id, kind, user_id, session_id, turn_id, "
               "at, ok, tool, request, arguments, duration_ms, domain) VALUES "
               "(?, 'tool_call', ?, 's', 't', ?, 1, 'inventory_lookup', ?, '{}', 1.0, ?)",
               (f"e{n:05d}", user, (T0 + timedelta(minutes=minutes)).timestamp(),
                REQUESTS[n % len(REQUESTS)] + " (other)", domain))


@pytest.mark.parametrize("seed", range(6))
async def test_kept_candidates_equal_a_fresh_read_through_every_change(tmp_path, monkeypatch,
                                                                      seed):
    monkeypatch.setattr(sqlite_experience, "WINDOW_ROWS", 6)  # windows fill, rows fall out
    rng = random.Random(seed)
    path = tmp_path / "experience.sqlite"
    log = SQLiteExperienceLog(path, HashingEmbedder(64))
    other = sqlite3.connect(path, isolation_level=None)  # another process's connection
    n = 0
    try:
        await log.record([entry(0, "u1", 0, None)])  # the schema, before `other` writes
        for _ in range(60):
            op = rng.choice(("record", "record", "record", "insert", "insert", "delete",
                             "update", "replace", "forget", "vacuum", "other_kind"))
            user = rng.choice(USERS)
            domain = rng.choice((None, "a", "b"))
            minutes = rng.randrange(0, 12)  # few instants: ties on `at`, older rows too
            if op == "record":
                batch = []
                for _ in range(rng.randrange(1, 4)):
                    n += 1
                    batch.append(entry(n, user, minutes, domain))
                await log.record(batch)
            elif op == "other_kind":
                n += 1
                await log.record([entry(n, user, minutes, domain, kind="memory_commit")])
            elif op == "insert":
                n += 1
                other_insert(other, n, user, minutes, domain)
            elif op == "replace":  # a row of the same id again: deleted, inserted anew
                rows = other.execute("SELECT entry_id FROM hermes_experience").fetchall()
                if rows:
                    gone = int(rng.choice(rows)[0][1:])
                    other_insert(other, gone, user, minutes, domain, "INSERT OR REPLACE")
            elif op == "delete":
                other.execute("DELETE FROM hermes_experience WHERE entry_id IN (SELECT "
                              "entry_id FROM hermes_experience ORDER BY random() LIMIT 1)")
            elif op == "update":
                other.execute("UPDATE hermes_experience SET request = 'changed', at = at + 1 "
                              "WHERE entry_id IN (SELECT entry_id FROM hermes_experience "
                              "ORDER BY random() LIMIT 1)")
            elif op == "forget":
                await log.forget(user)
            else:
                other.execute("VACUUM")
            reader = log._conn()
            for who in USERS:
                for scope_domain, shared in SCOPES:
                    kept = log._candidates(reader, who, scope_domain, shared)
                    assert kept == fresh(other, who, scope_domain, shared), (op, who,
                                                                              scope_domain)
    finally:
        other.close()
        await log.close()


async def test_a_kept_window_reads_only_the_rows_added_since(tmp_path):
    log = SQLiteExperienceLog(tmp_path / "experience.sqlite", HashingEmbedder(64))
    try:
        await log.record([entry(i, "u1", i, None) for i in range(1, 20)])
        seen: list[str] = []
        db = log._conn()
        db.set_trace_callback(seen.append)
        first = await log.similar_outcomes("u1", "stock of A1001", 3)
        assert any("LIMIT" in q for q in seen)  # the whole window, once
        seen.clear()
        assert await log.similar_outcomes("u1", "stock of A1001", 3) == first
        assert not any("LIMIT 500" in q or "rowid >" in q for q in seen), seen
        await log.record([entry(30, "u1", 40, None, request="stock of A1001 today")])
        seen.clear()
        found = await log.similar_outcomes("u1", "stock of A1001 today", 3)
        db.set_trace_callback(None)
        assert found[0].entry_id == "e00030"
        reads = [q for q in seen if q.startswith("SELECT at, entry_id")]
        assert len(reads) == 1 and "rowid >" in reads[0], seen
        plan = " ".join(str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + reads[0]))
        assert "INTEGER PRIMARY KEY (rowid>?)" in plan, plan  # not a walk of the user's rows
    finally:
        await log.close()


async def test_the_kept_rows_stay_within_their_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_experience, "CACHED_ROWS", 25)
    log = SQLiteExperienceLog(tmp_path / "experience.sqlite", HashingEmbedder(64))
    try:
        users = [f"u{i}" for i in range(8)]
        await log.record([entry(i, users[i % 8], i, None) for i in range(80)])
        for user in users:
            await log.similar_outcomes(user, "stock of A1001", 3)
        windows: dict[Any, Any] = log._windows
        assert log._cached_rows == sum(len(w.rows) for w in windows.values()) <= 25
        assert list(windows)[-1] == ("u7", None, False)  # the most recently ranked stays
        assert ("u0", None, False) not in windows  # the least recently ranked went first
    finally:
        await log.close()


def test_a_row_read_twice_is_kept_once_in_its_place():
    """A row committed while a window was being read comes back as added at the next call
    (its rowid is past the marks read first): it is kept once, in order."""
    window = sqlite_experience._Window([(3.0, "c", "r3"), (2.0, "b", "r2"), (1.0, "a", "r1")],
                                       upto=3, marks=(0, 1))
    grown = window.extended([(3.0, "c", "r3"), (2.5, "x", "rx")], upto=5)
    assert grown.pairs == [("c", "r3"), ("x", "rx"), ("b", "r2"), ("a", "r1")]
    assert (grown.upto, grown.marks) == (5, (0, 1))
    assert window.extended([], upto=6) is window and window.upto == 6


async def test_a_log_that_cannot_be_read_says_so_as_a_memory_error(tmp_path):
    """A file whose marks cannot be read (here: the rewrite count's table dropped by
    another hand) is a MemoryStoreError naming the file, not a bare sqlite3 error: the
    turn goes on without memory (memory_handlers catches it)."""
    from hermes_fsm.errors import MemoryStoreError

    path = tmp_path / "experience.sqlite"
    log = SQLiteExperienceLog(path, HashingEmbedder(64))
    try:
        await log.record([entry(1, "u1", 1, None)])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("DROP TRIGGER hermes_experience_deleted")
        other.execute("DROP TRIGGER hermes_experience_updated")
        other.execute("DROP TRIGGER hermes_experience_replaced")
        other.execute("DROP TABLE hermes_experience_rewrites")
        other.close()
        with pytest.raises(MemoryStoreError, match=r"read failed .*memory\.data_dir"):
            await log.similar_outcomes("u1", "stock of A1001", 3)
    finally:
        await log.close()
