"""The rolling summary in durable sessions (checkpoint, resume) and archiving idle sessions
into long-term memory — on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.brain.protocol import SummaryRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.cli.main import main
from hermes_fsm.engine.archive import archive_session
from hermes_fsm.errors import MemoryStoreError, SessionArchived, StoreError, UsageError
from hermes_fsm.memory import InProcessMemory
from hermes_fsm.sources import FixedClock
from hermes_fsm.store import InMemoryStore
from hermes_fsm.testing import HANG, ScriptedBrain, demo_orchestrator
from tests.store.conftest import dispose_store, make_store
from tests.support import happy_script

CONSTRAINT = "I must submit the tax report before Friday 5pm."
QUESTION = "How many A1001 are left in the east warehouse?"
LATER = datetime.now(UTC) + timedelta(hours=1)  # "now" for archiving: every session is idle


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: Any, tmp_path: Any) -> AsyncIterator[Any]:
    made = await make_store(request.param, tmp_path)
    yield made
    await dispose_store(made)


class Rules(RulesBrain):
    """The rules brain, noting every request."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Any] = []

    async def decide(self, request: Any) -> Any:
        self.requests.append(request)
        return await super().decide(request)


def durable(store: Any, brain: Any = None, memory: Any = None, **kwargs: Any) -> Orchestrator:
    """An orchestrator on ``store`` that folds history into its summary every few turns."""
    return demo_orchestrator(store=store, brain=brain or Rules(),
                             memory=memory or InProcessMemory(), clock=FixedClock(),
                             history_window=4, **kwargs)  # ids: unique per process


async def talk(orchestrator: Orchestrator, session: str, *texts: str,
               user: str = "alice") -> None:
    for text in texts:
        await orchestrator.run_turn(session, text, user_id=user)


# --- the summary is part of the checkpoint -------------------------------------------------


async def test_the_rolling_summary_is_checkpointed_and_resumed_by_another_process(
        store: Any) -> None:
    first = durable(store)
    await talk(first, "s1", CONSTRAINT, QUESTION, "hello")
    session = first.sessions()["s1"]
    assert "before Friday 5pm" in session.summary

    checkpoint = await store.checkpoint("s1")
    assert checkpoint.data["summary"] == session.summary
    assert checkpoint.data["history"] == session.history

    brain = Rules()
    second = durable(store, brain=brain)  # another process: nothing cached
    await talk(second, "s1", "thanks")
    assert brain.requests[0].summary == session.summary
    assert list(brain.requests[0].history) == session.history


async def test_a_fold_made_by_a_turn_that_crashed_is_kept_when_the_turn_resumes(
        store: Any) -> None:
    await talk(durable(store), "s1", CONSTRAINT, QUESTION)  # two turns: four messages
    reached = asyncio.Event()

    def stuck(request: Any) -> Any:
        reached.set()
        return HANG

    crashing = durable(store, brain=ScriptedBrain(happy_script(response=[stuck])))
    task = asyncio.create_task(crashing.run_turn("s1", "and B2002?", user_id="alice"))
    await reached.wait()  # INTENT folded the history; RESPONSE hangs: the process "dies"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stored = await store.events_after("s1", (await store.checkpoint("s1")).seq)
    (fold,) = [e for e in stored if e["kind"] == "context_built" and e["summary"] is not None]
    assert fold["folded"] == 4 and "before Friday 5pm" in fold["summary"]

    resumed = durable(store)
    result = await resumed.resume("s1")
    assert result is not None and result.status == "completed"
    session = resumed.sessions()["s1"]
    assert session.summary == fold["summary"]
    assert [m["content"] for m in session.history] == ["and B2002?", result.answer]
    assert (await store.checkpoint("s1")).data["summary"] == fold["summary"]


# --- archiving ------------------------------------------------------------------------------


async def test_idle_sessions_are_summarized_into_long_term_memory_and_archived(
        store: Any) -> None:
    memory = InProcessMemory()
    orchestrator = durable(store, memory=memory)
    await talk(orchestrator, "s1", CONSTRAINT, QUESTION, "hello")

    results = await orchestrator.archive_idle(timedelta(minutes=30), now=LATER)

    (archived,) = results
    assert (archived.session_id, archived.user_id, archived.status) == ("s1", "alice",
                                                                        "archived")
    assert archived.summarizer == "rules" and archived.memory_key == "conversation.s1"
    assert "before Friday 5pm" in archived.summary
    record = await store.get("s1")
    assert record.archived and record.summary == archived.summary
    items = await memory.items("alice")
    lines = archived.summary.splitlines()
    assert archived.memory_items == len(items) == len(lines) > 1
    assert [i.key for i in items] == [f"conversation.s1.{n}" for n in range(1, len(lines) + 1)]
    assert [i.value for i in items] == lines  # the summary, one item per line
    assert {(i.memory_type, i.evidence, i.status) for i in items} == {
        ("fact", "session:s1", "active")}
    assert await store.idle_sessions(LATER) == []


