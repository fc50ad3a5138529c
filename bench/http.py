#!/usr/bin/env python
"""HTTP overhead: turns over the ASGI app (uvicorn, loopback) against the same turns in-process.

    .venv/bin/python bench/http.py [--turns 1000] [--concurrency 16] [--sessions 100]
                                   [--client raw|httpx] [--http auto|httptools|h11]
                                   [--profile FILE]

Workload: the bundled seven-state graph, the rules brain, the demo tools, in-process
memory (embedded backends, no MCP server, no session store), one question about stock. The
in-process orchestrator and the server's one are built by the same function and hold the
same sessions (named alike), so both run the same turn on the same backends, on the same
event loop (uvloop when installed, as uvicorn picks it). Measured:

* in-process: ``await orchestrator.run_turn(...)`` sequentially (latency per turn), and
  ``--concurrency`` turns at a time over ``--sessions`` sessions (turns/s);
* over HTTP: the same against ``hermes-fsm``'s app served by uvicorn in a child process on
  127.0.0.1 (its own process, as a deployment would have; uvicorn picks httptools and
  uvloop when they are installed, as ``hermes-fsm serve`` runs it), with
  bearer-token authentication on: ``POST /v1/sessions/{id}/turns`` as JSON, and as
  server-sent events read to the ``result`` event.

The client: ``raw`` (the default) is a minimal HTTP/1.1 client on persistent connections
(one per concurrent worker): a request is one write of prebuilt bytes, an
``asyncio.Protocol`` gathers the answer (by Content-Length or chunks) and wakes the caller
once — so the figure is what the server path adds, not what a client library spends.
``httpx`` measures through ``httpx.AsyncClient`` with keep-alive instead (about 2 ms of
client CPU per request on this kind of machine).

Where the time goes, per turn (medians): the turn's CPU time (in-process: this thread's;
over HTTP: the server's main thread, which runs uvicorn's loop, request handling
included, from ``/proc/PID/schedstat``) and the client's CPU time. What wall time is
left is waiting: on a busy machine each hand-over between the two processes can wait for
a CPU, which an in-process turn never does. Both sides' CPU is also split in two: the
turn's own steps (timed around each step of its coroutine, so what other tasks do while
it waits — the stream writing its events — is not in it; the orchestrator's sinks, the
event hub included, are) and what runs outside them (the loop between steps and tasks
the turn started, on both sides; over HTTP also uvicorn, routing, the request, the hub's
task, the stream). The last lines print both, per turn (p50 of per-turn differences), and
how much more runs outside the turn over HTTP than in-process: a steadier figure than the
difference of the two turns' CPU, which moves with the machine's load.

Every mode is warmed up, then the modes are interleaved turn by turn (in-process, JSON,
in-process, SSE), so both orchestrators have run the same number of turns at every point
(embedded memory grows with every turn) and a slow patch of the machine hits all modes.

Prints turns/s, p50 and p99 latency per mode, and what HTTP adds to the in-process p50 and
p99 (the target: ≤ 1 ms p50) and to its CPU. ``--profile FILE`` runs the server under
cProfile (CPU time) and writes its stats to FILE (pstats format) when it stops. No
assertions: it prints figures. Linux only (``/proc``).
"""


from __future__ import annotations

import sys
from pathlib import Path

# run as a script, this file's folder comes first on sys.path, and this file would shadow
# the standard library's `http` package (which httpx imports): take the folder out
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import asyncio
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTION = "How many A1001 are left in the east warehouse?"
TOKEN = "bench-token"


def _orchestrator() -> object:
    from hermes_fsm.testing import demo_orchestrator

    return demo_orchestrator()  # rules brain, demo tools, in-process memory, no MCP server


