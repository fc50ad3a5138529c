"""The held-out bilingual memory eval (tests/data/memory_bilingual.json), shared by the
tests and ``bench/memory.py --eval``.

Two users, one per language: the English user stated 30 facts in English, the Chinese
user the same 30 in Chinese, each after an older value for 8 of the keys (superseded:
"never" must not come back) and among 8 near-miss distractors (notes about other people:
"my colleague Bob prefers phone calls" next to "contact me by email"). Each fact has four
queries — English direct and paraphrase, Chinese direct and paraphrase — asked of both
users, so 240 queries: 60 per slice ``en`` (English query, English items), ``zh``,
``zh→en`` (Chinese query, English items) and ``en→zh``.

Everything goes through the project's recall path: ``TieredMemory.apply`` (a turn per
statement, so later values supersede earlier ones) and ``TieredMemory.recall`` with the
policy given (the calibrated one by default).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_fsm.contracts.states import MemoryUpdate
from hermes_fsm.memory import InProcessMemory, RecallPolicy, TieredMemory
from hermes_fsm.memory.embedders import Embedder

DATA = Path(__file__).parent.parent / "data" / "memory_bilingual.json"
START = datetime(2026, 1, 1, tzinfo=UTC)
SLICES = ("en", "zh", "zh→en", "en→zh")


def load() -> dict[str, Any]:
    return dict(json.loads(DATA.read_text(encoding="utf-8")))


def cases() -> list[dict[str, Any]]:
    """One dict per query: user language, query language, kind, text, expected, never."""
    out = []
    for fact in load()["facts"]:
        for user_lang in ("en", "zh"):
            for q_lang in ("en", "zh"):
                for kind in ("direct", "paraphrase"):
                    old = fact["old"][user_lang]["value"] if fact["old"] else None
                    out.append({
                        "user": f"eval-{user_lang}", "user_lang": user_lang, "lang": q_lang,
                        "slice": q_lang if q_lang == user_lang else f"{q_lang}→{user_lang}",
                        "kind": kind, "query": fact["queries"][f"{q_lang}-{kind}"],
                        "key": fact["key"], "expected": fact[user_lang]["value"],
                        "never": old})
    return out


async def seed(memory: TieredMemory) -> int:
    """Write both users' statements, a turn each (older values first); returns how many."""
    data = load()
    n = 0
    for user_lang in ("en", "zh"):
        user = f"eval-{user_lang}"
        statements = [(f["key"], f["type"], f["old"][user_lang]) for f in data["facts"]
                      if f["old"]]
        rest = [(f["key"], f["type"], f[user_lang]) for f in data["facts"]]
        rest += [(d["key"], d["type"], d[user_lang]) for d in data["distractors"]]
        rest.sort(key=lambda s: zlib.crc32(s[0].encode()) % 7)  # distractors among facts
        for key, memory_type, said in statements + rest:
            update = MemoryUpdate(key=key, update_type="create", value=said["value"],
                                  memory_type=memory_type, evidence_source="user_message")
            await memory.apply(user, f"turn-{n}", [update], START + timedelta(hours=n),
                               text=said["text"])
            n += 1
    return n


async def evaluate(embedder: Embedder, *, policy: RecallPolicy | None = None,
                   memory: Callable[[Embedder, RecallPolicy | None], TieredMemory]
                   | None = None) -> dict[str, Any]:
    """recall@5 and recall@1 per slice and kind, queries with nothing recalled, superseded
    values returned, and the time per query."""
    tiers = (memory or (lambda e, p: InProcessMemory(embedder=e, policy=p)))(embedder, policy)
    try:
        await seed(tiers)
        at5: dict[str, list[int]] = {}
        at1: dict[str, list[int]] = {}
        empty, leaked, seconds = 0, [], 0.0
        for case in cases():
            started = time.perf_counter()
            found = await tiers.recall(case["user"], case["query"], 5,
                                       now=START + timedelta(days=3))
            seconds += time.perf_counter() - started
            pairs = [(i.key, i.value) for i in found]
            want = (case["key"], case["expected"])
            for group in ("all", case["slice"], case["kind"],
                          *(["superseded"] if case["never"] else [])):
                at5.setdefault(group, []).append(int(want in pairs))
                at1.setdefault(group, []).append(int(pairs[:1] == [want]))
            empty += not found
            if case["never"] and (case["key"], case["never"]) in pairs:
                leaked.append(case["query"])
            leaked.extend(case["query"] for i in found if i.status != "active")
        total = len(at5["all"])
        return {"queries": total,
                "recall@5": {g: sum(v) / len(v) for g, v in at5.items()},
                "recall@1": {g: sum(v) / len(v) for g, v in at1.items()},
                "empty": empty / total, "leaked": leaked, "ms_per_query": seconds / total * 1e3}
    finally:
        await tiers.close()
