"""Shared by the dialogue tests and the conversation crash test: the demo tools (its
``order_status`` has a slot with a pattern; its ``send_email`` needs approval) and the
packaged rule book plus one rule that e-mails a report to an address.

The demo's orders belong to users (``hermes_fsm/data/retail.yaml``): alice owns
ORD-12345678 (pending, promised two days after today) and ORD-87654321 (shipped two days
before today); dialogues about orders run as alice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from hermes_fsm.brain.rulebook import RuleBook
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.sources import Clock
from hermes_fsm.tools.registry import ToolRegistry

SUBJECT = "Sales report"
BODY = "The sales report, as asked. / 销售报告,如您所要。"

SLOT_RULES: dict[str, Any] = {
    "intents": [
        {"name": "email_report", "confidence": 0.9, "needs_tools": True,
         "patterns": [r"(?:发(?:送)?给|\bsend\b.*\bto\b)\s*[\w.]+@[\w.]+"],
         "extract": [r"(?P<to>[\w.]+@[\w.]+)"]},
        # a chain of four calls, each taking the one before's output (four planning
        # rounds in one turn: the plan ``continues`` until the last call is made)
        {"name": "order_pickup", "confidence": 0.9, "needs_tools": True,
         "patterns": [r"订单.*商品.*提醒我", r"^(?=.*\border\b)(?=.*\bitem\b)(?=.*\bremind me\b)"],
         "extract": [r"(?<![a-z0-9])(?P<order_id>ord-\d{8})(?!\d)",
                     r"(?P<store>徐汇|xuhui|浦东|pudong)",
                     r"(?P<due>(?:明天|后天)(?:上午|下午)?[一二三四五六七八九十\d]+点|"
                     r"tomorrow at \d{1,2}\s*(?:am|pm))"],
         "normalize": {"order_id": "upper", "store": "store_id"},
         "times": {"due": "instant"}},
    ],
    "plans": {
        "email_report": [{"tool": "send_email",
                          "arguments": {"to": "{to}", "subject": SUBJECT, "body": BODY},
                          "reasoning": "The user asks to e-mail the report to {to}."}],
        "order_pickup": [
            {"tool": "order_status", "arguments": {"order_id": "{order_id}"},
             "reasoning": "The user asks about the item of order {order_id}."},
            {"tool": "price_lookup", "arguments": {"sku": "{@order_status.sku}"},
             "requires": ["order_id"], "reasoning": "The price of that order's item."},
            {"tool": "store_stock",
             "arguments": {"sku": "{@price_lookup.sku}", "store": "{store}"},
             "reasoning": "Whether the store {store} has that item."},
            {"tool": "create_reminder",
             "arguments": {"text": "{@store_stock.name}", "due": "{due}"},
             "reasoning": "A reminder at {due} to pick the item up."},
        ],
    },
}


def slot_rules() -> RuleBook:
    """The packaged rule book plus a rule that e-mails the report to an address."""
    path = Path(__file__).parents[1] / "hermes_fsm" / "data" / "rules.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["intents"] = SLOT_RULES["intents"] + doc["intents"]
    doc["plans"].update(SLOT_RULES["plans"])
    return RuleBook.from_yaml(yaml.safe_dump(doc, allow_unicode=True), "slot_rules")


def slot_registry(sent: list[dict[str, Any]], on_send: Callable[[str], None] | None = None,
                  *, clock: Clock | None = None, timezone: str = "UTC",
                  data_dir: Path | None = None) -> ToolRegistry:
    """The demo tools on ``clock`` (the orders' dates count from its today; reminders,
    reports and the outbox under ``data_dir`` when given); each real ``send_email`` is
    appended to ``sent`` (its recipient) and given to ``on_send``."""
    registry = build_demo_registry(clock=clock, timezone=timezone, data_dir=data_dir)
    tool = registry.get("send_email")
    send = tool.fn

    def recorded(**arguments: Any) -> Any:
        if on_send is not None:
            on_send(arguments["to"])
        out = send(**arguments)
        sent.append({"to": arguments["to"]})
        return out

    tool.fn = recorded
    return registry


def cli_turns(data_dir: Path, session: str, texts: Sequence[str],
              user: str = "alice") -> list[str]:
    """Each text as its own ``hermes-fsm run`` process on one session (wall clock, the
    embedded defaults, ``HERMES_TIMEZONE=Asia/Shanghai``); the answer lines."""
    import shutil
    import subprocess
    import sys

    found = shutil.which("hermes-fsm") or str(Path(sys.executable).with_name("hermes-fsm"))
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_CONFIG", "HERMES_GRAPH")}
    env.update(HERMES_DATA_DIR=str(data_dir), HERMES_TIMEZONE="Asia/Shanghai",
               PYTHONIOENCODING="utf-8")
    answers = []
    for text in texts:
        done = subprocess.run([found, "run", "--session", session, "--user", user, text],
                              capture_output=True, text=True, encoding="utf-8", env=env,
                              timeout=120, check=True)
        [line] = [x for x in done.stdout.splitlines() if x.startswith("answer: ")]
        answers.append(line.removeprefix("answer: "))
    return answers
