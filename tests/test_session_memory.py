"""Memory per session is bounded: an LRU cache by bytes over a durable store (evicted
sessions come back from the store), a window of turns in an in-memory session's log."""

from __future__ import annotations

import asyncio
import copy
import io
from typing import Any

import pytest
from pydantic_core import from_json

from hermes_fsm.engine.orchestrator import DEFAULT_SESSION_CACHE_BYTES, Orchestrator
from hermes_fsm.engine.session import Session, SessionCache
from hermes_fsm.errors import UsageError
from hermes_fsm.events.model import EVENTS_ADAPTER, EventList
from hermes_fsm.events.recording import (
    RecordingSink,
    load_recording,
    parse_recording,
    recording_header,
    recording_text,
)
from hermes_fsm.replay.replayer import Replayer
from hermes_fsm.store import InMemoryStore, SQLiteStore
from hermes_fsm.testing import demo_orchestrator

ASKS = [
    "How many A1001 are left in the east?",
    "And in the west?",
    "How many B2002?",
    "How many A1001 are left in the south?",
    "Thanks, how many C3003 in the east?",
]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Any) -> Any:
    return InMemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")


async def store_recording(orchestrator: Orchestrator, session_id: str) -> str:
    """The whole recording of a durable session, from its store (as the server serves it)."""
    assert orchestrator.store is not None
    record = await orchestrator.store.get(session_id)
    assert record is not None
    header = recording_header(orchestrator, session_id, record.user_id)
    events = EVENTS_ADAPTER.validate_python(await orchestrator.store.events_after(session_id))
    return "\n".join([header.model_dump_json(), *(e.model_dump_json() for e in events)]) + "\n"


def one_session_bytes() -> int:
    """What a session holds after one demo turn (to size a cache holding about two)."""
    session = Session("x", "u", "IDLE")
    session.remember("user", ASKS[0], 20)
    session.remember("assistant", "There are 342 A1001 left in the east warehouse.", 20)
    return session.approx_bytes()


def test_a_store_bounds_the_cache_by_default_and_without_one_nothing_is_evicted():
    assert demo_orchestrator(store=InMemoryStore()).session_cache.max_bytes == (
        DEFAULT_SESSION_CACHE_BYTES
    )
    assert demo_orchestrator().session_cache.max_bytes is None  # it would lose the session
    assert (
        demo_orchestrator(store=InMemoryStore(), session_cache_bytes=None).session_cache.max_bytes
        is None
    )


@pytest.mark.parametrize("field", ["event_log_turns", "session_cache_bytes"])
@pytest.mark.parametrize("value", [-1, 2.5, "10"])
def test_a_bound_that_is_not_a_whole_number_is_refused(field, value):
    with pytest.raises(UsageError, match=field):
        demo_orchestrator(**{field: value})


async def test_the_least_recently_used_idle_sessions_are_evicted_to_stay_under_the_bound(store):
    bound = 6 * one_session_bytes()  # a session after its first turn holds more: ~2 fit
    orchestrator = demo_orchestrator(store=store, session_cache_bytes=bound)
    cache = orchestrator.session_cache
    for sid in ("s1", "s2", "s3", "s4"):
        await orchestrator.run_turn(sid, ASKS[0], user_id="u1")
        assert cache.bytes <= bound or len(cache) == 1
    assert cache.evicted >= 1
    assert "s4" in cache and "s1" not in cache  # the oldest went first
    assert cache.bytes == sum(orchestrator.sessions()[s].approx_bytes() for s in cache)
    await orchestrator.run_turn("s2" if "s2" in cache else "s3", ASKS[1], user_id="u1")
    assert cache.info()["max_bytes"] == bound and cache.info()["sessions"] == len(cache)
    await orchestrator.aclose()


async def test_an_unbounded_cache_keeps_every_session():
    orchestrator = demo_orchestrator(store=InMemoryStore(), session_cache_bytes=None)
    for sid in ("s1", "s2", "s3"):
        await orchestrator.run_turn(sid, ASKS[0], user_id="u1")
    assert len(orchestrator.session_cache) == 3 and orchestrator.session_cache.evicted == 0
    assert orchestrator.session_cache.info()["bytes"] == sum(
        s.approx_bytes() for s in orchestrator.sessions().values()
    )


