"""Prompt templates of MCP servers that load when a turn's intent matches (seed 000 §4.3).

An MCP server's configuration names the prompts to use
(``mcp_servers.<server>.prompts: {return_request: {intents: [return_request],
arguments: {order_id: order_id}}}``): when the server is ready, each is registered on the
tool registry (:attr:`~hermes_fsm.tools.registry.ToolRegistry.prompts`) as a
:class:`ServerPrompt` under ``<server>.<prompt>``. A brain request of a turn whose intent is
one of the prompt's ``intents`` carries the prompt's text
(:mod:`hermes_fsm.engine.offered_tools`), its arguments taken from the intent's
parameters (``arguments`` maps each prompt argument to an intent parameter).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ServerPrompt"]


@dataclass(frozen=True, slots=True)
class ServerPrompt:
    """A server's prompt template, and when a turn uses it."""

    name: str  # <server>.<prompt>
    intents: tuple[str, ...]
    arguments: Mapping[str, str] = field(default_factory=dict)  # prompt argument → parameter
    get: Callable[[dict[str, str]], Awaitable[list[dict[str, str]]]] | None = field(
        default=None, repr=False
    )

    def applies(self, intent: str | None) -> bool:
        """Whether a turn of ``intent`` uses this prompt."""
        return intent is not None and (intent in self.intents or "*" in self.intents)

    def arguments_from(self, parameters: Mapping[str, Any]) -> dict[str, str] | None:
        """The prompt's arguments from an intent's parameters; ``None`` when one is missing."""
        out = {}
        for argument, parameter in self.arguments.items():
            value = parameters.get(parameter)
            if value is None or value == "":
                return None
            out[argument] = str(value)
        return out
