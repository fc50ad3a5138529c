"""Canary error rates from the experience log (seed 003 §4): a call of a canaried tool is
logged with the version that ran it, and a rollback as an entry of its own, so a rollback
decided in one process holds in another on the same store (SQLite embedded, PostgreSQL),
and a process judges each version by the calls of every process."""

from __future__ import annotations

import asyncio
import io
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_fsm.cli.main import main
from hermes_fsm.cli.tools import tool_record
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import HermesConfig
from hermes_fsm.memory import HashingEmbedder
from hermes_fsm.memory.experience import Experience
from hermes_fsm.memory.sqlite_experience import SQLiteExperienceLog
from hermes_fsm.memory.turn_experience import experiences_of
from hermes_fsm.sources import FixedClock, SequentialIds
from tests.canary_tools import CANDIDATE_VERSION
from tests.memory.conftest import PG_URL, need

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ASK = "How many A1001 are left in the east warehouse?"
STABLE_VERSION = "1.1.0"


def config(tmp_path: Any, kind: str, schema: str) -> HermesConfig:
    return HermesConfig.model_validate(config_data(tmp_path, kind, schema))


def config_data(tmp_path: Any, kind: str, schema: str) -> dict[str, Any]:
    memory: dict[str, Any] = {"data_dir": str(tmp_path)}
    if kind == "postgres":
        memory.update(postgres_url=PG_URL, postgres_schema=schema)
    return {
        "mcp_servers": {}, "sessions": {"store": "memory"}, "memory": memory,
        "tools": {"local": ["tests.canary_tools:registry"], "demo": True,
                  "breaker": {"experience": {"enabled": False}},
                  "canaries": {"inventory_lookup": {
                      "candidate": "inventory_lookup_v2", "share": 1.0, "margin": 0.2,
                      "window": 10, "min_calls": 3, "refresh_s": 0}}}}


async def store_log(tmp_path: Any, kind: str, schema: str) -> Any:
    """A log instance of its own on the same store: what another process reads and writes."""
    if kind == "postgres":
        need(PG_URL, 5432, "PostgreSQL")
        from hermes_fsm.memory.postgres_experience import PostgresExperienceLog

        return PostgresExperienceLog(PG_URL, schema=schema, embedder=HashingEmbedder())
    return SQLiteExperienceLog(tmp_path / "experience.sqlite", HashingEmbedder())


@pytest.fixture(params=["sqlite", "postgres"])
async def shared(request: Any, tmp_path: Any) -> Any:
    schema = f"hermes_test_{uuid.uuid4().hex[:10]}"
    log = await store_log(tmp_path, request.param, schema)
    path = tmp_path / "hermes.yaml"  # the same configuration, for the CLI
    path.write_text(yaml.safe_dump(config_data(tmp_path, request.param, schema)),
                    encoding="utf-8")
    yield log, config(tmp_path, request.param, schema)
    if hasattr(log, "drop_schema"):
        await log.drop_schema()
    await log.close()


def ran_on(result: Any) -> list[str]:
    return [e.version for e in result.events if e.kind == "tool_version_chosen"]


def rollbacks(result: Any) -> list[Any]:
    return [e for e in result.events if e.kind == "tool_canary_rolled_back"]


