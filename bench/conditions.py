"""What a contract's CEL preconditions cost a call, through the real executor.

Prints µs per call of the demo's ``store_stock`` (an inline, in-memory tool) with its
contract as shipped (two preconditions over the store and catalog registries, two
postconditions) and with the conditions removed, and the cost of the narrowing: the same
precondition over a registry of N entries, read by key (narrowed to one entry) and read
whole (``size(registries.stores) > 0 && ...``), which converts every entry on every call.

    .venv/bin/python bench/conditions.py [--calls 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.registry import ToolRegistry


async def per_call(registry: ToolRegistry, tool: str, args: dict[str, Any], n: int) -> float:
    executor = ToolExecutor(registry)
    calls = [("c", tool, args)]
    for _ in range(200):  # warm up
        await executor.execute(calls)
    start = time.perf_counter()
    for _ in range(n):
        [out] = await executor.execute(calls)
    elapsed = time.perf_counter() - start
    assert out["success"], out
    return elapsed / n * 1e6


def without_conditions(registry: ToolRegistry, name: str) -> ToolRegistry:
    tool = registry.get(name)
    assert tool.contract is not None
    doc = tool.contract.to_document()
    for field in ("preconditions", "postconditions", "registries"):
        doc.pop(field, None)
    bare = ToolRegistry()
    bare.tool(contract=ToolContract.model_validate(doc), inline=True)(tool.fn)
    return bare


def probe(entries: int, whole: bool) -> ToolRegistry:
    expr = "registries.stores[args.store].confidence >= 0.8"
    if whole:
        expr = "size(registries.stores) > 0 && " + expr
    contract = ToolContract.model_validate({
        "name": "probe", "version": "1.0.0", "description": "probe",
        "registries": {"stores": {"type": "object",
                                  "properties": {"confidence": {"type": "number"}}}},
        "preconditions": [{"expr": expr}],
        "input_schema": {"type": "object", "properties": {"store": {"type": "string"}}}})
    registry = ToolRegistry()
    registry.provide_registry("stores", {f"s{i}": {"confidence": 0.9} for i in range(entries)})
    registry.tool(contract=contract, inline=True)(lambda store: {"ok": True})
    return registry


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    n = parser.parse_args().calls
    demo = build_demo_registry()
    args = {"sku": "IP15-128", "store": "hz_xh_001"}
    with_us = await per_call(demo, "store_stock", args, n)
    bare_us = await per_call(without_conditions(demo, "store_stock"), "store_stock", args, n)
    print(f"store_stock, {n} calls through ToolExecutor.execute (one call a plan):")
    print(f"  contract without conditions      {bare_us:8.1f} µs/call")
    print(f"  2 preconditions + 2 postconditions {with_us:6.1f} µs/call "
          f"(+{with_us - bare_us:.1f} µs)")
    print("one precondition over a registry of N entries:")
    for entries in (10, 1000, 10000):
        keyed = await per_call(probe(entries, False), "probe", {"store": "s1"}, n // 5)
        whole = await per_call(probe(entries, True), "probe", {"store": "s1"}, max(n // 50, 20))
        print(f"  N={entries:6d}  read by key {keyed:8.1f} µs/call   "
              f"read whole {whole:10.1f} µs/call")


if __name__ == "__main__":
    asyncio.run(main())
