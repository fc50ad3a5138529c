"""Checking a call against its contract's preconditions and postconditions.

The executor asks :func:`precondition_failure` after the arguments passed the input
schema and the caller's permissions, before the breaker and the call: a condition that
does not hold means the tool never runs, and the call fails with ``PRECONDITION_FAILED``
(not retryable, not counted by the breaker: nothing was called). The envelope's
``message`` is in English; ``details`` carries the condition, and the message and what
to confirm in both languages, for the answer. :func:`postcondition_problem` words a
failed postcondition as an output violation, which the contract's
``on_output_violation`` policy then handles.

Expressions were compiled when the contract loaded; a check evaluates them only. The
registries a condition reads by key are narrowed to the entries it reaches
(:func:`~hermes_fsm.contracts.conditions.narrow_registries`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hermes_fsm.contracts.conditions import ConditionFailure, cel_context, narrow_registries
from hermes_fsm.tools.calling import current_facts
from hermes_fsm.tools.registry import Tool, ToolRegistry

if TYPE_CHECKING:
    import cel

__all__ = ["SESSION_ROOTS", "postcondition_problem", "precondition_failure",
           "session_facts_read"]

SESSION_ROOTS = frozenset({"conversation", "memory"})
"""The conditions' variables the engine supplies from the session (:func:`current_facts`)."""


def session_facts_read(registry: ToolRegistry, names: Iterable[str]) -> frozenset[str]:
    """Which of :data:`SESSION_ROOTS` the conditions of the tools ``names`` read (the
    engine fetches only those)."""
    read: set[str] = set()
    for name in names:
        tool = registry.find(name)
        contract = tool.contract if tool is not None else None
        if contract is None:
            continue
        for condition in (*contract.compiled_preconditions, *contract.compiled_postconditions):
            read |= condition.roots & SESSION_ROOTS
    return frozenset(read)


def _context(tool: Tool, registries: Mapping[str, Mapping[str, Any]],
             arguments: Mapping[str, Any], caller: str, output: Any = None,
             post: bool = False) -> cel.Context:
    contract = tool.contract
    assert contract is not None
    conditions = contract.compiled_postconditions if post else contract.compiled_preconditions
    roots = frozenset().union(*(c.roots for c in conditions))
    context: dict[str, Any] = {"args": dict(arguments), "caller": caller}
    if post:
        context["output"] = output
    if roots & SESSION_ROOTS:  # the conversation graph and the user's memory (the engine's)
        facts = current_facts() or {}
        context["conversation"] = facts.get("conversation") or {"entities": [], "latest": {}}
        context["memory"] = facts.get("memory") or {}
    if "registries" in roots:
        declared = {name: registries.get(name) or {} for name in contract.registries}
        context["registries"] = narrow_registries(conditions, declared, context,
                                                  contract.registries)
    # converted into CEL values once for every condition, and only what they read
    return cel_context({k: v for k, v in context.items() if k in roots})


def precondition_failure(tool: Tool, registries: Mapping[str, Mapping[str, Any]],
                         arguments: Mapping[str, Any], caller: str
                         ) -> tuple[str, dict[str, Any]] | None:
    """``None`` when every precondition holds, else ``(message, details)`` of the first
    that does not (``details``: ``condition``, ``message``, ``message_zh``, ``confirm``,
    ``confirm_zh``, and ``error`` when it could not be evaluated)."""
    contract = tool.contract
    if contract is None or not contract.compiled_preconditions:
        return None
    context = _context(tool, registries, arguments, caller)
    for condition in contract.compiled_preconditions:
        failed = condition.check(context)
        if failed is not None:
            return _wording(tool.name, failed), _details(failed)
    return None


def postcondition_problem(tool: Tool, registries: Mapping[str, Mapping[str, Any]],
                          arguments: Mapping[str, Any], caller: str, output: Any) -> str | None:
    """``None`` when the output satisfies every postcondition, else the violation."""
    contract = tool.contract
    if contract is None or not contract.compiled_postconditions:
        return None
    context = _context(tool, registries, arguments, caller, output, post=True)
    for condition in contract.compiled_postconditions:
        failed = condition.check(context)
        if failed is not None:
            why = f" ({failed.error})" if failed.error else ""
            return f"postcondition {failed.label!r} does not hold: {failed.text('en')}{why}"
    return None


def _wording(tool: str, failed: ConditionFailure) -> str:
    why = f" (it could not be evaluated: {failed.error})" if failed.error else ""
    return f"{failed.text('en')}{why}"


def _details(failed: ConditionFailure) -> dict[str, Any]:
    details: dict[str, Any] = {"condition": failed.label,
                               "message": failed.message.pick("en"),
                               "message_zh": failed.message.pick("zh"),
                               "confirm": failed.confirm.pick("en"),
                               "confirm_zh": failed.confirm.pick("zh")}
    if failed.error:
        details["error"] = failed.error
    return details
