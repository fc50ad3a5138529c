"""The tools a brain request carries: every permitted tool, or the turn's toolsets'.

With toolsets configured (:mod:`hermes_fsm.tools.toolsets`, on the registry) a planning
request carries the tools of the scenario the turn's intent belongs to, the ``always``
tools, and the tools the turn's latest plan already named; a
:class:`~hermes_fsm.events.model.ToolsOffered` event says which, and how many tool
tokens that saved (counted by the context builder's counter, when there is one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_fsm.brain.prompt import tools_block
from hermes_fsm.brain.protocol import ToolDescription
from hermes_fsm.events.model import ToolsOffered

__all__ = ["offered_tools"]


def _get(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def offered_tools(
    turn: Any, described: Sequence[ToolDescription], *, plans: bool
) -> tuple[ToolDescription, ...]:
    """The tools of this request (``plans``: its contract plans tool calls)."""
    toolsets = turn.services.tools.toolsets
    if toolsets is None or not plans:
        return tuple(described)
    intent = _get(turn.by_contract.get("intent"), "intent_type")
    named = [_get(c, "tool_name") for c in _get(turn.by_contract.get("plan"), "tool_calls") or ()]
    choice = toolsets.select(intent, [n for n in named if isinstance(n, str)])
    if choice is None:
        return tuple(described)
    offered = tuple(d for d in described if d.name in choice.tools)
    context = turn.services.context
    counter = getattr(context, "counter", None)
    every = tokens = 0
    if counter is not None:
        every, tokens = counter.count(tools_block(described)), counter.count(tools_block(offered))
    assert turn.state is not None
    turn.emit(
        ToolsOffered,
        state=turn.state.name,
        intent=intent,
        toolsets=list(choice.toolsets),
        offered=[d.name for d in offered],
        left_out=len(described) - len(offered),
        tokens=tokens,
        tokens_all=every,
        tokens_saved=every - tokens,
    )
    return offered
