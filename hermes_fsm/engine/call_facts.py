"""What the session knows, for the conditions of the tools a plan calls.

A tool contract's preconditions and postconditions may read ``conversation`` (the
conversation graph) and ``memory`` (the user's active memory items) —
:mod:`hermes_fsm.contracts.conditions`. Before a plan's calls run, :func:`call_facts`
builds only what the planned tools' conditions read (the memory is asked only then), and
the executor's condition checks read it through
:func:`hermes_fsm.tools.calling.current_facts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hermes_fsm.tools.conditions import session_facts_read

__all__ = ["call_facts", "conversation_facts"]


def conversation_facts(conversation: Any) -> dict[str, Any]:
    """The conversation graph as CEL sees it: ``entities`` (active nodes, oldest first)
    and ``latest`` (the latest active node of each type)."""
    entities: list[dict[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}
    if conversation is not None:
        for node in conversation.active():
            entry = {
                "id": node.id,
                "type": node.type,
                "value": node.value,
                "canonical": node.canonical,
                "confidence": float(node.confidence),
                "version": int(node.version),
            }
            entities.append(entry)
            latest[node.type] = entry  # active() is oldest first: the last one wins
    return {"entities": entities, "latest": latest}


async def call_facts(turn: Any, tools: Iterable[str]) -> dict[str, Any] | None:
    """The ``conversation`` and ``memory`` the planned ``tools``' conditions read, or
    ``None`` when none reads either."""
    read = session_facts_read(turn.services.tools, tools)
    if not read:
        return None
    facts: dict[str, Any] = {}
    if "conversation" in read:
        facts["conversation"] = conversation_facts(turn.session.conversation)
    if "memory" in read:
        items = getattr(turn.services.memory, "items", None)
        known = await items(turn.user_id) if items is not None else []
        facts["memory"] = {
            i.key: {"value": i.value, "confidence": float(i.confidence), "type": i.memory_type}
            for i in known
            if i.status == "active"
        }
    return facts
