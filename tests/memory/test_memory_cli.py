"""``hermes-fsm memory search|list|forget --user U`` on the embedded stores."""

from __future__ import annotations

import io

from hermes_fsm.cli.main import main


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_memory_commands_list_search_and_forget_a_users_memory():
    code, _ = cli("run", "--user", "alice", "Please contact me by email")
    assert code == 0
    cli("run", "--user", "bob", "Please contact me by phone")
    code, listed = cli("memory", "list", "--user", "alice")
    assert code == 0 and "preference.contact_channel: email" in listed
    assert "phone" not in listed
    code, found = cli("memory", "search", "contact email", "--user", "alice")
    assert "preference.contact_channel: email" in found and "score" in found
    code, forgot = cli("memory", "forget", "--all", "--yes", "--user", "alice")
    assert code == 0 and "forgot user 'alice'" in forgot
    assert "0 item(s)" in cli("memory", "list", "--all", "--user", "alice")[1]
    assert "phone" in cli("memory", "list", "--user", "bob")[1]


def test_memory_search_without_a_query_is_a_usage_error(capsys):
    code, _ = cli("memory", "search", "--user", "alice")
    assert code == 1
    assert "needs a query" in capsys.readouterr().err


def first_found(query: str, user: str) -> str:
    code, found = cli("memory", "search", query, "--user", user, "-k", "3")
    assert code == 0, found
    return found.splitlines()[0]


def test_a_chinese_preference_is_found_in_both_languages_and_its_change_acknowledged(
        monkeypatch):
    """The issue's CLI check, on the default (USE) embedder and the embedded stores."""
    monkeypatch.setenv("HERMES_EMBEDDER", "use")
    code, said = cli("run", "--user", "carol", "我更喜欢用邮件接收通知")
    assert code == 0 and "你希望通过邮件联系" in said
    queries = ("联系方式", "通知方式", "how should I be contacted", "email")
    for query in queries:
        assert "preference.contact_channel: email" in first_found(query, "carol"), query
    code, said = cli("run", "--user", "carol", "其实我现在更喜欢用微信接收通知,不要邮件了")
    assert code == 0 and "已更新" in said and "微信" in said
    assert "没有理解" not in said
    for query in queries:
        assert "preference.contact_channel: wechat" in first_found(query, "carol"), query
    _, listed = cli("memory", "list", "--all", "--user", "carol")
    assert "superseded preference.contact_channel: email" in listed


def test_an_english_change_of_preference_is_acknowledged_as_a_change():
    _, said = cli("run", "--user", "dave", "Please contact me by email")
    assert "I'll remember" in said
    _, said = cli("run", "--user", "dave", "Actually, contact me by phone instead")
    assert "updated" in said and "phone" in said


def test_show_as_of_reads_the_earlier_profile_and_rollback_restores_it():
    import time
    from datetime import UTC, datetime

    cli("run", "--user", "erin", "Please contact me by email")
    time.sleep(0.05)
    between = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    cli("run", "--user", "erin", "Actually, contact me by phone instead")
    _, now = cli("memory", "show", "--user", "erin")
    assert "preference.contact_channel: phone" in now and "said: 'Actually" in now
    _, then = cli("memory", "show", "--user", "erin", "--as-of", between)
    assert "preference.contact_channel: email" in then and "phone" not in then
    code, rolled = cli("memory", "rollback", "--user", "erin", "--as-of", between)
    assert code == 0 and "modify    preference.contact_channel: applied" in rolled
    _, now = cli("memory", "show", "--user", "erin")
    assert "preference.contact_channel: email" in now and "phone" not in now
    _, history = cli("memory", "list", "--all", "--user", "erin")
    assert history.count("superseded") == 2  # nothing erased: a rollback is a new version
    _, before_all = cli("memory", "show", "--user", "erin", "--as-of", "2000-01-01")
    assert "0 item(s)" in before_all


