"""One conformance suite per tier, run against every implementation (see conftest)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from hermes_fsm.memory import HashingEmbedder, MemoryItem
from hermes_fsm.memory.experience import NOT_CALLED, Experience, ToolHealth, seen_in_domain
from hermes_fsm.memory.semantic import Mark
from hermes_fsm.memory.working import InProcessWorkingMemory, TurnWrite

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EMBED = HashingEmbedder(256)


def item(user: str, key: str, value: str, n: int, status: str = "active") -> MemoryItem:
    return MemoryItem(user, key, value, "fact", 0.9, status, T0 + timedelta(minutes=n),  # type: ignore[arg-type]
                      T0 + timedelta(minutes=n), "user_message", f"turn-{n}",
                      item_id=f"00000000-0000-0000-0000-{n:012d}")


def vec(text: str) -> list[float]:
    return EMBED.embed([text])[0]


# --- working memory ---------------------------------------------------------------------

async def test_working_memory_keeps_the_recent_window_and_slots(working):
    for n in range(5):
        await working.record_turn("u1", "s1", f"t{n}", [{"role": "user", "content": f"m{n}"}],
                                  {"step": n}, window=3)
    assert [m["content"] for m in await working.recent("u1", "s1")] == ["m2", "m3", "m4"]
    assert await working.slots("u1", "s1") == {"step": 4}


async def test_working_memory_records_a_turn_once(working):
    for _ in range(3):
        await working.record_turn("u1", "s1", "t1", [{"role": "user", "content": "hi"}], {})
    assert len(await working.recent("u1", "s1")) == 1


async def test_working_memory_never_shows_another_users_session(working):
    await working.record_turn("u1", "s1", "t1", [{"role": "user", "content": "secret"}],
                              {"k": 1})
    for user, session in [("u2", "s1"), ("u1*", "s1"), ("*", "*"), ("u1:s1", "")]:
        assert await working.recent(user, session) == []
        assert await working.slots(user, session) == {}


async def test_working_memory_forget_drops_every_session_of_the_user_only(working):
    await working.record_turn("u1", "s1", "t1", [{"role": "user", "content": "a"}], {})
    await working.record_turn("u1", "s2", "t2", [{"role": "user", "content": "b"}], {})
    await working.record_turn("u2", "s1", "t3", [{"role": "user", "content": "c"}], {})
    assert await working.forget("u1") == 2
    assert await working.recent("u1", "s1") == [] and await working.recent("u1", "s2") == []
    assert len(await working.recent("u2", "s1")) == 1


async def test_working_memory_expires_after_its_ttl(working):
    working.ttl_s = 0.3
    await working.record_turn("u1", "s1", "t1", [{"role": "user", "content": "a"}], {"x": 1})
    assert await working.recent("u1", "s1") != []
    await asyncio.sleep(0.6)
    assert await working.recent("u1", "s1") == []
    assert await working.slots("u1", "s1") == {}


async def test_working_memory_records_several_turns_at_once_each_once(working):
    turns = [TurnWrite("u1", "s1", "t1", [{"role": "user", "content": "a"}], {"step": 1}),
             TurnWrite("u2", "s2", "t2", [{"role": "user", "content": "b"}], {}),
             TurnWrite("u1", "s3", "t3", [], {"step": 3})]
    assert await working.record_turns(turns) == [True, True, True]
    assert await working.record_turns(turns[:2]) == [False, False]
    assert [m["content"] for m in await working.recent("u1", "s1")] == ["a"]
    assert await working.slots("u1", "s1") == {"step": 1}
    assert await working.slots("u1", "s3") == {"step": 3}
    assert len(await working.recent("u2", "s2")) == 1
    assert await working.record_turns([]) == []


def test_in_process_working_memory_default_ttl_is_fifteen_minutes():
    assert InProcessWorkingMemory().ttl_s == 900.0


# --- semantic store ---------------------------------------------------------------------

async def test_semantic_put_is_an_upsert_by_item_id(semantic):
    first = item("u1", "profile.city", "Berlin", 1)
    await semantic.put([first, first], [vec("Berlin"), vec("Berlin")])
    await semantic.put([first], [vec("Berlin")])
    assert [i.item_id for i in await semantic.items("u1")] == [first.item_id]


async def test_semantic_search_returns_active_items_of_the_user_best_first(semantic):
    items = [item("u1", "profile.city", "Berlin", 1), item("u1", "preference.coffee", "latte", 2),
             item("u1", "profile.city", "Paris", 3, status="superseded")]
    await semantic.put(items, [vec("city Berlin"), vec("coffee latte"), vec("city Paris")])
    found = await semantic.search("u1", vec("which city Berlin"), 5)
    assert next(i.value for i in found) == "Berlin"
    assert "Paris" not in [i.value for i in found]
    assert all(i.score is not None for i in found)


@pytest.mark.parametrize("intruder", ["u2", "", "*", "u1 ", "U1", '{"$ne": null}', "u1' OR 1=1"])
async def test_semantic_reads_never_cross_users(semantic, intruder):
    mine = item("u1", "profile.city", "Berlin", 1)
    await semantic.put([mine], [vec("Berlin")])
    assert await semantic.search(intruder, vec("Berlin"), 5) == []
    assert await semantic.get(intruder, [mine.item_id]) == []
    assert await semantic.active(intruder, "profile.city", None) == []
    assert await semantic.items(intruder) == []


async def test_semantic_mark_changes_only_the_users_items(semantic):
    mine = item("u1", "profile.city", "Berlin", 1)
    await semantic.put([mine], [vec("Berlin")])
    await semantic.mark("u2", [mine.item_id], "deleted", None, T0)
    assert (await semantic.get("u1", [mine.item_id]))[0].status == "active"
    await semantic.mark("u1", [mine.item_id], "superseded", "other", T0)
    (marked,) = await semantic.get("u1", [mine.item_id])
    assert (marked.status, marked.superseded_by) == ("superseded", "other")
    assert await semantic.active("u1", "profile.city", None) == []


async def test_semantic_write_marks_then_upserts_items_of_many_users(semantic):
    old, other = item("u1", "profile.city", "Berlin", 1), item("u2", "profile.city", "Rome", 2)
    await semantic.put([old, other], [vec("Berlin"), vec("Rome")])
    new, theirs = item("u1", "profile.city", "Paris", 3), item("u2", "pref.tea", "green", 4)
    await semantic.write([Mark("u1", (old.item_id,), "superseded", new.item_id, T0),
                          Mark("u1", (other.item_id,), "deleted", None, T0)],  # u2's: untouched
                         [new, theirs], [vec("Paris"), vec("green tea")])
    (marked,) = await semantic.get("u1", [old.item_id])
    assert (marked.status, marked.superseded_by) == ("superseded", new.item_id)
    assert [i.value for i in await semantic.active("u1", "profile.city", None)] == ["Paris"]
    assert (await semantic.get("u2", [other.item_id]))[0].status == "active"
    assert {i.value for i in await semantic.items("u2")} == {"Rome", "green"}
    assert [i.value for i in await semantic.search("u1", vec("Berlin"), 5)] == ["Paris"]


async def test_semantic_delete_user_removes_all_of_theirs_and_nothing_else(semantic):
    await semantic.put([item("u1", "a", "1", 1), item("u1", "b", "2", 2), item("u2", "a", "3", 3)],
                       [vec("1"), vec("2"), vec("3")])
    assert await semantic.delete_user("u1") == 2
    assert await semantic.items("u1") == []
    assert len(await semantic.items("u2")) == 1


async def test_semantic_delete_removes_the_users_named_items_only(semantic):
    mine = [item("u1", "a", "1", 1), item("u1", "b", "2", 2)]
    theirs = item("u2", "a", "3", 3)
    await semantic.put([*mine, theirs], [vec("1"), vec("2"), vec("3")])
    assert await semantic.delete("u1", [mine[0].item_id, theirs.item_id]) == 1
    assert [i.item_id for i in await semantic.items("u1")] == [mine[1].item_id]
    assert await semantic.active("u1", "a", None) == []
    assert [i.item_id for i in await semantic.search("u1", vec("1"), 5)] == [mine[1].item_id]
    assert len(await semantic.items("u2")) == 1
    assert await semantic.delete("u1", []) == 0


async def test_semantic_rejects_a_vector_of_the_wrong_size(semantic):
    from hermes_fsm.errors import VectorSizeMismatch

    with pytest.raises(VectorSizeMismatch, match="size"):
        await semantic.put([item("u1", "a", "1", 1)], [[0.1] * 17])


# --- experience log ---------------------------------------------------------------------

def outcome(n: int, tool: str = "inventory_lookup", ok: bool = True, user: str = "u1",
            request: str = "how many A1001 in the east", minutes: int = 0) -> Experience:
    return Experience(entry_id=f"turn-{n}:call-{n}", kind="tool_call", user_id=user,
                      session_id="s1", turn_id=f"turn-{n}", at=T0 + timedelta(minutes=minutes),
                      ok=ok, tool=tool, request=request, arguments={"sku": "A1001"},
                      error_code=None if ok else "TIMEOUT", duration_ms=1.5,
                      caused_by=f"call-{n}")


async def test_experience_record_is_idempotent_by_entry_id(experience):
    assert await experience.record([outcome(1), outcome(2)]) == 2
    assert await experience.record([outcome(1), outcome(2)]) == 0
    assert len(await experience.entries("u1")) == 2


async def test_experience_keeps_the_causal_chain(experience):
    await experience.record([outcome(1)])
    (entry,) = await experience.entries("u1")
    assert (entry.request, entry.tool, entry.arguments, entry.caused_by, entry.ok) == (
        "how many A1001 in the east", "inventory_lookup", {"sku": "A1001"}, "call-1", True)


async def test_experience_finds_the_entries_naming_an_entity_newest_first(experience):
    from dataclasses import replace

    await experience.record([
        outcome(1, request="how many A1001 in the east", minutes=1),
        replace(outcome(2, request="华东仓 还有多少", minutes=2), arguments={"sku": "B2002"}),
        replace(outcome(3, request="and the west?", minutes=3), arguments={"sku": "a1001"}),
        replace(outcome(4, request="50% off a_b?", minutes=4), arguments={"sku": "C3001"}),
        outcome(5, request="A1001 for someone else", user="u2", minutes=5)])

    def ids(entries):
        return [e.entry_id for e in entries]

    # by request or by argument, any ASCII case, the user's own only, newest first
    assert ids(await experience.mentioning("u1", ["a1001"])) == ["turn-3:call-3",
                                                                 "turn-1:call-1"]
    assert ids(await experience.mentioning("u1", ["华东仓", "c3001"])) == ["turn-4:call-4",
                                                                         "turn-2:call-2"]
    assert ids(await experience.mentioning("u1", ["a1001"], limit=1)) == ["turn-3:call-3"]
    # the name's own ASCII case does not matter either
    assert ids(await experience.mentioning("u1", ["A1001"])) == ["turn-3:call-3",
                                                                 "turn-1:call-1"]
    # LIKE's wildcards in a name are the characters themselves
    assert ids(await experience.mentioning("u1", ["50%"])) == ["turn-4:call-4"]
    assert ids(await experience.mentioning("u1", ["a_b"])) == ["turn-4:call-4"]
    assert await experience.mentioning("u1", ["5%o"]) == []
    assert await experience.mentioning("u1", ["a%b"]) == []
    assert await experience.mentioning("u1", []) == []


async def test_experience_failure_rate_counts_the_window_only(experience):
    await experience.record([outcome(1, ok=False, minutes=0), outcome(2, ok=True, minutes=50),
                             outcome(3, ok=False, minutes=55), outcome(4, tool="other",
                                                                      ok=False, minutes=55)])
    now = T0 + timedelta(minutes=60)
    assert await experience.failure_rate("inventory_lookup", timedelta(minutes=30), now) == 0.5
    assert await experience.failure_rate("inventory_lookup", timedelta(hours=2), now) == (
        pytest.approx(2 / 3))
    assert await experience.failure_rate("never_called", timedelta(hours=1), now) == 0.0


async def test_experience_record_counts_an_entry_repeated_in_one_batch_once(experience):
    assert await experience.record([outcome(1), outcome(1), outcome(2)]) == 2
    assert len(await experience.entries("u1")) == 2


async def test_experience_record_takes_a_batch_of_entries_of_every_shape(experience):
    entries = [outcome(1), replace(outcome(2), duration_ms=3, event_seq=7, detail={"é": [1]}),
               Experience(entry_id="t3:error:1", kind="error", user_id="u1", session_id="s1",
                          turn_id="t3", at=T0, ok=False, error_code="HandlerError",
                          detail="boom")]
    assert await experience.record(entries) == 3
    by_id = {e.entry_id: e for e in await experience.entries("u1")}
    assert (by_id["turn-2:call-2"].duration_ms, by_id["turn-2:call-2"].event_seq) == (3.0, 7)
    assert by_id["turn-2:call-2"].detail == {"é": [1]}
    assert (by_id["t3:error:1"].tool, by_id["t3:error:1"].detail) == (None, "boom")


async def test_experience_failure_rates_give_every_tool_of_the_window(experience):
    await experience.record([
        outcome(1, ok=False, minutes=0),                  # at the window's start: left out
        outcome(2, ok=False, minutes=10), outcome(3, ok=True, minutes=20),
        outcome(4, ok=False, minutes=30, user="u2"),      # every user counts
        outcome(5, tool="create_reminder", ok=True, minutes=40),
        outcome(6, ok=False, minutes=61)])                # after now: left out
    now = T0 + timedelta(minutes=60)
    rates = await experience.failure_rates(timedelta(hours=1), now)
    assert rates == {"inventory_lookup": ToolHealth("inventory_lookup", 3, 2),
                     "create_reminder": ToolHealth("create_reminder", 1, 0)}
    assert rates["inventory_lookup"].failure_rate == pytest.approx(2 / 3)
    assert await experience.failure_rates(timedelta(minutes=5), now) == {}


async def test_experience_failure_rates_leave_out_calls_refused_before_the_tool_ran(
        experience):
    refused = [replace(outcome(10 + n, ok=False, minutes=50), error_code=code)
               for n, code in enumerate(NOT_CALLED)]
    other = Experience(entry_id="t9:error:1", kind="error", user_id="u1", session_id="s1",
                       turn_id="t9", at=T0 + timedelta(minutes=50), ok=False,
                       tool="inventory_lookup", error_code="TIMEOUT")  # not a tool call
    await experience.record([*refused, other, outcome(1, ok=False, minutes=55),
                             outcome(2, ok=True, minutes=55)])
    now = T0 + timedelta(minutes=60)
    assert await experience.failure_rates(timedelta(hours=1), now) == {
        "inventory_lookup": ToolHealth("inventory_lookup", 2, 1)}
    assert await experience.failure_rate("inventory_lookup", timedelta(hours=1), now) == 0.5


async def test_experience_similar_outcomes_rank_by_request_and_stay_with_the_user(experience):
    await experience.record([outcome(1, request="stock of A1001 in the east warehouse"),
                             outcome(2, request="remind me to call Bob", tool="reminder"),
                             outcome(3, user="u2", request="stock of A1001 east")])
    similar = await experience.similar_outcomes("u1", "A1001 stock east", 5)
    assert similar[0].entry_id == "turn-1:call-1"
    assert all(e.user_id == "u1" for e in similar)


async def test_experience_reads_inside_a_domain_as_the_semantic_layer_does(experience):
    """Each entry keeps its domain; ``mentioning`` and ``similar_outcomes`` with a
    ``domain`` return its entries only (``shared``: and those of no domain), without one
    every entry: the rule of :func:`seen_in_domain`, on every backend."""
    await experience.record([
        replace(outcome(1, minutes=1), domain="credit_card"),
        replace(outcome(2, minutes=2), domain="wealth"),
        outcome(3, minutes=3),                                       # no domain
        replace(outcome(4, minutes=4, user="u2"), domain="credit_card")])
    by_id = {e.entry_id: e.domain for e in await experience.entries("u1")}
    assert by_id == {"turn-1:call-1": "credit_card", "turn-2:call-2": "wealth",
                     "turn-3:call-3": None}

    async def read(**scope):
        mentioning = {e.entry_id for e in await experience.mentioning("u1", ["a1001"],
                                                                      **scope)}
        similar = {e.entry_id for e in await experience.similar_outcomes(
            "u1", "how many A1001 in the east", 10, **scope)}
        assert mentioning == similar, scope
        assert mentioning == {i for i, d in by_id.items()
                              if seen_in_domain(d, scope.get("domain"),
                                                scope.get("shared", False))}, scope
        return mentioning

    assert await read() == set(by_id)
    assert await read(domain="credit_card") == {"turn-1:call-1"}
    assert await read(domain="credit_card", shared=True) == {"turn-1:call-1",
                                                             "turn-3:call-3"}
    assert await read(domain="loans") == set()
    assert await read(domain="loans", shared=True) == {"turn-3:call-3"}


async def test_experience_forget_removes_the_users_rows_only(experience):
    await experience.record([outcome(1), outcome(2, user="u2")])
    assert await experience.forget("u1") == 1
    assert await experience.entries("u1") == []
    assert len(await experience.entries("u2")) == 1


async def test_an_sqlite_log_of_the_first_schema_is_migrated_on_open(tmp_path):
    import sqlite3

    from hermes_fsm.memory.sqlite_experience import _MIGRATIONS, SQLiteExperienceLog

    path = tmp_path / "experience.sqlite"
    db = sqlite3.connect(path)
    db.executescript(f"{_MIGRATIONS[0]}; PRAGMA user_version=1;")
    db.close()
    log = SQLiteExperienceLog(path, EMBED)
    try:
        await log.record([outcome(1, ok=False, minutes=5)])
        assert await log.failure_rates(timedelta(hours=1), T0 + timedelta(minutes=10)) == {
            "inventory_lookup": ToolHealth("inventory_lookup", 1, 1)}
        db = log._conn()
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(_MIGRATIONS)
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE "
                                            "type = 'index'")}
        assert {"hermes_experience_kind_at",
                "hermes_experience_user_kind_at_request_domain"} <= indexes
        # the covering ones replaced their predecessors
        assert not {"hermes_experience_user_kind_at",
                    "hermes_experience_user_kind_at_request"} & indexes
    finally:
        await log.close()


async def test_an_sqlite_log_of_the_previous_schema_gets_the_domain_column(tmp_path):
    """A file written before entries had a domain: it opens, its entries read back with
    none (a domain's recall does not see them, a shared one does), and new entries keep
    theirs."""
    import sqlite3

    from hermes_fsm.memory.sqlite_experience import _MIGRATIONS, SQLiteExperienceLog

    path = tmp_path / "experience.sqlite"
    db = sqlite3.connect(path)
    before = next(i for i, ddl in enumerate(_MIGRATIONS) if "ADD COLUMN domain" in ddl)
    for ddl in _MIGRATIONS[:before]:
        db.executescript(ddl)
    db.execute(f"PRAGMA user_version={before}")
    db.execute("INSERT INTO hermes_experience (entry_id, kind, user_id, session_id, turn_id, "
               "at, ok, tool, request, arguments, duration_ms) VALUES ('old:1', 'tool_call', "
               "'u1', 's0', 'old', ?, 1, 'inventory_lookup', 'A1001 east', '{}', 1.0)",
               (T0.timestamp(),))
    db.commit()
    columns = {r[1] for r in db.execute("PRAGMA table_info(hermes_experience)")}
    assert "domain" not in columns
    db.close()
    log = SQLiteExperienceLog(path, EMBED)
    try:
        await log.record([replace(outcome(1, minutes=1), domain="wealth")])
        db = log._conn()
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(_MIGRATIONS)
        assert "domain" in {r[1] for r in db.execute("PRAGMA table_info(hermes_experience)")}
        assert {e.entry_id: e.domain for e in await log.entries("u1")} == {
            "old:1": None, "turn-1:call-1": "wealth"}
        assert [e.entry_id for e in await log.mentioning("u1", ["a1001"],
                                                         domain="wealth")] == ["turn-1:call-1"]
        assert {e.entry_id for e in await log.mentioning(
            "u1", ["a1001"], domain="loans", shared=True)} == {"old:1"}
    finally:
        await log.close()


async def test_a_postgres_log_of_the_previous_schema_gets_the_domain_column(monkeypatch):
    """``ADD COLUMN IF NOT EXISTS``: a schema written by the previous version migrates on
    open, and its entries read back with no domain."""
    import uuid

    from hermes_fsm.memory import postgres_experience
    from tests.memory.conftest import PG_URL, dispose, need

    need(PG_URL, 5432, "PostgreSQL")
    schema = f"hermes_test_{uuid.uuid4().hex[:10]}"
    migrations = postgres_experience._MIGRATIONS
    monkeypatch.setattr(postgres_experience, "_MIGRATIONS", migrations[:-1])
    old = postgres_experience.PostgresExperienceLog(PG_URL, schema=schema, embedder=EMBED)
    try:  # the previous version's schema, and a row as it wrote them
        pool = await old._open()
        async with pool.connection() as conn:
            await conn.execute(
                f'INSERT INTO "{schema}".hermes_experience (entry_id, kind, user_id, '
                "session_id, turn_id, at, ok, tool, request, arguments, duration_ms) VALUES "
                "('turn-1:call-1', 'tool_call', 'u1', 's0', 'turn-1', %s, true, "
                "'inventory_lookup', 'A1001 east', '{}', 1.0)", (T0,))
    finally:
        await old.close()
    monkeypatch.setattr(postgres_experience, "_MIGRATIONS", migrations)
    log = postgres_experience.PostgresExperienceLog(PG_URL, schema=schema, embedder=EMBED)
    try:
        await log.record([replace(outcome(2, minutes=2), domain="wealth")])
        assert {e.entry_id: e.domain for e in await log.entries("u1")} == {
            "turn-1:call-1": None, "turn-2:call-2": "wealth"}
        (version,), = await log._fetch(
            f'SELECT max(version) FROM "{schema}".hermes_schema_version', ())
        assert version == len(migrations)
    finally:
        await dispose(log)


async def test_similar_outcomes_reads_only_the_users_own_rows_through_an_index(tmp_path):
    """Its candidates come from the (user_id, kind, at, entry_id, request) index alone, not
    a walk over every user's tool calls (which made PLANNING slower as the log grew), nor
    a table lookup per candidate."""
    from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog

    log = SQLiteExperienceLog(tmp_path / "experience.sqlite", EMBED)
    try:
        await log.record([outcome(n, user=f"u{n % 7}") for n in range(1, 50)])
        seen: list[str] = []
        db = log._conn()
        db.set_trace_callback(seen.append)
        found = await log.similar_outcomes("u3", "stock of A1001", 3)
        db.set_trace_callback(None)
        assert found and {e.user_id for e in found} == {"u3"}
        candidates = next(q for q in seen if "LIMIT 500" in q)
        plan = " ".join(str(row[3]) for row in db.execute("EXPLAIN QUERY PLAN " + candidates))
        assert "COVERING INDEX hermes_experience_user_kind_at_request_domain" in plan, plan
        seen.clear()  # inside a domain too: the domain is in the index
        db.set_trace_callback(seen.append)
        await log.similar_outcomes("u3", "stock of A1001", 3, domain="wealth", shared=True)
        db.set_trace_callback(None)
        candidates = next(q for q in seen if "LIMIT 500" in q)
        plan = " ".join(str(row[3]) for row in db.execute("EXPLAIN QUERY PLAN " + candidates))
        assert "COVERING INDEX hermes_experience_user_kind_at_request_domain" in plan, plan
    finally:
        await log.close()


def test_top_requests_scores_repeated_requests_as_if_each_were_scored_alone():
    """Repeated requests are embedded and scored once; the ranking (ties: in row order,
    which backends give newest first) is what scoring every row would give."""
    import numpy as np

    from hermes_fsm.memory.experience import top_requests

    rows = [(f"e{n}", text) for n, text in enumerate(
        ["stock of A1001 east", "remind me at 9", "stock of A1001 east", "A1001 in the west",
         "stock of A1001 east", "weather"])]
    vectors = np.array(EMBED.embed([r for _, r in rows]), dtype=np.float32)
    query = np.array(EMBED.embed(["how many A1001 in the east"])[0], dtype=np.float32)
    scores = vectors @ query
    expected = [(rows[i][0], float(scores[i])) for i in np.argsort(-scores, kind="stable")[:4]
                if scores[i] > 0]

    got = top_requests(rows, "how many A1001 in the east", EMBED, 4)
    assert [e for e, _ in got] == [e for e, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-6)
    assert [e for e, _ in expected[:3]] == ["e0", "e2", "e4"]
