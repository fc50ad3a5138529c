"""Timeouts in three levels: the tool's budget (0.6 × bus), the bus's, the answer's deadline.

``EXECUTE_TIMEOUT`` reaches the RESULT state as a structured error; a late result is
journalled by the worker's fence and never applied to the turn that moved on.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hermes_fsm.config import HermesConfig
from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.durable import EffectsJournal
from hermes_fsm.store import InMemoryStore
from hermes_fsm.tools.bus import InProcessBus, Worker, serve_over_bus, specs_of
from hermes_fsm.tools.bus.sandbox import InlineRunner
from hermes_fsm.tools.executor import ToolExecutor
from tests.bus import tools as test_tools
from tests.bus.conftest import eventually


async def test_a_bus_timeout_reaches_the_result_state_as_a_structured_error():
    registry = build_demo_registry()
    registry.get("inventory_lookup").timeout_s = 0.3
    serve_over_bus(registry, InProcessBus(), group="nobody-serves-it")
    orchestrator = build_orchestrator(
        HermesConfig(mcp_servers={}, sessions={"store": "memory"}, log={"format": "off"}),
        tools=registry, executor=ToolExecutor(registry, sleep=_no_wait))
    result = await orchestrator.run_turn(None, "How many A1001 are left in the east "
                                         "warehouse?", "alice")
    finished: list[Any] = [e for e in result.events if type(e).__name__ == "ToolCallFinished"]
    assert finished and all(not e.ok for e in finished)
    assert finished[0].error["error_code"] == "TIMEOUT"
    assert "over the bus" in finished[0].error["message"]
    assert "RESULT" in result.path
    report = result.outputs.get("RESULT")
    assert report is not None and any("TIMEOUT" in v for v in report["violations"])


async def _no_wait(_delay: float) -> None:
    return None


async def test_a_late_result_is_journalled_and_not_applied():
    registry = test_tools.build_registry()
    bus = InProcessBus()
    fence = InMemoryStore()
    local = {n: registry.get(n) for n in ("mark",)}
    remote_registry = _copy(registry)
    remote_registry.get("mark").timeout_s = 0.5  # its budget in the worker: 0.3 s
    serve_over_bus(remote_registry, bus, names=["mark"])
    executor = ToolExecutor(remote_registry)
    marks = Path(tempfile.mkdtemp()) / "marks.txt"
    journal = EffectsJournal(InMemoryStore(), "sess-late")  # the orchestrator's own
    (envelope,) = await executor.execute([("late-s1-c1", "mark",
                                           {"path": str(marks), "token": "late"})],
                                         journal=journal)
    assert envelope["error_code"] == "TIMEOUT" and not envelope["retryable"]
    worker = Worker(bus, "default", specs_of(registry, local), InlineRunner(registry),
                    fence=fence, heartbeat_s=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:  # the worker comes up before the answer's deadline (+2 s) and runs it, too late
        assert await eventually(lambda: bus.waiters.late, timeout_s=5)
    finally:
        stop.set()
        await task
    (late,) = bus.waiters.late
    assert late.kind == "EXECUTE_RESULT", late
    journalled = await fence.effect_begin("bus:sess-late/late-s1-c1/a1", "s", "mark")
    assert journalled is not None and journalled.status == "finished"
    assert journalled.outcome is not None
    assert journalled.outcome["output_data"] == {"marked": "late"}
    assert marks.read_text().splitlines() == ["late"]
    assert envelope["success"] is False  # what the turn got stays what it got


def _copy(registry):
    """A second registry of the same tools (the module run again): one to serve over the
    bus, the original for the worker."""

    return test_tools.build_registry()
