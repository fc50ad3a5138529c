"""Compensation of write tools (seed 003 §4 and §6): status checks and sagas.

A write tool's contract may name a status tool and a compensating tool
(:class:`~hermes_fsm.contracts.tools.Compensation`). After a plan's calls ran,
:func:`settle` looks at each envelope:

* a compensable write that ended in ``TIMEOUT`` or ``OUTCOME_UNKNOWN``: the status tool is
  asked; when its output makes ``done`` true, the write happened and the call succeeds
  with the status output; otherwise (not done, or no status to be had) the compensating
  tool runs, and the call stays failed, its message saying what was undone;
* when any call of the plan failed, each compensable write of the plan that succeeded is
  undone, in reverse plan order (a saga); its envelope becomes ``COMPENSATED``.

Status and compensating calls go through the executor's whole pipeline as calls of their
own, with ids derived from the write's (``<call_id>-status``, ``<call_id>-undo``): each is
a ``tool_call_started``/``tool_call_finished`` pair in the events, and with an effects
journal each is journalled under that id — its idempotency key — so a process that
resumes a turn after a crash reuses a compensation that finished and never makes it
twice. A status or compensating tool that is unavailable (its MCP server restarting after
dying mid-write) is waited for, up to its timeout, before it is called. A compensation
that itself fails leaves its event, an error log line for the
operator, and an envelope that says the write may still be in effect; the session goes
on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.tools.registry import ToolRegistry

__all__ = ["UNKNOWN_OUTCOMES", "settle"]

UNKNOWN_OUTCOMES = frozenset({"TIMEOUT", "OUTCOME_UNKNOWN"})
"""Error codes after which a write may or may not have happened."""

_log = structlog.get_logger("hermes_fsm.tools.compensation")


class _Caller(Protocol):
    registry: ToolRegistry

    async def make_call(self, call_id: str, tool_name: str, arguments: dict[str, Any],
                        emit: Any, caller: str, journal: Any = None) -> dict[str, Any]: ...


def _contract(registry: ToolRegistry, name: str) -> ToolContract | None:
    tool = registry.find(name)
    contract = tool.contract if tool is not None else None
    return contract if contract is not None and contract.compensation is not None else None


def compensable(registry: ToolRegistry, calls: Sequence[tuple[str, str, dict[str, Any]]]
                ) -> bool:
    """Whether any call of the plan is of a tool with a compensation (cheap: every
    plan asks)."""
    for _, name, _ in calls:
        tool = registry.find(name)
        if tool is not None and tool.contract is not None and \
                tool.contract.compensation is not None:
            return True
    return False


async def settle(executor: _Caller, calls: Sequence[tuple[str, str, dict[str, Any]]],
                 envelopes: list[dict[str, Any]], emit: Any, caller: str,
                 journal: Any = None) -> list[dict[str, Any]]:
    """The plan's envelopes after status checks and compensations (see the module docs)."""
    out = list(envelopes)
    registry = executor.registry
    for i, ((call_id, name, args), envelope) in enumerate(zip(calls, out, strict=True)):
        contract = _contract(registry, name)
        if contract is None or envelope["success"] or \
                envelope.get("error_code") not in UNKNOWN_OUTCOMES:
            continue
        out[i] = await _unknown(executor, contract, call_id, name, args, envelope, emit,
                                caller, journal)
    failed = next((e for e in out if not e["success"]), None)
    if failed is None:
        return out
    for i in reversed(range(len(calls))):
        call_id, name, args = calls[i]
        contract = _contract(registry, name)
        if contract is None or not out[i]["success"]:
            continue
        why = (f"call {failed['call_id']} ({failed['tool_name']}) of the same plan failed "
               f"with {failed.get('error_code')}")
        undone = await _undo(executor, contract, call_id, args, out[i].get("output"), emit,
                             caller, journal)
        if undone is None:
            out[i] = _failure(out[i], "COMPENSATED", f"{name} was undone by "
                              f"{_comp_name(contract)} ({call_id}-undo) because {why}")
        else:
            out[i] = _failure(out[i], "COMPENSATION_FAILED", f"{why}; undoing {name} with "
                              f"{_comp_name(contract)} failed: {undone}. The write may still "
                              "be in effect: an operator must check it")
    return out


