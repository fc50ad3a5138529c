#!/usr/bin/env python
"""SIGKILL of tool workers mid-call, ≥ 50 trials on PostgreSQL + Redis (tests/bus_kill_trials.py).

    .venv/bin/python bench/bus_kill.py [TRIALS]

Prints the replies by kind, the slowest call against its bound, the idempotent calls run
again and each violation (a non-idempotent call that ran twice, a result without its
effect, a call that did not end in time); exits 1 when there is one.
"""

from __future__ import annotations

import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]  # bench/http.py
if str(_BENCH.parent) not in sys.path:
    sys.path.insert(1, str(_BENCH.parent))

from tests.bus_kill_trials import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
