#!/usr/bin/env python
"""The execution bus's cost and scale-out, in one run.

    .venv/bin/python bench/bus.py [--calls 2000] [--burst 1000] [--workers 1,2,4]
                                  [--fence memory|postgres] [--overhead-only] [--floor]

1. Per-call overhead of the Redis bus over the in-process executor, for a no-op tool:
   the same ``ToolExecutor`` pipeline, the tool run in this process vs sent over Redis
   Streams to a ``hermes-fsm worker`` process that runs it in a sandboxed child (p50, p99).
2. Throughput of ``--burst`` concurrent calls of a tool that sleeps 10 ms (blocking), with
   1, 2 and 4 worker processes (each one call at a time, so the scale-out is the
   workers'), beside the in-process executor (its thread pool, 16 threads).

3. ``--floor``: what redis-py itself costs, no hermes code: a bare asyncio redis-py round
   trip between two processes (XADD request → the other's blocking XREADGROUP → XADD reply
   + XACK → this one's blocking XREAD), p50/p99 and CPU per call of each process and of
   Redis (``INFO cpu`` deltas). ``--overhead-only`` skips part 2.

Workers are real processes on this machine (2 shared cores here); the effects fence is
an in-memory store per worker unless ``--fence postgres`` (then every call claims and
records its key in PostgreSQL, as in production).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]  # bench/http.py
if str(_BENCH.parent) not in sys.path:
    sys.path.insert(1, str(_BENCH.parent))

from hermes_fsm.tools.bus.redis_streams import RedisStreamsBus
from hermes_fsm.tools.bus.remote import serve_over_bus
from hermes_fsm.tools.executor import ToolExecutor
from tests.bus import tools as bench_tools

ROOT = _BENCH.parent
PG_URL = os.environ.get("HERMES_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("HERMES_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _registry():  # a fresh copy of the test tools: serve_over_bus replaces them in place
    return bench_tools.build_registry()


async def _latencies(executor: ToolExecutor, tool: str, args: dict, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        (envelope,) = await executor.execute([(f"b{i}-s1-c1", tool, args)])
        out.append((time.perf_counter() - t0) * 1000)
        assert envelope["success"], envelope
    return out


async def _burst(executor: ToolExecutor, n: int) -> float:
    t0 = time.perf_counter()
    results = await asyncio.gather(*(executor.execute([(f"t{i}-s1-c1", "tick", {})])
                                     for i in range(n)))
    took = time.perf_counter() - t0
    failed = [r[0] for r in results if not r[0]["success"]]
    assert not failed, failed[:3]
    return n / took


async def _same_process(n: int) -> list[float]:
    """The no-op over Redis to a worker in this process (one process hop fewer)."""
    from hermes_fsm.tools.bus import SandboxPool, Worker, specs_of

    prefix = f"hermes-bench-bus:{uuid.uuid4().hex}"
    caller, served = RedisStreamsBus(REDIS_URL, prefix=prefix), RedisStreamsBus(
        REDIS_URL, prefix=prefix)
    pool = SandboxPool("tests.bus.tools:registry", size=1)
    worker = Worker(served, "default", specs_of(bench_tools.registry), pool, concurrency=1)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    registry = _registry()
    serve_over_bus(registry, caller)
    executor = ToolExecutor(registry)
    try:
        await _latencies(executor, "noop", {}, 200)  # warm
        return await _latencies(executor, "noop", {}, n)
    finally:
        stop.set()
        await task
        await pool.aclose()
        keys = [k async for k in caller.client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await caller.client.delete(*keys)
        await caller.aclose()
        await served.aclose()


async def _floor_worker(prefix: str, n: int) -> None:
    """The floor's other process: serve ``n`` requests, then print its CPU per call."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    req, rep = f"{prefix}:req", f"{prefix}:rep"
    served, t0 = 0, None
    while served < n:
        got = await client.xreadgroup("g", "c", {req: ">"}, count=16, block=1000)
        for _stream, entries in got or ():
            for entry_id, fields in entries:
                if t0 is None and served >= 200:
                    t0 = os.times()
                await client.xadd(rep, {"m": fields[b"m"]})
                await client.xack(req, "g", entry_id)
                served += 1
    t1 = os.times()
    assert t0 is not None
    print(f"{((t1.user - t0.user) + (t1.system - t0.system)) / (n - 200) * 1e6:.1f}", flush=True)
    await client.aclose()


