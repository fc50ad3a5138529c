"""Recall@5 over the labelled set in tests/data/memory_recall.jsonl (shared by test and bench)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.memory import InProcessMemory, RecallPolicy

DATA = Path(__file__).parent.parent / "data" / "memory_recall.jsonl"


def load_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


async def evaluate(embedder: Any, k: int = 5) -> dict[str, Any]:
    """recall@k per language and kind; and every superseded value that was recalled."""
    # no cut (threshold far below any relevance): this eval measures the ranking
    memory = InProcessMemory(embedder=embedder, policy=RecallPolicy(k=k, threshold=-1e9))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    cases = load_cases()
    seeded: set[str] = set()
    for case in cases:
        if case["user"] in seeded:
            continue
        seeded.add(case["user"])
        for n, m in enumerate(case["memories"]):  # one turn per memory: later ones supersede
            update = MemoryUpdate(key=m["key"], update_type="create", value=m["value"],
                                  memory_type=m["type"], evidence_source="user_message")
            await memory.apply(case["user"], f"turn-{n}", [update], start + timedelta(hours=n),
                               text=m["text"])
    hits: dict[str, list[int]] = {}
    leaked = []
    for case in cases:
        items = await memory.recall(case["user"], case["query"], k,
                                    now=start + timedelta(days=1))
        found = [(i.key, i.value) for i in items]
        expected = (case["expected"]["key"], case["expected"]["value"])
        hit = int(expected in found)
        for group in ("all", case["lang"], f"{case['lang']}-{case['kind']}"):
            hits.setdefault(group, []).append(hit)
        never = case.get("never")
        if never and (never["key"], never["value"]) in found:
            leaked.append(case["id"])
        leaked.extend(case["id"] for i in items if i.status != "active")
    return {"recall": {g: sum(v) / len(v) for g, v in hits.items()}, "cases": len(cases),
            "leaked": leaked}