async def test_an_evicted_session_goes_on_from_the_store_on_the_same_orchestrator(store):
    orchestrator = demo_orchestrator(store=store, session_cache_bytes=1)  # evicts every other
    first = await orchestrator.run_turn("s1", ASKS[0], user_id="u1")
    await orchestrator.run_turn("s2", ASKS[0], user_id="u1")  # s1 is evicted now
    assert "s1" not in orchestrator.session_cache
    second = await orchestrator.run_turn("s1", ASKS[1], user_id="u1")  # a follow-up
    assert first.status == second.status == "completed"
    session = orchestrator.sessions()["s1"]
    assert session.history[:2] == [
        {"role": "user", "content": ASKS[0]},
        {"role": "assistant", "content": first.answer},
    ]
    assert second.events[0].seq == first.events[-1].seq + 1  # nothing lost, nothing doubled
    stored = await store.events_after("s1")
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    recording = parse_recording(await store_recording(orchestrator, "s1"), "<store>")
    replayer = Replayer()
    assert replayer.validate(recording).ok
    rerun = await replayer.arerun(recording, raise_on_failure=False)
    assert rerun.ok, rerun.divergences
    assert rerun.turns == 2 and not rerun.notes
    await orchestrator.aclose()


async def test_an_evicted_session_goes_on_in_another_orchestrator(tmp_path):
    path = tmp_path / "s.db"
    first = demo_orchestrator(store=SQLiteStore(path), session_cache_bytes=1)
    answers = [(await first.run_turn("s1", ASKS[0], user_id="u1")).answer]
    await first.run_turn("s2", ASKS[0], user_id="u1")
    assert "s1" not in first.session_cache
    await first.aclose()
    second = demo_orchestrator(store=SQLiteStore(path), session_cache_bytes=1)
    for text in ASKS[1:3]:
        answers.append((await second.run_turn("s1", text, user_id="u1")).answer)
    session = second.sessions()["s1"]
    assert [m["content"] for m in session.history] == [
        text for pair in zip(ASKS[:3], answers, strict=True) for text in pair
    ]
    recording = parse_recording(await store_recording(second, "s1"), "<store>")
    result = await Replayer().arerun(recording, raise_on_failure=False)
    assert result.ok and result.turns == 3, result.divergences
    await second.aclose()


def test_the_cache_never_evicts_a_busy_session_nor_one_it_is_told_to_keep():
    cache = SessionCache({}, max_bytes=1)
    busy, held, idle, current = (Session(s, "u", "IDLE") for s in ("b", "h", "i", "c"))
    busy.busy = True
    for s in (busy, held, idle, current):
        cache.add(s)
    cache.settle(current, keep={"h"})
    assert set(cache) == {"b", "h", "c"} and cache.evicted == 1
    cache.discard("b")
    cache.discard("h")
    assert cache.bytes == current.approx_bytes()


def test_settle_of_a_session_that_is_not_the_cached_copy_changes_nothing():
    cache = SessionCache({}, max_bytes=1)
    cached, stale = Session("s", "u", "IDLE"), Session("s", "u", "IDLE")
    other = cache.add(Session("o", "u", "IDLE"))
    cache.add(cached)
    cache.settle(stale)
    assert set(cache) == {"s", "o"} and cache.view["o"] is other


async def test_without_a_store_the_log_keeps_a_window_and_the_recording_every_turn(tmp_path):
    orchestrator = demo_orchestrator(event_log_turns=2)
    sink = RecordingSink(tmp_path, orchestrator)
    orchestrator.add_sink(sink)
    results = [await orchestrator.run_turn("s1", text, user_id="u1") for text in ASKS]
    sink.close()
    session = orchestrator.sessions()["s1"]
    kept = session.events
    assert {e.turn_id for e in kept} == {r.turn_id for r in results[-2:]}
    assert session.dropped == (3, results[2].events[-1].seq)
    assert kept[0].seq == results[3].events[0].seq
    assert session.events_after(0) == kept  # what is outside the window is not made up
    full = load_recording(sink.path_for("s1"))
    assert [e.turn_id for e in full.events if e.kind == "turn_started"] == [
        r.turn_id for r in results
    ]
    assert (await Replayer().arerun(full, raise_on_failure=False)).ok
    assert len(session.history) == 2 * len(ASKS)  # the history window is its own bound


