"""The contracts of the default seven-state turn.

Each is a strict :class:`~hermes_fsm.contracts.base.Contract`. Some check references as well
as shapes, through pydantic's validation context (passed by the engine):

- ``Plan`` asks ``context["tool_catalog"]`` whether each call names a known, permitted
  tool with valid arguments;
- ``Response`` requires each evidence reference to name a fact of this turn
  (``context["fact_ids"]``).

Their JSON Schemas are exported to ``contracts/states/`` (``hermes-fsm contracts export``).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from hermes_fsm.contracts.base import Contract

__all__ = [
    "STATE_CONTRACTS",
    "ExecutionResults",
    "Fact",
    "Intent",
    "MemoryCommit",
    "MemoryUpdate",
    "Plan",
    "Response",
    "ResultReport",
    "ToolCall",
    "ToolCatalog",
    "ToolFailure",
    "ToolSuccess",
]


class ToolCatalog(Protocol):
    """What the Plan contract asks of the tool layer while validating."""

    def check_call(self, tool_name: str, arguments: dict[str, Any]) -> str | None:
        """``None`` when the call is acceptable, else what is wrong with it."""


class Intent(Contract):
    """What the user wants: a classified intent, its parameters, and how sure the brain is."""

    contract_name = "intent"
    contract_version = "1.0.0"

    intent_type: str = Field(min_length=1, description="Intent label, e.g. 'inventory_query'.")
    parameters: dict[str, Any] = Field(description="Slots extracted from the message.")
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in [0, 1].")
    needs_tools: bool = Field(
        default=True, description="False when the answer needs no tool (small talk, thanks)."
    )


class ToolCall(Contract):
    """One planned tool call."""

    contract_name = "tool_call"
    contract_version = "1.0.0"

    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any]
    reasoning_trace: str = Field(description="Why this call, in one or two sentences.")


class Plan(Contract):
    """The tool calls to run next; each must name a known, permitted tool with valid arguments."""

    contract_name = "plan"
    contract_version = "1.0.0"

    tool_calls: list[ToolCall]

    @model_validator(mode="after")
    def _calls_are_executable(self, info: ValidationInfo) -> Plan:
        """Calls the tool catalog refuses make one ``value_error`` for the whole plan, whose
        context lists them as data under ``"calls"``: ``{"index", "tool", "problem"}`` per
        refused call (a brain reads them from :class:`~hermes_fsm.brain.protocol.Repair`).
        """
        catalog = (info.context or {}).get("tool_catalog")
        if catalog is None:
            return self
        refused = []
        for i, call in enumerate(self.tool_calls):
            problem = catalog.check_call(call.tool_name, call.arguments)
            if problem:
                refused.append({"index": i, "tool": call.tool_name, "problem": problem})
        if refused:
            problems = "; ".join(f"tool_calls[{c['index']}] ({c['tool']}): {c['problem']}"
                                 for c in refused)
            # worded as a ValueError would be (type and message), with the calls as data
            raise PydanticCustomError("value_error", "Value error, {problems}",
                                      {"problems": problems, "calls": refused})
        return self


class ToolSuccess(Contract):
    """A tool call that returned an output."""

    contract_name = "tool_success"
    contract_version = "1.0.0"

    call_id: str
    tool_name: str
    success: Literal[True] = True
    output: Any


class ToolFailure(Contract):
    """A tool call that failed, as the error envelope the brain sees."""

    contract_name = "tool_failure"
    contract_version = "1.0.0"

    call_id: str
    tool_name: str
    success: Literal[False] = False
    error_code: str = Field(min_length=1)
    message: str
    retryable: bool


class ExecutionResults(Contract):
    """One result per planned call, in plan order."""

    contract_name = "execution_results"
    contract_version = "1.0.0"

    results: list[Annotated[ToolSuccess | ToolFailure, Field(discriminator="success")]]


class Fact(Contract):
    """A fact established this turn, citable by the answer."""

    contract_name = "fact"
    contract_version = "1.0.0"

    id: str = Field(min_length=1)
    source: str = Field(description="Where it came from: a tool call id, or 'memory'.")
    content: Any


class ResultReport(Contract):
    """What the tool results established, what broke, and whether to plan again."""

    contract_name = "result_report"
    contract_version = "1.0.0"

    facts: list[Fact]
    violations: list[str]
    needs_more_tools: bool


class Response(Contract):
    """The answer, with evidence references that must name facts of this turn."""

    contract_name = "response"
    contract_version = "1.0.0"

    text: str = Field(min_length=1)
    evidence: list[str] = Field(description="Ids of the facts the answer relies on.")

    @field_validator("text")
    @classmethod
    def _readable(cls, value: str) -> str:
        """Not blank, and not the schema's own words (a small model echoes them)."""
        if not value.strip():
            raise ValueError("the answer is blank; write the sentence the user should read")
        said = _words(value)
        echoed = [d for d, words in _schema_texts(cls) if words in said]
        if echoed:
            raise ValueError(f"the answer restates the schema's description ({echoed[0]!r}) "
                             "instead of answering; answer the user's message")
        return value

    @field_validator("evidence")
    @classmethod
    def _evidence_exists(cls, value: list[str], info: ValidationInfo) -> list[str]:
        fact_ids = (info.context or {}).get("fact_ids")
        if fact_ids is None:
            return value
        unknown = [ref for ref in value if ref not in fact_ids]
        if unknown:
            known = ", ".join(sorted(fact_ids)) or "none"
            raise ValueError(f"evidence {unknown} names no fact of this turn (facts: {known})")
        return value


def _words(text: str | None) -> str:
    """Lowercase words only: what a restatement keeps of its source."""
    return " ".join("".join(c if c.isalnum() else " " for c in (text or "").lower()).split())


@functools.cache
def _schema_texts(model: type[Contract]) -> tuple[tuple[str, str], ...]:
    """The descriptions a model sees in a contract's schema (the docstring, each field's),
    each with its words."""
    texts = [model.__doc__ or ""]
    texts += [f.description for f in model.model_fields.values() if f.description]
    return tuple((t.strip(), _words(t)) for t in texts if _words(t))


class MemoryUpdate(Contract):
    """One change to long-term memory."""

    contract_name = "memory_update"
    contract_version = "1.0.0"

    key: str = Field(min_length=1, description="The dimension a newer value supersedes.")
    update_type: Literal["create", "modify", "deprecate"]
    value: Any = None
    memory_type: Literal["preference", "fact", "progress", "correction"] = "fact"
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    evidence: str = Field(min_length=1,
                          description="Where it came from: 'user_message', a fact id.")


class MemoryCommit(Contract):
    """The memory updates extracted from this turn."""

    contract_name = "memory_commit"
    contract_version = "1.0.0"

    memory_updates: list[MemoryUpdate]


STATE_CONTRACTS: tuple[type[Contract], ...] = (
    Intent,
    ToolCall,
    Plan,
    ToolSuccess,
    ToolFailure,
    ExecutionResults,
    Fact,
    ResultReport,
    Response,
    MemoryUpdate,
    MemoryCommit,
)
"""Every contract the default graph uses, nested ones included."""
