"""The handlers of the default graph, referenced from ``states/agent_turn.yaml`` by dotted path.

A handler is ``async def handler(turn: TurnContext) -> raw_output``; the engine validates
the output against the state's contract. An ``on_output`` hook is
``async def hook(turn, output) -> None`` and runs after validation, before the transition.
Nothing here is known to the engine.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from hermes_fsm.brain.brain_set import choose_brain
from hermes_fsm.brain.protocol import BrainReply, BrainRequest
from hermes_fsm.contracts.base import Contract
from hermes_fsm.contracts.states import ExecutionResults, Plan
from hermes_fsm.engine.call_facts import call_facts
from hermes_fsm.engine.context import apply_fold
from hermes_fsm.engine.memory_handlers import apply_memory_updates, recalled_memory
from hermes_fsm.engine.offered_tools import offer_tools, read_resources, with_server_context
from hermes_fsm.engine.turn import TurnContext
from hermes_fsm.events.model import BrainCall, ContextBuilt, TokenChunk
from hermes_fsm.tools.calling import calling_with_facts

__all__ = [
    "apply_memory_updates",  # in memory_handlers; here for states/agent_turn.yaml
    "ask_brain",
    "execute_tools",
    "recalled_memory",
    "report_results",
]


async def ask_brain(turn: TurnContext) -> Any:
    """Ask the brain for the current state's output (the default handler of a contract state)."""
    state = turn.state
    assert state is not None and state.contract is not None
    contract = state.contract
    await turn.services.tools.breaker.refresh()  # tools tripped elsewhere are not offered
    tools, tools_saved = offer_tools(
        turn, turn.validation_context()["tool_catalog"].describe(),
        plans="tool_calls" in _schema(contract).get("properties", {}))
    resources, resource_tokens = await read_resources(turn, contract.contract_name)
    request = BrainRequest(
        state=state.name,
        contract_name=contract.contract_name,
        schema=_schema(contract),
        text=turn.text,
        user_id=turn.user_id,
        outputs=turn.by_contract,
        tools=tools,
        memory=await with_server_context(turn, contract.contract_name,
                                         await recalled_memory(turn)),
        history=turn.history,
        attempt=turn.attempt,
        repair=turn.repair,
        on_token=lambda text: turn.emit(TokenChunk, state=state.name, text=text),
        now=turn.events.at(0) if len(turn.events) else None,  # the turn's start
        conversation=turn.session.conversation,
        resources=resources,
    )
    name = state.brain  # the graph's `brain:` of the state; its fallback for the last attempt
    if (state.fallback_brain is not None and turn.repair is not None
            and turn.attempt >= state.retry.max_attempts):
        name = state.fallback_brain
    brain = choose_brain(turn.services.brain, name)
    context = turn.services.context
    built: dict[str, Any] | None = None
    if context is not None:  # fit the request to the token budget (hermes_fsm.engine.context)
        # a brain that reads no prompt (the rules brain) has no window: it gets every tool
        request, built = await context.build(turn, request, trim_tools=reads_prompts(brain))
        if tools_saved:  # the toolsets left out the other scenarios' tools
            built["tools_saved"] = tools_saved
        if resource_tokens:  # which resources were read (their part: parts.resources)
            built["resources"] = resource_tokens
        turn.emit(ContextBuilt, **built)
        if built.get("summary") is not None:  # it folded history into the rolling summary
            apply_fold(turn, built)  # as a session rebuilt from its events replays it
    started = time.perf_counter()
    reply = await brain.decide(request)
    usage: dict[str, int] = {}
    source = None
    if isinstance(reply, BrainReply):
        usage, source, reply = dict(reply.usage), reply.usage_source, reply.output
    turn.emit(BrainCall, state=state.name, attempt=turn.attempt, brain=brain.name,
              duration_ms=(time.perf_counter() - started) * 1000.0, usage=usage,
              usage_source=source)
    if built is not None and usage:
        context.observe(built["used"], usage, source)
    return reply


def reads_prompts(brain: Any) -> bool:
    """Whether ``brain`` reads a prompt within a token window: a model does; a brain whose
    ``context_window`` is ``None`` (the rules brain) does not."""
    return getattr(brain, "context_window", 0) is not None


_SCHEMAS: dict[type[Contract], dict[str, Any]] = {}


def _schema(contract: type[Contract]) -> dict[str, Any]:
    schema = _SCHEMAS.get(contract)
    if schema is None:
        schema = _SCHEMAS[contract] = contract.json_schema()
    return schema


async def execute_tools(turn: TurnContext) -> dict[str, Any]:
    """Run the latest plan's calls through the tool executor; one envelope per call."""
    plan = turn.by_contract.get("plan")
    if not isinstance(plan, Plan) or not plan.tool_calls:
        return {"results": []}
    # The step at which this state was entered, not counting its retries (each appends it
    # to the path again): it distinguishes planning rounds within the turn, and a retry
    # keeps its calls' ids, so the effects journal answers for the calls that already ran
    # (a non-idempotent call is never made again because EXECUTION timed out and retried).
    step = len(turn.path) - (turn.attempt - 1)
    calls = [
        (f"{turn.turn_id}-s{step}-c{i + 1}", c.tool_name, dict(c.arguments))
        for i, c in enumerate(plan.tool_calls)
    ]
    executor = turn.services.executor
    facts = await call_facts(turn, {name for _, name, _ in calls})
    with calling_with_facts(facts) if facts is not None else nullcontext():
        if turn.journal is not None:  # a durable session: calls go through its journal
            results = await executor.execute(calls, turn.emit, caller=turn.user_id,
                                             journal=turn.journal)
        else:
            results = await executor.execute(calls, turn.emit, caller=turn.user_id)
    return {"results": results}


async def report_results(turn: TurnContext) -> dict[str, Any]:
    """Turn tool results into citable facts and violations; plan again if a call can be fixed.

    A failed call whose error is a planning mistake (unknown tool, invalid arguments) or
    retryable sets ``needs_more_tools``, and so does a plan that ``continues`` (calls wait
    for this round's outputs) once a call succeeded; the graph bounds how often that loops.
    """
    execution = turn.by_contract.get("execution_results")
    facts: list[dict[str, Any]] = []
    violations: list[str] = []
    needs_more = False
    previous = turn.by_contract.get("result_report")
    if previous is not None:  # earlier rounds' facts stay citable, their failures stay known
        facts.extend(f.model_dump() for f in getattr(previous, "facts", ()))
        violations.extend(getattr(previous, "violations", ()))
    if isinstance(execution, ExecutionResults):
        # the planner said more calls wait for these calls' outputs: plan again after them
        needs_more = bool(getattr(turn.by_contract.get("plan"), "continues", False)) and any(
            r.success for r in execution.results)
        for result in execution.results:
            if result.success:
                facts.append({"id": f"fact-{result.call_id}", "source": result.call_id,
                              "content": {"tool": result.tool_name, "output": result.output}})
            else:
                violations.append(f"{result.tool_name} ({result.call_id}) failed: "
                                  f"{result.error_code}: {result.message}")
                if result.retryable or result.error_code in ("VALIDATION_FAILED", "UNKNOWN_TOOL"):
                    needs_more = True
    return {"facts": facts, "violations": violations, "needs_more_tools": needs_more}
