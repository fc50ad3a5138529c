"""The contracts of the default seven-state turn.

Each is a strict :class:`~hermes_fsm.contracts.base.Contract`. Some check references as well
as shapes, through pydantic's validation context (passed by the engine):

- ``Plan`` asks ``context["tool_catalog"]`` whether each call names a known, permitted
  tool with valid arguments;
- ``Response`` requires each evidence reference to name a fact of this turn
  (``context["fact_ids"]``), and an answer citing a fact with figures to state one of
  them (``context["fact_figures"]``: fact id -> its numbers, see
  :mod:`hermes_fsm.contracts.grounding`).

Their JSON Schemas are exported to ``contracts/states/`` (``hermes-fsm contracts export``).
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from hermes_fsm.contracts.base import Contract
from hermes_fsm.contracts.grounding import FACT_PLACEHOLDER, states_figure

__all__ = [
    "STATE_CONTRACTS",
    "ApprovalRequest",
    "Clarification",
    "EntityRef",
    "ExecutionResults",
    "Fact",
    "Intent",
    "MemoryCommit",
    "MemoryUpdate",
    "MissingSlot",
    "Plan",
    "Response",
    "ResultReport",
    "ToolCall",
    "ToolCatalog",
    "ToolFailure",
    "ToolSuccess",
]


_NODE_ID = re.compile(r"\b(?:ent|int)_\d+(?:_v\d+)?\b")
"""A conversation graph node id cited in a reasoning trace."""


class ToolCatalog(Protocol):
    """What the Plan contract asks of the tool layer while validating."""

    def check_call(self, tool_name: str, arguments: dict[str, Any]) -> str | None:
        """``None`` when the call is acceptable, else what is wrong with it."""


def _conversation(info: ValidationInfo) -> Any:
    """The conversation graph the engine passed (``None``: references are not checked)."""
    return (info.context or {}).get("conversation", _UNCHECKED)


_UNCHECKED = object()


def _node_problems(conv: Any, ids: list[str], *, deprecated_ok: bool = False) -> list[str]:
    """Why each id cannot be referenced: it names no node of the graph, or a deprecated one."""
    problems = []
    entities = getattr(conv, "entities", {})
    intents = getattr(conv, "intents", {})
    for node_id in ids:
        node = entities.get(node_id)
        if node is None and node_id not in intents:
            problems.append(f"{node_id!r} names no node of the conversation graph")
        elif node is not None and node.deprecated_at is not None and not deprecated_ok:
            problems.append(f"{node_id!r} is deprecated (corrected at {node.deprecated_at}); "
                            "cite its current version")
    return problems


class EntityRef(Contract):
    """A slot's entity: an existing graph node (node_id) or a new one."""

    contract_name = "entity_ref"
    contract_version = "1.0.0"

    slot: str = Field(min_length=1)
    type: str = Field(min_length=1, description="Product, Warehouse, Location, Time ...")
    value: str = Field(min_length=1)
    canonical: str | None = Field(default=None, description="The exact value tools take.")
    node_id: str | None = None
    replaces: str | None = Field(default=None, description="The node a correction replaces.")


class Intent(Contract):
    """What the user wants: a classified intent, its parameters, and how sure the brain is."""

    # ``entities`` reference the conversation graph's nodes (or propose new ones): a
    # ``node_id`` must exist and be active, a ``replaces`` must exist. ``task`` is the
    # pending task this message answers, ``decision`` an answer to a pending approval.

    contract_name = "intent"
    contract_version = "2.0.0"

    intent_type: str = Field(min_length=1, description="Intent label, e.g. 'inventory_query'.")
    parameters: dict[str, Any] = Field(description="Slots extracted from the message.")
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in [0, 1].")
    needs_tools: bool = Field(
        default=True, description="False when the answer needs no tool (small talk, thanks)."
    )
    entities: list[EntityRef] = Field(default_factory=list)
    task: str | None = Field(default=None, description="The pending task it answers.")
    decision: Literal["approve", "cancel"] | None = None

    @model_validator(mode="after")
    def _references_exist(self, info: ValidationInfo) -> Intent:
        conv = _conversation(info)
        if conv is _UNCHECKED:
            return self
        problems = _node_problems(conv, [e.node_id for e in self.entities if e.node_id])
        problems += [p for p in _node_problems(
            conv, [e.replaces for e in self.entities if e.replaces], deprecated_ok=True)]
        if problems:
            raise ValueError("entities: " + "; ".join(problems))
        return self


