"""The brain protocol: what decides a state's output.

A brain gets a :class:`BrainRequest` — the state, its contract (name and JSON Schema),
the user's message, what earlier states of this turn produced, the tools it may plan
with, recalled memory, and, on a retry, the validation errors of its previous attempt —
and returns the *raw* output: a mapping, a contract instance, or JSON text. The engine
validates it; a brain never has to be right, only answerable for.

Brains dispatch on ``request.contract_name``, so they work with any graph whose states
use contracts they know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hermes_fsm.contracts.base import Contract

__all__ = [
    "Brain",
    "BrainReply",
    "BrainRequest",
    "Summarizer",
    "SummaryRequest",
    "ToolDescription",
]


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
        history: recent messages of the session, oldest first (``role``, ``content``):
            the sliding window, already cut to its token budget (:mod:`hermes_fsm.engine.context`).
        summary: the rolling summary of the messages older than ``history`` ("" when none).
        attempt: 1 on the first try; higher on retries.
        repair: on a retry, why the previous output was refused (validation errors).
        on_token: when set, a brain that streams may call it with each piece of answer
            text as it arrives (the default handler turns them into ``TokenChunk`` events).
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
    repair: str | None = None
    on_token: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    summary: str = ""


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
