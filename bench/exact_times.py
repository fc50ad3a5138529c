#!/usr/bin/env python
"""What exact times cost (hermes_fsm/conversation/times.py): parser imports, the first
parse, a warm parse, and a whole rules-brain turn with and without a time expression.

    .venv/bin/python bench/exact_times.py [--n 300]

CPU time (``time.process_time``), one process, no assertions: it prints figures.

- import: a fresh interpreter importing the parser (dateparser for English, jionlp-time for
  Chinese; the Chinese one is imported only when an expression has Chinese in it).
- first parse: the first expression of each language in a fresh interpreter, import
  excluded (both parsers compile their rules on first use).
- warm: per expression, mean over ``--n`` rounds of the expression set.
- turn: an in-process turn of the demo orchestrator (rules brain, demo tools, no MCP), mean
  over ``--n`` turns, for a reminder with a time ("…tomorrow at 3pm" / "明天上午十点…")
  against the same reminder with an exact time written out (no parser called) and the
  stock question of the README.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_HERE = _Path(__file__).resolve().parent
_sys.path[:] = [p for p in _sys.path if _Path(p or ".").resolve() != _HERE]

import argparse
import asyncio
import subprocess
import sys
import time
from datetime import UTC, datetime

EN = ["tomorrow at 3pm", "in two hours", "next monday", "friday at 10am", "last month", "Q3"]
ZH = ["明天上午十点", "后天早上八点", "下周一", "两小时后", "上个月", "第三季度"]
BASE = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _fresh(code: str) -> float:
    """CPU ms a fresh interpreter reports for ``code`` (which prints its own figure)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cold() -> None:
    timer = "import time; t = time.process_time(); "
    done = "; print((time.process_time() - t) * 1000)"
    print("cold (fresh interpreter, CPU ms)")
    print(f"  import dateparser            {_fresh(timer + 'import dateparser' + done):8.1f}")
    print(f"  import jionlp_time           {_fresh(timer + 'import jionlp_time' + done):8.1f}")
    setup = ("from datetime import datetime, UTC; "
             "from hermes_fsm.conversation.times import TimeResolver; "
             "r = TimeResolver('Asia/Shanghai'); b = datetime(2026, 12, 1, 2, tzinfo=UTC); ")
    en = _fresh(setup + "import dateparser.date; " + timer +
                "r.resolve('tomorrow at 3pm', base=b)" + done)
    zh = _fresh(setup + "import jionlp_time; " + timer + "r.resolve('明天上午十点', base=b)" + done)
    print(f"  first parse, English         {en:8.1f}")
    print(f"  first parse, Chinese         {zh:8.1f}")


def warm(n: int) -> None:
    from hermes_fsm.conversation.times import TimeResolver

    resolver = TimeResolver("Asia/Shanghai")
    print(f"warm (per expression, mean of {n} rounds, CPU µs)")
    for name, texts in (("English", EN), ("Chinese", ZH)):
        for text in texts:
            resolver.resolve(text, base=BASE)  # first use out of the way
        start = time.process_time()
        for _ in range(n):
            for text in texts:
                resolver.resolve(text, base=BASE)
        each = (time.process_time() - start) / (n * len(texts)) * 1e6
        print(f"  {name:<28} {each:8.1f}")


async def turns(n: int) -> None:
    from hermes_fsm.brain.rules import RulesBrain
    from hermes_fsm.sources import FixedClock
    from hermes_fsm.testing import demo_orchestrator

    cases = [
        ("reminder, English time", "remind me to call Bob tomorrow at 3pm"),
        ("reminder, Chinese time", "明天上午十点提醒我带项目计划书"),
        ("reminder, vague time (asks)", "remind me to stretch later"),
        ("stock question (no time)", "How many A1001 are left in the east warehouse?"),
    ]
    print(f"turn (in-process demo orchestrator, mean of {n} turns, CPU ms)")
    for label, text in cases:
        orchestrator = demo_orchestrator(brain=RulesBrain(timezone="Asia/Shanghai"),
                                         clock=FixedClock(BASE))
        for i in range(5):
            await orchestrator.run_turn(f"w{i}", text, user_id="bench")
        start = time.process_time()
        for i in range(n):
            await orchestrator.run_turn(f"s{i}", text, user_id="bench")
        print(f"  {label:<28} {(time.process_time() - start) / n * 1000:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    cold()
    warm(args.n)
    asyncio.run(turns(args.n))


if __name__ == "__main__":
    main()