async def test_a_turn_on_an_archived_session_is_refused_in_any_process(store: Any) -> None:
    orchestrator = durable(store)
    await talk(orchestrator, "s1", CONSTRAINT)
    await orchestrator.archive_idle(timedelta(0), now=LATER)
    seq = (await store.get("s1")).seq

    with pytest.raises(SessionArchived, match="Start a new session"):
        await orchestrator.run_turn("s1", "hello again", user_id="alice")
    with pytest.raises(SessionArchived):
        await durable(store).run_turn("s1", "hello again", user_id="alice")
    assert (await store.get("s1")).seq == seq  # nothing was appended


async def test_a_new_session_of_the_user_starts_from_long_term_memory(store: Any) -> None:
    memory = InProcessMemory()
    orchestrator = durable(store, memory=memory)
    await talk(orchestrator, "s1", CONSTRAINT, QUESTION, "hello")
    await orchestrator.archive_idle(timedelta(minutes=30), now=LATER)

    brain = Rules()
    fresh = durable(store, brain=brain, memory=memory)
    result = await fresh.run_turn("s2", "When is the tax report due?", user_id="alice")

    (recalled,) = [e for e in result.events if e.kind == "memory_recalled"]
    assert recalled.items[0]["key"] == "conversation.s1.1"  # the line about the tax report
    assert recalled.items[0]["value"] == f"user: {CONSTRAINT}"
    first = brain.requests[0]
    assert "before Friday 5pm" in first.memory
    assert list(first.history) == [] and first.summary == ""  # no old messages carried over
    other = await durable(store, memory=memory).run_turn("s3", "When is the tax report due?",
                                                         user_id="bob")
    assert not [e for e in other.events if e.kind == "memory_recalled"]  # never another user's


async def test_sessions_not_idle_long_enough_are_left_alone(store: Any) -> None:
    orchestrator = durable(store)
    await talk(orchestrator, "s1", CONSTRAINT)
    assert await orchestrator.archive_idle(timedelta(hours=1)) == []
    assert not (await store.get("s1")).archived
    await talk(orchestrator, "s1", "still here")


async def test_a_dry_run_only_says_what_would_be_archived(store: Any) -> None:
    orchestrator = durable(store)
    await talk(orchestrator, "s1", CONSTRAINT, "hello")
    (result,) = await orchestrator.archive_idle(timedelta(0), now=LATER, dry_run=True)
    assert (result.status, result.messages) == ("would_archive", 4)
    assert not (await store.get("s1")).archived


async def test_a_session_with_a_turn_running_is_skipped(store: Any) -> None:
    orchestrator = durable(store)
    await talk(orchestrator, "s1", CONSTRAINT)
    assert orchestrator.durable is not None
    hold = await orchestrator.durable.lease.acquire("s1", 0.0)
    assert hold is not None
    try:
        (result,) = await orchestrator.archive_idle(timedelta(0), now=LATER)
    finally:
        await hold.release()
    assert (result.status, result.detail) == ("skipped", "a turn is running on it")
    assert not (await store.get("s1")).archived


class BrokenMemory(InProcessMemory):
    async def apply(self, *args: Any, **kwargs: Any) -> Any:
        raise MemoryStoreError("semantic store unreachable")


async def test_when_memory_cannot_take_the_summary_the_session_stays_unarchived(
        store: Any) -> None:
    orchestrator = durable(store)
    await talk(orchestrator, "s1", CONSTRAINT)
    orchestrator.services.memory = BrokenMemory()

    (result,) = await orchestrator.archive_idle(timedelta(0), now=LATER)

    assert result.status == "failed" and "semantic store unreachable" in result.detail
    assert not (await store.get("s1")).archived
    orchestrator.services.memory = InProcessMemory()
    (again,) = await orchestrator.archive_idle(timedelta(0), now=LATER)  # the next run retries
    assert again.status == "archived"


