"""``hermes-fsm mcp list`` shows the MCP servers the bus's workers run: which worker of
which group serves each, read from their heartbeats (real Redis, the CLI as a process)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from hermes_fsm.config.bus import build_worker
from hermes_fsm.config.settings import load_config
from tests.bus.test_mcp_workers import _drop
from tests.memory.conftest import REDIS_URL, need

BROKEN = "import sys; sys.exit(3)"


def _config(tmp_path: Path, prefix: str) -> Path:
    cfg = tmp_path / "hermes.yaml"
    cfg.write_text(f"""\
log: {{format: 'off'}}
sessions: {{store: memory}}
mcp_servers:
  demo: {{transport: stdio, command: python, args: [-m, hermes_fsm.demo.mcp_server]}}
  broken: {{transport: stdio, command: python, args: [-c, '{BROKEN}'],
           connect_timeout_s: 3}}
bus: {{kind: redis, prefix: '{prefix}', heartbeat_s: 0.3, mcp_servers: [demo, broken]}}
""")
    return cfg


def _mcp_list(cfg: Path, env: dict[str, str], *extra: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hermes_fsm.cli.main", "--config", str(cfg), "mcp", "list",
         *extra], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_mcp_list_says_which_worker_of_which_group_serves_each_bus_server(
        tmp_path: Path) -> None:
    need(REDIS_URL, 6379, "Redis")
    prefix = f"hermes-test-bus-mcp-list:{uuid.uuid4().hex}"
    cfg = _config(tmp_path, prefix)
    env = {**os.environ, "HERMES_BUS_URL": REDIS_URL, "HERMES_DATA_DIR": str(tmp_path)}
    try:
        before = await asyncio.to_thread(_mcp_list, cfg, env)
        assert "demo: " in before and "transport=bus:default (stdio)" in before
        assert "served by: no live worker of bus group 'default'" in before

        setup = build_worker(load_config(cfg, environ=env), worker_id="w-list")
        stop = asyncio.Event()
        serving = asyncio.create_task(setup.run(stop))
        try:
            for _ in range(600):  # the heartbeat carrying the servers' tools
                if any(w.catalog for w in await setup.bus.workers()):
                    break
                await asyncio.sleep(0.05)
            text = await asyncio.to_thread(_mcp_list, cfg, env)
            listed = json.loads(await asyncio.to_thread(_mcp_list, cfg, env, "--json"))
        finally:
            stop.set()
            await serving
    finally:
        await _drop(prefix)

    servers: dict[str, Any] = {s["name"]: s for s in listed["servers"]}
    demo, broken = servers["demo"], servers["broken"]
    assert demo["status"] == "ready" and demo["group"] == "default"
    assert demo["workers"] == ["w-list"]
    (by,) = demo["served_by"]
    assert by["worker_id"] == "w-list" and by["status"] == "ready"
    assert by["pid"] == os.getpid() and by["tools"] == len(demo["tool_names"]) > 0
    assert "demo.server_pid" in demo["tool_names"]
    # the worker runs the broken server too and says why it is down: no tools, not ready
    assert broken["status"] != "ready" and broken["workers"] == [] and not broken["tool_names"]
    (down,) = broken["served_by"]
    assert down["worker_id"] == "w-list" and down["status"] == "failed"
    assert down["last_error"] and "w-list" in broken["last_error"]
    assert f"served by: worker w-list (group default, {by['host']} pid {os.getpid()}): " \
           "ready, tools=" in text
    assert "demo.server_pid" in text
    assert "served by: worker w-list (group default" in text.split("broken: ", 1)[1]
