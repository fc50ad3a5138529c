"""The tool executor's pipeline with local tools: validation, permissions, timeouts, retries,
output policies, breakers, concurrency, truncation, audit; and planning's view of it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hermes_fsm.contracts.retry import RetryPolicy
from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.events.model import EVENT_ADAPTER, ToolCallFinished, ToolCallRetried
from hermes_fsm.testing import ScriptedBrain
from hermes_fsm.tools.breaker import WindowBreaker
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.permissions import Caller, Permissions
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import happy_script

BOUND = 10.0  # seconds a broken executor may take before the test fails instead of hanging


class Events:
    """An ``emit`` that keeps (kind, fields)."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, dict[str, Any]]] = []

    def __call__(self, kind: Any, **fields: Any) -> None:
        self.items.append((kind, fields))

    def of(self, kind: Any) -> list[dict[str, Any]]:
        return [f for k, f in self.items if k is kind]


class Sleeps:
    """A ``sleep`` that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def run(executor: ToolExecutor, tool: str, arguments: dict[str, Any],
              events: Events | None = None, caller: str = "alice") -> dict[str, Any]:
    async with asyncio.timeout(BOUND):
        (envelope,) = await executor.execute([("c1", tool, arguments)], events or Events(),
                                             caller=caller)
    return envelope


def counting_registry() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    registry = ToolRegistry()
    calls: list[dict[str, Any]] = []

    @registry.tool()
    def lookup(sku: str) -> dict[str, Any]:
        """Look up a SKU."""
        calls.append({"sku": sku})
        return {"sku": sku, "quantity": 342}

    return registry, calls


# --- arguments and tools -------------------------------------------------------------------


async def test_arguments_breaking_the_input_schema_are_not_executed() -> None:
    registry, calls = counting_registry()
    envelope = await run(ToolExecutor(registry), "lookup", {"sku": 1001})
    assert (envelope["error_code"], envelope["retryable"]) == ("VALIDATION_FAILED", False)
    assert "sku" in envelope["message"]
    assert calls == []


async def test_an_unknown_tool_is_an_unknown_tool_envelope() -> None:
    registry, _ = counting_registry()
    envelope = await run(ToolExecutor(registry), "lookupp", {})
    assert envelope["error_code"] == "UNKNOWN_TOOL"
    assert "known tools: lookup" in envelope["message"]


@pytest.mark.parametrize(("bad_plan", "fed_back"), [
    ({"tool_name": "inventory_lookupp", "arguments": {"sku": "A1001"}}, "unknown tool"),
    ({"tool_name": "inventory_lookup", "arguments": {"sku": 1001}}, "not of type 'string'"),
])
async def test_a_bad_plan_is_not_executed_and_repaired_on_retry(
        make_orchestrator, bad_plan: dict[str, Any], fed_back: str) -> None:
    bad = {"tool_calls": [{**bad_plan, "reasoning_trace": "first try"}]}
    good = {"tool_calls": [{"tool_name": "inventory_lookup",
                            "arguments": {"sku": "A1001", "warehouse": "east"},
                            "reasoning_trace": "repaired"}]}
    brain = ScriptedBrain(happy_script(plan=[bad, good, {"tool_calls": []}]))
    result = await make_orchestrator(brain=brain).run_turn("s1", "How many A1001?")
    planning = brain.requests_for("plan")
    assert planning[1].repair is not None and fed_back in planning[1].repair.text()
    started = [e for e in result.events if e.kind == "tool_call_started"]
    assert [(e.tool, e.arguments) for e in started] == [
        ("inventory_lookup", {"sku": "A1001", "warehouse": "east"})]
    assert result.answer == "342 left"


# --- timeouts and retries --------------------------------------------------------------------


async def test_a_hanging_tool_returns_a_timeout_envelope_within_its_budget() -> None:
    registry = ToolRegistry()

    @registry.tool(timeout_s=0.05)
    async def hang() -> None:
        """Never answers."""
        await asyncio.Event().wait()

    envelope = await run(ToolExecutor(registry), "hang", {})
    assert (envelope["error_code"], envelope["retryable"]) == ("TIMEOUT", True)
    assert "0.05s" in envelope["message"]


def flaky_registry(failures: int, retryable: bool) -> tuple[ToolRegistry, list[int]]:
    registry = ToolRegistry()
    attempts: list[int] = []

    @registry.tool(retry=RetryPolicy(max_attempts=4, backoff_s=0.1, multiplier=2.0),
                   errors={"BUSY": {"retryable": True}, "GONE": {"retryable": False}})
    def flaky() -> dict[str, str]:
        """Fails a few times, then works."""
        attempts.append(1)
        if len(attempts) <= failures:
            raise ToolCallFailed("BUSY" if retryable else "GONE", "try later")
        return {"status": "ok"}

    return registry, attempts


async def test_a_retryable_error_is_retried_with_exponential_backoff_then_succeeds() -> None:
    registry, attempts = flaky_registry(failures=2, retryable=True)
    sleeps, events = Sleeps(), Events()
    envelope = await run(ToolExecutor(registry, sleep=sleeps), "flaky", {}, events)
    assert envelope["success"] is True
    assert len(attempts) == 3
    assert sleeps.delays == [0.1, 0.2]
    assert [(r["attempt"], r["error_code"]) for r in events.of(ToolCallRetried)] == [
        (2, "BUSY"), (3, "BUSY")]
    (finished,) = events.of(ToolCallFinished)
    assert finished["attempts"] == 3


async def test_retry_backoff_is_spread_by_jitter() -> None:
    registry = ToolRegistry()

    @registry.tool(retry=RetryPolicy(max_attempts=2, backoff_s=1.0, jitter=0.5))
    async def slow() -> None:
        """Times out."""
        raise ToolCallFailed("TIMEOUT", "no answer")

    sleeps = Sleeps()
    await run(ToolExecutor(registry, sleep=sleeps, random=lambda: 0.0), "slow", {})
    assert sleeps.delays == [0.5]


async def test_a_non_retryable_error_is_not_retried() -> None:
    registry, attempts = flaky_registry(failures=5, retryable=False)
    sleeps = Sleeps()
    envelope = await run(ToolExecutor(registry, sleep=sleeps), "flaky", {})
    assert (envelope["error_code"], envelope["retryable"]) == ("GONE", False)
    assert len(attempts) == 1
    assert sleeps.delays == []


async def test_a_retryable_error_that_persists_ends_as_a_retryable_envelope() -> None:
    registry, attempts = flaky_registry(failures=9, retryable=True)
    envelope = await run(ToolExecutor(registry, sleep=Sleeps()), "flaky", {})
    assert (envelope["error_code"], envelope["retryable"]) == ("BUSY", True)
    assert len(attempts) == 4


async def test_an_exception_in_a_tool_becomes_an_envelope() -> None:
    registry = ToolRegistry()

    @registry.tool()
    def broken() -> None:
        """Raises."""
        raise KeyError("shelf")

    envelope = await run(ToolExecutor(registry), "broken", {})
    assert envelope["error_code"] == "TOOL_EXCEPTION"
    assert "KeyError" in envelope["message"]


# --- output contracts ------------------------------------------------------------------------


def output_registry(policy: Any) -> ToolRegistry:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"quantity": {"type": "integer"}},
              "required": ["quantity"]}

    @registry.tool(output_schema=schema, on_output_violation=policy)
    def count() -> dict[str, Any]:
        """Counts (badly)."""
        return {"quantity": "many"}

    @registry.tool(output_schema=schema)
    def count_again() -> dict[str, Any]:
        """Counts (well)."""
        return {"quantity": 7}

    return registry


async def test_an_output_breaking_its_contract_fails_under_policy_fail() -> None:
    events = Events()
    envelope = await run(ToolExecutor(output_registry("fail")), "count", {}, events)
    assert (envelope["error_code"], envelope["retryable"]) == ("OUTPUT_VIOLATION", False)
    assert "'many' is not of type 'integer'" in envelope["message"]
    assert "quantity" in events.of(ToolCallFinished)[0]["output_violation"]


async def test_an_output_breaking_its_contract_passes_under_policy_log_only() -> None:
    events = Events()
    envelope = await run(ToolExecutor(output_registry("log_only")), "count", {}, events)
    assert envelope["output"] == {"quantity": "many"}
    (finished,) = events.of(ToolCallFinished)
    assert finished["ok"] is True
    assert "'many' is not of type 'integer'" in finished["output_violation"]


async def test_an_output_breaking_its_contract_is_replaced_by_its_fallback_tool() -> None:
    from hermes_fsm.contracts.tools import Fallback

    events = Events()
    executor = ToolExecutor(output_registry(Fallback(fallback="count_again")))
    envelope = await run(executor, "count", {}, events)
    assert (envelope["tool_name"], envelope["output"]) == ("count", {"quantity": 7})
    (finished,) = events.of(ToolCallFinished)
    assert (finished["fallback"], finished["ok"]) == ("count_again", True)


# --- permissions -----------------------------------------------------------------------------


def destructive_registry() -> tuple[ToolRegistry, list[str]]:
    wiped: list[str] = []
    registry = ToolRegistry(permissions=Permissions(
        users={"ops": Caller("ops", roles=("user",), grants=("wipe",))}))

    @registry.tool(side_effects="destructive")
    def wipe() -> dict[str, bool]:
        """Delete every reminder."""
        wiped.append("yes")
        return {"wiped": True}

    return registry, wiped


async def test_a_destructive_tool_without_a_grant_is_permission_denied() -> None:
    registry, wiped = destructive_registry()
    envelope = await run(ToolExecutor(registry), "wipe", {}, caller="bob")
    assert (envelope["error_code"], envelope["retryable"]) == ("PERMISSION_DENIED", False)
    assert "grant" in envelope["message"]
    assert wiped == []


async def test_a_destructive_tool_with_an_explicit_grant_runs() -> None:
    registry, wiped = destructive_registry()
    envelope = await run(ToolExecutor(registry), "wipe", {}, caller="ops")
    assert envelope["success"] is True and wiped == ["yes"]


def test_planning_neither_offers_nor_accepts_a_tool_the_user_may_not_call() -> None:
    registry, _ = destructive_registry()
    assert [t.name for t in registry.catalog_for("bob").describe()] == []
    assert [t.name for t in registry.catalog_for("ops").describe()] == ["wipe"]
    assert "permission denied" in (registry.catalog_for("bob").check_call("wipe", {}) or "")


async def test_a_required_role_is_checked_against_the_caller() -> None:
    registry = ToolRegistry(permissions=Permissions(
        users={"ann": Caller("ann", roles=("user", "finance"))}))

    @registry.tool(permissions=["finance"])
    def payroll() -> dict[str, int]:
        """Read the payroll."""
        return {"total": 1}

    executor = ToolExecutor(registry)
    assert (await run(executor, "payroll", {}, caller="bob"))["error_code"] == "PERMISSION_DENIED"
    assert (await run(executor, "payroll", {}, caller="ann"))["success"] is True


# --- circuit breaker -------------------------------------------------------------------------


def failing_registry() -> ToolRegistry:
    registry = ToolRegistry(breaker=WindowBreaker(window=4, min_calls=3, failure_rate=0.5,
                                                  cooldown_s=600))

    @registry.tool()
    def inventory_lookup(sku: str, warehouse: str | None = None) -> dict[str, Any]:
        """Look up stock (the warehouse system is down)."""
        raise RuntimeError("warehouse system down")

    return registry


async def test_a_tool_that_keeps_failing_opens_its_breaker_and_is_not_called() -> None:
    registry = failing_registry()
    executor = ToolExecutor(registry)
    codes = [(await run(executor, "inventory_lookup", {"sku": "A1"}))["error_code"]
             for _ in range(4)]
    assert codes == ["TOOL_EXCEPTION"] * 3 + ["CIRCUIT_OPEN"]
    assert registry.describe() == []
    assert "circuit breaker open" in (registry.check_call("inventory_lookup", {"sku": "A1"})
                                      or "")


async def test_planning_reports_an_open_breaker_instead_of_calling(make_orchestrator) -> None:
    registry = failing_registry()
    for _ in range(3):
        registry.breaker.record("inventory_lookup", False)
    result = await make_orchestrator(tools=registry).run_turn(
        "s1", "How many A1001 are left in the east warehouse?")
    assert not [e for e in result.events if e.kind == "tool_call_started"]
    assert "not available" in result.answer


# --- concurrency, truncation, audit ----------------------------------------------------------


async def test_independent_calls_of_one_plan_run_concurrently() -> None:
    registry = ToolRegistry()
    first_started = asyncio.Event()

    @registry.tool()
    async def waits() -> str:
        """Waits for the other call to have started."""
        await first_started.wait()  # deadlocks if the calls ran one after the other
        return "done"

    @registry.tool()
    async def starts() -> str:
        """Lets the other call finish."""
        first_started.set()
        return "started"

    async with asyncio.timeout(BOUND):
        envelopes = await ToolExecutor(registry).execute(
            [("c1", "waits", {}), ("c2", "starts", {})], Events())
    assert [e["output"] for e in envelopes] == ["done", "started"]


async def test_a_long_result_is_truncated_for_the_model_but_whole_in_the_event() -> None:
    registry = ToolRegistry()

    @registry.tool()
    def dump() -> dict[str, str]:
        """A big output."""
        return {"text": "x" * 5000}

    events = Events()
    envelope = await run(ToolExecutor(registry, max_result_chars=1000), "dump", {}, events)
    assert envelope["output"]["truncated"] is True
    assert len(envelope["output"]["preview"]) == 1000
    (finished,) = events.of(ToolCallFinished)
    assert finished["truncated"] is True
    assert finished["output"] == {"text": "x" * 5000}


async def test_every_call_leaves_an_audit_event(make_orchestrator) -> None:
    orchestrator = make_orchestrator()
    result = await orchestrator.run_turn("s1", "How many A1001 are left in the east warehouse?",
                                         user_id="alice")
    (finished,) = [e for e in result.events if e.kind == "tool_call_finished"]
    assert (finished.caller, finished.tool, finished.source) == ("alice", "inventory_lookup",
                                                                "local")
    assert finished.arguments == {"sku": "A1001", "warehouse": "east"}
    assert finished.output["quantity"] == 342
    assert finished.attempts == 1 and finished.duration_ms >= 0
    assert EVENT_ADAPTER.validate_python(finished.model_dump()) == finished


async def test_every_tool_event_a_turn_emits_validates_against_its_model(
        make_orchestrator) -> None:
    registry, _ = flaky_registry(failures=1, retryable=True)
    plan = {"tool_calls": [{"tool_name": "flaky", "arguments": {}, "reasoning_trace": "go"}]}
    brain = ScriptedBrain(happy_script(plan=[plan, {"tool_calls": []}]))
    orchestrator = make_orchestrator(brain=brain, tools=registry,
                                     executor=ToolExecutor(registry, sleep=Sleeps()))
    result = await orchestrator.run_turn("s1", "go", user_id="alice")
    kinds = [e.kind for e in result.events]
    assert {"tool_call_started", "tool_call_retried", "tool_call_finished"} <= set(kinds)
    for event in result.events:
        assert EVENT_ADAPTER.validate_json(event.model_dump_json()) == event


SCHEMA_CASES = [
    ({"type": "object", "properties": {"q": {"type": "string", "minLength": 2},
                                       "n": {"type": "integer", "maximum": 5}},
      "required": ["q"], "additionalProperties": False},
     [{"q": "ab"}, {"q": "a"}, {"q": "ab", "n": 6}, {"q": "ab", "n": 5}, {"q": "ab", "x": 1},
      {"n": 1}, {"q": 3}, {"q": "ab", "n": 2.5}, {"q": "ab", "n": True}]),
    ({"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                "maxItems": 2},
                                       "when": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
     [{}, {"tags": ["a"]}, {"tags": ["c"]}, {"tags": ["a", "b", "a"]}, {"when": None},
      {"when": 1}]),
    ({"type": "object", "properties": {"xs": {"type": "array",
                                              "prefixItems": [{"type": "integer"}]}}},
     [{"xs": [1]}, {"xs": ["a"]}]),  # a 2020-12 keyword: left to jsonschema
]


@pytest.mark.parametrize(("schema", "cases"), SCHEMA_CASES)
def test_the_compiled_argument_check_agrees_with_draft_2020_12(schema, cases) -> None:
    import jsonschema

    from hermes_fsm.tools.registry import Tool

    tool = Tool("t", "a tool", lambda **_: None, schema)
    reference = jsonschema.Draft202012Validator(schema)
    assert (tool._fast_check is None) == ("prefixItems" in str(schema))
    for arguments in cases:
        assert (tool.argument_problem(arguments) is None) == reference.is_valid(arguments), (
            arguments)


async def test_an_input_model_of_ones_own_is_checked_as_it_says() -> None:
    """The executor calls a plain model's validator itself (faster); a model that
    overrides ``model_validate`` keeps its own check."""
    from pydantic import BaseModel, ConfigDict

    from hermes_fsm.tools.registry import Tool, schema_of

    class Plain(BaseModel):
        model_config = ConfigDict(strict=True, extra="forbid")
        sku: str

    class OnlyA(Plain):
        @classmethod
        def model_validate(cls, obj: Any, **kwargs: Any) -> OnlyA:
            if not str(obj.get("sku", "")).startswith("A"):
                raise ValueError("only A skus")  # not a ValidationError: then schema wording
            return super().model_validate(obj, **kwargs)

    def lookup(sku: str) -> dict[str, Any]:
        return {"sku": sku}

    registry = ToolRegistry([
        Tool("plain", "a tool", lookup, schema_of(Plain), input_model=Plain, inline=True),
        Tool("only_a", "a tool", lookup, schema_of(OnlyA), input_model=OnlyA, inline=True)])
    executor = ToolExecutor(registry)
    (ok, bad) = await executor.execute([("c1", "plain", {"sku": "B1"}),
                                        ("c2", "plain", {"sku": 1})])
    assert ok["success"] and bad["error_code"] == "VALIDATION_FAILED", (ok, bad)
    assert "string" in bad["message"], bad
    (a,) = await executor.execute([("c3", "only_a", {"sku": "A1"})])
    assert a["success"], a
    with pytest.raises(ValueError, match="only A skus"):  # its own check ran
        registry.find("only_a").argument_problem({"sku": "B1"})  # type: ignore[union-attr]
