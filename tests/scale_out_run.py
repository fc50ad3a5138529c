"""Scale-out, shown: 2 ``hermes-fsm serve`` + 2 ``hermes-fsm worker`` on one PostgreSQL and
Redis, sessions driven over HTTP across both servers, one server and one worker SIGKILLed
in the middle.

Every turn asks for stock (``inventory_lookup``, served over the Redis bus by the
workers); session ``i``'s turn ``k`` goes to server ``(i + k) % 2``, so every session is
served by both; all sessions are under way at once (at most ``concurrency`` turns in
flight), so the kill finds every session mid-run. Once half the turns are answered,
server 0 and worker 0 are SIGKILLed. The client then does what a load balancer's client would:

- a request that failed with the dead server (connection refused or cut) is not lost:
  the client asks the survivor for the session's stored events; if the turn's
  ``turn_started`` is there, the turn reached the store and is *not* sent again — the
  session's next turn on the survivor finishes it first (an interrupted turn is resumed
  from its last step); a session whose interrupted turn was its last gets one more turn
  (a *nudge*) for that. Otherwise the turn is sent again to the survivor;
- ``409 session_busy`` (the dead server's lease, until its TTL) is retried after a pause.

Then the store is read: each planned turn's text is there exactly once, each stored turn
has exactly one ``turn_finished``, every turn answered over HTTP is there (its turn id)
exactly once, and sessions that had turns on the dead server went on on the survivor.

Used by ``tests/test_scale_out.py`` (a small run) and ``bench/scale_out.py`` (200 × 5).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "How many A1001 are left in the east warehouse?"


@dataclass
class ScaleOutReport:
    """What a run came to."""

    sessions: int = 0
    turns_planned: int = 0
    answered: int = 0  # HTTP 200 for a planned turn
    answered_by: Counter[str] = field(default_factory=Counter)
    failed_requests: int = 0  # transport errors / 5xx with the dead server
    resent: int = 0  # failed turns not in the store: sent again to the survivor
    stored_unanswered: int = 0  # failed turns found in the store: resumed, not resent
    busy_retries: int = 0
    nudges: int = 0
    resumed_sessions: int = 0  # sessions with turns on the dead server that went on
    killed_at_turn: int = 0
    violations: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    duration_s: float = 0.0

    def report(self) -> str:
        """A few lines for a person."""
        lat = sorted(self.latencies_ms) or [0.0]
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        by = ", ".join(f"{k} {n}" for k, n in sorted(self.answered_by.items()))
        lines = [
            f"{self.sessions} sessions x {self.turns_planned // max(1, self.sessions)} turns "
            f"over HTTP on 2 servers + 2 workers in {self.duration_s:.1f}s; server s0 and "
            f"worker w0 SIGKILLed after {self.killed_at_turn} answered turns",
            f"answered {self.answered}/{self.turns_planned} ({by}); turn latency p50 "
            f"{p50:.0f} ms, p99 {p99:.0f} ms",
            f"requests failed with the dead server: {self.failed_requests} (in the store, "
            f"resumed on the survivor: {self.stored_unanswered}; not stored, sent again: "
            f"{self.resent}); 409 busy retried: {self.busy_retries}; nudge turns: "
            f"{self.nudges}",
            f"sessions that had turns on the dead server and went on on the survivor: "
            f"{self.resumed_sessions}",
            f"violations: {len(self.violations)}"]
        lines += [f"  - {v}" for v in self.violations[:20]]
        return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(directory: Path, redis_url: str, pg_url: str, prefix: str, schema: str) -> Path:
    path = directory / "hermes.yaml"
    path.write_text(
        "mcp_servers: {}\nlog: {format: 'off'}\nbusy_policy: refuse\n"
        f"memory: {{postgres_url: '{pg_url}', redis_url: '{redis_url}',\n"
        f"         postgres_schema: {schema}_mem, data_dir: '{directory / 'data'}'}}\n"
        f"sessions: {{store: postgres, pg_schema: {schema}, lease: redis, lease_ttl_s: 2}}\n"
        f"bus: {{kind: redis, url: '{redis_url}', prefix: '{prefix}', heartbeat_s: 0.5,\n"
        "      visibility_timeout_s: 1.5, max_deliveries: 5, concurrency: 2}\n",
        encoding="utf-8")
    return path


def _cli(config: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "hermes_fsm.cli.main", "--config",
                             str(config), *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _up(client: httpx.AsyncClient, url: str, timeout_s: float = 90.0) -> None:
    """Wait for ``url``'s readyz: the store answers and a live worker serves every tool."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if (await client.get(f"{url}/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} was not ready after {timeout_s:g}s")


