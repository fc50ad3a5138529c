"""SIGKILL of tool workers mid-call, on PostgreSQL + Redis: exactly-once effects, shown.

Each trial sends a few calls of a tool that inserts one row per execution into a table of
its own (``pg_mark``, not idempotent; ``pg_mark_idem``, declared idempotent), kills one of
the worker processes with ``SIGKILL`` at a random point, and starts a new one. Then:

- every call ended (result, error or timeout) within its deadline plus the reclaim
  (visibility) timeout;
- no non-idempotent call's row is there twice, and a call answered ``EXECUTE_RESULT`` has
  its row exactly once;
- idempotent calls run again after a kill are counted (``reruns``).

Used by ``tests/bus/test_kill.py`` (a few trials) and ``bench/bus_kill.py`` (≥ 50).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hermes_fsm.tools.bus.messages import ExecuteRequest
from hermes_fsm.tools.bus.redis_streams import RedisStreamsBus

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 4.0
VISIBILITY_S = 1.0


@dataclass
class KillReport:
    """What the trials came to."""

    trials: int = 0
    calls: int = 0
    kills: int = 0
    replies: Counter[str] = field(default_factory=Counter)
    reruns: int = 0  # idempotent calls that ran more than once
    violations: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    duration_s: float = 0.0

    def report(self) -> str:
        """A few lines for a person."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.replies.items()))
        lines = [f"{self.trials} trials, {self.calls} calls, {self.kills} workers SIGKILLed "
                 f"in {self.duration_s:.1f}s",
                 f"replies: {kinds}",
                 f"slowest call ended after {self.slowest_s:.2f}s (bound: deadline "
                 f"{TIMEOUT_S + 2:g}s + reclaim {VISIBILITY_S:g}s)",
                 f"idempotent calls run again after a kill: {self.reruns}",
                 f"violations: {len(self.violations)}"]
        lines += [f"  - {v}" for v in self.violations[:20]]
        return "\n".join(lines)


def _config(directory: Path, redis_url: str, pg_url: str, prefix: str, schema: str) -> Path:
    path = directory / "hermes.yaml"
    path.write_text(
        "mcp_servers: {}\nlog: {format: 'off'}\n"
        f"memory: {{postgres_url: '{pg_url}'}}\n"
        f"sessions: {{store: postgres, pg_schema: {schema}}}\n"
        f"bus: {{kind: redis, url: '{redis_url}', prefix: '{prefix}', heartbeat_s: 0.25,\n"
        f"      visibility_timeout_s: {VISIBILITY_S}, max_deliveries: 5, concurrency: 2,\n"
        "      registry: 'tests.bus.tools:registry'}\n", encoding="utf-8")
    return path


def _start_worker(config: Path, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "hermes_fsm.cli.main", "--config",
                             str(config), "worker", "--id", name], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _wait_for(bus: RedisStreamsBus, names: set[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if names <= {w.worker_id for w in await bus.workers()}:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"workers {sorted(names)} did not come up in {timeout_s:g}s")


async def run_trials(trials: int, *, pg_url: str, redis_url: str, seed: int = 15,
                     workers: int = 2, calls: int = 4) -> KillReport:
    """Run ``trials`` kill trials (see the module docs)."""
    import psycopg

    from hermes_fsm.store.postgres import PostgresStore

    rng = random.Random(seed)
    report = KillReport()
    started = time.perf_counter()
    schema = f"hermes_bk_{uuid.uuid4().hex[:10]}"
    prefix = f"hermes-test-bus:{uuid.uuid4().hex}"
    store = PostgresStore(pg_url, schema=schema)
    await store.open()  # the fence's schema, made once here
    table = f"{schema}.effects_seen"
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(f"CREATE TABLE {table} (token TEXT NOT NULL, pid INT)")
    bus = RedisStreamsBus(redis_url, prefix=prefix, visibility_timeout_s=VISIBILITY_S,
                          on_event=lambda *a, **k: None)
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bus-kill-"))
    config = _config(tmp, redis_url, pg_url, prefix, schema)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    serial = 0
    tokens: dict[str, tuple[bool, str]] = {}  # token -> (idempotent, reply kind)
    try:
        for _ in range(workers):
            serial += 1
            procs[f"w{serial}"] = _start_worker(config, f"w{serial}")
        await _wait_for(bus, set(procs))
        for _trial in range(trials):
            report.trials += 1
            requests = []
            for _ in range(calls):
                idem = rng.random() < 0.25
                token = uuid.uuid4().hex
                tool = "pg_mark_idem" if idem else "pg_mark"
                requests.append(ExecuteRequest(
                    request_id=token, call_id=f"trial-{token[:8]}", idempotency_key=token,
                    tool_name=tool, idempotent=idem, timeout_ms=int(TIMEOUT_S * 1000),
                    input_params={"dsn": pg_url, "table": table, "token": token,
                                  "seconds": round(rng.uniform(0.0, 0.3), 3)},
                    sent_at=time.time()))
                tokens[token] = (idem, "")
            sent = time.monotonic()
            tasks = [asyncio.create_task(bus.call(r, "default")) for r in requests]
            await asyncio.sleep(rng.uniform(0.0, 0.4))
            victim = rng.choice(sorted(procs))
            procs.pop(victim).send_signal(signal.SIGKILL)
            report.kills += 1
            serial += 1
            procs[f"w{serial}"] = _start_worker(config, f"w{serial}")
            replies = await asyncio.gather(*tasks)
            for request, reply in zip(requests, replies, strict=True):
                kind = reply.kind if reply.kind != "EXECUTE_ERROR" else (
                    f"EXECUTE_ERROR {reply.error_code}")
                report.replies[kind] += 1
                report.calls += 1
                tokens[request.request_id] = (request.idempotent, reply.kind)
            took = time.monotonic() - sent
            report.slowest_s = max(report.slowest_s, took)
            if took > TIMEOUT_S + 2 + VISIBILITY_S + 1:  # +1: scheduling on a shared machine
                report.violations.append(f"trial {report.trials}: calls ended after {took:.2f}s")
            await _wait_for(bus, set(procs))  # the replacement is up before the next kill
        await asyncio.sleep(1.0)  # late executions, if any, land before counting
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            cur = await conn.execute(f"SELECT token, count(*) FROM {table} GROUP BY token")
            counts: dict[str, int] = dict(await cur.fetchall())
        for token, (idem, kind) in tokens.items():
            n = counts.get(token, 0)
            if idem:
                report.reruns += max(0, n - 1)
            elif n > 1:
                report.violations.append(f"non-idempotent call {token} ran {n} times")
            if kind == "EXECUTE_RESULT" and n == 0:
                report.violations.append(f"call {token} answered a result but left no row")
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        keys = [k async for k in bus.client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await bus.client.delete(*keys)
        await bus.aclose()
        await store.drop_schema()
        await store.close()
        report.duration_s = time.perf_counter() - started
    return report


def main(argv: list[str]) -> int:  # pragma: no cover - bench/bus_kill.py
    """Run the trials from the command line."""
    n = int(argv[0]) if argv else 50
    report = asyncio.run(run_trials(
        n, pg_url=os.environ.get("HERMES_TEST_POSTGRES_URL",
                                 "postgresql://postgres@127.0.0.1:5432/test"),
        redis_url=os.environ.get("HERMES_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")))
    print(report.report())
    return 1 if report.violations else 0


__all__ = ["KillReport", "run_trials"]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
