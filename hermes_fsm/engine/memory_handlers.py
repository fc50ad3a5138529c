"""The memory parts of the default handlers: recall for a brain request, commit of updates.

- :func:`recalled_memory` returns the background block of what the current state's
  ``recall:`` (in the graph file) lists: ``memory`` is recalled once per turn (at the first
  state that lists it), through the memory's layers in order when it has them
  (``TieredMemory.walk``, seed 002 §2.4: the session's working memory, the semantic items,
  then the experience log keyed by the conversation graph's entities), and emits
  ``memory_recalled`` (items, scores, token cost, the layers in the order walked);
  ``past_outcomes`` is the walk's experience layer (tool calls, the entities' first; for
  a memory without layers, the outcomes of similar requests from the experience log).
  A session of a memory domain (``Session.domain``) recalls with ``domain=`` and commits
  with it in the context, so both stay inside the domain (seed 003 §5).
- :func:`apply_memory_updates` commits the turn's memory updates and experiences. A commit
  that fails never fails the turn: it emits ``memory_commit_failed`` and is retried in the
  background; when retries run out, a final ``memory_commit_failed`` is recorded.

How a retry ends is reported late, after the turn ended: its ``memory_write`` events (or
the final ``memory_commit_failed``) are events of the session and of the turn that made
the commit (its ``turn_id``), in order, through :meth:`TurnContext.emit_late`. A late
event gets its seq only when no turn of the session is running — never one inside
another turn's range — so it comes after the events of the turn that was running when
it landed:

- without a store, at once if the session is idle, else as soon as the running turn
  ends (to the session's log and the sinks);
- with a durable store, it is written as its own append under the session's lease, by
  the running turn before it releases the lease, else by the session's next turn in
  this process before its own events, else when the orchestrator closes (see
  :mod:`hermes_fsm.engine.durable`). Until then it is in neither the store nor the sinks.
"""

from __future__ import annotations

from typing import Any

from hermes_fsm._internal.redact import redact
from hermes_fsm.brain.brain_set import memory_keys
from hermes_fsm.contracts.states import MemoryCommit
from hermes_fsm.engine.turn import TurnContext
from hermes_fsm.errors import MemoryStoreError
from hermes_fsm.events.model import MemoryCommitFailed, MemoryRecalled, MemoryWrite
from hermes_fsm.graph.model import DEFAULT_RECALL
from hermes_fsm.memory import BackgroundCommits, format_recall
from hermes_fsm.memory.recall import estimate_tokens

__all__ = ["apply_memory_updates", "cancel_commits_of", "recalled_memory"]

_EXPERIENCE_KINDS = frozenset({"tool_call_started", "tool_call_finished", "handler_failed",
                               "tool_version_chosen", "tool_canary_rolled_back"})
"""The events :func:`experiences_of` reads (the others are not built as objects for it)."""

_BACKGROUND = BackgroundCommits()
"""Retries for memories that bring none of their own (``memory.background``)."""


async def cancel_commits_of(memory: Any, user_id: str) -> int:
    """Cancel the background retries of ``user_id``'s memory commits (``memory``'s own and
    the shared ones of memories that bring none); returns how many were pending."""
    cancelled = await _BACKGROUND.cancel_user(user_id)
    own = getattr(memory, "background", None)
    if isinstance(own, BackgroundCommits) and own is not _BACKGROUND:
        cancelled += await own.cancel_user(user_id)
    return cancelled


async def recalled_memory(turn: TurnContext) -> str:
    """The recall block of the current state for this turn's message ("" for nothing).

    What goes in is the state's ``recall`` (:attr:`~hermes_fsm.graph.model.StateSpec.recall`);
    memories are recalled once per turn.
    """
    recall = turn.state.recall if turn.state is not None else DEFAULT_RECALL
    if "memory" not in recall:
        return await _past_outcomes(turn) if "past_outcomes" in recall else ""
    if turn.memory is None:
        await _recall(turn)
    block = turn.memory or ""
    if "past_outcomes" in recall:
        return block + await _past_outcomes(turn)
    return block


async def _recall(turn: TurnContext) -> None:
    """Recall for the turn, once: through the memory's layers in order (``walk``: working →
    semantic → experience keyed by the conversation's entities) when it has them, else its
    ``recall``; sets ``turn.memory`` (the block) and ``turn.walked``, and emits
    ``memory_recalled`` when something was found in long-term memory."""
    state = turn.state.name if turn.state is not None else ""
    memory: Any = turn.services.memory
    keys = memory_keys(turn.services.brain)  # standing preferences, by key
    extra: dict[str, Any] = {"keys": keys} if keys else {}  # keys=, domain=: see Memory.recall
    if turn.session.domain is not None:  # the session's domain: recall stays in it
        extra["domain"] = turn.session.domain
    walk = getattr(memory, "walk", None)
    try:
        if callable(walk):
            walked = turn.walked = await walk(
                turn.user_id, turn.text, session_id=turn.session_id,
                entities=_entity_values(turn.session.conversation), **extra)
            items = walked.semantic
        else:
            items = await memory.recall(turn.user_id, turn.text, **extra)
    except MemoryStoreError as exc:  # recorded, and the turn goes on without memory
        turn.emit(MemoryRecalled, state=state, error=redact(str(exc)))
        turn.memory = ""
        return
    turn.memory = format_recall(items)
    walked = turn.walked
    if not items and not (walked is not None and walked.keyed_by):
        return  # nothing recalled costs nothing: no event (recordings stay stable)
    context = turn.services.context  # its counter, as context_built counts
    tokens = (context.counter.count(turn.memory) if context is not None
              else estimate_tokens(turn.memory))
    turn.emit(MemoryRecalled, state=state, tokens=tokens, items=[
        {"item_id": getattr(i, "item_id", ""), "key": i.key, "value": i.value,
         "score": None if i.score is None else round(i.score, 4),
         "confidence": i.confidence, "created_at": i.created_at.isoformat()}
        for i in items], layers=_layers(walked) if walked is not None else [])