class _Run:
    def __init__(self, report: ScaleOutReport, urls: list[str], run: str, turns: int,
                 kill_after: int, kill: Any) -> None:
        self.report, self.urls, self.run, self.turns = report, urls, run, turns
        self.kill_after, self.kill = kill_after, kill
        self.dead: set[int] = set()
        self.answered_ids: dict[str, str] = {}  # turn_id -> planned text
        self.on_dead: set[str] = set()  # sessions with a turn answered by the dead server
        self.after_kill: set[str] = set()  # sessions with a turn answered after the kill
        self.killed = asyncio.Event()

    def text(self, session: str, k: int) -> str:
        return f"{QUESTION} ({session} turn {k})"

    async def _stored(self, client: httpx.AsyncClient, url: str, session: str,
                      text: str) -> bool:
        got = await client.get(f"{url}/v1/sessions/{session}/events")
        if got.status_code == 404:
            return False
        got.raise_for_status()
        return any(e.get("kind") == "turn_started" and e.get("text") == text
                   for e in got.json()["events"])

    async def post(self, client: httpx.AsyncClient, session: str, text: str,
                   prefer: int) -> tuple[str, dict[str, Any]] | None:
        """Send one turn until it is answered (``(server, result)``) or is found stored
        without an answer (``None``: the session's next turn finishes it)."""
        while True:
            target = prefer if prefer not in self.dead else 1 - prefer
            url = self.urls[target]
            started = time.perf_counter()
            try:
                got = await client.post(f"{url}/v1/sessions/{session}/turns",
                                        json={"text": text, "user_id": "alice"})
            except httpx.TransportError:
                got = None
            if got is not None and got.status_code == 200:
                self.report.latencies_ms.append((time.perf_counter() - started) * 1000)
                return f"s{target}", got.json()
            if got is not None and got.status_code == 409:  # the dead server's lease
                self.report.busy_retries += 1
                await asyncio.sleep(0.3)
                continue
            if got is not None and got.status_code < 500:
                raise AssertionError(f"{session}: {got.status_code} {got.text[:300]}")
            if not self.killed.is_set() or target not in self.dead:
                raise AssertionError(f"{session}: a live server failed the turn: "
                                     f"{got.status_code if got is not None else 'no answer'}")
            self.report.failed_requests += 1
            survivor = self.urls[1 - target]
            while True:
                try:
                    if await self._stored(client, survivor, session, text):
                        self.report.stored_unanswered += 1
                        return None
                    break
                except httpx.HTTPStatusError:
                    await asyncio.sleep(0.3)
            self.report.resent += 1

    async def session(self, client: httpx.AsyncClient, i: int, gate: asyncio.Semaphore
                      ) -> None:
        session = f"so-{self.run}-{i}"
        pending = False
        for k in range(self.turns):  # every session under way at once, a turn at a time
            async with gate:
                answer = await self.post(client, session, self.text(session, k), (i + k) % 2)
            pending = answer is None
            if answer is not None:
                server, result = answer
                self.note(session, server, result, self.text(session, k))
        if pending:  # the last turn was stored but cut: one more turn finishes it
            self.report.nudges += 1
            async with gate:
                answer = await self.post(client, session, f"hello ({session} nudge)", 1)
            assert answer is not None, f"{session}: the nudge turn was cut too"

    def note(self, session: str, server: str, result: dict[str, Any], text: str) -> None:
        if result.get("status") != "completed" or "342" not in str(result.get("answer")):
            self.report.violations.append(f"{session}: turn answered {result!r}")
        self.report.answered += 1
        self.report.answered_by[server] += 1
        self.answered_ids[result["turn_id"]] = text
        if self.killed.is_set():
            self.after_kill.add(session)
        elif server == "s0":
            self.on_dead.add(session)
        if self.report.answered == self.kill_after and not self.killed.is_set():
            self.kill()
            self.dead.add(0)
            self.killed.set()
            self.report.killed_at_turn = self.report.answered


