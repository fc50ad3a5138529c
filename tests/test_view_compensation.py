"""Compensation steps in the graph view: a recorded saga (a three-write plan whose third
write fails) and a status check (a write that hangs) each draw their own purple self-loop
on EXECUTION, counted and labelled with the tools, and only when they ran."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.events.recording import parse_recording, recording_text
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from hermes_fsm.tools.registry import ToolRegistry
from hermes_fsm.viz.overlay import overlay_from_events
from hermes_fsm.viz.view import render_view
from tests.support import PLAN_EMPTY, happy_script

ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def returns() -> ToolRegistry:
    reg = ToolRegistry()
    kept: dict[str, str] = {}

    @reg.tool(
        contract=ToolContract.model_validate(
            {
                "name": "create_return",
                "version": "1.0.0",
                "description": "Create a return.",
                "side_effects": "write",
                "timeout_s": 0.2,
                "input_schema": ORDER,
                "compensation": {
                    "status": "query_return_status",
                    "compensate": "cancel_return",
                    "done": "output.status == 'created'",
                    "arguments": {"order_id": "args.order_id"},
                },
            }
        )
    )
    async def create_return(order_id: str) -> dict[str, Any]:
        if order_id == "ORD-3":
            raise ToolCallFailed("REFUSED", "ORD-3 cannot be returned", False)
        if order_id == "ORD-9":
            await asyncio.sleep(10)  # hangs: a status query, then an undo
        kept[order_id] = "created"
        return {"order_id": order_id, "status": "created"}

    @reg.tool(
        contract=ToolContract(
            name="query_return_status", version="1.0.0", description="Status.", input_schema=ORDER
        )
    )
    async def query_return_status(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "status": kept.get(order_id, "none")}

    @reg.tool(
        contract=ToolContract(
            name="cancel_return",
            version="1.0.0",
            description="Cancel.",
            side_effects="write",
            idempotent=True,
            input_schema=ORDER,
        )
    )
    async def cancel_return(order_id: str) -> dict[str, Any]:
        kept.pop(order_id, None)
        return {"order_id": order_id, "status": "cancelled"}

    return reg


def plan(*orders: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "tool_name": "create_return",
                "arguments": {"order_id": o},
                "reasoning_trace": f"return {o}",
            }
            for o in orders
        ]
    }


def record(*plans: dict[str, Any]) -> Any:
    """One turn per plan (each turn plans once), on one session."""
    return parse_recording(record_text(*plans), "<test>")


def record_text(*plans: dict[str, Any]) -> str:
    """The recording of :func:`record` as text."""
    brain = ScriptedBrain(
        happy_script(plan=[*plans, PLAN_EMPTY], response=[{"text": "done", "evidence": []}])
    )
    orchestrator = demo_orchestrator(tools=returns(), brain=brain)
    for _ in plans:
        asyncio.run(orchestrator.run_turn("s1", "return my orders", user_id="alice"))
    return recording_text(orchestrator, "s1")


def loop(page: str, kind: str) -> tuple[str, str] | None:
    match = re.search(
        f'data-source="EXECUTION" data-dest="EXECUTION" data-kind="{kind}" '
        r'data-count="(\d+)"[^>]*><title>([^<]*)</title>',
        page,
    )
    return (match.group(1), match.group(2)) if match else None


def test_each_compensation_step_is_its_own_edge_with_its_count() -> None:
    recording = record(plan("ORD-1", "ORD-2", "ORD-3"), plan("ORD-9"))
    page = render_view(recording, load_graph(default_graph_path()))
    undo = loop(page, "compensate")
    status = loop(page, "status")
    assert undo is not None and undo[0] == "3"  # ORD-2 and ORD-1 of the saga, ORD-9's undo
    assert "compensate: cancel_return" in undo[1]
    assert status is not None and status[0] == "1"  # ORD-9's status query
    assert "status: query_return_status" in status[1]
    overlay = overlay_from_events(recording.events)
    assert overlay.steps == {
        ("EXECUTION", "compensate"): ("cancel_return",),
        ("EXECUTION", "status"): ("query_return_status",),
    }


def test_a_recording_without_compensations_draws_no_such_edge() -> None:
    recording = record(
        {
            "tool_calls": [
                {
                    "tool_name": "query_return_status",
                    "arguments": {"order_id": "ORD-1"},
                    "reasoning_trace": "status",
                }
            ]
        }
    )
    page = render_view(recording, load_graph(default_graph_path()))
    assert loop(page, "compensate") is None and loop(page, "status") is None
    assert 'data-kind="compensate"' not in page


def test_mermaid_and_dot_draw_each_compensation_step_as_its_own_edge(tmp_path: Any) -> None:
    import io

    from hermes_fsm.cli.main import main
    from hermes_fsm.viz.diagram import to_dot, to_mermaid

    text = record_text(plan("ORD-1", "ORD-2", "ORD-3"), plan("ORD-9"))
    graph = load_graph(default_graph_path())
    overlay = overlay_from_events(parse_recording(text, "<test>").events)
    mermaid = to_mermaid(graph, overlay)
    undo = [ln for ln in mermaid.splitlines() if "compensate: cancel_return" in ln]
    status = [ln for ln in mermaid.splitlines() if "status: query_return_status" in ln]
    assert undo == ['    s_EXECUTION -.->|"compensate: cancel_return ×3"| s_EXECUTION']
    assert status == ['    s_EXECUTION -.->|"status: query_return_status ×1"| s_EXECUTION']
    assert mermaid.count("stroke:#6a1b9a") == 2  # each styled as a compensation step
    dot = to_dot(graph, overlay)
    assert dot.count('"EXECUTION" -> "EXECUTION" [label="compensate: cancel_return ×3"') == 1
    assert dot.count('"EXECUTION" -> "EXECUTION" [label="status: query_return_status ×1"') == 1
    # without a recording: the graph alone, no compensation edge
    assert "cancel_return" not in to_mermaid(graph) and "cancel_return" not in to_dot(graph)
    # hermes-fsm graph --recording FILE
    path = tmp_path / "saga.jsonl"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    assert main(["graph", "--format", "dot", "--recording", str(path)], out=out) == 0
    assert 'label="compensate: cancel_return ×3"' in out.getvalue()

