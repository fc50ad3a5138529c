"""A refused append says only what is true: a superseded epoch (someone claimed the
session again), a seq out of step (nobody else did), a missing session — on every store."""

from __future__ import annotations

import pytest

from hermes_fsm.errors import StaleWriter
from hermes_fsm.store.protocol import Append


def event(seq: int) -> dict[str, object]:
    return {"kind": "retry", "seq": seq, "session_id": "s1", "turn_id": "t1",
            "state": "X", "attempt": 2, "reason": "error", "delay_s": 0.0, "at": None}


async def test_a_seq_out_of_step_does_not_say_another_process_took_the_session(store):
    record = await store.claim("s1", "u1", "IDLE")
    await store.append(Append("s1", record.epoch, 0, "IDLE", [event(1)]))
    with pytest.raises(StaleWriter) as refused:
        await store.append(Append("s1", record.epoch, 2, "IDLE", [event(3)]))
    message = str(refused.value)
    assert refused.value.reason == "seq"
    assert "expected seq 2 but the log is at 1" in message
    assert "another process has taken" not in message.lower()
    assert "no other process took the session over" in message


async def test_a_superseded_epoch_says_the_session_was_claimed_again(store):
    first = await store.claim("s1", "u1", "IDLE")
    await store.claim("s1", "u1", "IDLE")
    with pytest.raises(StaleWriter) as refused:
        await store.append(Append("s1", first.epoch, 0, "IDLE", [event(1)]))
    assert refused.value.reason == "epoch"
    assert f"epoch {first.epoch} was superseded by {first.epoch + 1}" in str(refused.value)
    assert "claimed again" in str(refused.value)


async def test_an_append_to_a_missing_session_says_so(store):
    with pytest.raises(StaleWriter) as refused:
        await store.append(Append("nope", 1, 0, "IDLE", [event(1)]))
    assert refused.value.reason == "missing"
    assert "does not exist" in str(refused.value) and "another process" not in str(refused.value)