async def run_scale_out(sessions: int, turns: int, *, pg_url: str, redis_url: str,
                        concurrency: int = 16, seed: int = 15) -> ScaleOutReport:
    """Run the scale-out (see the module docs)."""
    from redis.asyncio import Redis

    from hermes_fsm.store.postgres import PostgresStore

    random.seed(seed)
    report = ScaleOutReport(sessions=sessions, turns_planned=sessions * turns)
    started = time.perf_counter()
    run = uuid.uuid4().hex[:10]
    schema = f"hermes_so_{run}"
    prefix = f"hermes-test-bus:{run}"
    tmp = Path(tempfile.mkdtemp(prefix="hermes-scale-out-"))
    config = _config(tmp, redis_url, pg_url, prefix, schema)
    store = PostgresStore(pg_url, schema=schema)
    await store.open()  # the schema, made once here (not raced by two servers)
    ports = [_free_port(), _free_port()]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    procs: dict[str, subprocess.Popen[bytes]] = {
        "w0": _cli(config, "worker", "--id", f"so-{run}-w0"),
        "w1": _cli(config, "worker", "--id", f"so-{run}-w1"),
        "s0": _cli(config, "serve", "--port", str(ports[0])),
        "s1": _cli(config, "serve", "--port", str(ports[1]))}

    def kill() -> None:
        for name in ("s0", "w0"):
            procs[name].send_signal(signal.SIGKILL)

    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    try:
        async with httpx.AsyncClient(timeout=60.0, limits=limits) as client:
            await asyncio.gather(*(_up(client, url) for url in urls))
            state = _Run(report, urls, run, turns, max(1, sessions * turns // 2), kill)
            gate = asyncio.Semaphore(concurrency)
            await asyncio.gather(*(state.session(client, i, gate) for i in range(sessions)))
        report.resumed_sessions = len(state.on_dead & state.after_kill)
        await _check(store, state, report, sessions, turns)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        redis = Redis.from_url(redis_url)
        for pattern in (f"{prefix}:*", f"hermes:lease:so-{run}-*"):
            keys = [k async for k in redis.scan_iter(match=pattern, count=1000)]
            if keys:
                await redis.delete(*keys)
        await redis.aclose()
        await store.drop_schema()
        await store.close()
        report.duration_s = time.perf_counter() - started
    return report


async def _check(store: Any, state: _Run, report: ScaleOutReport, sessions: int,
                 turns: int) -> None:
    stored_ids: Counter[str] = Counter()
    for i in range(sessions):
        session = f"so-{state.run}-{i}"
        events = await store.events_after(session, 0)
        started = [e for e in events if e["kind"] == "turn_started"]
        finished = Counter(e["turn_id"] for e in events if e["kind"] == "turn_finished")
        texts = Counter(e["text"] for e in started)
        for k in range(turns):
            n = texts.get(state.text(session, k), 0)
            if n != 1:
                report.violations.append(f"{session} turn {k}: in the store {n} times")
        for e in started:
            stored_ids[e["turn_id"]] += 1
            if finished.get(e["turn_id"], 0) != 1:
                report.violations.append(
                    f"{session} turn {e['turn_id']} ({e['text']!r}): "
                    f"{finished.get(e['turn_id'], 0)} turn_finished")
    for turn_id, text in state.answered_ids.items():
        if stored_ids.get(turn_id, 0) != 1:
            report.violations.append(f"answered turn {turn_id} ({text!r}) is in the store "
                                     f"{stored_ids.get(turn_id, 0)} times")
    if report.answered + report.stored_unanswered != report.turns_planned:
        report.violations.append(f"{report.answered} answered + {report.stored_unanswered} "
                                 f"resumed != {report.turns_planned} planned")


def main(argv: list[str]) -> int:  # pragma: no cover - bench/scale_out.py
    """Run from the command line: ``SESSIONS TURNS``."""
    sessions = int(argv[0]) if argv else 200
    turns = int(argv[1]) if len(argv) > 1 else 5
    report = asyncio.run(run_scale_out(
        sessions, turns,
        pg_url=os.environ.get("HERMES_TEST_POSTGRES_URL",
                              "postgresql://postgres@127.0.0.1:5432/test"),
        redis_url=os.environ.get("HERMES_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")))
    print(report.report())
    return 1 if report.violations else 0


__all__ = ["ScaleOutReport", "run_scale_out"]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
