"""The previous major versions of the default turn's contracts, still resolvable.

A graph written for ``intent@1``/``plan@1``/``memory_commit@1`` (before the conversation
graph, issue 13) still loads, and a recording made with them still validates: these are
the 1.0.0 contracts as they were. They are not exported (``contracts export`` writes the
newest version of each name) and the default graph does not use them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from hermes_fsm.contracts.base import Contract
from hermes_fsm.contracts.states import check_calls

__all__ = ["LEGACY_CONTRACTS", "IntentV1", "MemoryCommitV1", "MemoryUpdateV1", "PlanV1",
           "ToolCallV1"]


class IntentV1(Contract):
    """intent@1.0.0: what the user wants, without references to the conversation graph."""

    contract_name = "intent"
    contract_version = "1.0.0"

    intent_type: str = Field(min_length=1, description="Intent label, e.g. 'inventory_query'.")
    parameters: dict[str, Any] = Field(description="Slots extracted from the message.")
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in [0, 1].")
    needs_tools: bool = Field(
        default=True, description="False when the answer needs no tool (small talk, thanks)."
    )


class ToolCallV1(Contract):
    """tool_call@1.0.0: one planned tool call."""

    contract_name = "tool_call"
    contract_version = "1.0.0"

    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any]
    reasoning_trace: str = Field(description="Why this call, in one or two sentences.")


class PlanV1(Contract):
    """plan@1.0.0: the tool calls to run next (checked against the tool catalog)."""

    contract_name = "plan"
    contract_version = "1.0.0"

    tool_calls: list[ToolCallV1]

    @model_validator(mode="after")
    def _calls_are_executable(self, info: ValidationInfo) -> PlanV1:
        check_calls(self.tool_calls, info)
        return self


class MemoryUpdateV1(Contract):
    """memory_update@1.0.0: one change to long-term memory (``evidence`` free text)."""

    contract_name = "memory_update"
    contract_version = "1.0.0"

    key: str = Field(min_length=1, description="The dimension a newer value supersedes.")
    update_type: Literal["create", "modify", "deprecate"]
    value: Any = None
    memory_type: Literal["preference", "fact", "progress", "correction"] = "fact"
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    evidence: str = Field(min_length=1,
                          description="Where it came from: 'user_message', a fact id.")

    @property
    def evidence_source(self) -> str:
        """The evidence, under its 2.0 name (what memory stores)."""
        return self.evidence

    @property
    def target_node_id(self) -> None:
        """The 1.0 contract names no conversation graph node."""
        return None


class MemoryCommitV1(Contract):
    """memory_commit@1.0.0: the memory updates extracted from this turn."""

    contract_name = "memory_commit"
    contract_version = "1.0.0"

    memory_updates: list[MemoryUpdateV1]


LEGACY_CONTRACTS: tuple[type[Contract], ...] = (
    IntentV1, ToolCallV1, PlanV1, MemoryUpdateV1, MemoryCommitV1)
"""The 1.x contracts that a 2.x contract of the default turn replaced."""
