"""Scale-out on PostgreSQL + Redis: 2 servers and 2 workers, one of each SIGKILLed mid-run.

A small run here (20 sessions x 5 turns); ``bench/scale_out.py`` runs 200 x 5
(see tests/scale_out_run.py).
"""

from __future__ import annotations

from tests.memory.conftest import PG_URL, REDIS_URL, need
from tests.scale_out_run import run_scale_out


async def test_every_answered_turn_is_stored_once_across_a_server_and_a_worker_killed():
    need(PG_URL, 5432, "PostgreSQL")
    need(REDIS_URL, 6379, "Redis")
    report = await run_scale_out(20, 5, pg_url=PG_URL, redis_url=REDIS_URL, concurrency=8)
    assert report.violations == [], report.report()
    assert report.killed_at_turn == 50
    assert report.answered + report.stored_unanswered == 100
    assert report.answered_by["s0"] and report.answered_by["s1"]  # both served turns
    assert report.resumed_sessions >= 10  # sessions went on on the survivor
