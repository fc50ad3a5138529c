"""The memory facade over every tier combination: commit, supersession, recall, forgetting."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory import RecallPolicy, item_id
from hermes_fsm.memory.experience import Experience

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def update(key: str, value: object, kind: Any = "create", memory_type: Any = "preference"):
    return MemoryUpdate(key=key, update_type=kind, value=value, memory_type=memory_type,
                        evidence_source="user_message")


async def apply(memory, user, turn, updates, session="s1", text="", **extra):
    return await memory.apply(user, turn, updates, NOW, session_id=session, text=text, **extra)


async def test_a_replayed_commit_writes_nothing_twice(memory):
    updates = [update("preference.contact", "email"), update("profile.city", "Berlin", "modify")]
    tool = Experience(entry_id="t1:c1", kind="tool_call", user_id="u1", session_id="s1",
                      turn_id="t1", at=NOW, tool="inventory_lookup")
    first = await apply(memory, "u1", "t1", updates, text="email me", experiences=[tool])
    again = await apply(memory, "u1", "t1", updates, text="email me", experiences=[tool])
    assert [o.status for o in first] == ["applied", "applied"]
    assert [o.status for o in again] == ["skipped", "skipped"]
    assert len(await memory.items("u1")) == 2
    assert len(await memory.experience.entries("u1")) == 3  # the call and two commits
    assert len(await memory.working.recent("u1", "s1")) == 1


async def test_modify_supersedes_the_old_item_and_links_it(memory):
    await apply(memory, "u1", "t1", [update("preference.contact", "email")])
    await apply(memory, "u1", "t2", [update("preference.contact", "phone", "modify")])
    old, new = await memory.items("u1")
    assert (old.value, old.status, old.superseded_by) == ("email", "superseded", new.item_id)
    assert (new.value, new.status) == ("phone", "active")
    assert new.item_id == item_id("u1", "t2", 0)


async def test_deprecate_deletes_the_active_item_and_it_is_never_recalled(memory):
    await apply(memory, "u1", "t1", [update("preference.contact", "email")])
    await apply(memory, "u1", "t2", [update("preference.contact", None, "deprecate")])
    assert all(i.status == "deleted" for i in await memory.items("u1"))
    assert await memory.recall("u1", "preference contact email") == []


async def test_a_replay_of_an_older_turn_does_not_resurrect_or_delete_newer_values(memory):
    await apply(memory, "u1", "t1", [update("preference.contact", "email")])
    await apply(memory, "u1", "t2", [update("preference.contact", None, "deprecate")])
    await apply(memory, "u1", "t3", [update("preference.contact", "sms")])
    await apply(memory, "u1", "t1", [update("preference.contact", "email")])   # replays
    await apply(memory, "u1", "t2", [update("preference.contact", None, "deprecate")])
    active = [i for i in await memory.items("u1") if i.status == "active"]
    assert [i.value for i in active] == ["sms"]


async def test_two_updates_of_one_key_in_one_commit_keep_the_last(memory):
    await apply(memory, "u1", "t1", [update("profile.city", "Paris"),
                                     update("profile.city", "Berlin", "modify")])
    active = [i.value for i in await memory.items("u1") if i.status == "active"]
    assert active == ["Berlin"]


async def test_superseded_values_are_never_recalled(memory):
    await apply(memory, "u1", "t1", [update("profile.city", "Paris")], text="I live in Paris")
    await apply(memory, "u1", "t2", [update("profile.city", "Berlin", "modify")],
                text="I live in Berlin")
    recalled = await memory.recall("u1", "I live in Paris, which city?", now=NOW)
    assert [i.value for i in recalled] == ["Berlin"]


@pytest.mark.parametrize("intruder", ["u2", "U1", "u1 ", "*", "", "u1%", "u1' OR '1'='1"])
async def test_recall_never_returns_another_users_items(memory, intruder):
    await apply(memory, "u1", "t1", [update("profile.city", "Berlin")], text="I live in Berlin")
    assert await memory.recall(intruder, "I live in Berlin city", now=NOW) == []
    assert await memory.items(intruder) == []


async def test_recency_breaks_ties_within_the_band_and_never_outweighs_relevance(memory):
    memory.policy = RecallPolicy(threshold=0.0, half_life_days={"progress": 1.0,
                                                                "preference": 1000.0})
    # keys of stop words only: the two items embed alike (equally relevant)
    await apply(memory, "u1", "t1", [update("a.is", "deploy the east warehouse", "create",
                                            "progress"),
                                     update("the.is", "deploy the east warehouse")])
    recalled = await memory.recall("u1", "deploy east warehouse", now=NOW + timedelta(days=3))
    assert [i.key for i in recalled] == ["the.is", "a.is"]  # equally relevant: recency
    assert 0 < recalled[0].score - recalled[1].score <= memory.policy.recency_band
    # an old, more relevant item stays above a new, less relevant one
    await memory.apply("u1", "t2", [update("pref.b", "deploy the north depot")],
                       NOW + timedelta(days=3), session_id="s1", text="")
    later = await memory.recall("u1", "deploy east warehouse", now=NOW + timedelta(days=3))
    assert [i.key for i in later][:2] == ["the.is", "a.is"]


async def test_recall_drops_items_under_the_threshold_and_keeps_k(memory):
    memory.policy = RecallPolicy(k=2, threshold=0.3)
    await apply(memory, "u1", "t1", [update(f"fact.{n}", f"east warehouse {n}") for n in range(5)]
                + [update("fact.other", "birthday cake")])
    recalled = await memory.recall("u1", "east warehouse", now=NOW)
    assert len(recalled) == 2
    assert all(i.score >= 0.3 and i.key != "fact.other" for i in recalled)


async def test_progress_updates_become_working_memory_slots(memory):
    await apply(memory, "u1", "t1", [update("task.order", "2002", memory_type="progress")],
                text="track order 2002", answer="tracking it")
    assert await memory.working.slots("u1", "s1") == {"task.order": "2002"}
    assert [m["role"] for m in await memory.working.recent("u1", "s1")] == ["user", "assistant"]


async def test_forget_leaves_nothing_about_the_user_in_any_store(memory):
    tool = Experience(entry_id="t1:c1", kind="tool_call", user_id="u1", session_id="s1",
                      turn_id="t1", at=NOW, tool="inventory_lookup")
    await apply(memory, "u1", "t1", [update("profile.city", "Berlin")], text="Berlin",
                experiences=[tool])
    await apply(memory, "u2", "t2", [update("profile.city", "Rome")], session="s2", text="Rome")
    assert await memory.forget("u1") > 0
    semantic, experience, working = memory.semantic, memory.experience, memory.working
    if hasattr(semantic, "count"):            # Qdrant: count points in the collection itself
        assert await semantic.count("u1") == 0
        assert await semantic.count("u2") == 1
    assert await semantic.items("u1") == []
    assert await experience.count("u1") == 0  # rows in the table itself
    assert await experience.count("u2") == 1
    if hasattr(working, "keys"):              # Redis: scan the user's keys
        assert await working.keys("u1") == []
    else:
        assert working.count("u1") == 0
    assert await working.recent("u1", "s1") == []


# --- group commit: concurrent turns' commits written together --------------------------

async def test_concurrent_commits_of_many_users_share_one_write_each_with_its_own_outcome(
        memory):
    writes = []
    real_write = memory.semantic.write

    async def counted(marks, items, vectors):
        writes.append(len(items))
        await real_write(marks, items, vectors)

    memory.semantic.write = counted
    outcomes = await asyncio.gather(*(
        apply(memory, f"u{n}", f"t{n}", [update("profile.city", f"city {n}"),
                                         update(f"fact.{n}", n)], session=f"s{n}",
              text=f"I live in city {n}") for n in range(8)))
    assert [[o.item_id for o in out] for out in outcomes] == [
        [item_id(f"u{n}", f"t{n}", 0), item_id(f"u{n}", f"t{n}", 1)] for n in range(8)]
    assert writes == [16]  # eight commits waiting together: one semantic write
    for n in range(8):
        assert {i.value for i in await memory.items(f"u{n}")} == {f"city {n}", n}
        assert len(await memory.experience.entries(f"u{n}")) == 2
        assert len(await memory.working.recent(f"u{n}", f"s{n}")) == 1


async def test_concurrent_commits_of_one_user_supersede_in_order(memory):
    await apply(memory, "u1", "t0", [update("preference.contact", "email")])
    await asyncio.gather(*(
        apply(memory, "u1", f"t{n}", [update("preference.contact", f"channel {n}", "modify")],
              session=f"s{n}") for n in range(1, 5)))
    items = {i.item_id: i for i in await memory.items("u1")}
    active = [i for i in items.values() if i.status == "active"]
    assert [i.value for i in active] == ["channel 4"]
    chain, current = [], item_id("u1", "t0", 0)
    while current is not None:  # each value superseded by the next commit's
        chain.append(items[current].value)
        current = items[current].superseded_by
    assert chain == ["email", "channel 1", "channel 2", "channel 3", "channel 4"]


async def test_a_commit_failing_on_its_own_does_not_fail_the_others_of_its_batch(memory):
    real_active = memory.semantic.active

    async def active(user_id, key, domain):
        if user_id == "bad":
            raise MemoryStoreError("semantic read failed (test)")
        return await real_active(user_id, key, domain)

    memory.semantic.active = active
    good: Any
    bad: Any
    good, bad = await asyncio.gather(
        apply(memory, "u1", "t1", [update("profile.city", "Berlin")]),
        apply(memory, "bad", "t2", [update("profile.city", "Rome")], session="s2"),
        return_exceptions=True)
    assert [o.status for o in good] == ["applied"]
    assert isinstance(bad, MemoryStoreError)
    assert [i.value for i in await memory.items("u1")] == ["Berlin"]
    assert await memory.items("bad") == []


async def test_a_failed_batch_fails_each_commit_and_their_retries_write_nothing_twice(memory):
    real_record, failures = memory.experience.record, [1]

    async def record(entries):
        if failures:
            failures.pop()
            raise MemoryStoreError("PostgreSQL experience log: connection lost (test)")
        return await real_record(entries)

    memory.experience.record = record
    commits = [("u1", "t1", [update("profile.city", "Berlin")]),
               ("u2", "t2", [update("profile.city", "Rome"), update("pref.tea", "green")])]
    first = await asyncio.gather(*(apply(memory, u, t, ups, session=f"s-{u}", text="hi")
                                   for u, t, ups in commits), return_exceptions=True)
    assert all(isinstance(f, MemoryStoreError) for f in first)
    retried = await asyncio.gather(*(apply(memory, u, t, ups, session=f"s-{u}", text="hi")
                                     for u, t, ups in commits))
    # the semantic write went through before the failure: the retry finds it, skips it
    assert [[o.status for o in r] for r in retried] == [["skipped"], ["skipped", "skipped"]]
    assert len(await memory.items("u1")) == 1 and len(await memory.items("u2")) == 2
    assert len(await memory.experience.entries("u1")) == 1
    assert len(await memory.experience.entries("u2")) == 2
    assert len(await memory.working.recent("u2", "s-u2")) == 1


async def test_a_failed_semantic_write_is_retried_and_the_tiers_written_beside_it_once(memory):
    """The three tiers are written at once: when the semantic write fails, the experience
    log and working memory may hold the commit already; the retry completes it and writes
    them nothing twice."""
    real_write, failures = memory.semantic.write, [1]

    async def write(marks, items, vectors):
        if failures:
            failures.pop()
            raise MemoryStoreError("semantic store: disk full (test)")
        return await real_write(marks, items, vectors)

    memory.semantic.write = write
    commits = [("u1", "t1", [update("profile.city", "Berlin")]),
               ("u2", "t2", [update("profile.city", "Rome"), update("pref.tea", "green")])]
    first = await asyncio.gather(*(apply(memory, u, t, ups, session=f"s-{u}", text="hi")
                                   for u, t, ups in commits), return_exceptions=True)
    assert all(isinstance(f, MemoryStoreError) for f in first)
    assert await memory.items("u1") == [] and await memory.items("u2") == []
    retried = await asyncio.gather(*(apply(memory, u, t, ups, session=f"s-{u}", text="hi")
                                     for u, t, ups in commits))
    assert [[o.status for o in r] for r in retried] == [["applied"], ["applied", "applied"]]
    assert [i.value for i in await memory.items("u1")] == ["Berlin"]
    assert len(await memory.items("u2")) == 2
    assert len(await memory.experience.entries("u1")) == 1
    assert len(await memory.experience.entries("u2")) == 2
    assert len(await memory.working.recent("u2", "s-u2")) == 1


async def test_a_short_term_item_expires_after_its_ttl_and_the_profile_does_not(memory):
    """The layers' TTLs, with an injected clock (``now=``)."""
    memory.policy = RecallPolicy(threshold=-1.0, ttl_days={"progress": 14.0})
    await apply(memory, "u1", "t1", [update("task.audit", "the east warehouse audit", "create",
                                            "progress"),
                                     update("pref.warehouse", "the east warehouse audit")])
    week = await memory.recall("u1", "east warehouse audit", now=NOW + timedelta(days=7))
    assert {i.key for i in week} == {"task.audit", "pref.warehouse"}
    later = await memory.recall("u1", "east warehouse audit", now=NOW + timedelta(days=15))
    assert [i.key for i in later] == ["pref.warehouse"]
    assert len(await memory.items("u1")) == 2  # expired, not deleted


