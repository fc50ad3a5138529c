"""The bus messages: committed schemas that match the models, and refusal of what is not one."""

from __future__ import annotations

import json
import shutil

import pytest

from hermes_fsm._internal.data import data_path
from hermes_fsm.contracts.check import check_contracts
from hermes_fsm.errors import ContractCheckFailed
from hermes_fsm.tools.bus.messages import (
    BUS_CONTRACTS,
    ExecuteRequest,
    MalformedMessage,
    decode,
    encode,
)


def test_the_committed_schemas_match_the_models():
    assert check_contracts(BUS_CONTRACTS, data_path("contracts", "bus")) == 5


def test_a_schema_that_drifted_fails_the_check(tmp_path):
    shutil.copytree(data_path("contracts", "bus"), tmp_path / "bus")
    path = tmp_path / "bus" / "execute_ack.json"
    doc = json.loads(path.read_text())
    doc["schema"]["properties"].pop("worker_id")
    path.write_text(json.dumps(doc))
    with pytest.raises(ContractCheckFailed, match="execute_ack"):
        check_contracts(BUS_CONTRACTS, tmp_path / "bus")


@pytest.mark.parametrize("raw", [
    None, b"", b"\xff\xfe", b"[]", b"{}", b"null", b'"EXECUTE_REQUEST"',
    b'{"kind": "EXECUTE_NOPE", "request_id": "r"}',
    b'{"kind": "EXECUTE_ACK", "v": 2, "request_id": "r", "worker_id": "w", "scheduled_at": 1}',
    b'{"kind": "EXECUTE_ERROR", "v": 1, "request_id": "", "error_code": "X"}',
    b'{"kind": "EXECUTE_RESULT", "v": 1, "request_id": "r", "execution_time_ms": -1}',
    b'{"kind": "EXECUTE_TIMEOUT", "v": 1, "request_id": "r", "timeout_ms": 0}',
    b'{"kind": "EXECUTE_ACK", "v": 1, "request_id": "r", "worker_id": "w",'
    b' "scheduled_at": 1, "extra": 1}',
    b"[" * 100_000,
])
def test_what_is_not_a_message_raises_malformed_and_nothing_else(raw):
    with pytest.raises(MalformedMessage):
        decode(raw)


def test_the_three_timeouts_derive_from_the_bus_timeout():
    req = ExecuteRequest(request_id="r", call_id="c", idempotency_key="k", tool_name="t",
                         timeout_ms=8000, sent_at=100.0)
    assert req.tool_budget_s == pytest.approx(4.8)  # 0.6 × the bus timeout
    assert req.deadline == pytest.approx(110.0)  # sent + bus timeout + 2 s
    assert decode(encode(req)) == req
