#!/usr/bin/env python
"""HTTP overhead: turns over the ASGI app (uvicorn, loopback) against the same turns in-process.

    .venv/bin/python bench/http.py [--turns 2000] [--concurrency 16] [--sessions 100]

Workload: the bundled seven-state graph, the rules brain, the demo tools, in-process
memory (embedded backends, no MCP server), one question about stock. Measured:

* in-process: ``await orchestrator.run_turn(...)`` sequentially (latency per turn), and
  ``--concurrency`` turns at a time over ``--sessions`` sessions (turns/s);
* over HTTP: the same against ``hermes-fsm``'s app served by uvicorn in a child process on
  127.0.0.1 (its own core, as a deployment would have), from an ``httpx.AsyncClient`` with
  keep-alive: ``POST /v1/sessions/{id}/turns`` as JSON, and as server-sent events read to
  the ``result`` event.

Prints turns/s, p50 and p99 latency per mode, and the HTTP p50 minus the in-process p50
(the target: ≤ 1 ms). No assertions: it prints figures.
"""


from __future__ import annotations

import sys
from pathlib import Path

# run as a script, this file's folder comes first on sys.path, and this file would shadow
# the standard library's `http` package (which httpx imports): take the folder out
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTION = "How many A1001 are left in the east warehouse?"
TOKEN = "bench-token"


def _orchestrator() -> object:
    from hermes_fsm import Orchestrator

    return Orchestrator()  # rules brain, demo tools, in-process memory, no MCP server


def serve(port: int) -> None:
    """The child process: the app under uvicorn on 127.0.0.1:``port``."""
    import uvicorn

    from hermes_fsm.server import create_app

    app = create_app(_orchestrator(), tokens={TOKEN: "bench-user"})
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Run = Callable[[int], Awaitable[None]]


async def _concurrent(turns: int, concurrency: int, sessions: int, run: Run) -> float:
    """Turns/s with ``concurrency`` turns in flight (each worker keeps its own sessions)."""
    per_worker = max(1, turns // concurrency)

    async def worker(w: int) -> None:
        for k in range(per_worker):
            await run(w + concurrency * (k % max(1, sessions // concurrency)))

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return per_worker * concurrency / (time.perf_counter() - started)


def _row(name: str, latencies: list[float], rate: float) -> str:
    return (f"| {name:<10} | {1000.0 / statistics.mean(latencies):>9,.0f} | {rate:>13,.0f} | "
            f"{_percentile(latencies, 0.5):>8.3f} | {_percentile(latencies, 0.99):>8.3f} |")


def _in_process(args: argparse.Namespace) -> Run:
    orchestrator: Any = _orchestrator()

    async def run(i: int) -> None:
        await orchestrator.run_turn(f"s{i % args.sessions}", QUESTION, user_id="bench-user")

    return run


def _over_http(http: Any, args: argparse.Namespace, stream: bool) -> Run:
    prefix = "sse" if stream else "json"
    headers = {"Accept": "text/event-stream"} if stream else {}

    async def run(i: int) -> None:
        path = f"/v1/sessions/{prefix}{i % args.sessions}/turns"
        if stream:
            async with http.stream("POST", path, json={"text": QUESTION},
                                   headers=headers) as response:
                body = b"".join([chunk async for chunk in response.aiter_bytes()])
            if response.status_code != 200 or b"event: result" not in body:
                raise RuntimeError(f"turn failed: HTTP {response.status_code}")
        else:
            response = await http.post(path, json={"text": QUESTION})
            if response.status_code != 200:
                raise RuntimeError(f"turn failed: HTTP {response.status_code}: "
                                   f"{response.text[:200]}")

    return run


async def measure(args: argparse.Namespace, url: str) -> dict[str, tuple[list[float], float]]:
    """Latencies and concurrent rates per mode.

    Modes are interleaved turn by turn (in-process, JSON, in-process, SSE), so the
    in-process orchestrator and the server's one have run the same number of turns at every
    point: embedded memory grows with every turn, and its cost must weigh the same on both.
    """
    import httpx

    limits = httpx.Limits(max_connections=args.concurrency,
                          max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60,
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        local = _in_process(args)
        order = [("in-process", local), ("HTTP JSON", _over_http(http, args, False)),
                 ("in-process", local), ("HTTP SSE", _over_http(http, args, True))]
        for i in range(args.warmup):
            for _, run in order:
                await run(i)
        latencies: dict[str, list[float]] = {name: [] for name, _ in order}
        for i in range(args.turns):
            for name, run in order:
                started = time.perf_counter()
                await run(i)
                latencies[name].append((time.perf_counter() - started) * 1000.0)
        rates: dict[str, list[float]] = {name: [] for name, _ in order}
        for name, run in order:
            rates[name].append(await _concurrent(args.turns, args.concurrency, args.sessions,
                                                 run))
    return {name: (latencies[name], statistics.mean(rates[name])) for name in latencies}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_ready(url: str, timeout_s: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the server at {url} did not come up within {timeout_s}s")


async def main(args: argparse.Namespace) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], cwd=ROOT)
    try:
        await _wait_ready(url)
        results = await measure(args, url)
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    print(f"{args.turns} measured turns per mode (after {args.warmup} warm-up); concurrency "
          f"{args.concurrency} over {args.sessions} sessions; {os.cpu_count()} CPU(s)\n")
    print("| mode       | turns/s 1 | turns/s conc. | p50 ms   | p99 ms   |")
    print("|---|---:|---:|---:|---:|")
    for name, (latencies, rate) in results.items():
        print(_row(name, latencies, rate))
    base = _percentile(results["in-process"][0], 0.5)
    print(f"\nHTTP adds {_percentile(results['HTTP JSON'][0], 0.5) - base:.3f} ms p50 per turn "
          f"(JSON), {_percentile(results['HTTP SSE'][0], 0.5) - base:.3f} ms (SSE); "
          "target ≤ 1 ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve is not None:
        serve(arguments.serve)
    else:
        asyncio.run(main(arguments))