async def test_stale_items_are_archived_out_of_the_index_and_can_be_restored(memory, tmp_path):
    """Superseded long ago, or past the TTL: archived (injected clock); restored: back."""
    from hermes_fsm.memory.archive import SQLiteArchive

    memory.policy = RecallPolicy(threshold=-1.0, ttl_days={"progress": 14.0})
    archive = SQLiteArchive(tmp_path / "archive.sqlite")
    await apply(memory, "u1", "t1", [update("pref.contact", "email"),
                                     update("task.order", "order 2002", "create", "progress")])
    await memory.apply("u1", "t2", [update("pref.contact", "phone", "modify")],
                       NOW + timedelta(days=1), session_id="s1", text="")
    await apply(memory, "u2", "t3", [update("pref.contact", "fax")])  # another user: kept
    assert await memory.archive_stale("u1", archive, now=NOW + timedelta(days=2)) == []
    moved = await memory.archive_stale("u1", archive, now=NOW + timedelta(days=120),
                                       stale_after_days=90)
    assert sorted(i.value for i in moved) == ["email", "order 2002"]
    assert [i.value for i in await memory.items("u1")] == ["phone"]
    assert len(await memory.items("u2")) == 1
    assert sorted(i.value for i in await archive.items("u1")) == ["email", "order 2002"]
    order = next(i for i in moved if i.value == "order 2002")
    restored = await memory.restore("u1", archive, [order.item_id])
    assert [i.value for i in restored] == ["order 2002"]
    assert {i.value for i in await memory.items("u1")} == {"phone", "order 2002"}
    assert [i.value for i in await archive.items("u1")] == ["email"]
    found = await memory.recall("u1", "order 2002", now=NOW + timedelta(days=3))
    assert "order 2002" in [i.value for i in found]
    await archive.close()