async def test_replay_of_a_windowed_in_memory_session_says_which_turns_are_outside():
    orchestrator = demo_orchestrator(event_log_turns=1)
    for text in ASKS[:3]:
        result = await orchestrator.run_turn("s1", text, user_id="u1")
    recording = parse_recording(recording_text(orchestrator, "s1"), "<memory>")
    first = result.events[0].seq
    checked = Replayer().validate(recording)
    assert checked.ok and checked.turns == 1
    assert len(checked.notes) == 1 and f"events 1-{first - 1}" in checked.notes[0]
    assert result.turn_id in checked.notes[0]
    rerun = await Replayer().arerun(recording, raise_on_failure=False)
    assert rerun.notes == checked.notes and rerun.to_json()["notes"] == checked.notes


def test_a_window_of_zero_keeps_no_events_but_counts_what_went():
    orchestrator = demo_orchestrator(event_log_turns=0)
    result = asyncio.run(orchestrator.run_turn("s1", ASKS[0]))
    session = orchestrator.sessions()["s1"]
    assert session.events == [] and session.dropped == (1, result.events[-1].seq)


async def test_a_durable_session_rebuilt_from_the_store_keeps_the_window_too(store):
    orchestrator = demo_orchestrator(store=store, event_log_turns=1, session_cache_bytes=1)
    for text in ASKS[:3]:
        result = await orchestrator.run_turn("s1", text, user_id="u1")
    assert {e.turn_id for e in orchestrator.sessions()["s1"].events} == {result.turn_id}
    assert len(await store.events_after("s1")) == result.events[-1].seq  # the store: all


def test_the_configuration_sets_the_bounds_and_serve_says_what_they_are():
    from hermes_fsm.config import HermesConfig, build_orchestrator
    from hermes_fsm.server.serve import server_orchestrator, session_bound

    default = build_orchestrator(HermesConfig(mcp_servers={}, sessions={"store": "memory"}))
    assert default.session_cache.max_bytes == 64 * 2**20 and default.event_log_turns is None
    served = server_orchestrator(HermesConfig(mcp_servers={}, sessions={"store": "memory"}))
    assert served.event_log_turns == 0  # the server reads the store: no log kept
    assert "at most 64 MiB" in session_bound(served) and "last 0 turn(s)" in session_bound(served)
    kept = server_orchestrator(HermesConfig(mcp_servers={}, sessions={"event_log_turns": None}))
    assert kept.event_log_turns is None  # set on purpose, even to "every turn": kept
    tuned = build_orchestrator(
        HermesConfig(
            mcp_servers={}, sessions={"store": "memory", "cache_mb": 0.5, "event_log_turns": 3}
        )
    )
    assert tuned.session_cache.max_bytes == 2**19 and tuned.event_log_turns == 3
    assert "0.5 MiB" in session_bound(tuned) and "last 3 turn(s)" in session_bound(tuned)
    unbounded = build_orchestrator(
        HermesConfig(mcp_servers={}, sessions={"store": "memory", "cache_mb": None})
    )
    assert "unbounded" in session_bound(unbounded)
    assert "grows with the number of sessions" in session_bound(demo_orchestrator())


def test_the_cli_reads_the_store_too_so_a_rebuilt_session_reads_only_its_unfinished_events(
        tmp_path):
    """``run`` and ``chat`` read no in-process log: like ``serve`` they keep none, so a CLI
    process continuing a long session does not read its whole history back."""
    from hermes_fsm.cli.console import ConsolePrinter
    from hermes_fsm.cli.main import _orchestrator
    from hermes_fsm.config import HermesConfig

    config = HermesConfig(mcp_servers={}, memory={"data_dir": str(tmp_path)})
    assert _orchestrator(config, ConsolePrinter(io.StringIO())).event_log_turns == 0
    kept = HermesConfig(mcp_servers={}, memory={"data_dir": str(tmp_path)},
                        sessions={"event_log_turns": 2})
    assert _orchestrator(kept, ConsolePrinter(io.StringIO())).event_log_turns == 2


async def test_readiness_reports_what_the_cached_sessions_hold_and_their_bound():
    from hermes_fsm.server.health import readiness

    orchestrator = demo_orchestrator(store=InMemoryStore(), session_cache_bytes=10**6)
    await orchestrator.run_turn("s1", ASKS[0], user_id="u1")
    ready, checks = await readiness(orchestrator)
    assert ready and checks["sessions"] == {
        "ready": True,
        "sessions": 1,
        "bytes": orchestrator.sessions()["s1"].approx_bytes(),
        "max_bytes": 10**6,
        "evicted": 0,
    }