def _entity_values(conv: Any, most: int = 8) -> list[str]:
    """The values (and canonical forms) of the conversation graph's active entities, the
    most recently mentioned first: what the experience layer is keyed by."""
    if conv is None:
        return []
    values: dict[str, None] = {}
    for node in reversed(conv.active()[-most:]):
        values.update(dict.fromkeys(v for v in (node.value, node.canonical) if v))
    return list(values)


def _layers(walked: Any) -> list[dict[str, Any]]:
    found = {"working": len(walked.working), "semantic": len(walked.semantic),
             "experience": len(walked.experience)}
    layers: list[dict[str, Any]] = []
    for name in walked.order:
        layer: dict[str, Any] = {"layer": name, "found": found.get(name, 0)}
        if name == "experience":
            layer["keyed_by"] = list(walked.keyed_by)
            layer["entries"] = [e.entry_id for e in walked.experience]
        layers.append(layer)
    return layers


async def _past_outcomes(turn: TurnContext) -> str:
    walked = turn.walked
    if walked is not None:  # the walk's experience layer: the entities' entries first
        similar = [e for e in walked.experience if e.kind == "tool_call"][:3]
    else:
        memory: Any = turn.services.memory
        experience = getattr(memory, "experience", None)
        if experience is None:
            return ""
        domain = turn.session.domain  # in a domain: its entries (and, shared, those of none)
        scope: dict[str, Any] = {} if domain is None else {
            "domain": domain, "shared": domain in getattr(memory, "shared_domains", ())}
        try:
            similar = await experience.similar_outcomes(turn.user_id, turn.text, 3, **scope)
        except MemoryStoreError:
            return ""  # planning works without it; recall already reported its state
    if not similar:
        return ""
    lines = ["", "Past outcomes of similar requests:"]
    for e in similar:
        result = "ok" if e.ok else f"failed ({e.error_code})"
        lines.append(f"- [{e.at:%Y-%m-%d}] {e.tool}({e.arguments}) → {result}")
    return "\n".join(lines)


async def apply_memory_updates(turn: TurnContext, output: MemoryCommit) -> None:
    """Commit the turn's memory updates and experiences; each outcome becomes an event."""
    # imported at the first commit, not with the handlers: loading a graph (hermes-fsm
    # graph) must not import the memory engines (numpy); tests/test_cli_imports.py
    from hermes_fsm.memory.turn_experience import experiences_of

    memory = turn.services.memory
    updates = output.memory_updates
    now = turn.services.clock.now()
    context: dict[str, Any] = {
        "session_id": turn.session_id, "text": turn.text, "answer": turn.answer() or "",
        "experiences": experiences_of(turn.events.of_kinds(_EXPERIENCE_KINDS), turn.user_id,
                                      turn.text)}
    if turn.session.domain is not None:  # the session's domain: the commit is written in it
        context["domain"] = turn.session.domain

    async def commit() -> Any:
        return await memory.apply(turn.user_id, turn.turn_id, updates, now, **context)

    keys = [u.key for u in updates]
    try:
        outcomes = await commit()
    except MemoryStoreError as exc:
        turn.emit(MemoryCommitFailed, attempts=1, error=redact(str(exc)), final=False,
                  keys=keys)
        background = getattr(memory, "background", None) or _BACKGROUND
        background.retry(
            commit,
            on_success=lambda attempt, outcomes: _report(turn, outcomes, updates, late=True),
            on_failure=lambda attempts, error: turn.emit_late(
                MemoryCommitFailed, attempts=attempts, error=redact(str(error)), final=True,
                keys=keys),
            user_id=turn.user_id)
        return
    _report(turn, outcomes, updates, late=False)


def _report(turn: TurnContext, outcomes: Any, updates: Any, late: bool) -> None:
    values = {u.key: u.value for u in updates}
    for outcome in outcomes:
        fields = {"key": outcome.key, "update_type": outcome.update_type,
                  "value": values.get(outcome.key), "status": outcome.status,
                  "detail": outcome.detail}
        if late:
            turn.emit_late(MemoryWrite, **fields)
        else:
            turn.emit(MemoryWrite, **fields)

