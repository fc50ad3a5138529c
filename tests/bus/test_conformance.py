"""The bus conformance suite: the same behaviour on the in-process bus and on real Redis."""

from __future__ import annotations

import asyncio
import json
import time

from hermes_fsm.store import InMemoryStore
from hermes_fsm.tools.bus.messages import ExecuteResult, encode
from hermes_fsm.tools.bus.sandbox import InlineRunner
from hermes_fsm.tools.bus.worker import Worker, specs_of
from tests.bus.conftest import eventually, request, running
from tests.bus.tools import registry


async def test_a_request_is_acked_and_answered(bus):
    async with running(bus) as worker:
        req = request("nap", seconds=0.0)
        reply = await bus.call(req, "default")
    assert reply.kind == "EXECUTE_RESULT"
    assert reply.output_data == {"slept": 0.0}
    assert reply.request_id == req.request_id and reply.worker_id == worker.worker_id
    assert worker.served == 1


async def test_a_tool_failure_is_an_execute_error(bus):
    async with running(bus):
        reply = await bus.call(request("fail", code="QUOTA", retryable=True), "default")
    assert reply.kind == "EXECUTE_ERROR"
    assert (reply.error_code, reply.retryable) == ("QUOTA", True)


async def test_no_worker_means_execute_timeout_at_the_bus_timeout(bus):
    started = time.monotonic()
    reply = await bus.call(request("noop", timeout_s=0.3), "nobody-serves-this")
    assert reply.kind == "EXECUTE_TIMEOUT"
    assert reply.timeout_ms == 300 and "no worker" in reply.reason
    assert time.monotonic() - started < 3.0


async def test_a_malformed_request_is_dead_lettered_and_the_worker_serves_on(bus, events):
    await bus.send_raw("default", b"{not json")
    await bus.send_raw("default", json.dumps({"kind": "EXECUTE_REQUEST", "v": 1}).encode())
    await bus.send_raw("default", json.dumps({"kind": "EXECUTE_REQUEST", "v": 99,
                                              "request_id": "x"}).encode())
    async with running(bus) as worker:
        reply = await bus.call(request("noop"), "default")
    assert reply.kind == "EXECUTE_RESULT"
    assert worker.refused == 3
    dead = await bus.dead_letters("default")
    assert len(dead) == 3 and all(d["reason"].startswith("malformed") for d in dead)
    assert dead[0]["raw"] == b"{not json"
    assert len(events.named("bus.message_refused")) == 3


async def test_a_malformed_reply_is_refused_and_the_caller_is_unharmed(bus, events):
    await bus.reply_raw(bus.reply_stream, b"garbage")  # before anything: the reader copes
    async with running(bus):
        first = await bus.call(request("noop"), "default")
        await bus.reply_raw(bus.reply_stream, b'{"kind": "EXECUTE_RESULT", "v": 1}')
        second = await bus.call(request("noop"), "default")
    assert first.kind == second.kind == "EXECUTE_RESULT"
    assert await eventually(lambda: len(events.named("bus.message_refused")) == 2)


async def test_a_dead_workers_request_is_reclaimed_after_the_visibility_timeout(bus):
    req = request("nap", seconds=0.0).model_copy(update={"reply_to": bus.reply_stream})
    future = bus.waiters.expect(req.request_id)
    if hasattr(bus, "_start_reader"):
        bus._start_reader()
    await bus.send_raw("default", encode(req))
    taken = await bus.take("default", "dead-worker", 1, block_s=1.0)
    assert len(taken) == 1  # ... and the worker dies without acking it
    async with running(bus):
        reply = await bus.waiters.wait(req, future)
    assert reply.kind == "EXECUTE_RESULT"


async def test_a_request_delivered_too_often_is_dead_lettered(bus):
    req = request("noop").model_copy(update={"reply_to": bus.reply_stream})
    future = bus.waiters.expect(req.request_id)
    if hasattr(bus, "_start_reader"):
        bus._start_reader()
    await bus.send_raw("default", encode(req))
    assert await bus.take("default", "w0", 1, block_s=1.0)
    for n in range(bus.max_deliveries - 1):  # it keeps dying under the same request
        await asyncio.sleep(bus.visibility_timeout_s + 0.05)
        got = await bus.reclaim("default", f"w{n + 1}", 1)
        assert [d.count for d in got] == [n + 2]
    await asyncio.sleep(bus.visibility_timeout_s + 0.05)
    async with running(bus):
        reply = await bus.waiters.wait(req, future)
    assert reply.kind == "EXECUTE_ERROR" and reply.error_code == "DEAD_LETTERED"
    dead = await bus.dead_letters("default")
    assert [d["count"] for d in dead] == [bus.max_deliveries + 1]


