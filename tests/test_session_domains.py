"""A session declares its memory domain (seed 003 §5) and the engine keeps its turns'
recall and commits inside it: through the orchestrator (in-process and durable), the
CLI's ``--domain`` and the server's ``domain`` field."""

from __future__ import annotations

import httpx
import pytest

from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.errors import SessionError, UsageError
from hermes_fsm.memory import InProcessMemory
from hermes_fsm.server import create_app
from hermes_fsm.store import SQLiteStore
from tests.http_support import served

DOMAINS = ("credit_card", "wealth", "loans")
USERS = [f"user-{n}" for n in range(5)]
STORE_IT = "Please contact me by email"
ASK = "how should I be contacted?"


def recalled_ids(result) -> list[str]:
    return [item["item_id"] for e in result.events if e.kind == "memory_recalled"
            for item in e.items]


async def test_a_memory_committed_in_one_domain_is_never_recalled_in_another() -> None:
    """Over many users and domains, through the orchestrator: the preference stored in a
    turn of a ``credit_card`` session lands in that domain, a later ``credit_card``
    session of the same user recalls it, and no session of another domain ever does."""
    memory = InProcessMemory()
    orchestrator = build_orchestrator(memory=memory)
    try:
        for user in USERS:
            result = await orchestrator.run_turn(f"{user}-store", STORE_IT, user_id=user,
                                                 domain="credit_card")
            assert [e.domain for e in result.events if e.kind == "turn_started"] == [
                "credit_card"]
        domain_of = {}
        for user in USERS:
            (item,) = [i for i in await memory.items(user) if i.status == "active"]
            assert (item.key, item.value, item.domain) == (
                "preference.contact_channel", "email", "credit_card")
            domain_of[item.item_id] = item.domain
        for user in USERS:
            for domain in DOMAINS:
                result = await orchestrator.run_turn(f"{user}-{domain}-ask", ASK,
                                                     user_id=user, domain=domain)
                found = recalled_ids(result)
                if domain == "credit_card":
                    assert found and {domain_of[i] for i in found} == {"credit_card"}
                else:
                    assert found == [], (user, domain)
        # a session of no domain is not a domain's session: it is not restricted
        result = await orchestrator.run_turn(None, ASK, user_id=USERS[0])
        assert recalled_ids(result)
    finally:
        await orchestrator.aclose()


async def test_a_commit_in_a_domain_session_does_not_supersede_another_domains() -> None:
    memory = InProcessMemory()
    orchestrator = build_orchestrator(memory=memory)
    try:
        await orchestrator.run_turn(None, STORE_IT, user_id="alice", domain="wealth")
        await orchestrator.run_turn(None, "Please contact me by phone", user_id="alice",
                                    domain="credit_card")
        active = {(i.domain, i.value) for i in await memory.items("alice")
                  if i.status == "active"}
        assert active == {("wealth", "email"), ("credit_card", "phone")}
    finally:
        await orchestrator.aclose()


async def test_a_session_keeps_the_domain_it_was_created_in() -> None:
    orchestrator = build_orchestrator(memory=InProcessMemory())
    try:
        await orchestrator.run_turn("s1", "hello", user_id="alice", domain="wealth")
        assert orchestrator.session("s1").domain == "wealth"
        await orchestrator.run_turn("s1", "hello again", user_id="alice")  # its own
        with pytest.raises(SessionError, match="created in memory domain 'wealth'"):
            await orchestrator.run_turn("s1", "hi", user_id="alice", domain="credit_card")
        await orchestrator.run_turn("s2", "hello", user_id="alice")
        with pytest.raises(SessionError, match="created in no memory domain"):
            await orchestrator.run_turn("s2", "hi", user_id="alice", domain="wealth")
        with pytest.raises(UsageError, match="non-blank name"):
            await orchestrator.run_turn("s3", "hi", user_id="alice", domain=" ")
        fresh = orchestrator.session("s4", "alice", domain="loans")  # declared at creation
        assert fresh.domain == "loans"
    finally:
        await orchestrator.aclose()


async def test_shared_domains_in_configuration_also_recall_the_general_profile() -> None:
    """``memory.shared_domains``: such a domain's sessions also recall items of no domain;
    the others do not, and neither recalls another domain's."""
    memory = InProcessMemory()
    memory.shared_domains = frozenset({"wealth"})
    orchestrator = build_orchestrator(memory=memory)
    try:
        await orchestrator.run_turn(None, STORE_IT, user_id="bob")  # no domain: general
        shared = await orchestrator.run_turn(None, ASK, user_id="bob", domain="wealth")
        strict = await orchestrator.run_turn(None, ASK, user_id="bob", domain="credit_card")
        assert recalled_ids(shared) and recalled_ids(strict) == []
    finally:
        await orchestrator.aclose()


