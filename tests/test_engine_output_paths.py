"""The engine validates a handler's dict and dumps the output for ``state_output`` through
per-state precomputed calls; what they give must be what ``model_validate`` /
``model_dump(mode="json")`` give, and a contract that overrides either keeps its override."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, PrivateAttr, ValidationInfo, field_serializer, field_validator

from hermes_fsm import Contract, Orchestrator, ToolRegistry
from hermes_fsm.contracts import ContractRegistry
from hermes_fsm.graph.loader import parse_graph
from hermes_fsm.testing import ScriptedBrain


class Scored(Contract):
    contract_name = "scored"
    contract_version = "1.0.0"
    text: str
    score: float

    @field_serializer("score")
    def _rounded(self, value: float) -> float:
        return round(value, 1)

    @field_validator("text")
    @classmethod
    def _known(cls, value: str, info: ValidationInfo) -> str:
        assert info.context is not None and "tool_catalog" in info.context
        return value.strip()


class Tagged(Contract):
    contract_name = "tagged"
    contract_version = "1.0.0"
    text: str

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().model_dump(**kwargs), "tag": "overridden"}


OUTPUT: dict[str, Any] = {}


async def answer(ctx: Any) -> dict[str, Any]:
    return dict(OUTPUT)


def _orchestrator(contract: type[Contract]) -> Orchestrator:
    registry = ContractRegistry()
    registry.register(contract)
    graph = parse_graph(
        "name: out\ninitial: IDLE\nstates:\n  IDLE: {}\n"
        f"  ANSWER: {{handler: {__name__}.answer, contract: {contract.contract_name}@1, "
        "retry: {max_attempts: 1}, on_failure: IDLE}\n"
        "transitions:\n  - {trigger: start, source: IDLE, dest: ANSWER}\n"
        "  - {source: ANSWER, dest: IDLE}\n", "out.yaml", contracts=registry)
    return Orchestrator(graph, brain=ScriptedBrain({}), tools=ToolRegistry())


def _outputs(result: Any) -> list[Any]:
    return [e.output for e in result.events if e.kind == "state_output"]


async def test_the_output_event_holds_model_dump_json_with_the_validation_context() -> None:
    OUTPUT.clear()
    OUTPUT.update(text="  hi ", score=0.2345)
    result = await _orchestrator(Scored).run_turn("s1", "hello")
    assert result.status == "completed"
    expected = Scored.model_validate(
        OUTPUT, context={"tool_catalog": None}).model_dump(mode="json")
    assert _outputs(result) == [expected] == [{"text": "hi", "score": 0.2}]


async def test_a_contract_overriding_model_dump_keeps_its_dump() -> None:
    OUTPUT.clear()
    OUTPUT.update(text="hi")
    result = await _orchestrator(Tagged).run_turn("s1", "hello")
    assert _outputs(result) == [{"text": "hi", "tag": "overridden"}]


async def test_a_dict_that_breaks_the_contract_is_a_violation() -> None:
    OUTPUT.clear()
    OUTPUT.update(text="hi", score="high")
    result = await _orchestrator(Scored).run_turn("s1", "hello")
    kinds = [e.kind for e in result.events]
    assert "contract_violation" in kinds and "state_output" not in kinds
    violation = next(e for e in result.events if e.kind == "contract_violation")
    assert violation.contract == "scored@1.0.0"
    assert violation.errors[0]["loc"] == ["score"]


# --- output_field: getattr without pydantic's cost for a miss -----------------------------


class Shaped(Contract):
    contract_name = "shaped"
    contract_version = "1.0.0"
    text: str
    facts: list[str] | None = None
    _note: str = PrivateAttr(default="private")

    @property
    def shout(self) -> str:
        return self.text.upper()


class Open(Contract):
    model_config = ConfigDict(extra="allow")
    contract_name = "open"
    contract_version = "1.0.0"
    text: str


def test_output_field_reads_what_getattr_reads_and_misses_what_it_misses() -> None:
    from types import SimpleNamespace

    from hermes_fsm.contracts.base import output_field

    shaped = Shaped(text="hi")
    opened = Open.model_validate({"text": "hi", "facts": ["f1"]})
    plain = SimpleNamespace(facts=["f2"])
    absent = object()
    cases = [(shaped, "text"), (shaped, "facts"), (shaped, "shout"), (shaped, "_note"),
             (shaped, "ref"), (shaped, "contract_name"), (shaped, "results"),
             (opened, "facts"), (opened, "results"), (plain, "facts"), (plain, "results")]
    for output, name in cases:
        assert output_field(output, name, absent) == getattr(output, name, absent), name
    assert output_field(shaped, "facts", absent) is None  # a field set to None is there
    assert output_field(shaped, "results", absent) is absent
    assert output_field(opened, "facts") == ["f1"]  # an extra field of an open contract
