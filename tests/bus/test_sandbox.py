"""Sandboxed workers: a call runs in a resource-limited child that is killed at its budget.

Timing is asserted only loosely, as the issue asks (a 2 s sleep against a 0.2 s timeout,
other calls against the 2 s the stuck one would take: ≥ 10× margins).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import signal
import subprocess
import time

import pytest

from hermes_fsm.tools.bus import InProcessBus, SandboxLimits, SandboxPool
from tests.bus.conftest import request, running

TARGET = "tests.bus.tools:registry"


@pytest.fixture
async def pool():
    made = SandboxPool(TARGET, size=2, limits=SandboxLimits(cpu_s=2, as_bytes=768 << 20,
                                                            nofile=64))
    yield made
    await made.aclose()


async def test_a_stuck_sync_tool_is_killed_at_its_budget_and_other_calls_go_on(pool):
    bus = InProcessBus(visibility_timeout_s=5.0)
    async with running(bus, runner=pool, concurrency=2):
        await pool.start()
        started = time.monotonic()
        stuck = asyncio.create_task(bus.call(request("stuck", timeout_s=0.2), "default"))
        others: list[float] = []
        while not stuck.done():  # another session's calls, while the stuck one runs
            t0 = time.monotonic()
            reply = await bus.call(request("nap", seconds=0.0), "default")
            if reply.kind == "EXECUTE_RESULT":
                others.append(time.monotonic() - t0)
            if time.monotonic() - started > 5:
                break
        killed = await stuck
        took = time.monotonic() - started
        after = await bus.call(request("nap", seconds=0.0), "default")
    assert killed.kind in ("EXECUTE_ERROR", "EXECUTE_TIMEOUT")
    if killed.kind == "EXECUTE_ERROR":
        assert killed.error_code == "TIMEOUT" and not killed.retryable
    assert took < 1.0  # it sleeps 2 s; killed at its 0.12 s budget (0.6 × 0.2 s)
    # none waited for the stuck call (it would hold them 2 s): the median 10× under that,
    # the slowest (one scheduling hiccup on a loaded 2-core box: 0.36 s seen) under half
    assert others and sorted(others)[len(others) // 2] < 0.2 and max(others) < 1.0
    assert after.kind == "EXECUTE_RESULT"
    assert pool.replaced == 1


async def test_a_tool_allocating_a_gigabyte_is_stopped_and_the_next_call_served(pool):
    first = await pool.run("hog", {"megabytes": 1024}, budget_s=10)
    second = await pool.run("noop", {}, budget_s=10)
    assert (first.ok, first.code) == (False, "RESOURCE_LIMIT")
    assert second.ok and second.output == {"ok": True}


async def test_a_tool_over_its_cpu_seconds_is_stopped(pool):
    outcome = await pool.run("spin", {"seconds": 30}, budget_s=20)
    assert (outcome.ok, outcome.code) == (False, "RESOURCE_LIMIT")
    assert "CPU" in outcome.message
    assert (await pool.run("noop", {}, budget_s=10)).ok


def _group_alive(pgid: int) -> int:
    """Live (not zombie) processes of the process group ``pgid``."""
    out = subprocess.run(["ps", "-e", "-o", "pgid=,stat="], capture_output=True, text=True)
    return sum(1 for line in out.stdout.splitlines()
               if line.split()[0] == str(pgid) and not line.split()[1].startswith("Z"))


async def test_a_forking_tool_is_killed_with_its_whole_process_group(pool):
    await pool.start()
    pgids = {c.process.pid for c in pool._children}
    outcome = await pool.run("forks", {"limit": 40}, budget_s=1.0)
    assert (outcome.ok, outcome.code) == (False, "TIMEOUT")
    await asyncio.sleep(0.2)
    assert sum(_group_alive(p) for p in pgids) <= 1  # the other child; none of the forks
    assert (await pool.run("noop", {}, budget_s=10)).ok


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
async def test_a_fork_bomb_as_an_unprivileged_user_hits_its_process_limit():
    pwd.getpwnam("nobody")
    bomb = SandboxPool(TARGET, size=1, limits=SandboxLimits(nproc=16, user="nobody"))
    try:
        outcome = await bomb.run("forks", {"limit": 100_000}, budget_s=5.0)
        assert not outcome.ok and outcome.code in ("RESOURCE_LIMIT", "TIMEOUT")
        if outcome.code == "RESOURCE_LIMIT":
            assert "process limit" in outcome.message
        assert (await bomb.run("noop", {}, budget_s=10)).ok
    finally:
        await bomb.aclose()


async def test_a_tool_sees_a_scrubbed_environment_and_its_own_directory(pool, monkeypatch):
    monkeypatch.setenv("HERMES_TEST_SECRET", "s3cret")
    fresh = SandboxPool(TARGET, size=1, limits=SandboxLimits(env=("HERMES_TEST_PASSED",)))
    monkeypatch.setenv("HERMES_TEST_PASSED", "yes")
    try:
        outcome = await fresh.run("probe", {}, budget_s=10)
    finally:
        await fresh.aclose()
    assert outcome.ok
    seen = outcome.output
    assert "HERMES_TEST_SECRET" not in seen["env"] and "HERMES_TEST_PASSED" in seen["env"]
    assert seen["cwd"] == seen["home"] and seen["cwd"] != os.getcwd()
    assert seen["files"] == []
    assert not os.path.exists(seen["cwd"])  # removed with its child


async def test_a_closed_pool_has_read_every_child_pipe_to_its_end():
    """aclose kills a child and reads its stdout to the end, even where a process that left
    the group holds the pipe a moment longer; else the transport is closed by its __del__
    after the event loop (a warning at teardown, seen in CI)."""
    one = SandboxPool(TARGET, size=1)
    try:
        outcome = await one.run("linger", {"seconds": 0.3}, budget_s=10)
        processes = [c.process for c in one._children]
    finally:
        await one.aclose()
    assert outcome.ok and processes
    assert all(p.stdout is not None and p.stdout.at_eof() for p in processes)


async def test_a_pipe_held_open_does_not_hold_up_aclose():
    one = SandboxPool(TARGET, size=1)
    outcome = None
    processes = []
    try:
        outcome = await one.run("linger", {"seconds": 60}, budget_s=10)
        processes = [c.process for c in one._children]
        assert outcome.ok
        t0 = time.monotonic()
        await one.aclose()
        assert time.monotonic() - t0 < 10  # read for its end ~1 s, not the 60 s held
    finally:
        await one.aclose()
        if outcome is not None and outcome.ok:
            os.kill(outcome.output["pid"], signal.SIGKILL)
        for process in processes:  # its end, now that nothing holds it: closed in this loop
            assert process.stdout is not None
            await asyncio.wait_for(process.stdout.read(), 10)


async def test_a_tool_that_raises_is_an_error_and_the_child_serves_on(pool):
    failed = await pool.run("fail", {"code": "QUOTA"}, budget_s=10)
    assert (failed.ok, failed.code, failed.retryable) == (False, "QUOTA", False)
    unknown = await pool.run("nope", {}, budget_s=10)
    assert (unknown.ok, unknown.code) == (False, "UNKNOWN_TOOL")
    assert (await pool.run("noop", {}, budget_s=10)).ok
    assert pool.replaced == 0


async def test_a_call_waiting_for_a_busy_pool_gives_up_within_its_budget():
    one = SandboxPool(TARGET, size=1)
    try:
        await one.start()
        busy = asyncio.create_task(one.run("nap", {"seconds": 1.0}, budget_s=5))
        await asyncio.sleep(0.05)
        waited = await one.run("noop", {}, budget_s=0.2)
        assert (waited.ok, waited.code, waited.retryable) == (False, "SERVER_UNAVAILABLE", True)
        assert "not started" in waited.message
        assert (await busy).ok
    finally:
        await one.aclose()
