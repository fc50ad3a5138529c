"""MCP servers run by a worker process (stdio and HTTP), their tools called over Redis
Streams; the orchestrator starts none of them."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.config import HermesConfig
from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.config.bus import build_worker
from hermes_fsm.config.settings import load_config
from hermes_fsm.errors import ConfigError
from hermes_fsm.tools.bus.mcp import RemoteMCPServer
from tests.memory.conftest import REDIS_URL, need


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int, but: int = -1) -> list[str]:
    """The command lines of ``pid``'s child processes (but the one ``but``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid and int(entry.name) != but:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):
            continue
    return found


async def _drop(prefix: str) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(REDIS_URL)
    keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def test_a_worker_runs_the_mcp_servers_and_serves_their_tools_over_redis(tmp_path):
    need(REDIS_URL, 6379, "Redis")
    prefix = f"hermes-test-bus-mcp:{uuid.uuid4().hex}"
    port = _free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "hermes_fsm.demo.mcp_server", "--http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cfg = tmp_path / "hermes.yaml"
    cfg.write_text(f"""\
log: {{format: 'off'}}
sessions: {{store: memory}}
mcp_servers:
  time: {{transport: stdio, command: python, args: [-m, mcp_server_time, --local-timezone, UTC]}}
  demo: {{transport: stdio, command: python, args: [-m, hermes_fsm.demo.mcp_server]}}
  web: {{transport: http, url: 'http://127.0.0.1:{port}/mcp'}}
bus: {{kind: redis, prefix: '{prefix}', heartbeat_s: 0.3, mcp_servers: [time, demo, web]}}
""")
    env = {**os.environ, "HERMES_BUS_URL": REDIS_URL, "HERMES_DATA_DIR": str(tmp_path)}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hermes_fsm.cli.main",
            "--config",
            str(cfg),
            "worker",
            "--concurrency",
            "2",
            "--id",
            "w-mcp",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    orchestrator = build_orchestrator(load_config(cfg, environ=env))
    mcp = orchestrator.mcp
    assert mcp is not None
    try:
        assert all(isinstance(c, RemoteMCPServer) for c in mcp) and len(mcp) == 3  # none here
        await orchestrator.start()
        for server in mcp:
            assert await server.wait_ready(60), server.info()
        registry = orchestrator.services.tools
        names = set(registry.names())
        assert {"time.get_current_time", "demo.server_pid", "web.server_pid"} <= names
        assert registry.get("time.get_current_time").source == "bus:default:mcp:time"
        executor: Any = orchestrator.services.executor
        now, pid, web_pid, day = await executor.execute(
            [
                ("c1", "time.get_current_time", {"timezone": "Asia/Shanghai"}),
                ("c2", "demo.server_pid", {}),
                ("c3", "web.server_pid", {}),
                ("c4", "demo.calendar_query", {"query": "restock"}),
            ],
            caller="alice",
        )
        for envelope in (now, pid, web_pid, day):
            assert envelope["success"], envelope
        assert "Asia/Shanghai" in str(now["output"])
        # the stdio servers are the worker's children, none is the orchestrator's
        server_pid = int(pid["output"]["pid"])
        assert server_pid != worker.pid and server_pid != os.getpid()
        worker_children = _children(worker.pid)
        assert any("mcp_server_time" in c for c in worker_children), worker_children
        assert any("hermes_fsm.demo.mcp_server" in c for c in worker_children)
        assert not any("mcp_server" in c for c in _children(os.getpid(), but=web.pid))
        assert web_pid["output"]["pid"] == web.pid  # reached over HTTP by the worker
        info = {i["name"]: i for i in mcp.info()}
        assert info["time"]["status"] == "ready" and info["time"]["workers"] == ["w-mcp"]
        bus: Any = getattr(registry.get("time.get_current_time").fn, "bus")  # noqa: B009
        (live,) = await bus.workers()
        assert "time.get_current_time" in live.tools and "inventory_lookup" in live.tools
        # the worker goes: its MCP tools are unavailable, said clearly, not a hang
        worker.terminate()
        worker.wait(timeout=30)
        deadline = time.monotonic() + 30
        while mcp["time"].status == "ready" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        (gone,) = await executor.execute(
            [("c5", "time.get_current_time", {"timezone": "UTC"})], caller="alice"
        )
        assert not gone["success"] and gone["error_code"] == "SERVER_UNAVAILABLE"
        assert "hermes-fsm worker" in gone["message"]
    finally:
        await orchestrator.aclose()
        if worker.poll() is None:
            worker.terminate()
        _out, err = worker.communicate(timeout=30)
        web.terminate()
        web.wait(timeout=10)
        await _drop(prefix)
    assert worker.returncode == 0, err
    assert not any("mcp_server" in c for c in _children(worker.pid))


def test_bus_mcp_servers_must_be_configured_and_a_worker_needs_redis():
    with pytest.raises(ConfigError, match=r"nope.*not in mcp_servers"):
        build_orchestrator(
            HermesConfig(
                mcp_servers={},
                sessions={"store": "memory"},
                bus={"kind": "redis", "url": REDIS_URL, "mcp_servers": ["nope"]},
            )
        )
    with pytest.raises(ConfigError, match="nope"):
        build_worker(
            HermesConfig(
                mcp_servers={}, bus={"kind": "redis", "url": REDIS_URL, "mcp_servers": ["nope"]}
            )
        )


def test_a_worker_of_another_group_does_not_run_them():
    config = HermesConfig(
        sessions={"store": "memory"},
        bus={"kind": "redis", "url": REDIS_URL, "mcp_servers": ["demo"]},
    )
    assert build_worker(config).mcp is not None
    assert build_worker(config, group="other").mcp is None
