"""Workers check the caller's permissions again (defence in depth): a request that reaches
a worker without the grant its tool requires — forged on the stream, or altered — is
refused with ``PERMISSION_DENIED`` naming the permission, and the tool does not run."""

from __future__ import annotations

import json
import time
import uuid

from hermes_fsm.tools.bus.messages import CallerInfo, ExecuteRequest
from tests.bus.conftest import request, running


def _guarded(path: str, token: str, caller: CallerInfo) -> ExecuteRequest:
    return request("guarded", path=path, token=token).model_copy(update={"caller": caller})


async def test_a_request_without_the_grant_is_refused_by_the_worker(bus, events, tmp_path):
    marks = tmp_path / "marks.txt"
    async with running(bus) as worker:
        refused = await bus.call(
            _guarded(str(marks), "forged", CallerInfo(user_id="mallory", roles=("user",))),
            "default",
        )
        allowed = await bus.call(
            _guarded(str(marks), "granted", CallerInfo(user_id="ops-bot", grants=("ops",))),
            "default",
        )
        by_role = await bus.call(
            _guarded(str(marks), "role", CallerInfo(user_id="admin", roles=("ops",))), "default"
        )
    assert refused.kind == "EXECUTE_ERROR", refused
    assert refused.error_code == "PERMISSION_DENIED" and not refused.retryable
    assert "'ops'" in refused.error_message and "mallory" in refused.error_message
    assert allowed.kind == "EXECUTE_RESULT" and by_role.kind == "EXECUTE_RESULT"
    assert marks.read_text().split() == ["granted", "role"]  # the forged one never ran
    (event,) = events.named("bus.permission_denied")
    assert event["user"] == "mallory" and event["tool"] == "guarded"
    assert event["request_id"] == refused.request_id and "ops" in event["reason"]
    assert worker.denied == 1 and worker.served == 2


async def test_a_hand_crafted_request_on_the_stream_is_refused(bus, events, tmp_path):
    """The raw JSON a forger would XADD: no caller at all (``anonymous``), then a caller
    whose grants were edited to something else."""
    marks = tmp_path / "marks.txt"
    replies = []
    async with running(bus):
        for caller in (None, {"user_id": "eve", "roles": ["user"], "grants": ["opz"]}):
            rid = uuid.uuid4().hex
            raw: dict[str, object] = {
                "kind": "EXECUTE_REQUEST",
                "v": 1,
                "request_id": rid,
                "call_id": "forged-c1",
                "idempotency_key": f"forged/{rid}",
                "tool_name": "guarded",
                "input_params": {"path": str(marks), "token": rid},
                "timeout_ms": 5000,
                "sent_at": time.time(),
                "reply_to": bus.reply_stream,
            }
            if caller is not None:
                raw["caller"] = caller
            replies.append(await _raw_call(bus, rid, json.dumps(raw).encode()))
    for reply in replies:
        assert reply.kind == "EXECUTE_ERROR" and reply.error_code == "PERMISSION_DENIED"
        assert "'ops'" in reply.error_message
    assert not marks.exists()
    assert [e["user"] for e in events.named("bus.permission_denied")] == ["anonymous", "eve"]


async def _raw_call(bus, rid: str, raw: bytes):
    """Send ``raw`` as it is and wait for its reply, as :meth:`Bus.call` would."""
    start = getattr(bus, "_start_reader", None)
    if start is not None:
        start()
    future = bus.waiters.expect(rid)
    await bus.send_raw("default", raw)
    probe = ExecuteRequest(
        request_id=rid,
        call_id="x",
        idempotency_key="x",
        tool_name="x",
        timeout_ms=5000,
        sent_at=time.time(),
    )
    return await bus.waiters.wait(probe, future)