class _TimedTurn:
    """Awaits a turn, adding up the CPU time of its own steps only (not what other tasks
    run while it waits, such as the stream writing its events), then records it."""

    def __init__(self, turn: Any, record: Callable[[int], None]) -> None:
        self.turn = turn
        self.record = record

    def __await__(self) -> Any:
        turn, clock = self.turn, time.thread_time_ns
        spent, value, error = 0, None, None
        try:
            while True:
                started = clock()
                try:
                    step = turn.send(value) if error is None else turn.throw(error)
                except StopIteration as stop:
                    return stop.value
                finally:
                    spent += clock() - started
                try:
                    value, error = (yield step), None
                except BaseException as exc:  # cancelled: into the turn
                    value, error = None, exc
        finally:
            self.record(spent)


def serve(port: int, profile: str | None, http: str, turn_cpu: str | None) -> None:
    """The child process: the app under uvicorn on 127.0.0.1:``port``; with ``turn_cpu``,
    the CPU time of each turn's own steps (ns, in the order they end) written there at exit."""
    import signal

    import uvicorn

    from hermes_fsm.server import create_app

    orchestrator: Any = _orchestrator()
    spent: list[int] = []
    if turn_cpu is not None:
        run_turn = orchestrator.run_turn

        async def timed(*args: Any, **kwargs: Any) -> Any:
            return await _TimedTurn(run_turn(*args, **kwargs), spent.append)

        orchestrator.run_turn = timed
    app = create_app(orchestrator, tokens={TOKEN: "bench-user"})
    # as hermes-fsm serve runs it (uvicorn's auto: httptools and uvloop when installed)
    options: dict[str, Any] = {} if http == "auto" else {"http": http}
    # uvicorn shuts down on SIGTERM, then raises it again under the handler it found
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile(time.thread_time_ns, 1e-9)  # CPU time, not wall time
        profiler.enable()
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                    **options)
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        if turn_cpu is not None:
            Path(turn_cpu).write_text(json.dumps(spent))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


STEPS: list[float] = []
"""The in-process turns' own steps' CPU (ms), as measured (``measure`` fills it)."""

Run = Callable[[int, int], Awaitable[None]]
"""``run(i, worker)``: one turn on session ``i % sessions``, on the worker's connection."""