async def test_archiving_again_after_a_crash_writes_nothing_twice(
        store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = InProcessMemory()
    orchestrator = durable(store, memory=memory)
    await talk(orchestrator, "s1", CONSTRAINT, "hello")
    assert orchestrator.durable is not None

    async def lost(session_id: str, summary: str) -> None:
        raise StoreError("connection lost")

    with monkeypatch.context() as patch:  # memory written, then the store fails
        patch.setattr(store, "archive", lost)
        with pytest.raises(StoreError):
            await archive_session(orchestrator.durable, "s1", now=LATER)
    written = len(await memory.items("alice"))
    assert written > 0 and not (await store.get("s1")).archived

    again = await archive_session(orchestrator.durable, "s1", now=LATER)
    third = await archive_session(orchestrator.durable, "s1", now=LATER)
    assert (again.status, third.status, third.detail) == ("archived", "skipped",
                                                          "already archived")
    assert len(await memory.items("alice")) == written == again.memory_items


async def test_a_failing_brain_summary_falls_back_when_archiving(store: Any) -> None:
    class Failing(Rules):
        name = "flaky"

        async def summarize(self, request: SummaryRequest) -> str:
            raise RuntimeError("model offline")

    orchestrator = durable(store, brain=Failing())
    await talk(orchestrator, "s1", CONSTRAINT)
    (result,) = await orchestrator.archive_idle(timedelta(0), now=LATER)
    assert (result.status, result.summarizer) == ("archived", "extractive")
    assert result.summary_error == "RuntimeError: model offline"
    assert "before Friday 5pm" in result.summary


async def test_archiving_needs_a_store_and_a_sensible_age() -> None:
    with pytest.raises(UsageError, match="store"):
        await demo_orchestrator().archive_idle(timedelta(minutes=30))
    with pytest.raises(UsageError, match="negative"):
        await durable(InMemoryStore()).archive_idle(timedelta(minutes=-1))


# --- the command line ------------------------------------------------------------------------


def cli(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return main(argv, out=out), out.getvalue()


def test_the_cli_archives_idle_sessions_and_a_new_session_recalls_them(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HERMES_CONFIG", raising=False)
    config = tmp_path / "hermes.yaml"
    config.write_text(f"mcp_servers: {{}}\nsessions: {{store: sqlite, sqlite_path: "
                      f"{tmp_path / 's.db'}}}\nmemory: {{data_dir: {tmp_path / 'data'}}}\n",
                      encoding="utf-8")
    at = ["--config", str(config)]
    assert cli(["run", *at, "--session", "s1", "--user", "alice", CONSTRAINT])[0] == 0

    code, out = cli(["sessions", "archive", "--idle", "0s", *at])
    assert code == 0, out
    assert "archived s1 (user alice): 2 message(s) summarized by rules → " in out
    assert "memory item(s) conversation.s1.*" in out
    code, out = cli(["sessions", "list", "--user", "alice", *at])
    assert code == 0 and "s1  archived" in out

    capsys.readouterr()
    code, _ = cli(["run", *at, "--session", "s1", "--user", "alice", "hello"])
    err = capsys.readouterr().err
    assert code == 1 and "is archived" in err and "Traceback" not in err
    code, out = cli(["run", *at, "--session", "s2", "--user", "alice", "--json",
                     "When is the tax report due?"])
    assert code == 0 and '"conversation.s1.1"' in out


@pytest.mark.parametrize("argv, message", [
    (["sessions", "archive", "--idle", "30"], "with units"),
    (["sessions", "archive"], "needs --idle"),
    (["sessions", "list"], "needs --user"),
])
def test_the_cli_explains_a_wrong_sessions_command(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli(argv)
    err = capsys.readouterr().err
    assert code == 1 and message in err


# --- over HTTP --------------------------------------------------------------------------------


async def test_over_http_a_turn_on_an_archived_session_is_410_gone(tmp_path: Any) -> None:
    import httpx

    from hermes_fsm.server import create_app
    from hermes_fsm.store import SQLiteStore
    from tests.http_support import served

    orchestrator = durable(SQLiteStore(tmp_path / "s.db"))
    await talk(orchestrator, "s1", CONSTRAINT)
    await orchestrator.archive_idle(timedelta(0), now=LATER)
    app = create_app(orchestrator, tokens={"t": "alice"})
    headers = {"Authorization": "Bearer t"}
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        gone = await http.post("/v1/sessions/s1/turns", json={"text": "hi"}, headers=headers)
        fresh = await http.post("/v1/sessions/s2/turns", json={"text": "hi"}, headers=headers)
    assert gone.status_code == 410
    assert gone.json()["error"]["code"] == "session_archived"
    assert fresh.status_code == 200