async def test_a_durable_sessions_domain_survives_another_process(tmp_path) -> None:
    """The domain is in the session's events and checkpoint: an orchestrator that
    rebuilds the session from the store keeps its turns in it, and refuses another."""
    memory = InProcessMemory()
    first = build_orchestrator(memory=memory, store=SQLiteStore(tmp_path / "s.db"))
    try:
        await first.run_turn("d1", STORE_IT, user_id="carol", domain="credit_card")
        await first.run_turn("w1", "hello", user_id="carol", domain="wealth")
    finally:
        await first.aclose()
    second = build_orchestrator(memory=memory, store=SQLiteStore(tmp_path / "s.db"))
    try:
        again = await second.run_turn("d1", ASK, user_id="carol")  # no domain given
        assert [e.domain for e in again.events if e.kind == "turn_started"] == ["credit_card"]
        assert recalled_ids(again)
        wealth = await second.run_turn("w1", ASK, user_id="carol")
        assert recalled_ids(wealth) == []
        with pytest.raises(SessionError, match="created in memory domain 'wealth'"):
            await second.run_turn("w1", ASK, user_id="carol", domain="credit_card")
    finally:
        await second.aclose()


async def test_the_server_takes_a_new_sessions_domain() -> None:
    memory = InProcessMemory()
    orchestrator = build_orchestrator(memory=memory)
    async with served(create_app(orchestrator)) as url, httpx.AsyncClient(
            base_url=url, timeout=20) as http:
        stored = await http.post("/v1/sessions/s1/turns", json={
            "text": STORE_IT, "user_id": "dave", "domain": "credit_card"})
        refused = await http.post("/v1/sessions/s1/turns", json={
            "text": ASK, "user_id": "dave", "domain": "wealth"})
        blank = await http.post("/v1/sessions/s2/turns", json={
            "text": ASK, "user_id": "dave", "domain": ""})
    await orchestrator.aclose()
    assert stored.status_code == 200
    assert orchestrator.sessions()["s1"].domain == "credit_card"
    assert refused.status_code == 403 and "memory domain" in refused.json()["error"]["message"]
    assert blank.status_code == 422
    assert [i.domain for i in await memory.items("dave")] == ["credit_card"]


def test_the_cli_declares_the_sessions_domain(tmp_path, monkeypatch, capsys) -> None:
    import io

    from hermes_fsm.cli.main import main

    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    out = io.StringIO()
    assert main(["run", STORE_IT, "--user", "erin", "--domain", "credit_card",
                 "--session", "c1", "--json"], out=out) == 0
    out = io.StringIO()
    assert main(["run", ASK, "--user", "erin", "--domain", "wealth", "--session", "c1"],
                out=out) == 1
    assert "created in memory domain 'credit_card'" in capsys.readouterr().err


def test_shared_domains_come_from_the_configuration(tmp_path) -> None:
    from hermes_fsm.config.memory import build_memory
    from hermes_fsm.memory.settings import MemoryConfig

    memory = build_memory(MemoryConfig(data_dir=tmp_path, shared_domains=["wealth"]))
    assert memory.shared_domains == frozenset({"wealth"})
    assert build_memory(MemoryConfig(data_dir=tmp_path)).shared_domains == frozenset()


async def test_a_memory_bound_to_a_domain_refuses_a_session_of_another() -> None:
    memory = InProcessMemory().in_domain("wealth")
    orchestrator = build_orchestrator(memory=memory)
    try:
        assert (await orchestrator.run_turn(None, STORE_IT, user_id="fay",
                                            domain="wealth")).status == "completed"
        with pytest.raises(UsageError, match="bound to domain 'wealth'"):
            await memory.recall("fay", ASK, domain="credit_card")
        with pytest.raises(UsageError, match="bound to domain 'wealth'"):
            await memory.apply("fay", "t9", [], orchestrator.services.clock.now(),
                               domain="credit_card")
    finally:
        await orchestrator.aclose()


async def test_the_experience_of_another_domains_session_is_not_recalled() -> None:
    """Experience entries carry their session's domain: a domain session's walk keeps the
    domain's entries only, so a tool outcome of a ``credit_card`` session never reaches a
    ``wealth`` session's recall or planning (tests/memory/test_experience_domains.py: the
    same domain's other sessions do, on SQLite and PostgreSQL)."""
    memory = InProcessMemory()
    orchestrator = build_orchestrator(memory=memory)
    try:
        await orchestrator.run_turn("cc", "How many A1001 are left in the east?",
                                    user_id="gus", domain="credit_card")
        assert [e for e in await memory.experience.entries("gus") if e.kind == "tool_call"]
        mine = await memory.walk("gus", "A1001 stock", session_id="cc", entities=["A1001"],
                                 domain="credit_card")
        assert mine.experience and {e.session_id for e in mine.experience} == {"cc"}
        other = await memory.walk("gus", "A1001 stock", session_id="w", entities=["A1001"],
                                  domain="wealth")
        assert other.experience == [] and other.keyed_by == ()
        result = await orchestrator.run_turn("w", "How many A1001 are left in the east?",
                                             user_id="gus", domain="wealth")
        for event in result.events:
            if event.kind == "memory_recalled":
                assert event.layers[-1]["entries"] == []
    finally:
        await orchestrator.aclose()
