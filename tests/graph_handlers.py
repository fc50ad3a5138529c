"""Handlers, conditions and contracts referenced by dotted path from ``tests/graphs/*.yaml``."""

from __future__ import annotations

from typing import Any

from hermes_fsm.contracts.base import Contract


class Clarification(Contract):
    """What the CLARIFY state of the support graph produces."""

    contract_name = "clarification"
    contract_version = "1.0.0"

    question: str
    ready: bool


class Approval(Contract):
    """What the APPROVAL state of the support graph produces."""

    contract_name = "approval"
    contract_version = "2.1.0"

    approved: bool
    approver: str


class NotAContract:
    """A class that looks like a contract but does not derive from ``Contract``."""

    contract_name = "impostor"
    contract_version = "1.0.0"


async def ask_clarifying_question(turn: Any) -> dict[str, Any]:
    """CLARIFY: ask the user what they meant."""
    return {"question": f"Did you mean {turn.text!r}?", "ready": True}


async def request_approval(turn: Any) -> dict[str, Any]:
    """APPROVAL: approve everything (a test double)."""
    return {"approved": True, "approver": "tests"}


def is_urgent(turn: Any) -> bool:
    """A callable condition: the message contains the word 'urgent'."""
    return "urgent" in str(getattr(turn, "text", ""))


NOT_CALLABLE = 42
"""A module attribute a graph may wrongly name as a handler."""
