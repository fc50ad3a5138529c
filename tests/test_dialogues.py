"""Labelled multi-turn dialogues (tests/dialogues/*.yaml; the format is in its README.md).

Each dialogue runs on one in-process session with the rules brain and a fixed clock; every
turn is checked against its labels: intent, the canonical values of its entities (from
the conversation graph), the exact tool calls, facts in the answer, the turn's status and
the nodes deprecated by a correction.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.sources import FixedClock, SequentialIds
from tests.conversation_support import slot_registry, slot_rules

DIALOGUES = Path(__file__).parent / "dialogues"
START = datetime(2026, 6, 12, 8, 0, tzinfo=UTC)

def load_dialogues() -> list[dict[str, Any]]:
    found = []
    for path in sorted(DIALOGUES.glob("*.yaml")):
        for dialogue in yaml.safe_load(path.read_text(encoding="utf-8"))["dialogues"]:
            found.append({**dialogue, "file": path.name})
    return found


ALL = load_dialogues()


def test_dialogue_ids_are_unique_and_labelled() -> None:
    ids = [d["id"] for d in ALL]
    assert len(ids) == len(set(ids))
    for dialogue in ALL:
        assert dialogue["lang"] in ("zh", "en"), dialogue["id"]
        assert all("say" in t and "intent" in t for t in dialogue["turns"]), dialogue["id"]


def build(dialogue: dict[str, Any]) -> tuple[Orchestrator, FixedClock, list[dict[str, Any]]]:
    clock = FixedClock(START)
    sent: list[dict[str, Any]] = []
    if dialogue.get("setup", "demo") == "slots":
        brain, tools = RulesBrain(slot_rules()), slot_registry(sent, clock=clock)
    else:
        brain, tools = RulesBrain(), build_demo_registry()
    return Orchestrator(brain=brain, tools=tools, clock=clock, ids=SequentialIds()), clock, sent


def _duration(text: str) -> timedelta:
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    return timedelta(**{units[text[-1]]: float(text[:-1])})


def check_turn(orchestrator: Orchestrator, session_id: str, result: Any,
               turn: dict[str, Any], where: str) -> None:
    """Every label of ``turn`` against the turn's result and the session's graph."""
    intents = [e.output for e in result.events if e.kind == "state_output"
               and e.state == "INTENT"]
    assert intents, f"{where}: no INTENT output"
    assert intents[-1]["intent_type"] == turn["intent"], f"{where}: intent"
    conv = orchestrator.sessions()[session_id].conversation
    if "entities" in turn:
        node = next((n for n in reversed(conv.intents.values())
                     if n.turn_id == result.turn_id), None) if conv else None
        got = {} if node is None else {s: conv.entities[i].canonical  # type: ignore[union-attr]
                                       for s, i in node.params.items()}
        assert got == turn["entities"], f"{where}: entities"
    calls = [{"tool": e.tool, "args": e.arguments} for e in result.events
             if e.kind == "tool_call_started"]
    assert calls == turn.get("calls", []), f"{where}: tool calls"
    for fact in turn.get("answer_has", ()):
        assert str(fact) in result.answer, f"{where}: answer lacks {fact!r}: {result.answer!r}"
    for fact in turn.get("answer_lacks", ()):
        assert str(fact) not in result.answer, f"{where}: answer has {fact!r}: {result.answer!r}"
    if "status" in turn:
        assert result.status == turn["status"], f"{where}: status"
    if "deprecated" in turn:
        assert conv is not None
        gone = {n.canonical for n in conv.entities.values() if not n.active}
        assert set(turn["deprecated"]) <= gone, f"{where}: deprecated {gone}"


@pytest.mark.parametrize("dialogue", ALL, ids=[d["id"] for d in ALL])
async def test_dialogue(dialogue: dict[str, Any]) -> None:
    orchestrator, clock, sent = build(dialogue)
    session_id = f"dialogue-{dialogue['id']}"
    for n, turn in enumerate(dialogue["turns"], 1):
        if "after" in turn:
            clock.advance(_duration(turn["after"]))
        result = await orchestrator.run_turn(session_id, turn["say"],
                                             dialogue.get("user", "u1"))
        check_turn(orchestrator, session_id, result, turn,
                   f"{dialogue['file']}:{dialogue['id']} turn {n} ({turn['say']!r})")
    if "sent" in dialogue:  # what the approval-guarded tool really did, in the end
        assert sent == dialogue["sent"]
