"""Helpers shared by tests: scripted outputs, graphs with adjusted policies."""

from __future__ import annotations

from typing import Any

import yaml

from hermes_fsm.graph.loader import default_graph_path, parse_graph
from hermes_fsm.graph.model import Graph

INTENT_TOOLS = {"intent_type": "inventory_query",
                "parameters": {"sku": "A1001", "warehouse": "east"},
                "confidence": 0.9, "needs_tools": True}
INTENT_CHAT = {"intent_type": "smalltalk", "parameters": {}, "confidence": 0.9,
               "needs_tools": False}
PLAN_LOOKUP = {"tool_calls": [{"tool_name": "inventory_lookup",
                               "arguments": {"sku": "A1001", "warehouse": "east"},
                               "reasoning_trace": "stock question"}]}
PLAN_EMPTY: dict[str, Any] = {"tool_calls": []}
MEMORY_NONE: dict[str, Any] = {"memory_updates": []}


def answer_from_facts(request: Any) -> dict[str, Any]:
    """A RESPONSE script entry: cite every fact, quote the first quantity found."""
    report = request.outputs.get("result_report")
    facts = list(report.facts) if report is not None else []
    quantities = [f.content["output"].get("quantity") for f in facts
                  if isinstance(f.content, dict) and isinstance(f.content.get("output"), dict)]
    text = f"{quantities[0]} left" if quantities else "no facts"
    return {"text": text, "evidence": [f.id for f in facts]}


def happy_script(**overrides: list[Any]) -> dict[str, list[Any]]:
    """A script for a whole tool-using turn; pass state or contract names to override."""
    script: dict[str, list[Any]] = {
        "intent": [INTENT_TOOLS],
        "plan": [PLAN_LOOKUP, PLAN_EMPTY],
        "response": [answer_from_facts],
        "memory_commit": [MEMORY_NONE],
    }
    script.update(overrides)
    return script


def graph_with(states: dict[str, dict[str, Any]] | None = None, **top: Any) -> Graph:
    """The bundled graph with some state fields (and top-level fields) replaced.

    Backoff is set to 0 everywhere unless given, so tests do not sleep.
    """
    doc = yaml.safe_load(default_graph_path().read_text(encoding="utf-8"))
    for spec in doc["states"].values():
        if spec and "retry" in spec:
            spec["retry"]["backoff_s"] = 0
    for name, fields in (states or {}).items():
        doc["states"][name] = {**(doc["states"][name] or {}), **fields}
    doc.update(top)
    return parse_graph(yaml.safe_dump(doc, sort_keys=False), "test-graph.yaml")
