#!/usr/bin/env python
"""Where the Redis bus's per-call time goes: CPU per no-op call, by process.

    .venv/bin/python bench/bus_profile.py [--calls 2000] [--cprofile]

``bench/bus.py`` measures the overhead in wall-clock time, which on a loaded machine is
mostly waiting for a core. This measures what bounds it on an idle one: the CPU each
process spends per sequential no-op call — the orchestrator (this process), the worker
process, its sandbox child, and a Redis server of its own (``redis-server`` on a free
port when the binary is there, else ``HERMES_TEST_REDIS_URL``, whose CPU is then not
counted) — beside the wall-clock p50/p99 and the load average. The path of one call is
sequential (orchestrator → Redis → worker → child → worker → Redis → orchestrator), so
the sum of these CPU times, plus the wake-ups, is a floor under its latency.
``--cprofile`` prints the orchestrator's and (in the same-process mode) the worker's
hottest functions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
if str(_BENCH.parent) not in sys.path:
    sys.path.insert(1, str(_BENCH.parent))

from hermes_fsm.tools.bus.redis_streams import RedisStreamsBus
from hermes_fsm.tools.bus.remote import serve_over_bus
from hermes_fsm.tools.executor import ToolExecutor
from tests.bus import tools as bench_tools

ROOT = _BENCH.parent
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (and its reaped children: none here)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _calls(executor: ToolExecutor, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        (envelope,) = await executor.execute([(f"p{i}-s1-c1", "noop", {})])
        out.append((time.perf_counter() - t0) * 1000)
        assert envelope["success"], envelope
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument(
        "--worker-profile",
        metavar="PATH",
        help="run the worker under cProfile, its stats written to PATH",
    )
    args = parser.parse_args()
    redis_proc = None
    server = shutil.which("redis-server")
    if server:
        port = _free_port()
        redis_proc = subprocess.Popen(
            [server, "--port", str(port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
    else:
        url = os.environ.get("HERMES_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"hermes-bench-profile:{uuid.uuid4().hex}"
    workdir = Path(tempfile.mkdtemp(prefix="hermes-bench-profile-"))
    config = workdir / "hermes.yaml"
    config.write_text(
        "mcp_servers: {}\nlog: {format: 'off'}\nsessions: {store: memory}\n"
        f"bus: {{kind: redis, url: '{url}', prefix: '{prefix}', heartbeat_s: 0.5,"
        " registry: 'tests.bus.tools:registry', concurrency: 1}\n"
    )
    bus = RedisStreamsBus(url, prefix=prefix)
    for _ in range(100):
        try:
            await bus.client.ping()
            break
        except Exception:
            await asyncio.sleep(0.05)
    wrap = ["-m", "cProfile", "-o", args.worker_profile] if args.worker_profile else []
    worker = subprocess.Popen(
        [
            sys.executable,
            *wrap,
            "-m",
            "hermes_fsm.cli.main",
            "--config",
            str(config),
            "worker",
            "--id",
            "profile",
            "--concurrency",
            "1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    registry = bench_tools.build_registry()
    serve_over_bus(registry, bus)
    executor = ToolExecutor(registry)
    try:
        for _ in range(600):
            if await bus.workers():
                break
            await asyncio.sleep(0.1)
        await _calls(executor, 300)  # warm: the child started, connections made
        kids = _children(worker.pid)
        pids = {"worker process": worker.pid, **{f"sandbox child {k}": k for k in kids}}
        if redis_proc is not None:
            pids["redis-server (own)"] = redis_proc.pid
        stats = (await bus.client.info("commandstats")) if redis_proc is not None else {}
        before = {name: _cpu(pid) for name, pid in pids.items()}
        mine = time.process_time()
        profile = cProfile.Profile(time.process_time) if args.cprofile else None
        if profile is not None:
            profile.enable()
        wall = await _calls(executor, args.calls)
        if profile is not None:
            profile.disable()
        mine = time.process_time() - mine
        after = {name: _cpu(pid) for name, pid in pids.items()}
        stats_after = (await bus.client.info("commandstats")) if redis_proc is not None else {}
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        keys = [k async for k in bus.client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await bus.client.delete(*keys)
        await bus.aclose()
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
    n = args.calls
    print(
        f"no-op over the Redis bus, {n} sequential calls; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"  wall-clock per call: p50 {_pct(wall, 0.5):.3f} ms, p99 {_pct(wall, 0.99):.3f} ms")
    print(f"  CPU per call (µs, /proc ticks of 1/{TICK} s: ±{1e6 / TICK / n:.0f} µs each)")
    total = mine
    print(f"    orchestrator (this process)   {mine / n * 1e6:8.1f}")
    for name in pids:
        spent = after[name] - before[name]
        total += spent
        print(f"    {name:<30}{spent / n * 1e6:8.1f}")
    print(f"    sum: a floor under the latency {total / n * 1e6:8.1f}")
    if stats_after:
        print("  Redis commands per call (own server; heartbeats included)")
        for name, row in sorted(stats_after.items()):
            calls = row["calls"] - stats.get(name, {}).get("calls", 0)
            if calls >= n / 10:
                print(f"    {name.removeprefix('cmdstat_'):<30}{calls / n:8.2f}")
    if profile is not None:
        print("\norchestrator, hottest by own time:")
        order = os.environ.get("BUS_PROFILE_SORT", "tottime")
        shown = os.environ.get("BUS_PROFILE_FILTER", "")
        pstats.Stats(profile).sort_stats(order).print_stats(shown, 25)
    if args.worker_profile:
        print("\nworker, hottest by own time:")
        pstats.Stats(args.worker_profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    asyncio.run(main())