async def test_a_late_reply_is_kept_apart_and_never_answers_a_newer_request(bus, events):
    req = request("noop", timeout_s=0.2)
    reply = await bus.call(req, "default")  # no worker yet: the bus times it out
    assert reply.kind == "EXECUTE_TIMEOUT"
    async with running(bus):  # a worker comes up within the deadline and answers it
        assert await eventually(lambda: bus.waiters.late, timeout_s=5.0)
        fresh = await bus.call(request("nap", seconds=0.0), "default")
    assert [m.request_id for m in bus.waiters.late] == [req.request_id]
    assert fresh.kind == "EXECUTE_RESULT" and fresh.output_data == {"slept": 0.0}
    assert events.named("bus.late_reply")[0]["request_id"] == req.request_id


async def test_a_request_past_its_deadline_is_not_run(bus, tmp_path):
    marks = tmp_path / "marks.txt"
    req = request("mark", path=str(marks), token="t").model_copy(
        update={"sent_at": time.time() - 60})
    async with running(bus):
        reply = await bus.call(req, "default")
    assert reply.kind == "EXECUTE_TIMEOUT" and "deadline" in reply.reason
    assert not marks.exists()


async def test_the_fence_returns_a_finished_calls_recorded_outcome(bus, tmp_path):
    fence = InMemoryStore()
    marks = tmp_path / "marks.txt"
    req = request("mark", path=str(marks), token="once")
    async with running(bus, fence=fence):
        first = await bus.call(req, "default")
        again = await bus.call(req.model_copy(update={"request_id": "redelivered"}), "default")
    assert first.kind == again.kind == "EXECUTE_RESULT"
    assert again.replayed and again.output_data == {"marked": "once"}
    assert marks.read_text().splitlines() == ["once"]


async def test_the_fence_never_reruns_a_started_non_idempotent_call(bus, tmp_path):
    fence = InMemoryStore()
    marks = tmp_path / "marks.txt"
    req = request("mark", path=str(marks), token="x")
    await fence.effect_begin(f"bus:{req.idempotency_key}", "s", "mark")  # a worker died here
    async with running(bus, fence=fence):
        reply = await bus.call(req, "default")
    assert reply.kind == "EXECUTE_ERROR" and reply.error_code == "OUTCOME_UNKNOWN"
    assert not reply.retryable and not marks.exists()


async def test_the_fence_reruns_a_started_idempotent_call(bus, tmp_path):
    fence = InMemoryStore()
    marks = tmp_path / "marks.txt"
    req = request("mark_idem", path=str(marks), token="y")
    await fence.effect_begin(f"bus:{req.idempotency_key}", "s", "mark_idem")
    async with running(bus, fence=fence) as worker:
        reply = await bus.call(req, "default")
    assert reply.kind == "EXECUTE_RESULT" and worker.reruns == 1
    assert marks.read_text().splitlines() == ["y"]


async def test_workers_send_heartbeats(bus):
    async with running(bus, group="g1") as worker:
        seen = await eventually(bus.workers)
        assert [w.worker_id for w in seen] == [worker.worker_id]
        assert seen[0].group == "g1" and "noop" in seen[0].tools
    # the heartbeat expires (3 intervals) once the worker stopped
    assert await eventually(lambda: _none(bus), timeout_s=3.0)


async def _none(bus) -> bool:
    return not await bus.workers()


async def test_an_unknown_tool_is_an_error_not_a_crash(bus):
    worker_tools = {k: v for k, v in specs_of(registry).items() if k != "noop"}
    worker = Worker(bus, "default", worker_tools, InlineRunner(registry), heartbeat_s=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        reply = await bus.call(request("noop"), "default")
    finally:
        stop.set()
        await task
    assert reply.kind == "EXECUTE_ERROR" and reply.error_code == "UNKNOWN_TOOL"


def test_a_result_survives_the_wire():
    result = ExecuteResult(request_id="r", output_data={"a": [1, 2]}, execution_time_ms=1.5)
    from hermes_fsm.tools.bus.messages import decode

    assert decode(encode(result)) == result
