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


async def _sequential(turns: int, run: Callable[[int], Awaitable[None]]) -> list[float]:
    for i in range(min(200, turns)):  # warm-up
        await run(i)
    latencies = []
    for i in range(turns):
        started = time.perf_counter()
        await run(i)
        latencies.append((time.perf_counter() - started) * 1000.0)
    return latencies


async def _concurrent(turns: int, concurrency: int, sessions: int,
                      run: Callable[[int], Awaitable[None]]) -> float:
    """Turns/s with ``concurrency`` turns in flight (each worker keeps its own sessions)."""
    per_worker = turns // concurrency

    async def worker(w: int) -> None:
        for k in range(per_worker):
            await run(w + concurrency * (k % max(1, sessions // concurrency)))

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return per_worker * concurrency / (time.perf_counter() - started)


def _row(name: str, latencies: list[float], rate: float) -> str:
    return (f"| {name:<22} | {1000.0 / statistics.mean(latencies):>9,.0f} | {rate:>13,.0f} | "
            f"{_percentile(latencies, 0.5):>8.3f} | {_percentile(latencies, 0.99):>8.3f} |")


async def in_process(args: argparse.Namespace) -> tuple[list[float], float]:
    orchestrator = _orchestrator()

    async def run(i: int) -> None:
        await orchestrator.run_turn(f"s{i % args.sessions}", QUESTION,  # type: ignore[attr-defined]
                                    user_id="bench-user")

    latencies = await _sequential(args.turns, run)
    return latencies, await _concurrent(args.turns, args.concurrency, args.sessions, run)


async def over_http(args: argparse.Namespace, url: str,
                    stream: bool) -> tuple[list[float], float]:
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    if stream:
        headers["Accept"] = "text/event-stream"
    limits = httpx.Limits(max_connections=args.concurrency,
                          max_keepalive_connections=args.concurrency)
    prefix = "sse" if stream else "json"
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits,
                                 timeout=60) as http:

        async def run(i: int) -> None:
            path = f"/v1/sessions/{prefix}{i % args.sessions}/turns"
            if stream:
                async with http.stream("POST", path, json={"text": QUESTION}) as response:
                    body = b"".join([chunk async for chunk in response.aiter_bytes()])
                if response.status_code != 200 or b"event: result" not in body:
                    raise RuntimeError(f"turn failed: HTTP {response.status_code}")
            else:
                response = await http.post(path, json={"text": QUESTION})
                if response.status_code != 200:
                    raise RuntimeError(f"turn failed: HTTP {response.status_code}: "
                                       f"{response.text[:200]}")

        latencies = await _sequential(args.turns, run)
        return latencies, await _concurrent(args.turns, args.concurrency, args.sessions, run)


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
        base = await in_process(args)
        json_run = await over_http(args, url, stream=False)
        sse_run = await over_http(args, url, stream=True)
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    print(f"{args.turns} turns per mode; concurrency {args.concurrency} over "
          f"{args.sessions} sessions; {os.cpu_count()} CPU(s)\n")
    print("| mode                   | turns/s 1 | turns/s conc. | p50 ms   | p99 ms   |")
    print("|---|---:|---:|---:|---:|")
    print(_row("in-process", base[0], base[1]))
    print(_row("HTTP JSON", json_run[0], json_run[1]))
    print(_row("HTTP SSE", sse_run[0], sse_run[1]))
    p50 = _percentile(base[0], 0.5)
    print(f"\nHTTP adds {_percentile(json_run[0], 0.5) - p50:.3f} ms p50 per turn (JSON), "
          f"{_percentile(sse_run[0], 0.5) - p50:.3f} ms (SSE); target ≤ 1 ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve is not None:
        serve(arguments.serve)
    else:
        asyncio.run(main(arguments))