class ToolCall(Contract):
    """One planned tool call; its ``reasoning_trace`` cites conversation graph node ids
    (``ent_3``, ``int_2``; also listed in ``cites``)."""

    contract_name = "tool_call"
    contract_version = "2.0.0"

    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any]
    reasoning_trace: str = Field(description="Why this call, citing graph node ids "
                                             "(e.g. 'Based on ent_1 and ent_2').")
    cites: list[str] = Field(default_factory=list,
                             description="The conversation graph node ids it relies on.")


class MissingSlot(Contract):
    """A required input a planner could not fill (``missing``) or found malformed
    (``invalid``): the turn asks the user for it instead of guessing."""

    contract_name = "missing_slot"
    contract_version = "1.0.0"

    tool: str = Field(min_length=1)
    slot: str = Field(min_length=1)
    reason: Literal["missing", "invalid"]
    value: str = ""


class Plan(Contract):
    """The tool calls to run next; each must name a known, permitted tool with valid arguments."""

    contract_name = "plan"
    contract_version = "2.1.0"

    tool_calls: list[ToolCall]
    missing_slots: list[MissingSlot] = Field(
        default_factory=list, description="Required inputs to ask the user for (CLARIFY).")
    continues: bool = Field(
        default=False, description="More calls wait for these calls' outputs (an argument "
                                   "taken from their results): plan again after them.")

    @model_validator(mode="after")
    def _cited_nodes_exist(self, info: ValidationInfo) -> Plan:
        """Every node id a call cites (``cites`` and ids in ``reasoning_trace``) must name
        an active node of the conversation graph."""
        conv = _conversation(info)
        if conv is _UNCHECKED:
            return self
        problems = []
        for i, call in enumerate(self.tool_calls):
            ids = list(dict.fromkeys([*call.cites, *_NODE_ID.findall(call.reasoning_trace)]))
            problems += [f"tool_calls[{i}].reasoning_trace: {p}"
                         for p in _node_problems(conv, ids)]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _calls_are_executable(self, info: ValidationInfo) -> Plan:
        """Calls the tool catalog refuses make one ``value_error`` for the whole plan, whose
        context lists them as data under ``"calls"``: ``{"index", "tool", "problem"}`` per
        refused call (a brain reads them from :class:`~hermes_fsm.brain.protocol.Repair`).
        """
        check_calls(self.tool_calls, info)
        return self


def check_calls(tool_calls: list[Any], info: ValidationInfo) -> None:
    """Raise when the tool catalog of the validation context refuses a planned call (see
    :class:`Plan`; shared with the 1.0 plan contract)."""
    catalog = (info.context or {}).get("tool_catalog")
    if catalog is None:
        return
    refused = []
    for i, call in enumerate(tool_calls):
        problem = catalog.check_call(call.tool_name, call.arguments)
        if problem:
            refused.append({"index": i, "tool": call.tool_name, "problem": problem})
    if refused:
        problems = "; ".join(f"tool_calls[{c['index']}] ({c['tool']}): {c['problem']}"
                             for c in refused)
        # worded as a ValueError would be (type and message), with the calls as data
        raise PydanticCustomError("value_error", "Value error, {problems}",
                                  {"problems": problems, "calls": refused})


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
    contract_version = "1.1.0"

    call_id: str
    tool_name: str
    success: Literal[False] = False
    error_code: str = Field(min_length=1)
    message: str
    retryable: bool
    details: dict[str, Any] | None = None
    """Structured detail (a failed precondition: ``condition``, ``message``/``message_zh``,
    ``confirm``/``confirm_zh``), for the answer."""


