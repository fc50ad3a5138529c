"""A pending clarification and a pending approval survive SIGKILL between turns and
resume on another process (PostgreSQL + Redis); an approval runs exactly the plan shown."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conversation_support import BODY, SUBJECT
from tests.memory.conftest import PG_URL, REDIS_URL, need

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def services() -> Any:
    need(PG_URL, 5432, "PostgreSQL")
    need(REDIS_URL, 6379, "Redis")
    schema = f"hermes_conv_{uuid.uuid4().hex[:10]}"
    prefix = f"hermes-test:{uuid.uuid4().hex}:"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".sent (recipient TEXT NOT NULL)')
    yield {"pg_url": PG_URL, "schema": schema, "redis_url": REDIS_URL, "prefix": prefix}
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)
    client.close()


def turn(settings: dict[str, Any], session: str, text: str, *, kill: bool) -> dict[str, Any]:
    """One turn in a fresh process; with ``kill``, SIGKILL it after the turn, before it
    exits (between turns: nothing of its own shutdown runs)."""
    args = {**settings, "session": session, "text": text, "hold": kill}
    child = subprocess.Popen([sys.executable, "-m", "tests.conversation_child",
                              json.dumps(args)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert child.stdout is not None
    try:
        line = child.stdout.readline()
        if not line:
            pytest.fail(child.communicate(timeout=30)[1].decode()[-3000:])
        if kill:
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
        assert child.stderr is not None
        child.stderr.close()
    if kill:
        assert child.returncode == -signal.SIGKILL
    return json.loads(line)  # type: ignore[no-any-return]


def sent(settings: dict[str, Any]) -> list[str]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(f'SELECT recipient FROM "{settings["schema"]}".sent').fetchall()
    return [r[0] for r in rows]


def test_a_pending_clarification_survives_sigkill_and_resumes_on_another_process(
        services: dict[str, Any]) -> None:
    first = turn(services, "conv-clarify", "我的订单还没发货,急!", kill=True)
    assert first["status"] == "awaiting_input" and "ORD-12345678" in first["answer"]
    assert "CLARIFY" in first["path"] and first["calls"] == []
    second = turn(services, "conv-clarify", "ORD-12345678", kill=False)
    assert second["status"] == "completed"
    assert second["calls"] == [{"tool": "order_status", "args": {"order_id": "ORD-12345678"}}]
    assert "还没有发货" in second["answer"]  # alice's order in retail.yaml: pending


def test_a_pending_approval_survives_sigkill_and_runs_exactly_the_plan_shown(
        services: dict[str, Any]) -> None:
    first = turn(services, "conv-approve", "把销售报告发给 li@example.com", kill=True)
    assert first["status"] == "awaiting_approval"
    assert 'subject="Sales report", to="li@example.com")' in first["answer"]
    assert sent(services) == []  # nothing ran before the yes
    other = turn(services, "conv-approve", "A1001 在华东仓还有多少", kill=True)
    assert "342" in other["answer"] and sent(services) == []  # still pending, not run
    second = turn(services, "conv-approve", "确认", kill=False)
    assert second["status"] == "completed"
    assert "PLANNING" not in second["path"]  # the stored plan, not a new one
    assert second["calls"] == [{"tool": "send_email", "args": {
        "to": "li@example.com", "subject": SUBJECT, "body": BODY}}]
    assert sent(services) == ["li@example.com"]
    again = turn(services, "conv-approve", "确认", kill=False)  # the approval is used up
    assert again["calls"] == [] and sent(services) == ["li@example.com"]
