#!/usr/bin/env python
"""A long seeded fault campaign on PostgreSQL + Redis (tests/fault_campaign.py).

    .venv/bin/python bench/faults.py [--faults N] [--seed S] [--sessions K]

Prints the outcome counts, the faults triggered by kind and each property violated (with
the seed, session and turn); exits 1 when a property failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]  # bench/http.py
if str(_BENCH.parent) not in sys.path:
    sys.path.insert(1, str(_BENCH.parent))

from tests.fault_campaign import run_campaign


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--pg-url", default=os.environ.get(
        "HERMES_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--redis-url", default=os.environ.get(
        "HERMES_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    started = time.perf_counter()
    findings = asyncio.run(run_campaign(args.seed, faults=args.faults, sessions=args.sessions,
                                        pg_url=args.pg_url, redis_url=args.redis_url))
    print(findings.report())
    print(f"wall {time.perf_counter() - started:.1f} s")
    return 1 if findings.violations() else 0


if __name__ == "__main__":
    sys.exit(main())
