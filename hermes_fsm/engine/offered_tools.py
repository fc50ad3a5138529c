"""What a brain request carries from the tools: every permitted tool or the turn's
toolsets', and the MCP prompt templates the turn's intent loads.

With toolsets configured (:mod:`hermes_fsm.tools.toolsets`, on the registry) a planning
request carries the tools of the scenario the turn's intent belongs to — or, when no
toolset serves that intent (a vague follow-up), the scenario of the session's pending
task (the conversation graph's, :mod:`hermes_fsm.conversation`) — the ``always`` tools,
and the tools the turn's latest plan already named; a
:class:`~hermes_fsm.events.model.ToolsOffered` event says which, and how many tool
tokens that saved (counted by the context builder's counter, when there is one); the
request's ``context_built`` event carries the saving too (``tools_saved``).

The MCP resources the turn's toolsets name (``tools.toolsets.<name>.resources``) are read
for the planning and answering requests through the servers' ``<server>.read_resource``
tools (``mcp_servers.<server>.resources: true``) into the request's ``resources``, a part
of the token budget of its own (``parts.resources`` and ``resources`` by URI in the
request's ``context_built``); a :class:`~hermes_fsm.events.model.ResourcesRead` event
says which, and their tokens.

A server prompt (:mod:`hermes_fsm.tools.server_prompts`) whose intents name the turn's
intent is fetched from its server for the planning and answering requests and added to
the request's background block (so the token budget counts it with memory); a
:class:`~hermes_fsm.events.model.PromptLoaded` event says which, with what arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hermes_fsm.brain.prompt import tools_block
from hermes_fsm.brain.protocol import ToolDescription
from hermes_fsm.events.model import PromptLoaded, ResourcesRead, ToolsOffered

__all__ = ["offer_tools", "offered_tools", "read_resources", "with_server_context",
           "with_server_prompts"]

_PROMPTED = frozenset({"plan", "response"})  # the requests a server prompt is for


def _get(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def offered_tools(
    turn: Any, described: Sequence[ToolDescription], *, plans: bool
) -> tuple[ToolDescription, ...]:
    """The tools of this request (``plans``: its contract plans tool calls)."""
    return offer_tools(turn, described, plans=plans)[0]


def offer_tools(
    turn: Any, described: Sequence[ToolDescription], *, plans: bool
) -> tuple[tuple[ToolDescription, ...], int]:
    """The tools of this request and the tool tokens the toolsets saved (0 without them),
    which the request's ``context_built`` event carries as ``tools_saved``."""
    toolsets = turn.services.tools.toolsets
    if toolsets is None or not plans:
        return tuple(described), 0
    intent = _get(turn.by_contract.get("intent"), "intent_type")
    named = [_get(c, "tool_name") for c in _get(turn.by_contract.get("plan"), "tool_calls") or ()]
    choice, task = choose_toolsets(turn, toolsets, intent, [n for n in named if isinstance(n, str)])
    if choice is None:
        return tuple(described), 0
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
        pending_task=task,
        toolsets=list(choice.toolsets),
        offered=[d.name for d in offered],
        left_out=len(described) - len(offered),
        tokens=tokens,
        tokens_all=every,
        tokens_saved=every - tokens,
    )
    return offered, every - tokens


def pending_task(turn: Any) -> Any:
    """The session's pending task (the conversation graph's, not expired at the turn's
    start), or ``None``."""
    session = getattr(turn, "session", None)
    conversation = getattr(session, "conversation", None)
    if conversation is None or not getattr(conversation, "tasks", None):
        return None
    events = turn.events
    now = events.at(0) if len(events) else None
    if isinstance(now, str):
        now = datetime.fromisoformat(now)
    return conversation.pending(now) if now is not None else conversation.tasks[-1]


def choose_toolsets(
    turn: Any, toolsets: Any, intent: str | None, named: Sequence[str] = ()
) -> tuple[Any, str | None]:
    """The toolsets of the turn's ``intent``; when none serves it (a vague follow-up: "and
    the other one?"), those of the session's pending task's intent (its tool offered
    too). Returns the choice (``None``: every tool) and the pending task's id when it
    decided."""
    choice = toolsets.select(intent, named)
    if choice is not None:
        return choice, None
    task = pending_task(turn)
    if task is None or task.intent_type == intent:
        return None, None
    extra = [*named, task.tool] if task.tool else list(named)
    extra += [str(c.get("tool_name")) for c in task.plan if c.get("tool_name")]
    choice = toolsets.select(task.intent_type, extra)
    return (choice, task.id) if choice is not None else (None, None)


