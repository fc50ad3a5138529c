"""Crash and race tests on real PostgreSQL + Redis, with real processes.

- Crash: a child runs turns; the parent kills it with SIGKILL when it reaches a chosen
  state (every state in turn, after a random short delay); a fresh child resumes every
  session and goes on. Every turn plans the non-idempotent ``transfer``. At the end every
  turn ended in IDLE exactly once, every session's sequence numbers are contiguous, every
  turn called ``transfer``, and each call ran once — or, killed before it ran, was not
  made again (``OUTCOME_UNKNOWN``) — never twice.
- Race: two children run turns on the same sessions at once: turns of a session never
  interleave, every refusal is a clean SessionBusy, every accepted turn completed.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.memory.conftest import PG_URL, REDIS_URL, need

ROOT = Path(__file__).resolve().parent.parent
STATES = ["INTENT", "PLANNING", "EXECUTION", "RESULT", "RESPONSE", "MEMORY_COMMIT", "IDLE"]
TRIALS = 56  # 8 kills in each of the 7 states


@pytest.fixture
def services() -> Any:
    need(PG_URL, 5432, "PostgreSQL")
    need(REDIS_URL, 6379, "Redis")
    schema = f"hermes_crash_{uuid.uuid4().hex[:10]}"
    prefix = f"hermes-test:{uuid.uuid4().hex}:"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".executions (call_id TEXT NOT NULL)')
    yield {"pg_url": PG_URL, "schema": schema, "redis_url": REDIS_URL, "prefix": prefix}
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)
    client.close()


def spawn(settings: dict[str, Any]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.durable_child", json.dumps(settings)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def run_until(child: subprocess.Popen[bytes], target: str, nth: int, delay_s: float,
              timeout_s: float = 30.0) -> bool:
    """Read the child's state lines; SIGKILL it after ``delay_s`` once it has entered
    ``target`` ``nth`` times. True when it was killed, False when it finished first."""
    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    seen, buffer, deadline = 0, b"", time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                continue
            chunk = os.read(child.stdout.fileno(), 65536)
            if not chunk:
                return False
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            seen += sum(1 for line in lines if line == f"state {target}".encode())
            if seen >= nth:
                time.sleep(delay_s)
                child.send_signal(signal.SIGKILL)
                return True
        child.kill()
        pytest.fail(f"the child did not reach {target} within {timeout_s}s")
    finally:
        selector.close()
        child.wait(timeout=10)


def finish(child: subprocess.Popen[bytes], timeout_s: float = 60.0) -> bytes:
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"a child did not finish within {timeout_s}s")
    assert child.returncode == 0, err.decode()[-3000:]
    return out


def test_sessions_survive_sigkill_in_every_state(services):
    rng = random.Random(20261130)
    sessions = ["crash-a", "crash-b", "crash-c"]
    settings = {**services, "sessions": sessions, "turns": 2, "mode": "crash"}
    killed_in: Counter[str] = Counter()
    for trial in range(TRIALS):
        target = STATES[trial % len(STATES)]
        child = spawn(settings)
        if run_until(child, target, nth=rng.randint(1, 3), delay_s=rng.random() * 0.004):
            killed_in[target] += 1
    finish(spawn({**settings, "turns": 0}))  # a last fresh process resumes what is left

    assert set(killed_in) == set(STATES), killed_in
    schema = services["schema"]
    transfers: dict[str, str | None] = {}  # call key → error code of its last finish
    turns = 0
    with psycopg.connect(PG_URL) as conn:
        for sid in sessions:
            rows = conn.execute(f'SELECT seq, kind, turn_id, body::text FROM "{schema}".'
                                "hermes_events WHERE session_id = %s ORDER BY seq",
                                (sid,)).fetchall()
            assert [r[0] for r in rows] == list(range(1, len(rows) + 1)), sid
            started = Counter(r[2] for r in rows if r[1] == "turn_started")
            finished = Counter(r[2] for r in rows if r[1] == "turn_finished")
            assert started and set(started.values()) == {1}
            assert finished == started, f"{sid}: a turn did not end exactly once"
            turns += len(finished)
            for body in (json.loads(r[3]) for r in rows if r[1] == "turn_finished"):
                assert body["path"][-1] == "IDLE"
            paid = set()
            for kind, turn_id, body in ((r[1], r[2], json.loads(r[3])) for r in rows):
                if kind.startswith("tool_call_") and body["tool"] == "transfer":
                    key = f"{sid}/{body['call_id']}"
                    if kind == "tool_call_started":
                        paid.add(turn_id)
                        transfers.setdefault(key, None)
                    elif kind == "tool_call_finished":
                        transfers[key] = None if body["ok"] else body["error"]["error_code"]
            assert paid == set(finished), f"{sid}: a turn did not plan the transfer"
            state = conn.execute(f'SELECT state FROM "{schema}".hermes_sessions '
                                 "WHERE session_id = %s", (sid,)).fetchone()
            assert state == ("IDLE",)
        executions = Counter(r[0] for r in conn.execute(
            f'SELECT call_id FROM "{schema}".executions').fetchall())
    twice = {key: n for key, n in executions.items() if n > 1}
    assert twice == {}, f"non-idempotent calls executed twice: {twice}"
    assert set(executions) <= set(transfers), "an execution of a call the log does not have"
    not_run = {key: code for key, code in transfers.items() if key not in executions}
    assert all(code == "OUTCOME_UNKNOWN" for code in not_run.values()), not_run
    # every turn paid once (or, killed before paying, was not made to pay again)
    assert len(executions) + len(not_run) == len(transfers) >= turns
    assert len(executions) > turns // 2, (len(executions), turns)


def test_two_processes_racing_on_the_same_sessions_never_interleave(services):
    sessions = [f"race-{i}" for i in range(4)]
    settings = {**services, "sessions": sessions, "turns": 40, "mode": "race"}
    children = [spawn({**settings, "seed": seed}) for seed in (1, 2)]
    for child in children:
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
    outcomes = [json.loads(line) for child in children
                for line in finish(child).decode().splitlines() if line.strip()]

    accepted = [o for o in outcomes if "accepted" in o]
    refused = [o for o in outcomes if "refused" in o]
    assert len(accepted) + len(refused) == 80
    assert refused, "the two processes never met on a session; the race did not happen"
    assert all("is busy" in o["message"] for o in refused)
    assert all(o["status"] == "completed" for o in accepted)
    schema = services["schema"]
    with psycopg.connect(PG_URL) as conn:
        finished_turns = set()
        for sid in sessions:
            rows = conn.execute(f'SELECT seq, kind, turn_id FROM "{schema}".hermes_events '
                                "WHERE session_id = %s ORDER BY seq", (sid,)).fetchall()
            assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
            blocks = [r[2] for i, r in enumerate(rows) if i == 0 or rows[i - 1][2] != r[2]]
            assert len(blocks) == len(set(blocks)), f"{sid}: turns interleaved"
            finished_turns |= {r[2] for r in rows if r[1] == "turn_finished"}
        assert finished_turns == {o["turn_id"] for o in accepted}
