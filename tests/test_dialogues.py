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

from hermes_fsm.brain.rulebook import RuleBook
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.sources import FixedClock, SequentialIds
from hermes_fsm.tools.registry import ToolRegistry

DIALOGUES = Path(__file__).parent / "dialogues"
START = datetime(2026, 6, 12, 8, 0, tzinfo=UTC)

ORDERS = {"ORD-12345678": {"status": "shipped", "promised": "2026-06-14"},
          "ORD-87654321": {"status": "processing", "promised": "2026-06-16"}}

SLOT_RULES = {
    "intents": [
        {"name": "order_status", "confidence": 0.9, "needs_tools": True,
         "patterns": [r"订单|\border\b"],
         "extract": [r"(?P<order_id>ord-?\d+)"], "normalize": {"order_id": "upper"}},
        {"name": "send_report", "confidence": 0.9, "needs_tools": True,
         "patterns": [r"发(?:送)?给|\bsend\b.*\bto\b"],
         "extract": [r"(?P<to>[\w.]+@[\w.]+)"]},
    ],
    "plans": {
        "order_status": [{"tool": "order_status", "arguments": {"order_id": "{order_id}"},
                          "reasoning": "The user asks about order {order_id}."}],
        "send_report": [{"tool": "send_report", "arguments": {"to": "{to}"},
                         "reasoning": "The user asks to send the report to {to}."}],
    },
    "answers": {"tools": {
        "order_status": [{"en": "Order {order_id} is {status}; promised for {promised}.",
                          "zh": "订单 {order_id} 状态:{status},承诺送达日期 {promised}。"}],
        "send_report": [{"en": "Sent the report to {to}.", "zh": "已把报告发给 {to}。"}],
    }},
}


def slot_rules() -> RuleBook:
    """The packaged rule book plus an order lookup and a report sender."""
    path = Path(__file__).parents[1] / "hermes_fsm" / "data" / "rules.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["intents"] = SLOT_RULES["intents"] + doc["intents"]
    doc["plans"].update(SLOT_RULES["plans"])
    doc["answers"]["tools"].update(SLOT_RULES["answers"]["tools"])
    return RuleBook.from_yaml(yaml.safe_dump(doc, allow_unicode=True), "slot_rules")


def slot_registry(sent: list[dict[str, Any]]) -> ToolRegistry:
    """The demo tools, an order lookup whose id has a pattern, and a sender needing approval."""
    registry = build_demo_registry()
    order = ToolContract(
        name="order_status", version="1.0.0", description="Status of an order by its id.",
        input_schema={"type": "object", "additionalProperties": False, "required": ["order_id"],
                      "properties": {"order_id": {"type": "string", "pattern": r"^ORD-\d{8}$",
                                                  "examples": ["ORD-12345678"]}}},
        slots={"order_id": {"entity": "Order", "ask": "请问您的订单号是多少?",
                            "ask_en": "What is your order number?"}})
    send = ToolContract(
        name="send_report", version="1.0.0", description="E-mail the sales report.",
        side_effects="write", approval=True,
        input_schema={"type": "object", "additionalProperties": False, "required": ["to"],
                      "properties": {"to": {"type": "string"}}})

    @registry.tool(contract=order, inline=True)
    def order_status(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, **ORDERS.get(order_id, {"status": "unknown",
                                                              "promised": "-"})}

    @registry.tool(contract=send, inline=True)
    def send_report(to: str) -> dict[str, Any]:
        sent.append({"to": to})
        return {"to": to}

    return registry


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
        brain, tools = RulesBrain(slot_rules()), slot_registry(sent)
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
