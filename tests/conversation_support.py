"""Shared by the dialogue tests and the conversation crash test: a rule book and tools
with a slot that has a pattern (an order id) and a tool that needs approval."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hermes_fsm.brain.rulebook import RuleBook
from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.tools.registry import ToolRegistry

ORDERS = {"ORD-12345678": {"status": "shipped", "promised": "2026-06-14"},
          "ORD-87654321": {"status": "processing", "promised": "2026-06-16"}}

SLOT_RULES: dict[str, Any] = {
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


def slot_registry(sent: list[dict[str, Any]],
                  on_send: Callable[[str], None] | None = None) -> ToolRegistry:
    """The demo tools, an order lookup whose id has a pattern, and a sender needing approval
    (each real send is appended to ``sent`` and given to ``on_send``)."""
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
        if on_send is not None:
            on_send(to)
        return {"to": to}

    return registry
