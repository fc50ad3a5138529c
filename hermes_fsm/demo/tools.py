"""Demo tools on a small embedded dataset: inventory by SKU and warehouse, reminders.

They make the default configuration a real agent turn: the rules brain plans
``inventory_lookup`` (and ``demo.calendar_query`` on the bundled demo MCP server) and
answers from their results. Their contracts are pinned in ``contracts/tools/``.

>>> registry = build_demo_registry()
>>> registry.names()
['create_reminder', 'inventory_lookup', 'list_reminders']
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from hermes_fsm.errors import ToolError
from hermes_fsm.tools.registry import ToolRegistry

__all__ = ["build_demo_registry", "inventory_data", "warehouse_code"]


@cache
def inventory_data() -> dict[str, Any]:
    """The embedded inventory dataset (``hermes_fsm/data/inventory.json``)."""
    text = resources.files("hermes_fsm").joinpath("data/inventory.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def warehouse_code(name: str) -> str | None:
    """The warehouse code (``east`` …) for a name in English or Chinese, or ``None``."""
    wanted = name.strip().lower()
    for code, info in inventory_data()["warehouses"].items():
        if wanted == code or wanted in (n.lower() for n in info["names"]):
            return str(code)
    return None


def build_demo_registry() -> ToolRegistry:
    """A fresh registry with the demo tools (each registry has its own reminder list)."""
    registry = ToolRegistry()
    reminders: list[dict[str, str]] = []

    # in-memory and instant: called on the event loop, no worker thread (see Tool.inline)
    @registry.tool(timeout_s=5, inline=True, description=(
        "Look up how many units of a product (by SKU, e.g. 'A1001') are in stock. "
        "Give 'warehouse' (east, north, south, west) for one warehouse, or leave it out "
        "for every warehouse. Use it for any question about stock, inventory or availability."
    ))
    def inventory_lookup(sku: str, warehouse: str | None = None) -> dict[str, Any]:
        items = {item["sku"]: item for item in inventory_data()["items"]}
        item = items.get(sku.upper())
        if item is None:
            raise ToolError(f"no product with SKU {sku!r}; known SKUs: {', '.join(sorted(items))}")
        if warehouse is None:
            return {"sku": item["sku"], "name": item["name"], "stock": dict(item["stock"]),
                    "total": sum(item["stock"].values())}
        code = warehouse_code(warehouse)
        if code is None:
            known = ", ".join(inventory_data()["warehouses"])
            raise ToolError(f"unknown warehouse {warehouse!r}; known warehouses: {known}")
        return {"sku": item["sku"], "name": item["name"], "warehouse": code,
                "quantity": item["stock"][code]}

    @registry.tool(side_effects="write", timeout_s=5, inline=True, description=(
        "Create a reminder with a text and a due time (free text, e.g. 'tomorrow 9:00'). "
        "Use it when the user asks to be reminded of something."
    ))
    def create_reminder(text: str, due: str) -> dict[str, Any]:
        reminder = {"id": f"r{len(reminders) + 1}", "text": text, "due": due}
        reminders.append(reminder)
        return dict(reminder)

    @registry.tool(inline=True, description=(
        "List the most recent reminders (at most 10) and how many there are in all. "
        "Use it when asked about reminders."))
    def list_reminders() -> dict[str, Any]:
        return {"reminders": [dict(r) for r in reminders[-10:]], "total": len(reminders)}

    return registry
