"""Recordings hold U+0000 and non-finite numbers as the session stores do (U+FFFD; the
strings "NaN", "Infinity"), so a live recording (the sink's file, the one made from the
session's log) reads the same as the one exported from the store, and is strict JSON
(issue 16, a known gap: live recordings kept U+0000 and turned NaN into null, or into a
bare NaN token no strict JSON reader takes)."""

from __future__ import annotations

import json
from typing import Any

from hermes_fsm.events.recording import RecordingSink, recording_text
from hermes_fsm.store import InMemoryStore
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import PLAN_EMPTY, graph_with, happy_script

PLAN = {"tool_calls": [{"tool_name": "odd", "arguments": {}, "reasoning_trace": "odd"}]}


def strict(line: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(line, parse_constant=refuse)


async def test_live_recordings_hold_what_the_store_holds(tmp_path):
    registry = ToolRegistry()

    @registry.tool(description="Answers with awkward values.")
    async def odd() -> dict[str, Any]:
        return {"nul": "a\x00b", "nan": float("nan"), "inf": float("inf")}

    store = InMemoryStore()
    brain = ScriptedBrain(happy_script(plan=[PLAN, PLAN_EMPTY],
                                       response=[{"text": "done", "evidence": []}]))
    orchestrator = demo_orchestrator(graph_with(), brain=brain, tools=registry, store=store)
    sink = RecordingSink(tmp_path, orchestrator)
    orchestrator.add_sink(sink)
    await orchestrator.run_turn("s1", "go", user_id="u1")
    sink.close()
    stored = await store.events_after("s1")
    finished = [e for e in stored if e["kind"] == "tool_call_finished"]
    assert finished[0]["output"] == {"nul": "a\ufffdb", "nan": "NaN", "inf": "Infinity"}
    for text in (sink.path_for("s1").read_text(encoding="utf-8"),
                 recording_text(orchestrator, "s1")):
        assert "\\u0000" not in text and "\x00" not in text
        events = [strict(line) for line in text.splitlines()[1:]]
        assert events == stored
