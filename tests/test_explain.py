"""The evidence chain of a turn (``hermes-fsm explain``): from a recording written by a live
turn and from a session kept in the SQLite session store, linked by the events' ids."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hermes_fsm.cli.main import main
from hermes_fsm.config import HermesConfig, build_orchestrator
from hermes_fsm.events.evidence import evidence_chains
from hermes_fsm.events.recording import recording_text
from hermes_fsm.memory import InProcessMemory
from hermes_fsm.sources import FixedClock, SequentialIds

BASE = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
SEED002 = Path(__file__).parent / "recordings" / "seeds" / "seed002_store_stock.jsonl"


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERMES_CONFIG", raising=False)
    monkeypatch.delenv("HERMES_POSTGRES_URL", raising=False)
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def config(tmp_path: Path, store: str = "memory") -> HermesConfig:
    return HermesConfig(timezone="Asia/Shanghai", mcp_servers={},
                        sessions={"store": store}, memory={"data_dir": str(tmp_path / "data")})


async def record(tmp_path: Path, texts: list[str]) -> Path:
    orch = build_orchestrator(config(tmp_path), clock=FixedClock(BASE), ids=SequentialIds(),
                              memory=InProcessMemory())
    async with orch:
        for text in texts:
            await orch.run_turn("s1", text, user_id="alice")
        path = tmp_path / "s1.jsonl"
        path.write_text(recording_text(orch, "s1"), "utf-8")
    return path


def test_the_chain_links_message_intent_call_result_fact_and_answer_by_id(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "explain", str(SEED002), "--turn", "1", "--json")
    assert code == 0
    [chain] = json.loads(out)["turns"]
    [call] = chain["calls"]
    assert chain["user_message"]["text"] == "帮我查iPhone 15在杭州西湖区门店的库存"
    assert chain["intent"]["intent_type"] == "store_stock"
    assert call["call_id"] == "turn-000001-s4-c1" and call["result"]["ok"] is True
    assert call["facts"] == ["fact-turn-000001-s4-c1"] and call["cited"] is True
    assert chain["answer"]["evidence"] == ["fact-turn-000001-s4-c1"]
    seqs = [chain["user_message"]["seq"], chain["intent"]["seq"], call["seq"],
            call["result"]["seq"], chain["answer"]["seq"]]
    assert seqs == sorted(seqs)


async def test_a_refused_call_shows_in_the_chain_with_no_fact(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = await record(tmp_path, ["帮我查iPhone 15在杭州西湖区门店的库存",
                                   "iPhone 15 在徐汇滨江店的库存"])
    code, out, _ = cli(capsys, "explain", str(path), "--turn", "2")
    assert code == 0
    assert out.startswith("turn 2 ")
    assert "[tool call]" in out and "store_stock" in out
    assert "PRECONDITION_FAILED" in out
    assert "[facts]        none" in out
    assert "建议确认门店全称" in out


def test_explain_reads_a_session_from_the_sqlite_store(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    orch = build_orchestrator(config(tmp_path, "sqlite"), clock=FixedClock(BASE),
                              ids=SequentialIds(), memory=InProcessMemory())

    async def turn() -> str:
        async with orch:
            result = await orch.run_turn("stored-1", "How many A1001 are in the east "
                                         "warehouse?", user_id="alice")
        return result.status

    assert asyncio.run(turn()) == "completed"
    conf = tmp_path / "hermes.yaml"
    conf.write_text(f"sessions: {{store: sqlite}}\nmcp_servers: {{}}\n"
                    f"memory: {{data_dir: '{tmp_path / 'data'}'}}\n", "utf-8")
    code, out, err = cli(capsys, "explain", "stored-1", "--config", str(conf), "--json")
    assert code == 0, err
    [chain] = json.loads(out)["turns"]
    assert [c["tool"] for c in chain["calls"]] == ["inventory_lookup"]
    assert chain["calls"][0]["cited"] is True


@pytest.mark.parametrize(("argv", "said"), [
    (["explain", str(SEED002), "--turn", "9"], "has 1 turn(s); give 1 to 1"),
    (["explain", "missing.jsonl"], "no recording at missing.jsonl"),
    (["explain", "no-such-session"], "no session 'no-such-session' in the session store"),
])
def test_explain_mistakes_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                       said: str) -> None:
    code, _, err = cli(capsys, *argv)
    assert code == 1 and said in err and err.count("\n") == 1


def test_a_call_that_never_finished_has_no_result() -> None:
    events = [{"kind": "turn_started", "turn_id": "t", "seq": 1, "user_id": "u", "text": "x"},
              {"kind": "tool_call_started", "turn_id": "t", "seq": 2, "call_id": "c1",
               "tool": "slow", "arguments": {}}]
    [chain] = evidence_chains(events)
    assert chain["calls"][0]["result"] is None and chain["status"] is None
