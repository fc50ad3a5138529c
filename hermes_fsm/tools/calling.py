"""Who a tool call is made for: the caller's user id, from the engine, never the model.

The executor sets :func:`current_caller` around every call (sync tools in worker threads
and MCP calls see it too: the context is copied). A tool whose answer depends on the user
(their orders, their calendar, their reminders) reads it here instead of taking a user
argument a model could fill in; an MCP server gets it in the call's ``_meta``
(:data:`CALLER_META`).

>>> current_caller() is None
True
>>> with calling_as("alice"):
...     current_caller()
'alice'
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["CALLER_META", "calling_as", "calling_with_facts", "current_caller",
           "current_facts", "reset_caller", "set_caller"]

CALLER_META = "hermes-fsm/user"
"""The ``_meta`` key of an MCP ``tools/call`` that names the caller (set by the client,
from the engine: a server serving per-user data reads the user there, not in arguments)."""

_CALLER: ContextVar[str | None] = ContextVar("hermes_fsm_tool_caller", default=None)


def current_caller() -> str | None:
    """The user id the current tool call is made for (``None`` outside a call)."""
    return _CALLER.get()


set_caller = _CALLER.set
"""``set_caller(user_id) -> token``: what :class:`calling_as` does on entry, for a hot path
that cannot afford the ``with`` (the executor's single call); pair it with
:func:`reset_caller` in a ``finally``."""

reset_caller = _CALLER.reset
"""``reset_caller(token)``: undo a :func:`set_caller`."""


class calling_as:  # lower case: used as a function, ``with calling_as(user):``
    """Run the block as a call made for ``user_id`` (a class, not a ``@contextmanager``:
    every tool call enters it, and a generator costs ~1 µs more)."""

    __slots__ = ("_token", "_user_id")

    def __init__(self, user_id: str) -> None:
        self._user_id = user_id

    def __enter__(self) -> None:
        self._token = _CALLER.set(self._user_id)

    def __exit__(self, *exc: object) -> None:
        _CALLER.reset(self._token)


_FACTS: ContextVar[dict[str, Any] | None] = ContextVar("hermes_fsm_call_facts", default=None)


def current_facts() -> dict[str, Any] | None:
    """What the session knows for the calls being made (``conversation``, ``memory``: the
    CEL variables of contract conditions), or ``None`` when the engine gave nothing."""
    return _FACTS.get()


@contextmanager
def calling_with_facts(facts: dict[str, Any]) -> Iterator[None]:
    """Run the block's calls with ``facts`` (``conversation``, ``memory``) for their
    contracts' conditions (:mod:`hermes_fsm.tools.conditions`)."""
    token = _FACTS.set(facts)
    try:
        yield
    finally:
        _FACTS.reset(token)
