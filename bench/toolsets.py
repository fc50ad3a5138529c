"""Tool tokens per planning request, with every tool offered and with toolsets.

Registers 30 tools (the demo's 9 and 21 of other scenarios, each with a real schema), runs
the same turns through the rules brain with and without toolsets, and prints the tools
block's tokens of each planning request (``context_built.parts.tools``), and the
``tools_offered`` events' counts.

    .venv/bin/python -m bench.toolsets
"""

from __future__ import annotations

import asyncio
from statistics import mean
from typing import Any

from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.testing import capture_events, demo_orchestrator
from hermes_fsm.tools.registry import ToolRegistry
from hermes_fsm.tools.toolsets import Toolset, Toolsets

TURNS = [
    "How many A1001 are left?",
    "How much is the A1002 keyboard?",
    "Where is order ORD-10000001?",
    "鼠标在华东仓还有多少",
]


def thirty_tools(with_toolsets: bool) -> ToolRegistry:
    reg = build_demo_registry()
    for i in range(30 - len(reg)):

        def filler(account_id: str, period: str = "month", limit: int = 10) -> dict[str, Any]:
            return {"account_id": account_id}

        filler.__name__ = f"crm_tool_{i:02d}"
        reg.tool(
            description=f"CRM operation {i}: looks up an account's history over a "
            "period and returns the matching records, newest first."
        )(filler)
    if with_toolsets:
        reg.toolsets = Toolsets(
            {
                "retail": Toolset(
                    "retail",
                    ("inventory_lookup", "store_stock", "price_lookup", "order_status"),
                    ("inventory_query", "store_stock", "price_lookup", "order_status"),
                ),
                "office": Toolset(
                    "office",
                    (
                        "sales_report",
                        "contact_lookup",
                        "send_email",
                        "create_reminder",
                        "list_reminders",
                    ),
                    ("sales_report", "create_reminder", "list_reminders"),
                ),
            }
        )
    return reg


async def measure(with_toolsets: bool) -> tuple[list[int], list[int]]:
    orchestrator = demo_orchestrator(tools=thirty_tools(with_toolsets))
    with capture_events(orchestrator) as seen:
        for i, text in enumerate(TURNS):
            await orchestrator.run_turn(f"s{i}", text)
    tokens = [
        e.parts.get("tools", 0)
        for e in seen.events
        if e.kind == "context_built" and e.state == "PLANNING"
    ]
    counts = [len(e.offered) for e in seen.events if e.kind == "tools_offered"]
    return tokens, counts


def main() -> None:
    before, _ = asyncio.run(measure(False))
    after, counts = asyncio.run(measure(True))
    print(f"30 registered tools, {len(TURNS)} turns, rules brain")
    print(f"tool tokens per planning request, every tool: {before} (mean {mean(before):.0f})")
    print(
        f"tool tokens per planning request, toolsets:   {after} (mean {mean(after):.0f}); "
        f"tools offered {counts}"
    )
    print(f"ratio after/before: {mean(after) / mean(before):.2f}")


if __name__ == "__main__":
    main()