class ExecutionResults(Contract):
    """One result per planned call, in plan order."""

    contract_name = "execution_results"
    contract_version = "1.1.0"

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
        if f"{cls.contract_name}@" in value.lower():
            raise ValueError(f"the answer restates why the previous attempt was refused (it "
                             f"names the contract {cls.contract_name}) instead of answering; "
                             "answer the user's message")
        unfilled = FACT_PLACEHOLDER.search(value)
        if unfilled:
            raise ValueError(f"the answer has the placeholder {unfilled.group(0)}, which names "
                             "no value of this turn's facts; write only placeholders the facts "
                             "list")
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
        # an answer citing a fact with numbers states one of them (a small model that cites
        # the stock fact and writes "in stock" has not answered "how many")
        fact_figures = (info.context or {}).get("fact_figures") or {}
        text = info.data.get("text")
        if not isinstance(text, str):
            return value  # the text itself was refused
        for ref in value:
            wanted = fact_figures.get(ref)
            if wanted and not states_figure(text, wanted):
                raise ValueError(f"the answer cites {ref} but states none of its figures "
                                 f"({', '.join(wanted[:8])}); write the figure the user "
                                 "asked for in text")
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

    # ``target_node_id``: the conversation graph node it is about (it must exist);
    # ``evidence_source`` in the seed's form: ``user_message``, ``tool:<tool>[:<arg>...]``
    # (``tool:get_inventory:hz_xh_001:IP15-128``), ``session:<id>`` or a fact id.

    contract_name = "memory_update"
    contract_version = "2.0.0"

    key: str = Field(min_length=1, description="The dimension a newer value supersedes.")
    update_type: Literal["create", "modify", "deprecate"]
    value: Any = None
    memory_type: Literal["preference", "fact", "progress", "correction"] = "fact"
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    target_node_id: str | None = Field(default=None, description="A graph node id.")
    evidence_source: str = Field(
        pattern=r"^(user_message|memory|session:\S+|fact-\S+|tool:[\w.-]+(:[^:\s]+)*)$",
        description="e.g. user_message, tool:get_inventory:hz_xh_001:IP15-128, a fact id")

    @model_validator(mode="after")
    def _target_exists(self, info: ValidationInfo) -> MemoryUpdate:
        conv = _conversation(info)
        if conv is not _UNCHECKED and self.target_node_id is not None:
            problems = _node_problems(conv, [self.target_node_id], deprecated_ok=True)
            if problems:
                raise ValueError("target_node_id: " + problems[0])
        return self


class MemoryCommit(Contract):
    """The memory updates extracted from this turn."""

    contract_name = "memory_commit"
    contract_version = "2.0.0"

    memory_updates: list[MemoryUpdate]


class Clarification(Contract):
    """CLARIFY's output: the question that asks for exactly one slot, with its format;
    the task waits in the session (``task_id``)."""

    contract_name = "slot_question"
    contract_version = "1.0.0"

    text: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    slot: str = Field(min_length=1)
    expected_format: str = ""
    abandoned: bool = Field(default=False,
                            description="The slot failed too often: the task was dropped.")


class ApprovalRequest(Contract):
    """APPROVAL's output: exactly what would run, waiting for the user's yes."""

    contract_name = "approval_request"
    contract_version = "1.0.0"

    text: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    calls: list[ToolCall]


STATE_CONTRACTS: tuple[type[Contract], ...] = (
    EntityRef,
    Intent,
    ToolCall,
    MissingSlot,
    Plan,
    ToolSuccess,
    ToolFailure,
    ExecutionResults,
    Fact,
    ResultReport,
    Response,
    MemoryUpdate,
    MemoryCommit,
    Clarification,
    ApprovalRequest,
)
"""Every contract the default graph uses, nested ones included."""
