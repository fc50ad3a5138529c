"""The bus behind the engine: a turn's tool call runs in a worker, by configuration only."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest

from hermes_fsm.config import HermesConfig
from hermes_fsm.config.build import build_orchestrator
from hermes_fsm.config.bus import build_bus
from hermes_fsm.config.settings import load_config
from hermes_fsm.errors import ConfigError
from hermes_fsm.tools.executor import ToolExecutor
from tests.memory.conftest import REDIS_URL, need, redis_connections_named

QUESTION = "How many A1001 are left in the east warehouse?"


def _finished(result):
    return [e for e in result.events if type(e).__name__ == "ToolCallFinished"]


async def test_without_a_bus_nothing_changes():
    orchestrator = build_orchestrator(HermesConfig(mcp_servers={}, sessions={"store": "memory"},
                                                   log={"format": "off"}))
    assert {t.source for t in orchestrator.services.tools.tools()} == {"local"}


async def test_the_in_process_bus_runs_a_turns_tool_in_a_sandboxed_child():
    config = HermesConfig(mcp_servers={}, sessions={"store": "memory"}, log={"format": "off"},
                          bus={"kind": "inprocess", "concurrency": 1})
    orchestrator = build_orchestrator(config)
    assert isinstance(orchestrator.services.executor, ToolExecutor)  # the engine's view
    tool = orchestrator.services.tools.get("inventory_lookup")
    assert tool.source == "bus:default"
    bus: Any = getattr(tool.fn, "bus")  # noqa: B009
    try:
        result = await orchestrator.run_turn(None, QUESTION, "alice")
    finally:
        await bus.aclose()
    assert "342" in result.answer
    (finished,) = _finished(result)
    assert finished.ok and finished.source == "bus:default"


def test_hermes_bus_url_switches_to_redis(monkeypatch):
    config = load_config(environ={"HERMES_BUS_URL": "redis://127.0.0.1:6379/5"})
    assert (config.bus.kind, config.bus.url) == ("redis", "redis://127.0.0.1:6379/5")
    bus = build_bus(config)
    assert bus is not None and bus.name == "redis-streams"


def test_a_redis_bus_without_a_url_says_what_to_set():
    with pytest.raises(ConfigError, match="HERMES_BUS_URL"):
        build_bus(HermesConfig(mcp_servers={}, bus={"kind": "redis"}))


def test_bus_tools_must_exist():
    with pytest.raises(ConfigError, match="nope"):
        build_orchestrator(HermesConfig(mcp_servers={}, sessions={"store": "memory"},
                                        bus={"kind": "inprocess", "tools": ["nope"]}))


async def test_a_turn_over_redis_is_served_by_a_worker_process(tmp_path):
    need(REDIS_URL, 6379, "Redis")
    prefix = f"hermes-test-bus:{uuid.uuid4().hex}"
    env = {**os.environ, "HERMES_BUS_URL": REDIS_URL, "HERMES_DATA_DIR": str(tmp_path)}
    cfg = tmp_path / "hermes.yaml"
    cfg.write_text(f"mcp_servers: {{}}\nlog: {{format: 'off'}}\nsessions: {{store: memory}}\n"
                   f"bus: {{kind: redis, prefix: '{prefix}', heartbeat_s: 0.3}}\n")
    worker = subprocess.Popen([sys.executable, "-m", "hermes_fsm.cli.main", "--config", str(cfg),
                               "worker", "--concurrency", "2", "--id", "w-e2e"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    config = load_config(cfg, environ=env)
    orchestrator = build_orchestrator(config)
    bus: Any = getattr(orchestrator.services.tools.get("inventory_lookup").fn, "bus")  # noqa: B009
    try:
        for _ in range(100):  # the worker's first heartbeat
            if await bus.workers():
                break
            await asyncio.sleep(0.1)
        listed = subprocess.run([sys.executable, "-m", "hermes_fsm.cli.main", "--config",
                                 str(cfg), "workers", "list"], env=env, capture_output=True,
                                text=True, timeout=60)
        assert "w-e2e" in listed.stdout and "inventory_lookup" in listed.stdout
        result = await orchestrator.run_turn(None, QUESTION, "alice")
        assert "342" in result.answer
        (finished,) = _finished(result)
        assert finished.ok and finished.source == "bus:default"
    finally:
        keys = [k async for k in bus.client.scan_iter(match=f"{prefix}:*", count=1000)]
        await bus.aclose()
        worker.terminate()
        out, err = worker.communicate(timeout=30)
        from redis.asyncio import Redis

        client = Redis.from_url(REDIS_URL)
        if keys:
            await client.delete(*keys)
        keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    assert worker.returncode == 0, err
    assert "serving group 'default'" in out


async def test_readiness_says_whether_a_live_worker_serves_every_bus_tool():
    from hermes_fsm.demo.tools import build_demo_registry
    from hermes_fsm.server.health import readiness
    from hermes_fsm.tools.bus import InProcessBus, Worker, serve_over_bus, specs_of
    from hermes_fsm.tools.bus.sandbox import InlineRunner

    registry = build_demo_registry()
    bus = InProcessBus()
    serve_over_bus(registry, bus)
    orchestrator = build_orchestrator(
        HermesConfig(mcp_servers={}, sessions={"store": "memory"}, log={"format": "off"}),
        tools=registry)
    ready, checks = await readiness(orchestrator)
    assert not ready and checks["bus:default"]["unserved"] == registry.names()
    local = build_demo_registry()
    partial = {k: v for k, v in specs_of(local).items() if k != "list_reminders"}
    worker = Worker(bus, "default", partial, InlineRunner(local), heartbeat_s=0.1)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.sleep(0.05)
        ready, checks = await readiness(orchestrator)
        assert not ready and checks["bus:default"]["unserved"] == ["list_reminders"]
        worker.tools = specs_of(local)
        worker.info.tools = sorted(worker.tools)
        await asyncio.sleep(0.25)
        ready, checks = await readiness(orchestrator)
        assert checks["bus:default"]["ready"] and checks["bus:default"]["workers"]
    finally:
        stop.set()
        await task


async def test_closing_the_orchestrator_closes_the_bus_it_was_built_with():
    need(REDIS_URL, 6379, "Redis")
    config = HermesConfig(mcp_servers={}, sessions={"store": "memory"}, log={"format": "off"},
                          bus={"kind": "redis", "url": REDIS_URL,
                               "prefix": f"hermes-test-bus:{uuid.uuid4().hex}"})
    orchestrator = build_orchestrator(config)
    bus: Any = getattr(orchestrator.services.tools.get("inventory_lookup").fn, "bus")  # noqa: B009
    name = f"hermes-bus:{bus.process_id}"
    await bus.workers()  # the pool's connection
    bus._start_reader()  # the reply reader, on a connection of its own
    for _ in range(50):
        if await redis_connections_named(name, settle_s=0) >= 2:
            break
        await asyncio.sleep(0.02)
    await orchestrator.aclose()
    assert await redis_connections_named(name) == 0, "the bus's connections are still open"
    assert bus._reader is None  # the reader stopped
