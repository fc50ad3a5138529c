"""A new version of the demo's ``inventory_lookup`` for the canary tests: ``inventory_lookup_v2``
(contract version 9.0.0), whose stock backend fails every call (``tools.local`` loads it)."""

from __future__ import annotations

from typing import Any

from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.tools.registry import ToolRegistry

CANDIDATE_VERSION = "9.0.0"

registry = ToolRegistry()
_stable = build_demo_registry().get("inventory_lookup").contract
assert _stable is not None


@registry.tool(contract=_stable.model_copy(update={"name": "inventory_lookup_v2",
                                                   "version": CANDIDATE_VERSION}))
async def inventory_lookup_v2(sku: str, warehouse: str | None = None) -> dict[str, Any]:
    raise ToolCallFailed("BACKEND", "the new stock backend failed", False)
