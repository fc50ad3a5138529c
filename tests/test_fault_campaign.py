"""A short seeded fault campaign (real PostgreSQL + Redis): concurrent turns with random
tool, brain, Redis and PostgreSQL faults; every turn ends in IDLE by a declared route, no
event is lost, every session reads back, no non-idempotent call runs twice. The long one:
``bench/faults.py --faults 1000``. A failure prints the seed and each violation."""

from __future__ import annotations

import pytest

from tests.fault_campaign import run_campaign
from tests.memory.conftest import PG_URL, REDIS_URL, need


@pytest.mark.parametrize("seed", [16, 1016])
async def test_a_seeded_fault_campaign_keeps_every_property(seed):
    need(PG_URL, 5432, "PostgreSQL")
    need(REDIS_URL, 6379, "Redis")
    findings = await run_campaign(seed, faults=60, sessions=6, pg_url=PG_URL,
                                  redis_url=REDIS_URL)
    print(findings.report())
    assert sum(findings.triggered.values()) >= 20  # the faults did happen
    assert findings.transfers > 0
    assert not findings.violations(), findings.report()
