"""Regenerate the golden recordings in this folder (deterministic: fixed clock and ids).

    .venv/bin/python tests/recordings/make_recordings.py

Each is a real run of the engine; two are made to fail replay on purpose:

- ``divergent_graph.jsonl`` was recorded with an older graph in which INTENT always went
  to PLANNING; today's graph goes INTENT → RESPONSE when no tool is needed, so a rerun
  diverges at the first transition out of INTENT.
- ``drift_intent.jsonl`` was recorded with an older ``intent@0.9.0`` contract that had an
  ``urgency`` field; today's ``intent@1.0.0`` forbids it, so validation reports drift.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from hermes_fsm import Contract, Orchestrator  # noqa: E402
from hermes_fsm.config import build_orchestrator  # noqa: E402
from hermes_fsm.config.settings import HermesConfig  # noqa: E402
from hermes_fsm.contracts import ContractRegistry  # noqa: E402
from hermes_fsm.contracts.states import STATE_CONTRACTS, Intent  # noqa: E402
from hermes_fsm.errors import RetryableError  # noqa: E402
from hermes_fsm.events.recording import recording_text  # noqa: E402
from hermes_fsm.graph.loader import default_graph_path, parse_graph  # noqa: E402
from hermes_fsm.memory import InProcessMemory  # noqa: E402
from hermes_fsm.sources import FixedClock, SequentialIds  # noqa: E402
from hermes_fsm.testing import ScriptedBrain  # noqa: E402


def _orchestrator(graph: Any = None, **kwargs: Any) -> Orchestrator:
    """The embedded default (demo MCP server included), with fixed time, ids, and memory
    and sessions kept in the process (no files: the default session store is a SQLite file
    in the data directory, where sequential message ids of two recordings would collide)."""
    if graph is not None:
        kwargs["graph"] = graph
    return build_orchestrator(HermesConfig(), clock=FixedClock(), ids=SequentialIds(),
                              memory=InProcessMemory(), store=None, **kwargs)


async def _record(name: str, orchestrator: Orchestrator, session: str, user: str,
                  texts: list[str]) -> None:
    async with orchestrator:
        for text in texts:
            await orchestrator.run_turn(session, text, user_id=user)
    text = recording_text(orchestrator, session)
    # the header names the graph file; a checkout's absolute path would differ on every
    # machine, so it is written relative to this folder (view and replay try it from here)
    root = str(HERE.parents[1])
    text = text.replace(f'"path":"{root}/', f'"path":"{os.path.relpath(root, HERE)}/', 1)
    (HERE / f"{name}.jsonl").write_text(text, encoding="utf-8")


def _graph_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(default_graph_path().read_text(encoding="utf-8"))
    for spec in doc["states"].values():
        if spec and "retry" in spec:
            spec["retry"]["backoff_s"] = 0
    return doc


async def main() -> None:
    await _record("inventory_en", _orchestrator(), "golden-en", "alice",
                  ["How many A1001 are left in the east warehouse?",
                   "And how many B2002 in total?"])
    await _record("chinese_preference", _orchestrator(), "golden-zh", "li",
                  ["SKU A1001 在华东仓还有多少库存?", "我喜欢用邮件联系", "你好"])

    intent_bad = {"intent_type": "inventory_query", "parameters": {"sku": "A1001"},
                  "confidence": 1.4}
    intent_ok = {"intent_type": "inventory_query",
                 "parameters": {"sku": "A1001", "warehouse": "east"}, "confidence": 0.8}
    bad_plan = {"tool_calls": [{"tool_name": "teleport", "arguments": {},
                                "reasoning_trace": "no such tool"}]}
    scripted = ScriptedBrain({
        "intent": [intent_bad, intent_ok],
        "plan": [bad_plan],
        "response": [{"text": "I could not look that up right now.", "evidence": []}],
        "memory_commit": [RetryableError("memory store busy"), {"memory_updates": []}],
    })
    await _record("retries_and_route", _orchestrator(brain=scripted), "golden-retry",
                  "bob", ["How many A1001 are left in the east warehouse?"])

    old = _graph_doc()
    old["version"] = "0.9.0"
    del old["states"]["APPROVED"]  # the approvals of today's graph came later too
    old["transitions"] = [t for t in old["transitions"]
                          if not (t["source"] == "INTENT" and t["dest"] in ("RESPONSE",
                                                                            "APPROVED"))
                          and "APPROVED" not in (t["source"], t["dest"])]
    old["transitions"][1] = {"source": "INTENT", "dest": "PLANNING"}
    old_graph = parse_graph(yaml.safe_dump(old, sort_keys=False), "agent_turn@0.9.yaml")
    await _record("divergent_graph", _orchestrator(old_graph), "golden-divergent", "carol",
                  ["hello there"])

    class OldIntent(Contract):
        contract_name = "intent"
        contract_version = "0.9.0"
        intent_type: str
        parameters: dict[str, Any]
        confidence: float = Field(ge=0.0, le=1.0)
        needs_tools: bool = True
        urgency: str = "normal"

    registry = ContractRegistry([c for c in STATE_CONTRACTS if c is not Intent] + [OldIntent])
    doc = _graph_doc()
    doc["states"]["INTENT"]["contract"] = "intent@0.9"
    drift_graph = parse_graph(yaml.safe_dump(doc, sort_keys=False), "agent_turn.yaml",
                              contracts=registry)
    drifting = ScriptedBrain({
        "intent": [{**intent_ok, "urgency": "high"}],
        "plan": [{"tool_calls": [{"tool_name": "inventory_lookup",
                                  "arguments": {"sku": "A1001", "warehouse": "east"},
                                  "reasoning_trace": "stock"}]}],
        "response": [lambda r: {"text": "342 left", "evidence": [
            f.id for f in r.outputs["result_report"].facts]}],
        "memory_commit": [{"memory_updates": []}],
    })
    await _record("drift_intent", _orchestrator(drift_graph, brain=drifting), "golden-drift",
                  "dave", ["How many A1001 are left in the east warehouse?"])


if __name__ == "__main__":
    asyncio.run(main())
