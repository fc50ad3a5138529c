"""The engine's written-out emission (``state_exited``, ``state_entered``, ``state_output``,
``turn_started``, ``turn_finished``)
builds the field dicts :func:`event_data` builds, and the fast dict validation is taken only
for contracts that validate as :class:`Contract` does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hermes_fsm.contracts.base import Contract
from hermes_fsm.engine.orchestrator import _fast_validate
from hermes_fsm.events.model import EVENT_ADAPTER, event_data
from hermes_fsm.testing import ScriptedBrain
from tests.support import happy_script

WRITTEN_OUT = ("state_exited", "state_entered", "state_output", "turn_started", "turn_finished")


class DataRecorder:
    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []
        self.objects: list[Any] = []

    def emit(self, event: Any) -> None:
        self.objects.append(event)

    def emit_data(self, kind: type[Any], data: Mapping[str, Any]) -> None:
        self.data.append(dict(data))


async def test_written_out_events_have_the_fields_of_event_data_in_order(make_orchestrator):
    orchestrator = make_orchestrator(brain=ScriptedBrain(happy_script()))
    result = await orchestrator.run_turn("s1", "How many A1001 are left in the east?")
    seen = set()
    for kind, data in result.events.pairs():
        if data["kind"] not in WRITTEN_OUT:
            continue
        seen.add(data["kind"])
        fields = {k: v for k, v in data.items() if k != "kind"}
        assert list(data) == list(event_data(kind, fields)), data["kind"]
        assert data == event_data(kind, fields)
        event = EVENT_ADAPTER.validate_python(data)
        assert event.model_dump() == data
    assert seen == set(WRITTEN_OUT)
    seqs = [data["seq"] for data in result.events.data]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_sinks_get_the_written_out_events_as_data_and_as_objects(make_orchestrator):
    data_sink, object_sink = DataRecorder(), DataRecorder()
    object_sink.emit_data = None  # type: ignore[assignment]  # an object-only sink
    orchestrator = make_orchestrator(
        brain=ScriptedBrain(happy_script()), sinks=[data_sink, object_sink]
    )
    result = await orchestrator.run_turn("s1", "How many A1001 are left in the east?")
    assert data_sink.data == list(result.events.data)
    assert [e.model_dump() for e in object_sink.objects] == list(result.events.data)
    assert any(d["kind"] == "state_entered" for d in data_sink.data)


class Plain(Contract):
    contract_name: ClassVar[str] = "plain"
    value: int


class Own(Contract):
    contract_name: ClassVar[str] = "own"
    value: int

    @classmethod
    def validate_output(cls, raw: Any, context: Mapping[str, Any] | None = None) -> Contract:
        return super().validate_output({"value": raw["value"] + 1}, context)


def test_the_fast_validation_is_only_for_contracts_that_keep_validate_output():
    fast = _fast_validate(Plain)
    assert fast is not None and fast({"value": 3}) == Plain(value=3)
    assert _fast_validate(Own) is None
    assert _fast_validate(None) is None