def test_replay_on_the_command_line_prints_the_note_of_a_windowed_recording(tmp_path, capsys):
    from hermes_fsm.cli.main import main

    orchestrator = demo_orchestrator(event_log_turns=1)
    for text in ASKS[:2]:
        asyncio.run(orchestrator.run_turn("s1", text, user_id="u1"))
    path = tmp_path / "s1.jsonl"
    path.write_text(recording_text(orchestrator, "s1"), encoding="utf-8")
    out = io.StringIO()
    code = main(["replay", "validate", str(path)], out=out)
    printed = out.getvalue() + capsys.readouterr().out
    assert code == 0, printed
    assert f"note: {path}: events 1-" in printed and "event_log_turns" in printed


async def test_a_configured_orchestrator_keeps_every_event_by_default():
    """``recording_text`` and other readers of the in-process log need every event (with
    no store it is their only copy); only the server, which reads the store, keeps none."""
    from hermes_fsm.config import HermesConfig, build_orchestrator
    from hermes_fsm.memory import InProcessMemory

    bare = build_orchestrator(HermesConfig(mcp_servers={}), store=None,
                              memory=InProcessMemory())
    assert bare.event_log_turns is None
    async with bare:
        await bare.run_turn("s-bare", "How many A1001 are left in the east warehouse?",
                            user_id="alice")
        kinds = [e.kind for e in bare.session("s-bare", user_id="alice").events]
    assert kinds[0] == "turn_started" and "turn_finished" in kinds
    windowed = build_orchestrator(HermesConfig(mcp_servers={}, sessions={"event_log_turns": 2}),
                                  store=None, memory=InProcessMemory())
    assert windowed.event_log_turns == 2  # set on purpose: kept


def session_state(session: Session) -> dict[str, Any]:
    """Everything a cached session holds that its next turn or a reader of its log sees
    (a deep copy: the live session goes on changing)."""
    return copy.deepcopy({
        "user_id": session.user_id, "state": session.state, "seq": session.seq,
        "history": session.history, "summary": session.summary,
        "conversation": None if session.conversation is None else session.conversation.to_data(),
        "late": session.late, "dropped": session.dropped,
        "events": [e.model_dump(mode="json") for e in session.events],
        "event_lines": [from_json(line) for line in session.event_lines()],
    })


@pytest.mark.parametrize("window", [None, 2, 0])
async def test_an_evicted_session_reloaded_from_the_store_is_the_session_it_was(store, window):
    # a bound of 1 byte keeps only the session of the last turn: s1 goes when "other" runs
    orchestrator = demo_orchestrator(store=store, session_cache_bytes=1, event_log_turns=window)
    for text in ASKS:
        await orchestrator.run_turn("s1", text, user_id="u1")
        before = session_state(orchestrator.sessions()["s1"])
        await orchestrator.run_turn("other", "How many B2002?", user_id="u2")
        assert "s1" not in orchestrator.session_cache and orchestrator.session_cache.evicted
        assert await orchestrator.resume("s1") is None  # rebuilt from the store, no turn run
        after = session_state(orchestrator.sessions()["s1"])
        if window == 0:  # no log kept, none read back: up to where, not how many entries
            assert after.pop("dropped")[1] == before.pop("dropped")[1] == before["seq"]
        assert after == before
    assert orchestrator.session_cache.info()["bytes"] == sum(
        s.approx_bytes() for s in orchestrator.sessions().values())
    await orchestrator.aclose()



async def test_a_log_entry_holds_no_more_memory_than_its_json():
    """The log keeps each turn's JSON for the session's life: it must not keep the writer's
    spare capacity with it (orjson >= 3.12 hands out its buffer rounded up to a power of two
    and never shrinks it: the bench's 5.3 KB turn held 8 KiB, and the cache's bound, which
    counts the JSON's length, understated what sessions held)."""
    import tracemalloc

    orchestrator = demo_orchestrator()
    result = await orchestrator.run_turn("s", ASKS[0], "u")
    events = result.events
    assert isinstance(events, EventList)  # what the engine records
    for _ in range(2):  # warm: whatever the first write caches is not the log's
        Session("w", "u", "IDLE").record(events)
    session = Session("x", "u", "IDLE")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        session.record(events)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    blob = session.event_lines()  # parsed back: the entry is the turn's JSON
    size = sum(len(line) for line in blob) + len(blob) + 1  # the array's commas and brackets
    assert size > 4000, "a demo turn's events are several KB of JSON"
    # the entry's bytes, its tuple and the log list's slot: ~200 bytes beyond the JSON
    assert held <= size + 300, f"one log entry holds {held} bytes for {size} bytes of JSON"
