"""Toolsets (seed 000 §3.1): tools grouped by scenario, so a brain sees only the few it needs.

Configured under ``tools.toolsets`` (:class:`~hermes_fsm.config.settings.ToolsetConfig`)::

    tools:
      toolsets:
        retail: {intents: [inventory_query, price_query], tools: [store_stock, price_lookup]}
        office: {intents: [send_report], tools: [sales_report, send_email, contact_lookup]}
      always: [order_status]        # offered whatever the scenario

:meth:`Toolsets.select` picks the toolsets whose ``intents`` name the turn's intent (``*``
matches every intent) and offers their tools, the ``always`` ones, and the tools a plan
of this turn already named (a tool outside the scenario is added on demand: the Plan
contract accepts any registered tool, and once planned it stays offered for the turn's
later planning rounds). An intent no toolset names gets every tool: a scenario nobody
configured is not starved of tools. A toolset's ``resources`` (MCP resource URIs) are read
into the planning and answering requests of its scenario
(:mod:`hermes_fsm.engine.offered_tools`).

>>> sets = Toolsets({"retail": Toolset("retail", ("store_stock", "price_lookup"),
...                                    ("inventory_query",))}, always=("order_status",))
>>> choice = sets.select("inventory_query")
>>> choice.toolsets, sorted(choice.tools)
(('retail',), ['order_status', 'price_lookup', 'store_stock'])
>>> sets.select("chitchat") is None          # no toolset for it: every tool
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Toolset", "ToolsetChoice", "Toolsets"]


@dataclass(frozen=True, slots=True)
class Toolset:
    """A scenario's tools, and the intents it serves (``*``: every intent)."""

    name: str
    tools: tuple[str, ...]
    intents: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()  # MCP resource URIs read into the scenario's context


@dataclass(frozen=True, slots=True)
class ToolsetChoice:
    """The toolsets chosen for a request and the tool names they offer."""

    toolsets: tuple[str, ...]
    tools: frozenset[str]
    resources: tuple[str, ...] = ()


class Toolsets:
    """The configured toolsets (see the module docs)."""

    __slots__ = ("always", "sets")

    def __init__(self, sets: Mapping[str, Toolset], always: Sequence[str] = ()) -> None:
        self.sets = dict(sets)
        self.always = tuple(always)

    def select(self, intent: str | None, named: Iterable[str] = ()) -> ToolsetChoice | None:
        """The tools for a request of ``intent`` (plus the tools already ``named`` by a plan
        of the turn); ``None``: no toolset serves the intent, offer every tool."""
        if intent is None:
            return None
        chosen = [s for s in self.sets.values() if intent in s.intents or "*" in s.intents]
        if not chosen:
            return None
        tools = {t for s in chosen for t in s.tools} | set(self.always) | set(named)
        resources = tuple(dict.fromkeys(r for s in chosen for r in s.resources))
        return ToolsetChoice(tuple(s.name for s in chosen), frozenset(tools), resources)

    def unknown_tools(self, known: Iterable[str]) -> list[str]:
        """Tool names the toolsets list that ``known`` lacks (e.g. a misspelt name)."""
        have = set(known)
        listed = [t for s in self.sets.values() for t in s.tools] + list(self.always)
        return sorted({t for t in listed if t not in have})
