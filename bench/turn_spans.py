#!/usr/bin/env python
"""What the turn spans cost: a default demo turn (``build_orchestrator``, sessions in
memory, no MCP server) with tracing off, then on (an SDK provider exporting to memory).

    .venv/bin/python bench/turn_spans.py [TURNS]

Off is the default and adds nothing to a turn (no hook, no brain wrapper); run it against
an older checkout (``PYTHONPATH=/path/to/checkout``) to compare: "on" is skipped there.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]  # bench/http.py

from hermes_fsm.config import HermesConfig
from hermes_fsm.config.build import build_orchestrator

QUESTION = "How many A1001 are left in the east warehouse?"


async def _time(turns: int, **overrides: object) -> list[float]:
    config = HermesConfig(mcp_servers={}, sessions={"store": "memory"}, log={"format": "off"})
    orchestrator = build_orchestrator(config, **overrides)
    for i in range(50):  # warm up
        await orchestrator.run_turn(f"w{i}", QUESTION, "alice")
    took = []
    for i in range(turns):
        started = time.perf_counter()
        await orchestrator.run_turn(f"s{i}", QUESTION, "alice")
        took.append((time.perf_counter() - started) * 1e6)
    return took


def _line(label: str, took: list[float]) -> str:
    took = sorted(took)
    return (f"{label:<34} p50 {statistics.median(took):8.0f} us   "
            f"p90 {took[int(len(took) * 0.9)]:8.0f} us   mean {statistics.fmean(took):8.0f} us")


def main(argv: list[str]) -> int:
    turns = int(argv[0]) if argv else 1000
    print(_line("tracing off (default)", asyncio.run(_time(turns))))
    try:
        from hermes_fsm.brain.rules import RulesBrain
        from hermes_fsm.engine.tracing import TurnTracer, traced_brain
    except ImportError:
        print("tracing on: skipped (no hermes_fsm.engine.tracing in this checkout)")
        return 0
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    took = asyncio.run(_time(turns, hooks=[TurnTracer()], brain=traced_brain(RulesBrain())))
    spans = len(exporter.get_finished_spans()) / (turns + 50)
    print(_line(f"tracing on ({spans:.0f} spans a turn)", took))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
