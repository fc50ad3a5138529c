"""The brain protocol: what decides a state's output.

A brain gets a :class:`BrainRequest` — the state, its contract (name and JSON Schema),
the user's message, what earlier states of this turn produced, the tools it may plan
with, recalled memory, and, on a retry, a :class:`Repair` saying why its previous attempt
was refused (with the validation errors as data) — and returns the *raw* output: a
mapping, a contract instance, or JSON text. The engine validates it; a brain never has
to be right, only answerable for.

Brains dispatch on ``request.contract_name``, so they work with any graph whose states
use contracts they know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import ValidationError

from hermes_fsm._internal.redact import redact
from hermes_fsm.contracts.base import Contract
from hermes_fsm.conversation.graph import Conversation

__all__ = [
    "Brain",
    "BrainReply",
    "BrainRequest",
    "Repair",
    "RepairError",
    "RepairReason",
    "Summarizer",
    "SummaryRequest",
    "ToolDescription",
]

RepairReason = Literal["violation", "timeout", "error"]
"""Why an attempt is retried: its output broke the contract, it timed out, or it raised a
:class:`~hermes_fsm.errors.RetryableError` (the ``reason`` of the ``retry`` event)."""


@dataclass(frozen=True, slots=True)
class RepairError:
    """One validation error of a refused output, as pydantic reported it.

    Attributes:
        loc: where in the output (``("confidence",)``, ``("tool_calls", 0, "tool_name")``;
            ``()`` for the output as a whole).
        msg: what is wrong, in words.
        type: pydantic's error type (``"less_than_equal"``, ``"missing"``, ``"value_error"``).
        ctx: the error's context, its JSON-like values only (``{"le": 1}``; the Plan
            contract puts the refused calls under ``"calls"``, see
            :class:`~hermes_fsm.contracts.states.Plan`).
    """

    loc: tuple[str | int, ...]
    msg: str
    type: str
    ctx: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """``loc`` as a dotted path (``"(root)"`` for the whole output)."""
        return ".".join(str(p) for p in self.loc) or "(root)"


@dataclass(frozen=True, slots=True)
class Repair:
    """Why the previous attempt at a state was refused: what a brain gets on a retry.

    Brains read the fields; :meth:`text` words it for a model
    (:func:`hermes_fsm.brain.prompt.repair_message` adds it to the prompt).

    >>> from hermes_fsm.contracts.states import Intent
    >>> try:
    ...     Intent.validate_output({"intent_type": "hi", "parameters": {}, "confidence": 2})
    ... except ValidationError as exc:
    ...     repair = Repair.violation(Intent.ref(), exc)
    >>> repair.reason, [(e.loc, e.type) for e in repair.errors]
    ('violation', [(('confidence',), 'less_than_equal')])
    >>> print(repair.text())
    Your output was refused by contract intent@2.0.0:
    - confidence: Input should be less than or equal to 1
    Return output that satisfies the JSON Schema exactly; no extra fields.

    Attributes:
        reason: ``violation``, ``timeout`` or ``error`` (:data:`RepairReason`).
        message: what happened, in one sentence.
        contract: the ref of the contract that refused the output (``"plan@1.0.0"``), for a
            violation.
        errors: the validation errors, for a violation.
    """

    reason: RepairReason
    message: str
    contract: str | None = None
    errors: tuple[RepairError, ...] = ()

    @classmethod
    def violation(cls, contract: str, error: ValidationError) -> Repair:
        """The output broke ``contract`` (a ref such as ``"intent@1.0.0"``) with ``error``."""
        errors = tuple(
            RepairError(tuple(e["loc"]), e["msg"], e["type"], _plain_ctx(e.get("ctx")))
            for e in error.errors(include_url=False))
        return cls("violation", f"Your output was refused by contract {contract}",
                   contract, errors)

    @classmethod
    def timeout(cls, limit_s: float | None) -> Repair:
        """The attempt ran past the state's ``timeout_s``."""
        return cls("timeout", f"the previous attempt timed out after {limit_s}s")

    @classmethod
    def error(cls, error: BaseException) -> Repair:
        """The attempt raised ``error`` (a retryable one)."""
        return cls("error", f"the previous attempt failed: {redact(str(error))}")

    def text(self) -> str:
        """The repair in words, as a model is told it."""
        if not self.errors:
            return self.message
        lines = [f"{self.message}:"]
        lines.extend(f"- {e.where}: {e.msg}" for e in self.errors)
        lines.append("Return output that satisfies the JSON Schema exactly; no extra fields.")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _plain_ctx(ctx: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON-like entries of a pydantic error context (not the exception objects)."""
    return {k: v for k, v in (ctx or {}).items() if _plain(v)}


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


@dataclass(frozen=True, slots=True)
class ToolDescription:
    """A tool as a brain sees it when planning."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class BrainRequest:
    """Everything a brain may use to produce one state's output.

    Attributes:
        state: the graph state asking (e.g. ``"INTENT"``).
        contract_name: the name of the state's contract (e.g. ``"intent"``); brains dispatch
            on it.
        schema: the contract's JSON Schema (hand it to a model as the output format).
        text: the user's message of this turn.
        user_id: who is asking.
        outputs: validated outputs of this turn so far, by contract name (latest wins).
        tools: tools the brain may plan with.
        memory: recalled memory, formatted as a background block ("" when none).
        resources: the MCP resources read for the turn's scenario, one ``Reference URI:``
            block each ("" when none); a part of the token budget of its own.
        history: recent messages of the session, oldest first (``role``, ``content``):
            the sliding window, already cut to its token budget (:mod:`hermes_fsm.engine.context`).
        summary: the rolling summary of the messages older than ``history`` ("" when none).
        now: when the turn started (aware): the base of relative times ("tomorrow");
            ``None``: the brain reads its own clock.
        attempt: 1 on the first try; higher on retries.
        repair: on a retry, why the previous attempt was refused (:class:`Repair`: the
            reason, and for a violation the contract and its validation errors).
        on_token: when set, a brain that streams may call it with each piece of answer
            text as it arrives (the default handler turns them into ``TokenChunk`` events).
        conversation: the session's conversation graph and pending tasks
            (:class:`~hermes_fsm.conversation.graph.Conversation`; ``None`` before the
            first turn or with the graph off): read it, never change it.
    """

    state: str
    contract_name: str
    schema: Mapping[str, Any]
    text: str
    user_id: str
    outputs: Mapping[str, Contract] = field(default_factory=dict)
    tools: Sequence[ToolDescription] = ()
    memory: str = ""
    history: Sequence[Mapping[str, str]] = ()
    attempt: int = 1
    repair: Repair | None = None
    on_token: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    summary: str = ""
    now: datetime | None = None
    conversation: Conversation | None = field(default=None, compare=False, repr=False)
    resources: str = ""


@dataclass(frozen=True, slots=True)
class BrainReply:
    """A raw output with what it cost; a brain may return this instead of a bare output.

    ``usage_source`` says where ``usage`` came from: ``"server"`` (reported by the model's
    server), ``"tokenizer"`` (counted with the server's tokenizer), ``"estimated:METHOD"``,
    or ``None`` (no usage).
    """

    output: Any
    usage: Mapping[str, int] = field(default_factory=dict)
    usage_source: str | None = None


@runtime_checkable
class Brain(Protocol):
    """Produces raw state outputs. ``name`` appears in events.

    A brain may also write rolling summaries: implement :class:`Summarizer`'s
    ``summarize`` (optional; without it the extractive summarizer of
    :mod:`hermes_fsm.brain.summary` is used).
    """

    name: str

    async def decide(self, request: BrainRequest) -> Any:
        """Return the raw output for ``request`` (mapping, Contract, JSON text, or BrainReply).

        Raises:
            hermes_fsm.errors.BrainError: the brain cannot answer this contract at all.
            hermes_fsm.errors.RetryableError: a passing failure; the state is retried.
        """
        ...


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """Fold ``messages`` into the rolling summary ``previous``, within ``max_tokens``.

    Attributes:
        user_id, session_id: whose conversation.
        previous: the summary so far ("" for none).
        messages: the messages leaving the window, oldest first (``role``, ``content``).
        max_tokens: the summary's budget, as ``counter`` counts.
        counter: the context's token counter (a :class:`~hermes_fsm.brain.tokens.TokenCounter`).
    """

    user_id: str
    session_id: str
    previous: str
    messages: Sequence[Mapping[str, str]]
    max_tokens: int
    counter: Any = field(default=None, compare=False, repr=False)


@runtime_checkable
class Summarizer(Protocol):
    """The optional ``summarize`` capability of a brain (see :mod:`hermes_fsm.engine.context`)."""

    async def summarize(self, request: SummaryRequest) -> str:
        """The new summary: ``previous`` plus what ``messages`` add, keeping stated times
        and dates, open tasks and constraints, within ``max_tokens``.

        Raises:
            Any exception: the caller falls back to the extractive summarizer and records why.
        """
        ...