def test_rollback_without_a_time_and_a_bad_time_are_usage_errors(capsys):
    assert cli("memory", "rollback", "--user", "erin")[0] == 1
    assert "needs --as-of" in capsys.readouterr().err
    assert cli("memory", "show", "--user", "erin", "--as-of", "last tuesday")[0] == 1
    assert "is not a time" in capsys.readouterr().err


def test_archive_moves_stale_items_out_and_restore_puts_them_back(capsys):
    cli("run", "--user", "frank", "Please contact me by email")
    cli("run", "--user", "frank", "Actually, contact me by phone instead")
    cli("run", "--user", "gina", "Please contact me by email")
    cli("run", "--user", "gina", "Actually, contact me by phone instead")
    code, kept = cli("memory", "archive", "--user", "frank")  # superseded just now: not stale
    assert code == 0 and "0 item(s) archived" in kept
    code, moved = cli("memory", "archive", "--user", "frank", "--stale-days", "0")
    assert code == 0 and "superseded preference.contact_channel: email" in moved
    assert "1 item(s) archived for user 'frank'" in moved
    _, history = cli("memory", "list", "--all", "--user", "frank")
    assert "email" not in history and "phone" in history  # out of the vector index
    assert "superseded" in cli("memory", "list", "--all", "--user", "gina")[1]  # not hers
    _, listed = cli("memory", "restore", "--user", "frank")
    assert "1 item(s) in the archive" in listed
    item_id = listed.split()[0]
    assert cli("memory", "restore", "no-such-id", "--user", "frank")[0] == 1
    assert "no archived item 'no-such-id'" in capsys.readouterr().err
    assert cli("memory", "restore", item_id, "--user", "gina")[0] == 1  # not hers to restore
    code, restored = cli("memory", "restore", item_id, "--user", "frank")
    assert code == 0 and "1 item(s) restored" in restored
    _, history = cli("memory", "list", "--all", "--user", "frank")
    assert "superseded preference.contact_channel: email" in history
    assert "0 item(s) in the archive" in cli("memory", "restore", "--user", "frank")[1]
    assert "preference.contact_channel: phone" in first_found("contact", "frank")


def test_archive_with_a_query_and_restore_with_both_an_id_and_all_are_usage_errors(capsys):
    assert cli("memory", "archive", "email", "--user", "frank")[0] == 1
    assert "takes no query" in capsys.readouterr().err
    assert cli("memory", "restore", "abc", "--all", "--user", "frank")[0] == 1
    assert "not both" in capsys.readouterr().err


def test_memory_migrate_moves_an_old_local_mode_store_into_edge(tmp_path, monkeypatch):
    """``hermes-fsm memory migrate``: a data dir the old embedded store wrote (qdrant-client
    local mode) becomes an Edge store the other commands read."""
    import asyncio
    from datetime import UTC, datetime

    from hermes_fsm.contracts.states import MemoryUpdate
    from hermes_fsm.memory import HashingEmbedder, InProcessWorkingMemory, TieredMemory
    from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore
    from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog

    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    embedder = HashingEmbedder()  # the tests' configured embedder (HERMES_EMBEDDER=hashing)

    async def old_store() -> None:
        old = TieredMemory(working=InProcessWorkingMemory(), embedder=embedder,
                           semantic=QdrantSemanticStore(embedder.dim,
                                                        path=str(tmp_path / "qdrant")),
                           experience=SQLiteExperienceLog())
        await old.apply("hank", "turn-1", [MemoryUpdate(
            key="preference.contact_channel", update_type="create", value="email",
            evidence_source="user_message")], datetime.now(UTC),
            text="Please contact me by email")
        await old.close()
    asyncio.run(old_store())
    assert cli("memory", "migrate", "--user", "hank")[0] == 1  # the whole store: no user
    code, said = cli("memory", "migrate")
    assert code == 0 and "moved 1 item(s)" in said and "qdrant.migrated" in said
    assert "preference.contact_channel: email" in first_found("contact", "hank")
    assert cli("memory", "migrate")[0] == 1  # nothing left to migrate
    assert cli("memory", "list")[0] == 1  # every other action needs --user
