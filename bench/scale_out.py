#!/usr/bin/env python
"""Scale-out: 2 servers + 2 workers, 200 sessions x 5 turns over HTTP, one server and one
worker SIGKILLed in the middle (tests/scale_out_run.py).

    .venv/bin/python bench/scale_out.py [SESSIONS [TURNS]]

Prints the turns answered by each server, turn latency, the requests that failed with
the dead server and what became of them, and each violation (a planned turn not in the
store exactly once, a stored turn without exactly one end, an answered turn missing);
exits 1 when there is one.
"""

from __future__ import annotations

import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]  # bench/http.py
if str(_BENCH.parent) not in sys.path:
    sys.path.insert(1, str(_BENCH.parent))

from tests.scale_out_run import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