async def _concurrent(turns: int, concurrency: int, sessions: int, run: Run) -> float:
    """Turns/s with ``concurrency`` turns in flight (each worker keeps its own sessions)."""
    per_worker = max(1, turns // concurrency)

    async def worker(w: int) -> None:
        for k in range(per_worker):
            await run(w + concurrency * (k % max(1, sessions // concurrency)), w)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return per_worker * concurrency / (time.perf_counter() - started)


def _in_process(args: argparse.Namespace, steps: list[int]) -> tuple[Run, Run]:
    """Turns on the in-process orchestrator, on sessions named as the server's: the JSON
    ones and the SSE ones, so both orchestrators hold the same sessions and histories.
    The CPU of each turn's own steps goes to ``steps`` (ns), as the server times its own."""
    orchestrator: Any = _orchestrator()

    def on(prefix: str) -> Run:
        async def run(i: int, worker: int = 0) -> None:
            await _TimedTurn(orchestrator.run_turn(f"{prefix}{i % args.sessions}", QUESTION,
                                                   user_id="bench-user"), steps.append)

        return run

    return on("json"), on("sse")


# --- the lean client ----------------------------------------------------------------------


class _Answer(asyncio.Protocol):
    """The reading side of a :class:`RawConnection`: bytes in, one complete answer out."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.buffer = bytearray()
        self.lost = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport  # uvloop's transports are not asyncio.Transport instances

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the server closed the connection"))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        answer = _complete(self.buffer)
        if answer is not None and self.waiter is not None and not self.waiter.done():
            self.buffer.clear()
            self.waiter.set_result(answer)


def _complete(buffer: bytearray) -> tuple[int, bytes] | None:
    """The answer in ``buffer`` (status, body) once it is all there, else ``None``."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end]).lower()
    status = int(head[9:12])
    start = end + 4
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        length = int((head[at + 17:] + b"\r\n").split(b"\r\n", 1)[0])
        if len(buffer) < start + length:
            return None
        return status, bytes(buffer[start:start + length])
    if b"\r\ntransfer-encoding: chunked" not in head:
        raise RuntimeError(f"an answer with neither Content-Length nor chunks: {head!r}")
    parts = []
    while True:  # a chunk: size in hex, CRLF, data, CRLF; the last one has size 0
        line_end = buffer.find(b"\r\n", start)
        if line_end < 0:
            return None
        size = int(bytes(buffer[start:line_end]).split(b";")[0], 16)
        if len(buffer) < line_end + 2 + size + 2:
            return None
        if size == 0:
            return status, b"".join(parts)
        parts.append(bytes(buffer[line_end + 2:line_end + 2 + size]))
        start = line_end + 2 + size + 2


class RawConnection:
    """One persistent HTTP/1.1 connection, as lean as a client gets in Python: a request is
    one write of prebuilt bytes; an :class:`asyncio.Protocol` gathers the answer (by
    ``Content-Length`` or chunks) and wakes the caller once, when it is complete."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.answer = _Answer()

    @classmethod
    async def open(cls, host: str, port: int) -> RawConnection:
        connection = cls(host, port)
        await connection._connect()
        return connection

    async def _connect(self) -> None:
        self.answer = answer = _Answer()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_connection(lambda: answer, self.host, self.port)
        answer.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        if self.answer.lost:  # the server closed it while idle (uvicorn: after 5 s)
            await self._connect()
        answer = self.answer
        assert answer.transport is not None
        answer.waiter = asyncio.get_running_loop().create_future()
        answer.transport.write(raw)
        return await answer.waiter

    async def close(self) -> None:
        if self.answer.transport is not None:
            self.answer.transport.close()


def _post_bytes(path: str, body: bytes, stream: bool) -> bytes:
    accept = b"text/event-stream" if stream else b"application/json"
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
            b"Accept: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (path.encode(), TOKEN.encode(), accept, len(body), body))


def _check(status: int, body: bytes, stream: bool) -> None:
    if status != 200 or (stream and b"event: result" not in body):
        raise RuntimeError(f"turn failed: HTTP {status}: {body[:200]!r}")


def _over_raw(connections: list[RawConnection], args: argparse.Namespace, stream: bool) -> Run:
    prefix = "sse" if stream else "json"
    body = json.dumps({"text": QUESTION}).encode()
    requests = [_post_bytes(f"/v1/sessions/{prefix}{i}/turns", body, stream)
                for i in range(args.sessions)]

    async def run(i: int, worker: int = 0) -> None:
        status, answer = await connections[worker].request(requests[i % args.sessions])
        _check(status, answer, stream)

    return run


def _over_httpx(http: Any, args: argparse.Namespace, stream: bool) -> Run:
    prefix = "sse" if stream else "json"
    headers = {"Accept": "text/event-stream"} if stream else {}

    async def run(i: int, worker: int = 0) -> None:
        path = f"/v1/sessions/{prefix}{i % args.sessions}/turns"
        if stream:
            async with http.stream("POST", path, json={"text": QUESTION},
                                   headers=headers) as response:
                body = b"".join([chunk async for chunk in response.aiter_bytes()])
        else:
            response = await http.post(path, json={"text": QUESTION})
            body = response.content
        _check(response.status_code, body, stream)

    return run


class Figures:
    """Per mode, in ms per turn: wall latency, this thread's CPU (the in-process turn, or
    the client's request), the server's CPU; and turns/s at concurrency."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.server_cpu: list[float] = []
        self.server_turn: list[float] = []  # the turn's own steps' CPU in the server
        self.steps: list[float] = []  # in-process: the turn's own steps' CPU
        self.rates: list[float] = []


class ThreadClock:
    """A thread's time on a CPU in ns, from ``/proc/PID/schedstat`` (the server's main
    thread runs uvicorn's event loop: all of its work). The kernel brings it up to date
    when the thread is switched out: read it while the thread is blocked (the server, while
    the client waits or sends)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDONLY)

    def read(self) -> int:
        os.lseek(self._fd, 0, os.SEEK_SET)
        return int(os.read(self._fd, 128).split()[0])

    def close(self) -> None:
        os.close(self._fd)


async def _timed(args: argparse.Namespace, order: list[tuple[str, Run]],
                 server: ThreadClock) -> dict[str, Figures]:
    for i in range(args.warmup):
        for _, run in order:
            await run(i, 0)
    figures = {name: Figures() for name, _ in order}
    for i in range(args.turns):
        for name, run in order:
            ran = server.read()
            used = time.thread_time_ns()  # up to date, where schedstat lags for a running thread
            started = time.perf_counter()
            await run(i, 0)
            wall = time.perf_counter() - started
            used_after = time.thread_time_ns()
            ran_after = server.read()
            record = figures[name]
            record.wall.append(wall * 1e3)
            record.cpu.append((used_after - used) / 1e6)
            record.server_cpu.append((ran_after - ran) / 1e6)
    for name, run in order:
        figures[name].rates.append(
            await _concurrent(args.turns, args.concurrency, args.sessions, run))
    return figures


async def measure(args: argparse.Namespace, port: int, pid: int) -> dict[str, Figures]:
    """The figures of each mode."""
    steps: list[int] = []
    local, local_too = _in_process(args, steps)
    server = ThreadClock(f"/proc/{pid}/schedstat")
    try:
        if args.client == "httpx":
            import httpx

            limits = httpx.Limits(max_connections=args.concurrency,
                                  max_keepalive_connections=args.concurrency)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits,
                                         timeout=60, headers={"Authorization":
                                                              f"Bearer {TOKEN}"}) as http:
                return await _timed(args, [("in-process", local),
                                           ("HTTP JSON", _over_httpx(http, args, False)),
                                           ("in-process", local_too),
                                           ("HTTP SSE", _over_httpx(http, args, True))],
                                    server)
        connections = [await RawConnection.open("127.0.0.1", port)
                       for _ in range(args.concurrency)]
        try:
            return await _timed(args, [("in-process", local),
                                       ("HTTP JSON", _over_raw(connections, args, False)),
                                       ("in-process", local_too),
                                       ("HTTP SSE", _over_raw(connections, args, True))],
                                server)
        finally:
            for connection in connections:
                await connection.close()
    finally:
        server.close()
        measured = steps[2 * args.warmup:2 * (args.warmup + args.turns)]
        STEPS[:] = [ns / 1e6 for ns in measured]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_ready(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            connection = await RawConnection.open("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        try:
            status, _ = await connection.request(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        finally:
            await connection.close()
        if status == 200:
            return
    raise RuntimeError(f"the server on port {port} did not come up within {timeout_s}s")


def _server_stack(http: str) -> str:
    import uvicorn

    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return f"uvicorn {uvicorn.__version__} ({http}, {loop})"


def _split(args: argparse.Namespace, results: dict[str, Figures], turn_cpu: Path) -> None:
    """Give each HTTP turn the CPU its own steps took in the server (the server ran the
    warm-up and the measured turns one at a time, JSON and SSE alternating)."""
    try:
        spent = json.loads(turn_cpu.read_text())
    finally:
        turn_cpu.unlink(missing_ok=True)
        turn_cpu.parent.rmdir()
    measured = spent[2 * args.warmup:2 * (args.warmup + args.turns)]
    results["HTTP JSON"].server_turn = [ns / 1e6 for ns in measured[0::2]]
    results["HTTP SSE"].server_turn = [ns / 1e6 for ns in measured[1::2]]


def _p(values: list[float], q: float = 0.5) -> float:
    return _percentile(values, q)


def _row(name: str, f: Figures) -> str:
    local = name == "in-process"
    turn_cpu = f.cpu if local else f.server_cpu
    client = "" if local else f"{_p(f.cpu):.3f}"
    return (f"| {name:<10} | {1000.0 / statistics.mean(f.wall):>7,.0f} | "
            f"{statistics.mean(f.rates):>7,.0f} | {_p(f.wall):>6.3f} | {_p(f.wall, 0.99):>7.3f} | "
            f"{_p(turn_cpu):>12.3f} | {client:>10} |")


async def main(args: argparse.Namespace) -> None:
    port = _free_port()
    turn_cpu = Path(tempfile.mkdtemp(prefix="hermes-bench-")) / "turn-cpu.json"
    command = [sys.executable, __file__, "--serve", str(port), "--turn-cpu", str(turn_cpu)]
    if args.profile:
        command += ["--profile", args.profile]
    command += ["--http", args.http]
    child = subprocess.Popen(command, cwd=ROOT)
    try:
        await _wait_ready(port)
        results = await measure(args, port, child.pid)
    finally:
        child.terminate()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    _split(args, results, turn_cpu)
    load = os.getloadavg()
    print(f"{args.turns} measured turns per mode (after {args.warmup} warm-up); concurrency "
          f"{args.concurrency} over {args.sessions} sessions; {os.cpu_count()} CPU(s), load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; server: "
          f"{_server_stack(args.http)}; client: {args.client}\n")
    print("ms per turn. turn CPU: the turn's CPU time (in-process: this thread's; over HTTP: "
          "the server's,\nrequest handling included); client CPU: this thread's per request "
          "(medians).\n")
    print("| mode       | turns/s | conc./s | p50    | p99     | turn CPU p50 | client CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, figures in results.items():
        print(_row(name, figures))
    local = results["in-process"]
    print()
    for mode in ("JSON", "SSE"):
        over = results[f"HTTP {mode}"]
        print(f"HTTP {mode:<4} adds {_p(over.wall) - _p(local.wall):6.3f} ms p50 and "
              f"{_p(over.wall, 0.99) - _p(local.wall, 0.99):6.3f} ms p99 of wall time per turn "
              f"(target ≤ 1 ms p50); CPU: server {_p(over.server_cpu) - _p(local.cpu):+.3f} ms, "
              f"client {_p(over.cpu):.3f} ms; {statistics.mean(over.rates):,.0f} turns/s at "
              "concurrency "
              f"{args.concurrency} vs {statistics.mean(local.rates):,.0f} in-process")
    print()
    outside = [cpu - step for cpu, step in zip(local.cpu, STEPS, strict=True)]
    print(f"in-process: the turn's own steps {_p(STEPS):.3f} ms + {_p(outside):.3f} ms "
          "outside them (the loop between steps, tasks the turn started)")
    for mode in ("JSON", "SSE"):
        over = results[f"HTTP {mode}"]
        rest = [cpu - turn for cpu, turn in zip(over.server_cpu, over.server_turn, strict=True)]
        print(f"HTTP {mode:<4} server: the turn's own steps {_p(over.server_turn):.3f} ms "
              f"(sinks included) + {_p(rest):.3f} ms outside them, {_p(rest) - _p(outside):+.3f}"
              " ms over in-process: uvicorn, routing, the request, the hub's task, the stream")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw")
    parser.add_argument("--profile", metavar="FILE",
                        help="run the server under cProfile; write its stats to FILE")
    parser.add_argument("--http", choices=["auto", "httptools", "h11"], default="auto",
                        help="uvicorn's HTTP protocol (auto: httptools when installed, as "
                        "hermes-fsm serve runs it)")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--turn-cpu", metavar="FILE", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve is not None:
        serve(arguments.serve, arguments.profile, arguments.http, arguments.turn_cpu)
    else:
        try:  # the loop uvicorn runs the server on (uvloop when installed), here too
            import uvloop
        except ImportError:
            asyncio.run(main(arguments))
        else:
            uvloop.run(main(arguments))