async def with_server_prompts(turn: Any, contract_name: str, memory: str) -> str:
    """``memory`` with the texts of the server prompts the turn's intent loads (see the
    module docs); ``memory`` itself when none applies."""
    prompts = turn.services.tools.prompts
    if not prompts or contract_name not in _PROMPTED:
        return memory
    intent_output = turn.by_contract.get("intent")
    intent = _get(intent_output, "intent_type")
    parameters = _get(intent_output, "parameters") or {}
    blocks = []
    counter = getattr(turn.services.context, "counter", None)
    assert turn.state is not None
    for prompt in prompts.values():
        if not prompt.applies(intent) or prompt.get is None:
            continue
        arguments = prompt.arguments_from(parameters)
        if arguments is None:
            turn.emit(
                PromptLoaded,
                state=turn.state.name,
                prompt=prompt.name,
                intent=intent,
                error="the intent lacks a parameter the prompt takes: "
                f"{sorted(prompt.arguments.values())}",
            )
            continue
        try:
            messages = await prompt.get(arguments)
        except Exception as exc:  # a server down: the turn goes on without its prompt
            turn.emit(
                PromptLoaded,
                state=turn.state.name,
                prompt=prompt.name,
                intent=intent,
                arguments=arguments,
                error=f"{type(exc).__name__}: {exc}",
            )
            continue
        text = "\n".join(m.get("text", "") for m in messages if m.get("text"))
        block = f"Guidance from {prompt.name}:\n{text}"
        blocks.append(block)
        turn.emit(
            PromptLoaded,
            state=turn.state.name,
            prompt=prompt.name,
            intent=intent,
            arguments=arguments,
            tokens=counter.count(block) if counter else 0,
        )
    if not blocks:
        return memory
    return "\n\n".join([*blocks, memory] if memory else blocks)


async def with_server_context(turn: Any, contract_name: str, memory: str) -> str:
    """``memory`` with the turn's intent's server prompts (the resources are a part of
    their own: :func:`read_resources`)."""
    return await with_server_prompts(turn, contract_name, memory)


def _reader(registry: Any, uri: str) -> Any:
    """The ``<server>.read_resource`` tool that can read ``uri`` (``None``: none can)."""
    for tool in registry.tools():
        if tool.name.endswith(".read_resource"):
            uris = tool.input_schema.get("properties", {}).get("uri", {}).get("enum", ())
            if uri in uris and registry.unavailable(tool) is None:
                return tool
    return None


async def read_resources(turn: Any, contract_name: str) -> tuple[str, dict[str, int]]:
    """The resources the turn's toolsets name, read for this request (see the module
    docs): their ``Reference URI:`` blocks as one text (the request's ``resources``, a
    part of the token budget of its own), and their tokens by URI."""
    registry = turn.services.tools
    toolsets = registry.toolsets
    if toolsets is None or contract_name not in _PROMPTED:
        return "", {}
    choice, _ = choose_toolsets(turn, toolsets, _get(turn.by_contract.get("intent"),
                                                     "intent_type"))
    if choice is None or not choice.resources:
        return "", {}
    counter = getattr(turn.services.context, "counter", None)
    blocks: list[str] = []
    tokens: dict[str, int] = {}
    errors: dict[str, str] = {}
    for uri in choice.resources:
        reader = _reader(registry, uri)
        if reader is None:
            errors[uri] = (
                "no ready MCP server offers it (set resources: true on the server that has it)"
            )
            continue
        try:
            result = reader.invoke({"uri": uri})
            read = await result if hasattr(result, "__await__") else result
        except Exception as exc:  # the turn goes on without it
            errors[uri] = f"{type(exc).__name__}: {exc}"
            continue
        block = f"Reference {uri}:\n{read.get('text', '')}"
        blocks.append(block)
        tokens[uri] = counter.count(block) if counter is not None else 0
    assert turn.state is not None
    turn.emit(
        ResourcesRead,
        state=turn.state.name,
        toolsets=list(choice.toolsets),
        tokens=tokens,
        errors=errors,
    )
    return "\n\n".join(blocks), tokens
