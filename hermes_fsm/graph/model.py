"""The resolved graph: states, transitions and conditions as objects, not names.

Data only: the loader (:mod:`hermes_fsm.graph.loader`) builds it, the machine and the engine
read it. A working state without a handler has a contract: the engine asks the brain for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hermes_fsm.contracts.base import Contract, ContractRegistry
from hermes_fsm.contracts.retry import RetryPolicy

__all__ = [
    "DEFAULT_RECALL",
    "ENGINE_TRIGGERS",
    "RECALL_KINDS",
    "Condition",
    "Graph",
    "Recall",
    "StateSpec",
    "TransitionSpec",
]

ENGINE_TRIGGERS = ("start", "done")
"""Triggers a graph file may use; ``retry``, ``fail`` and ``abort`` are added by the engine."""

Recall = Literal["memory", "past_outcomes"]
"""What a state's brain request may be given from memory (a state's ``recall:``):
``memory``, the user's long-term memories recalled for the message; ``past_outcomes``,
the outcomes of the user's similar earlier requests from the experience log."""

RECALL_KINDS: tuple[Recall, ...] = ("memory", "past_outcomes")
DEFAULT_RECALL: frozenset[Recall] = frozenset({"memory"})
"""A state's recall when its ``recall:`` is not given."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A resolved transition condition: ``text`` as written, ``check(ctx) -> bool``."""

    text: str
    check: Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class StateSpec:
    """One state of a graph, resolved: handler and contract are objects, not names."""

    name: str
    description: str = ""
    handler: Callable[..., Any] | None = None
    handler_path: str | None = None
    contract: type[Contract] | None = None
    timeout_s: float | None = None
    retry: RetryPolicy = RetryPolicy()  # noqa: RUF009 - frozen, so one shared default is safe
    on_failure: str | None = None
    on_output: Callable[..., Any] | None = None
    line: int | None = None
    recall: frozenset[Recall] = DEFAULT_RECALL
    brain: str | None = None  # a configured brain's name (``rules``, ``small``); None: default
    fallback_brain: str | None = None  # answers the last attempt after a refused one

    @property
    def working(self) -> bool:
        """Whether the engine runs this state (it has a handler, or a contract for the brain);
        the initial state only waits for a message."""
        return self.handler is not None or self.contract is not None


@dataclass(frozen=True, slots=True)
class TransitionSpec:
    """One declared transition (``retry``/``fail``/``abort`` are derived, see :class:`Graph`)."""

    trigger: str
    source: str
    dest: str
    conditions: tuple[Condition, ...] = ()
    unless: tuple[Condition, ...] = ()
    limit: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class Graph:
    """A validated state graph. Build one with :func:`load_graph` or :func:`parse_graph`."""

    name: str
    version: str
    initial: str
    states: Mapping[str, StateSpec]
    transitions: tuple[TransitionSpec, ...]
    budget_s: float = 60.0
    partial_answer: str = "I could not finish this in time (stopped in {state})."
    fallback_answer: str = ("Sorry, I could not answer that this time ({state}: {reason}). "
                            "Please try again.")
    description: str = ""
    path: str = "<string>"
    content_hash: str = ""
    contracts: ContractRegistry = field(default_factory=ContractRegistry)

    def failure_routes(self) -> list[tuple[str, str]]:
        """``(state, route)`` for every state with a declared ``on_failure``."""
        return [(s.name, s.on_failure) for s in self.states.values() if s.on_failure]

    def retrying_states(self) -> list[str]:
        """States that may be attempted more than once."""
        return [s.name for s in self.states.values() if s.retry.max_attempts > 1]