async def test_a_rollback_decided_in_one_process_holds_in_another(
        shared: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    log, cfg = shared
    monkeypatch.delenv("HERMES_DATA_DIR", raising=False)  # the CLI reads the file's
    first = build_orchestrator(cfg, clock=FixedClock(start=T0), ids=SequentialIds())
    try:
        seen: list[Any] = []
        for i in range(6):
            result = await first.run_turn(f"a{i}", ASK, user_id="u1")
            seen.append(result)
        canary = first.services.tools.canaries["inventory_lookup"]
        assert canary.rolled_back is not None
        assert sum(len(rollbacks(r)) for r in seen) == 1
        assert [v for r in seen for v in ran_on(r)][:3] == [CANDIDATE_VERSION] * 3
    finally:
        await first.aclose()
    entries = await log.entries("u1")
    logged = [e for e in entries if e.kind == "canary_rollback"]
    assert [(e.tool, e.tool_version) for e in logged] == [("inventory_lookup",
                                                           CANDIDATE_VERSION)]
    assert {e.tool_version for e in entries if e.kind == "tool_call"} == {
        CANDIDATE_VERSION, STABLE_VERSION}

    # a fresh process on the same store: share 1.0, yet its first call runs the old version
    second = build_orchestrator(cfg, clock=FixedClock(start=T0 + timedelta(minutes=1)),
                                ids=SequentialIds())
    try:
        result = await second.run_turn("b1", ASK, user_id="u2")
        assert ran_on(result) == [STABLE_VERSION]
        [event] = rollbacks(result)  # the rollback is an event here too
        assert event.version == CANDIDATE_VERSION
        registry = second.services.tools
        line = tool_record(registry, registry.get("inventory_lookup"))["canary"]["line"]
        assert "ROLLED BACK" in line and CANDIDATE_VERSION in line
    finally:
        await second.aclose()
    # and `hermes-fsm tools list`, a process of its own, reads it from the log too
    out = io.StringIO()
    path = Path(str(cfg.memory.data_dir)) / "hermes.yaml"
    code = await asyncio.to_thread(main, ["--config", str(path), "tools", "list"], out)
    assert code == 0
    [canary_line] = [ln for ln in out.getvalue().splitlines() if ln.startswith("  canary ")]
    assert "ROLLED BACK" in canary_line and "experience log" in canary_line


def calls(n: int, version: str, ok: bool) -> list[Experience]:
    """``n`` calls of ``inventory_lookup`` on ``version`` that another process logged."""
    return [Experience(entry_id=f"other-{uuid.uuid4().hex}", kind="tool_call",
                       user_id=f"someone-{i}", session_id=f"elsewhere-{i}", turn_id=f"t{i}",
                       at=T0 - timedelta(seconds=60 - i), ok=ok, tool="inventory_lookup",
                       error_code=None if ok else "BACKEND", tool_version=version)
            for i in range(n)]


async def test_each_versions_error_rate_is_read_from_every_processes_calls(shared: Any) -> None:
    log, cfg = shared
    # other processes: the new version failed 4 of 5, the old one none of 5 — no process of
    # this one has called either yet
    await log.record(calls(5, STABLE_VERSION, True) + calls(1, CANDIDATE_VERSION, True)
                     + calls(4, CANDIDATE_VERSION, False))
    orchestrator = build_orchestrator(cfg, clock=FixedClock(start=T0), ids=SequentialIds())
    try:
        result = await orchestrator.run_turn("s1", ASK, user_id="u1")
        assert ran_on(result) == [STABLE_VERSION]
        [event] = rollbacks(result)
        assert "80% of its last 5 calls against 0% of 5" in event.reason
        assert "experience log" in event.reason
    finally:
        await orchestrator.aclose()


async def test_below_the_margin_in_the_log_the_new_version_keeps_its_share(shared: Any) -> None:
    log, cfg = shared
    await log.record(calls(5, STABLE_VERSION, True) + calls(5, CANDIDATE_VERSION, True))
    orchestrator = build_orchestrator(cfg, clock=FixedClock(start=T0), ids=SequentialIds())
    try:
        result = await orchestrator.run_turn("s1", ASK, user_id="u1")
        assert ran_on(result) == [CANDIDATE_VERSION] and not rollbacks(result)
    finally:
        await orchestrator.aclose()


def test_a_turns_experience_carries_the_version_and_the_rollback() -> None:
    class E:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(session_id="s", turn_id="t1", at=T0, **fields)

    events = [E(kind="tool_call_started", call_id="c0", arguments={"sku": "A1"}, seq=1),
              E(kind="tool_version_chosen", call_id="c0", version="2.0.0", seq=2),
              E(kind="tool_call_finished", call_id="c0", ok=False, tool="lookup",
                error={"error_code": "BACKEND", "message": "x"}, duration_ms=1.0, seq=3),
              E(kind="tool_canary_rolled_back", call_id="c0", tool="lookup",
                candidate="lookup_v2", reason="too many errors", version="2.0.0", seq=4)]
    call, rollback = experiences_of(events, "u", "stock?")
    assert (call.kind, call.tool_version) == ("tool_call", "2.0.0")
    assert (rollback.kind, rollback.tool, rollback.tool_version, rollback.detail) == (
        "canary_rollback", "lookup", "2.0.0", "too many errors")


async def test_an_experience_file_from_before_the_version_column_gains_it(tmp_path: Any) -> None:
    import sqlite3

    from hermes_fsm.memory import sqlite_experience

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)  # the schema as the four migrations before this one left it
    for number, ddl in enumerate(sqlite_experience._MIGRATIONS[:4], start=1):
        db.executescript(f"BEGIN; {ddl}; PRAGMA user_version={number}; COMMIT;")
    db.execute("INSERT INTO hermes_experience (entry_id, kind, user_id, session_id, turn_id, "
               "at, ok, tool, request, arguments, duration_ms) VALUES ('old', 'tool_call', "
               "'u', 's', 't', 0, 1, 'lookup', '', '{}', 0)")
    db.commit()
    db.close()
    log = SQLiteExperienceLog(path, HashingEmbedder())
    try:
        [old] = await log.entries("u")
        assert old.tool_version is None
        await log.record(calls(2, "2.0.0", False))
        health = await log.version_outcomes("inventory_lookup", ["2.0.0", "1.0.0"], 10)
        assert (health.versions["2.0.0"].calls, health.versions["2.0.0"].failed) == (2, 2)
        assert health.versions["1.0.0"].calls == 0 and health.rolled_back is None
    finally:
        await log.close()