async def until_available(registry: ToolRegistry, name: str, poll_s: float = 0.05) -> None:
    """Wait (up to the tool's timeout) while tool ``name`` is unavailable — its MCP server
    restarting after it died during the write, say: a status or compensating call made at
    once would fail without being sent, and the write be reported as not undone."""
    loop = asyncio.get_running_loop()
    tool = registry.find(name)
    if tool is None or tool.available is None or tool.available() is None:
        return
    deadline = loop.time() + tool.timeout_s
    while loop.time() < deadline:
        await asyncio.sleep(poll_s)
        tool = registry.find(name)  # a restarted server registers its tools anew
        if tool is None or tool.available is None or tool.available() is None:
            return


def _comp_name(contract: ToolContract) -> str:
    assert contract.compensation is not None
    return contract.compensation.compensate


def _failure(envelope: dict[str, Any], code: str, message: str) -> dict[str, Any]:
    return {"call_id": envelope["call_id"], "tool_name": envelope["tool_name"],
            "success": False, "error_code": code, "message": message, "retryable": False}


async def _unknown(executor: _Caller, contract: ToolContract, call_id: str, name: str,
                   args: dict[str, Any], envelope: dict[str, Any], emit: Any, caller: str,
                   journal: Any) -> dict[str, Any]:
    spec, compiled = contract.compensation, contract.compiled_compensation
    assert spec is not None and compiled is not None
    said = f"{envelope.get('error_code')}: {envelope.get('message')}"
    if spec.status is not None:
        try:
            status_args = compiled.arguments_for(args, None)
        except Exception as exc:
            status = {"success": False, "message": f"its arguments could not be made: {exc}"}
        else:
            await until_available(executor.registry, spec.status)
            status = await executor.make_call(f"{call_id}-status", spec.status, status_args,
                                              emit, caller, journal)
        if status["success"] and compiled.is_done(status["output"], args):
            return {"call_id": call_id, "tool_name": name, "success": True,
                    "output": status["output"]}
        said += (f"; {spec.status} says it did not happen" if status["success"]
                 else f"; {spec.status} failed too ({status.get('message')})")
    undone = await _undo(executor, contract, call_id, args, None, emit, caller, journal)
    if undone is None:
        return _failure(envelope, str(envelope.get("error_code")),
                        f"{said}; compensated by {spec.compensate} ({call_id}-undo): nothing "
                        "of it remains, the user may ask again")
    return _failure(envelope, "COMPENSATION_FAILED", f"{said}; compensating with "
                    f"{spec.compensate} failed: {undone}. The write may still be in effect: "
                    "an operator must check it")


async def _undo(executor: _Caller, contract: ToolContract, call_id: str, args: dict[str, Any],
                output: Any, emit: Any, caller: str, journal: Any) -> str | None:
    """Run the compensating call; ``None`` when it succeeded, else why not."""
    spec, compiled = contract.compensation, contract.compiled_compensation
    assert spec is not None and compiled is not None
    try:
        comp_args = compiled.arguments_for(args, output)
    except Exception as exc:
        problem = f"its arguments could not be made from the write's ({exc})"
    else:
        await until_available(executor.registry, spec.compensate)
        result = await executor.make_call(f"{call_id}-undo", spec.compensate, comp_args, emit,
                                          caller, journal)
        if result["success"]:
            return None
        problem = f"{result.get('error_code')}: {result.get('message')}"
    _log.error("compensation failed", tool=contract.name, call_id=call_id,
               compensate=spec.compensate, problem=problem)
    return problem