def _tree_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of process ``pid`` (key ``pid``) and of its children (key ``-1``)."""
    def cpu(p: int) -> float:
        fields = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    kids = [int(k) for t in Path(f"/proc/{pid}/task").iterdir()
            for k in (t / "children").read_text().split()]
    return {pid: cpu(pid), -1: sum(cpu(k) for k in kids)}


def _redis_cpu(info: dict) -> float:
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _floor(n: int) -> None:
    """Part 3 (see the module docs)."""
    import redis.asyncio as aioredis
    import redis.utils

    prefix = f"hermes-bench-floor:{uuid.uuid4().hex}"
    client = aioredis.Redis.from_url(REDIS_URL)
    req, rep = f"{prefix}:req", f"{prefix}:rep"
    await client.xgroup_create(req, "g", id="0", mkstream=True)
    proc = subprocess.Popen([sys.executable, __file__, "--floor-worker", prefix, str(n + 200)],
                            stdout=subprocess.PIPE, cwd=ROOT)
    last, times = "0-0", []
    try:
        for i in range(n + 200):
            if i == 200:
                c0, r0 = os.times(), _redis_cpu(await client.info("cpu"))
            t = time.perf_counter()
            await client.xadd(req, {"m": b'{"kind":"EXECUTE_REQUEST"}'})
            got = []
            while not got:
                got = await client.xread({rep: last}, count=16, block=1000)
            last = got[0][1][-1][0]
            if i >= 200:
                times.append((time.perf_counter() - t) * 1000)
        c1, r1 = os.times(), _redis_cpu(await client.info("cpu"))
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        await client.delete(req, rep)
        await client.aclose()
    mine = ((c1.user - c0.user) + (c1.system - c0.system)) / n * 1e6
    print(f"floor: bare redis-py (asyncio, hiredis {redis.utils.HIREDIS_AVAILABLE}) "
          f"XADD→XREADGROUP→XADD+XACK→XREAD, two processes, {n} calls")
    print(f"  round trip p50 {_pct(times, .5):.3f} ms, p99 {_pct(times, .99):.3f} ms")
    print(f"  CPU per call: caller {mine:.0f} µs, server side {float(out):.0f} µs, "
          f"Redis {(r1 - r0) / n * 1e6:.0f} µs (Redis includes everyone's commands)")


class Workers:
    """Worker processes on one bus prefix."""

    def __init__(self, prefix: str, fence: str, schema: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="hermes-bench-bus-"))
        store = (f"memory: {{postgres_url: '{PG_URL}'}}\nsessions: {{store: postgres, "
                 f"pg_schema: {schema}}}\n" if fence == "postgres"
                 else "sessions: {store: memory}\n")
        self.config = self.dir / "hermes.yaml"
        self.config.write_text(
            "mcp_servers: {}\nlog: {format: 'off'}\n" + store +
            f"bus: {{kind: redis, url: '{REDIS_URL}', prefix: '{prefix}', heartbeat_s: 0.5,"
            " registry: 'tests.bus.tools:registry', concurrency: 1}\n", encoding="utf-8")
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int) -> list[str]:
        names = []
        for _ in range(n):
            name = f"bench-{uuid.uuid4().hex[:6]}"
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "hermes_fsm.cli.main", "--config", str(self.config),
                 "worker", "--id", name, "--concurrency", "1"], cwd=ROOT,
                stdout=subprocess.DEVNULL))
            names.append(name)
        return names

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs = []


async def _up(bus: RedisStreamsBus, names: list[str]) -> None:
    for _ in range(600):
        if set(names) <= {w.worker_id for w in await bus.workers()}:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the workers did not come up; run one by hand to see why")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--fence", choices=["memory", "postgres"], default="memory")
    parser.add_argument("--overhead-only", action="store_true", help="skip the throughput")
    parser.add_argument("--floor", action="store_true", help="the bare redis-py round trip")
    parser.add_argument("--floor-worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_worker:
        await _floor_worker(args.floor_worker[0], int(args.floor_worker[1]))
        return
    if args.floor:
        await _floor(args.calls)
        return
    counts = [int(n) for n in args.workers.split(",")]
    schema = f"hermes_bench_{uuid.uuid4().hex[:8]}"
    store = None
    if args.fence == "postgres":
        from hermes_fsm.store.postgres import PostgresStore

        store = PostgresStore(PG_URL, schema=schema)
        await store.open()

    local = ToolExecutor(_registry())
    await _latencies(local, "noop", {}, 200)  # warm
    base = await _latencies(local, "noop", {}, args.calls)

    prefix = f"hermes-bench-bus:{uuid.uuid4().hex}"
    bus = RedisStreamsBus(REDIS_URL, prefix=prefix)
    registry = _registry()
    serve_over_bus(registry, bus)
    remote = ToolExecutor(registry)
    workers = Workers(prefix, args.fence, schema)
    try:
        await _up(bus, workers.start(1))
        await _latencies(remote, "noop", {}, 200)  # warm
        pid = workers.procs[0].pid
        c0, w0, r0 = os.times(), _tree_cpu(pid), _redis_cpu(await bus.client.info("cpu"))
        over = await _latencies(remote, "noop", {}, args.calls)
        c1, w1, r1 = os.times(), _tree_cpu(pid), _redis_cpu(await bus.client.info("cpu"))
        print(f"no-op tool, {args.calls} sequential calls (ms)       p50      p99")
        print(f"  in-process executor                      {_pct(base, .5):8.3f} "
              f"{_pct(base, .99):8.3f}")
        print(f"  Redis bus + worker process + sandbox     {_pct(over, .5):8.3f} "
              f"{_pct(over, .99):8.3f}")
        near = await _same_process(args.calls)
        print(f"  Redis bus + worker in this process + sandbox {_pct(near, .5):4.3f} "
              f"{_pct(near, .99):8.3f}")
        print(f"  added by the bus (worker process)        "
              f"{_pct(over, .5) - _pct(base, .5):8.3f} {_pct(over, .99) - _pct(base, .99):8.3f}"
              f"   (fence: {args.fence})")
        mine = (c1.user - c0.user + c1.system - c0.system) / args.calls * 1e6
        print(f"  CPU per bus call (µs): orchestrator {mine:.0f}, " + ", ".join(
            f"{name} {(w1.get(k, 0) - w0.get(k, 0)) / args.calls * 1e6:.0f}"
            for k, name in ((pid, "worker"), (-1, "sandbox child"))) +
            f", Redis {(r1 - r0) / args.calls * 1e6:.0f}; load {os.getloadavg()[0]:.2f}")
        if args.overhead_only:
            return
        print()
        print(f"{args.burst} concurrent calls of a 10 ms blocking tool       calls/s  vs 1 worker")
        local_rate = await _burst(local, args.burst)
        print(f"  in-process executor (16 threads)          {local_rate:8.0f}")
        running, first = 1, None
        for n in counts:
            if n > running:
                await _up(bus, workers.start(n - running))
                running = n
            await _burst(remote, min(100, args.burst))  # warm the new ones
            rate = await _burst(remote, args.burst)
            first = first or rate
            print(f"  {n} worker process(es), 1 call each at once {rate:8.0f}  "
                  f"{rate / first:5.2f}×")
    finally:
        workers.stop()
        keys = [k async for k in bus.client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await bus.client.delete(*keys)
        await bus.aclose()
        if store is not None:
            await store.drop_schema()
            await store.close()
    print(f"\n(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, fence {args.fence}; "
          f"median of one run: {statistics.median(over):.3f} ms bus vs "
          f"{statistics.median(base):.3f} ms in-process)")


if __name__ == "__main__":
    asyncio.run(main())
