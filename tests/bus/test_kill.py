"""Workers SIGKILLed mid-call on PostgreSQL + Redis: no non-idempotent call runs twice.

A few trials here; ``bench/bus_kill.py`` runs fifty and more (see tests/bus_kill_trials.py).
"""

from __future__ import annotations

from tests.bus_kill_trials import run_trials
from tests.memory.conftest import PG_URL, REDIS_URL, need


async def test_killed_workers_never_run_a_non_idempotent_call_twice():
    need(PG_URL, 5432, "PostgreSQL")
    need(REDIS_URL, 6379, "Redis")
    report = await run_trials(3, pg_url=PG_URL, redis_url=REDIS_URL, seed=7)
    assert report.violations == [], report.report()
    assert report.calls == 12 and report.kills == 3
    assert sum(report.replies.values()) == report.calls  # every call ended
