"""Forgetting a user removes her everywhere: every memory tier, the experience log, the
session store (sessions, messages, events, checkpoints, journalled calls), the sessions
cached in the process, and her memory commits still retried in the background — and
nobody else's data (issue 16, defect 6)."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from hermes_fsm.cli.main import main
from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.memory import BackgroundCommits, InProcessMemory
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from tests.store.conftest import dispose_store, make_store
from tests.support import INTENT_CHAT, graph_with, happy_script

SECRET = "my account number is 4242-ALICE"
COMMIT = {"memory_updates": [{"key": "preference.contact", "update_type": "create",
                              "value": "email", "evidence_source": "user_message"}]}


def brain() -> ScriptedBrain:
    return ScriptedBrain(happy_script(intent=[INTENT_CHAT], memory_commit=[COMMIT]))


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_forget_user_removes_her_from_the_store_and_the_next_turn_starts_afresh(
        kind, tmp_path):
    store = await make_store(kind, tmp_path)
    try:
        scripted, memory = brain(), InProcessMemory()
        orchestrator = demo_orchestrator(graph_with(), brain=scripted, memory=memory,
                                         store=store)
        await orchestrator.run_turn("sa", SECRET, user_id="alice")
        await orchestrator.run_turn("sa", "and remember it", user_id="alice")
        await orchestrator.run_turn("sb", "bob's own words", user_id="bob")
        bob_events = await store.events_after("sb")
        bob_items = await memory.items("bob")

        report = await orchestrator.forget_user("alice")

        assert report["sessions"] == 1 and report["messages"] == 4
        assert report["events"] > 0 and report["checkpoints"] == 1
        assert report["memory"]["semantic"] >= 1 and report["experience"] >= 1
        assert report["cached_sessions"] == 1
        assert await store.sessions_of("alice") == []
        assert await store.get("sa") is None
        assert await store.events_after("sa") == []
        assert await store.messages("sa") == []
        assert await store.checkpoint("sa") is None
        assert await memory.items("alice") == []
        # bob is untouched
        assert await store.events_after("sb") == bob_events
        assert (await store.messages("sb"))[0].content == "bob's own words"
        assert await memory.items("bob") == bob_items

        # her next turn on the old session id feeds the brain nothing of the past
        scripted.requests.clear()
        result = await orchestrator.run_turn("sa", "hello again", user_id="alice")
        assert result.status == "completed"
        for request in scripted.requests:
            assert SECRET not in json.dumps([dict(m) for m in request.history])
            assert SECRET not in (request.summary or "")
        assert (await store.messages("sa"))[0].content == "hello again"
        assert all(e["turn_id"] == result.turn_id for e in await store.events_after("sa"))
    finally:
        await dispose_store(store)


async def test_forget_user_without_a_store_drops_her_cached_sessions():
    scripted = brain()
    orchestrator = demo_orchestrator(graph_with(), brain=scripted)
    await orchestrator.run_turn("sa", SECRET, user_id="alice")
    await orchestrator.run_turn("sb", "bob", user_id="bob")
    report = await orchestrator.forget_user("alice")
    assert report["cached_sessions"] == 1 and report["sessions"] == 0
    assert list(orchestrator.sessions()) == ["sb"]
    scripted.requests.clear()
    await orchestrator.run_turn("sa", "hello again", user_id="alice")
    assert all(SECRET not in json.dumps([dict(m) for m in r.history])
               for r in scripted.requests)


class FailingFirstMemory(InProcessMemory):
    """The first commit fails; its background retries would succeed ``delay_s`` later."""

    def __init__(self, delay_s: float = 0.2) -> None:
        super().__init__()
        self.background = BackgroundCommits(attempts=3, delay_s=delay_s)
        self.calls = 0

    async def apply(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise MemoryStoreError("semantic store: connection lost (test)")
        return await super().apply(*args, **kwargs)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_background_retry_pending_at_forget_does_not_bring_an_item_back(
        kind, tmp_path):
    store = await make_store(kind, tmp_path)
    try:
        memory = FailingFirstMemory()
        orchestrator = demo_orchestrator(graph_with(), brain=brain(), memory=memory,
                                         store=store)
        await orchestrator.run_turn("sa", SECRET, user_id="alice")
        assert memory.background.pending == 1
        report = await orchestrator.forget_user("alice")
        assert report["memory"]["pending_commits"] == 1
        await asyncio.sleep(0.5)  # past when the retry would have written
        assert memory.calls == 1
        assert await memory.items("alice") == []
        assert await store.sessions_of("alice") == []
    finally:
        await dispose_store(store)


async def test_memory_forget_alone_cancels_her_pending_background_retry():
    memory = FailingFirstMemory(delay_s=0.05)
    orchestrator = demo_orchestrator(graph_with(), brain=brain(), memory=memory)
    await orchestrator.run_turn("sa", SECRET, user_id="alice")
    await orchestrator.run_turn("sb", "bob", user_id="bob")
    assert memory.background.pending == 1
    await memory.forget("alice")
    await asyncio.sleep(0.3)  # past when the retry would have written
    assert await memory.items("alice") == []
    assert len(await memory.items("bob")) == 1


async def test_a_commit_queued_before_forget_is_dropped_and_a_later_one_is_kept():
    memory = InProcessMemory()
    update = MemoryUpdate(key="k", update_type="create", value="v", evidence_source="user_message")
    gate = asyncio.Event()
    real_write = memory.semantic.write

    async def slow_write(*args: Any) -> Any:
        await gate.wait()
        return await real_write(*args)

    memory.semantic.write = slow_write  # type: ignore[method-assign,assignment]
    now = datetime.now(UTC)
    first = asyncio.ensure_future(memory.apply("alice", "t1", [update], now))
    await asyncio.sleep(0.01)  # t1 is being written
    second = asyncio.ensure_future(memory.apply("alice", "t2", [update], now))
    await asyncio.sleep(0.01)  # t2 waits behind it
    forget = asyncio.ensure_future(memory.forget_report("alice"))
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(first, second, forget)
    assert (await second)[0].status == "skipped"
    assert await memory.items("alice") == []  # t1 landed before the delete, t2 never
    await memory.apply("alice", "t3", [update], now)
    assert len(await memory.items("alice")) == 1


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_memory_forget_cli_clears_sessions_list_and_record_export(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    assert cli("run", "--user", "alice", "--session", "sa", SECRET)[0] == 0
    assert cli("run", "--user", "bob", "--session", "sb", "bob's words")[0] == 0
    assert "sa" in cli("sessions", "list", "--user", "alice")[1]
    code, text = cli("memory", "forget", "--all", "--yes", "--user", "alice")
    assert code == 0 and "1 session(s)" in text and "experience log" in text
    code, listed = cli("sessions", "list", "--user", "alice")
    assert "0 session(s)" in listed and SECRET not in listed
    code, exported = cli("record", "export", "sa")
    assert SECRET not in exported
    assert "bob's words" in cli("record", "export", "sb")[1]
    assert "1 session(s)" in cli("sessions", "list", "--user", "bob")[1]
    assert not list(tmp_path.rglob("*.jsonl")) or all(
        SECRET not in p.read_text(encoding="utf-8") for p in tmp_path.rglob("*.jsonl"))
    code, out = cli("memory", "forget", "--all", "--yes", "--user", "alice", "--json")
    report = json.loads(out)
    assert code == 0 and report["sessions"] == 0 and report["user_id"] == "alice"
    assert set(report) >= {"sessions", "messages", "events", "checkpoints", "effects",
                           "memory", "experience", "cached_sessions"}


def test_after_forget_no_file_in_the_data_dir_holds_her_text(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path))
    assert cli("run", "--user", "alice", "--session", "sa", SECRET)[0] == 0
    assert cli("run", "--user", "bob", "--session", "sb", "bob's words")[0] == 0
    assert cli("memory", "forget", "--all", "--yes", "--user", "alice")[0] == 0
    holding = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
               if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert holding == []
