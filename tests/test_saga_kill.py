"""SIGKILL in the middle of a saga's compensations: a real child process runs a three-call
plan of returns on the SDK demo MCP server (a separate process, over streamable HTTP) whose
third call fails; it is killed while its second compensation hangs. A new process resumes
the plan from the effects journal (a SQLite file both share) and finishes the saga: each
write was made once and each compensated exactly once, counted in the server's own
store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.config.settings import MCPServerConfig
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.registry import ToolRegistry

BOUND = 60.0
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def returns_server() -> Iterator[str]:
    """The SDK demo server over streamable HTTP: its returns store outlives the children."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "hermes_fsm.demo.mcp_server", "--http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    deadline = time.monotonic() + BOUND
    try:
        while True:
            assert process.poll() is None, "the demo HTTP server exited at start"
            assert time.monotonic() < deadline, "the demo HTTP server did not listen in time"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def child(settings: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.saga_child", json.dumps(settings)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def read_until(process: subprocess.Popen[str], line: str) -> list[str]:
    """The child's lines up to and including ``line`` (fails if it ends first)."""
    assert process.stdout is not None
    seen: list[str] = []
    while True:
        got = process.stdout.readline()
        assert got, f"the child ended before {line!r}: {seen} {process.stderr.read()}"  # type: ignore[union-attr]
        seen.append(got.strip())
        if got.strip() == line:
            return seen


async def effects(url: str) -> list[list[str]]:
    connection = MCPConnection("demo", MCPServerConfig(transport="http", url=url), ToolRegistry())
    async with asyncio.timeout(BOUND):
        await connection.start()
    try:
        [out] = await ToolExecutor(connection.registry).execute([("fx", "demo.return_effects", {})])
    finally:
        await connection.aclose()
    return list(out["output"]["effects"])


def test_a_saga_killed_mid_compensation_is_finished_by_the_next_process_once(
    returns_server: str, tmp_path: Path
) -> None:
    settings = {"url": returns_server, "db": str(tmp_path / "journal.sqlite3")}
    first = child({**settings, "mode": "first"})
    try:
        lines = read_until(first, "started c1-undo")  # c2 undone; c1's undo hangs
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL
    assert lines.index("started c2-undo") < lines.index("started c1-undo")  # reverse order
    before = asyncio.run(effects(returns_server))
    assert [e for e in before if e[0] == "cancel"] == [["cancel", "ORD-2"]]

    second = child({**settings, "mode": "resume"})
    out, err = second.communicate(timeout=BOUND)
    assert second.returncode == 0, err
    started = [line.split()[1] for line in out.splitlines() if line.startswith("started ")]
    envelopes = json.loads(out.splitlines()[-1])["envelopes"]
    assert [e.get("error_code") for e in envelopes][:2] == ["COMPENSATED", "COMPENSATED"]
    assert envelopes[2]["success"] is False
    after = asyncio.run(effects(returns_server))
    creates = sorted(e[1] for e in after if e[0] == "create")
    cancels = [e[1] for e in after if e[0] == "cancel"]
    assert creates == ["ORD-1", "ORD-2"]  # no write made again by the resumed process
    assert cancels == ["ORD-2", "ORD-1"]  # each compensated exactly once, in reverse
    # the resumed process made only the unfinished compensation; the rest came from the
    # journal (their events are replays: nothing was called)
    assert started == ["c1", "c2", "c3", "c2-undo", "c1-undo"]