async def test_walk_goes_working_then_semantic_then_experience_keyed_by_entities(memory):
    """Seed 002 §2.4: the session's messages, the user's items, then her experience —
    entries naming a conversation entity first (newest first), then similar requests;
    never another user's."""
    from datetime import timedelta

    def call(n: int, user: str, warehouse: str, request: str) -> Experience:
        return Experience(entry_id=f"{user}:c{n}", kind="tool_call", user_id=user,
                          session_id="s1", turn_id=f"t{n}", at=NOW + timedelta(minutes=n),
                          tool="inventory_lookup", request=request,
                          arguments={"warehouse": warehouse, "sku": "A1"})

    await apply(memory, "u1", "t1", [update("preference.contact", "email")],
                text="email me", experiences=[call(1, "u1", "east", "stock of A1")])
    await apply(memory, "u1", "t2", [update("preference.warehouse", "east")],
                text="check the east warehouse first",
                experiences=[call(2, "u1", "west", "stock of A1 in the west"),
                             call(3, "u1", "east", "is A1 in stock")])
    await apply(memory, "u2", "t9", [], text="hi",
                experiences=[call(9, "u2", "east", "east stock of A1")])
    walked = await memory.walk("u1", "which warehouse should I check", session_id="s1",
                               entities=["East"], now=NOW + timedelta(hours=1))
    assert [m["content"] for m in walked.working if m["role"] == "user"] == [
        "email me", "check the east warehouse first"]
    assert walked.semantic[0].key == "preference.warehouse"
    tools = [e for e in walked.experience if e.kind == "tool_call"]
    assert [e.entry_id for e in tools[:2]] == ["u1:c3", "u1:c1"]  # the entity's, newest first
    assert all(e.user_id == "u1" for e in walked.experience)
    assert len(walked.experience) <= memory.policy.k
    no_session = await memory.walk("u1", "warehouse", entities=[])
    assert no_session.working == [] and no_session.semantic


async def test_standing_keys_are_recalled_by_key_whatever_the_query(memory):
    memory.policy = RecallPolicy(k=2, threshold=0.3)
    await apply(memory, "u1", "t1", [update("preference.store", "hz_xh_001")],
                text="I prefer the Hangzhou Xihu store")
    await apply(memory, "u1", "t2", [update("preference.store", "sh_xh_002", "modify")],
                text="I prefer the Shanghai Xuhui store now")
    await apply(memory, "u2", "t3", [update("preference.warehouse", "east")], text="east only")
    query = "Is the iPhone 15 in stock?"  # shares nothing with the preference
    assert await memory.recall("u1", query, now=NOW) == []  # below the threshold
    recalled = await memory.recall("u1", query, now=NOW,
                                   keys=["preference.store", "preference.warehouse"])
    # the active value only (not the superseded one), and never another user's key
    assert [(i.key, i.value, i.score) for i in recalled] == [
        ("preference.store", "sh_xh_002", None)]
    # a key the similarity search already found is not added twice
    found = await memory.recall("u1", "I prefer the Shanghai Xuhui store now", now=NOW,
                                keys=["preference.store"])
    assert [i.key for i in found] == ["preference.store"]
    assert found[0].score is not None
