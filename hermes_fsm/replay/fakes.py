"""What a rerun runs a recording with: a brain, an executor and a memory answering from
the recording (offline: no model, no tool, no store, no waiting), and today's tools as
replay sees them (:func:`offline_catalog`, with no server started).

Each fake is a real implementation of its protocol; a test can drive one directly: give
it recorded turns and :meth:`begin` one by id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.contracts.tools import default_tool_contract_dir, load_tool_contracts
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.errors import BrainError, HermesError, MemoryStoreError, RetryableError
from hermes_fsm.events.model import ToolCallFinished, ToolCallStarted
from hermes_fsm.memory import Experience, LayeredRecall, MemoryItem, WriteOutcome
from hermes_fsm.replay.compare import event_fields
from hermes_fsm.tools.executor import Emit, truncate_for_model
from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["RecordedIds", "ReplayBrain", "ReplayExecutor", "ReplayMemory", "index_turn",
           "no_wait", "offline_catalog"]


def offline_catalog(registry: ToolRegistry | None = None,
                    contracts_dir: str | Path | None = None) -> ToolRegistry:
    """Today's tools as replay sees them, with no server started.

    ``registry`` (default: the demo tools) plus every pinned tool contract in
    ``contracts_dir`` (default: ``contracts/tools``) that it lacks — MCP tools among them —
    registered with their schemas only: plans and tool inputs are checked against them,
    and calling one is an error (replay never calls a tool).
    """
    if registry is None:
        registry = build_demo_registry()
    directory = Path(contracts_dir) if contracts_dir is not None else default_tool_contract_dir()
    if not directory.is_dir():
        return registry
    known = set(registry.names())
    for name, contract in sorted(load_tool_contracts(directory).items()):
        if name in known:
            continue

        def offline(*_: Any, _name: str = name, **__: Any) -> Any:
            raise HermesError(f"{_name} is known from its pinned contract only; replay does "
                              "not call tools")

        registry.add(Tool(name, contract.description, offline, contract.input_schema,
                          contract=contract, timeout_s=contract.timeout_s, source="contract"))
    return registry


async def no_wait(delay: float) -> None:
    """How a rerun waits out a retry's backoff: not at all."""
    return None


class RecordedIds:
    """Hands out the recorded turn ids, so call ids (which embed them) match."""

    def __init__(self, turn_ids: list[str]) -> None:
        self._turns = deque(turn_ids)

    def new(self, prefix: str) -> str:
        if prefix == "turn" and self._turns:
            return self._turns.popleft()
        return f"replay-{prefix}"


class ReplayBrain:
    """A brain that answers each state attempt with what the recording says the brain did.

    For every attempt of a state that asked the brain (a ``brain_call`` event), it returns
    the recorded raw output (the refused one, for a contract violation); for an attempt
    that failed before the brain answered, it raises the recorded error again (a timeout
    as :class:`TimeoutError`, at once).

    Args:
        turns: recorded turns (each a list of events, raw or typed); :meth:`begin` picks
            one by id. A replayer instead :meth:`load`\\ s each turn's outcomes as it goes.
    """

    name = "replay"

    def __init__(self, turns: Sequence[Sequence[Any]] = ()) -> None:
        self._turns = _turns_by_id(turns)
        self._current: dict[str, deque[Any]] = {}

    def begin(self, turn_id: str) -> None:
        """Answer from the recorded turn ``turn_id`` (one given to the constructor)."""
        self.load(index_turn(self._turns.get(turn_id, ()))[0])

    def load(self, outcomes: Mapping[str, Iterable[Any]]) -> None:
        """Answer from ``outcomes``: per state, what the brain returned (or raised), in
        attempt order."""
        self._current = {state: deque(queue) for state, queue in outcomes.items()}

    async def decide(self, request: BrainRequest) -> Any:
        queue = self._current.get(request.state)
        if not queue:
            raise BrainError(f"replay: the recording has no brain output for {request.state} "
                             f"attempt {request.attempt}")
        outcome = queue.popleft()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _turns_by_id(turns: Sequence[Sequence[Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for events in turns:
        if events:
            data = [event_fields(e) for e in events]
            out[data[0]["turn_id"]] = data
    return out


_INDEXED = frozenset({"brain_call", "state_output", "contract_violation", "handler_failed",
                      "timed_out", "tool_call_started", "tool_call_finished", "memory_recalled",
                      "memory_write"})


def index_turn(events: Sequence[Mapping[str, Any]]
               ) -> tuple[dict[str, list[Any]], list[tuple[Mapping[str, Any], Mapping[str, Any]]],
                          Mapping[str, Any] | None, list[Mapping[str, Any]]]:
    """What a recorded turn's events say the outside world did, in one pass:

    - per state, in attempt order, what the brain returned (or the error it ended in);
    - the tool calls, each as its (started, finished) events, in the order they started;
    - the memory recall (its ``memory_recalled`` event, if any);
    - the memory writes (``memory_write`` events).
    """
    outcomes: dict[str, list[Any]] = {}
    asked: set[tuple[str, int]] = set()
    pending: dict[str, Mapping[str, Any]] = {}
    calls: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    recall: Mapping[str, Any] | None = None
    writes: list[Mapping[str, Any]] = []
    indexed = _INDEXED
    for e in events:
        kind = e["kind"]
        if kind not in indexed:
            continue
        if kind == "brain_call":
            asked.add((e["state"], e["attempt"]))
        elif kind == "state_output":
            if (e["state"], e["attempt"]) in asked:
                raw = e.get("raw")
                outcomes.setdefault(e["state"], []).append(raw if raw is not None
                                                           else e["output"])
        elif kind == "contract_violation":
            if (e["state"], e["attempt"]) in asked:
                outcomes.setdefault(e["state"], []).append(e.get("raw"))
        elif kind == "handler_failed":
            if (e["state"], e["attempt"]) not in asked:
                error = (RetryableError(e["message"]) if e["retryable"]
                         else BrainError(e["message"]))
                outcomes.setdefault(e["state"], []).append(error)
        elif kind == "timed_out":
            if e["scope"] == "state" and (e["state"], e["attempt"]) not in asked:
                outcomes.setdefault(e["state"], []).append(TimeoutError())
        elif kind == "tool_call_started":
            pending[e["call_id"]] = e
        elif kind == "tool_call_finished":
            started = pending.pop(e["call_id"], None)
            if started is not None:
                calls.append((started, e))
        elif kind == "memory_recalled":
            recall = e
        elif kind == "memory_write":
            writes.append(e)
    calls.sort(key=lambda call: call[0].get("seq") or 0)  # the plan's order, not finishing
    return outcomes, calls, recall, writes


class ReplayExecutor:
    """Answers tool calls from the recording, in order; never runs a tool.

    Args:
        turns: recorded turns (raw or typed events); :meth:`begin` picks one by id. A
            replayer instead :meth:`load`\\ s each turn's calls as it goes.
        max_result_chars: as the tool executor's: an output the model saw truncated is
            truncated the same way.
    """

    def __init__(self, turns: Sequence[Sequence[Any]] = (), max_result_chars: int = 4000
                 ) -> None:
        self.max_result_chars = max_result_chars
        self._turns = _turns_by_id(turns)
        self._queue: deque[tuple[Mapping[str, Any], Mapping[str, Any]]] = deque()

    def begin(self, turn_id: str) -> None:
        """Answer from the recorded turn ``turn_id`` (one given to the constructor)."""
        self.load(index_turn(self._turns.get(turn_id, ()))[1])

    def load(self, calls: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> None:
        """Answer from ``calls``: (``tool_call_started``, ``tool_call_finished``) events."""
        self._queue = deque(calls)

    async def execute(self, calls: Sequence[tuple[str, str, dict[str, Any]]],
                      emit: Emit, caller: str = "anonymous", journal: Any = None
                      ) -> list[dict[str, Any]]:
        """The recorded envelopes; the events come in the recorded order (the calls of a
        plan run concurrently, so their start and finish events may interleave)."""
        later: list[tuple[int, Any, dict[str, Any]]] = []
        envelopes = [self._one(call_id, tool, arguments, later.append)
                     for call_id, tool, arguments in calls]
        for _, kind, fields in sorted(later, key=lambda item: item[0]):
            emit(kind, **fields)
        return envelopes

    def _one(self, call_id: str, tool: str, arguments: dict[str, Any],
             emit: Callable[[tuple[int, Any, dict[str, Any]]], None]) -> dict[str, Any]:
        if not self._queue:
            emit((1 << 62, ToolCallStarted, {"call_id": call_id, "tool": tool,
                                             "arguments": arguments}))
            return {"call_id": call_id, "tool_name": tool, "success": False,
                    "error_code": "REPLAY_NO_RECORDED_CALL",
                    "message": "the recording has no more tool calls", "retryable": False}
        started, finished = self._queue.popleft()
        emit((started.get("seq") or 0, ToolCallStarted,
              {**_payload(started, _STARTED_FIELDS), "call_id": call_id, "tool": tool,
               "arguments": arguments}))
        emit((finished.get("seq") or 0, ToolCallFinished,
              {**_payload(finished, _FINISHED_FIELDS), "call_id": call_id, "tool": tool}))
        if finished["ok"]:
            envelope = {"call_id": call_id, "tool_name": tool, "success": True,
                        "output": finished.get("output")}
            if finished.get("truncated"):  # the model saw a preview: show it the same one
                truncate_for_model(envelope, self.max_result_chars)
            return envelope
        return {"call_id": call_id, "tool_name": tool, "success": False, **finished["error"]}


class ReplayMemory:
    """Long-term memory as the recording saw it: recalls and write outcomes, per turn.

    A rerun must not depend on what a memory store holds today (other sessions of the
    same user wrote to it since), so recall returns the recorded items and a commit
    reports the recorded outcomes. Nothing is stored.

    Args:
        turns: recorded turns (raw or typed events); :meth:`begin` picks one by id. A
            replayer instead :meth:`load`\\ s each turn's recall and writes as it goes.
    """

    def __init__(self, turns: Sequence[Sequence[Any]] = ()) -> None:
        self._turns = _turns_by_id(turns)
        self._turn = ""
        self._recall: Mapping[str, Any] | None = None
        self._writes: list[Mapping[str, Any]] = []

    def begin(self, turn_id: str) -> None:
        """Answer from the recorded turn ``turn_id`` (one given to the constructor)."""
        _, _, recall, writes = index_turn(self._turns.get(turn_id, ()))
        self.load(turn_id, recall, writes)

    def load(self, turn_id: str, recall: Mapping[str, Any] | None,
             writes: list[Mapping[str, Any]]) -> None:
        """Answer for turn ``turn_id`` with its ``memory_recalled`` event (or none) and its
        ``memory_write`` events."""
        self._turn, self._recall, self._writes = turn_id, recall, writes

    async def recall(self, user_id: str, query: str, k: int = 5) -> list[Any]:
        event = self._recall
        if event is None:
            return []
        if event.get("error"):
            raise MemoryStoreError(event["error"])
        items = []
        for item in event.get("items", ()):
            created = datetime.fromisoformat(item["created_at"])
            items.append(MemoryItem(
                user_id=user_id, key=item["key"], value=item["value"], memory_type="fact",
                confidence=item.get("confidence", 0.0), status="active", created_at=created,
                updated_at=created, evidence="", turn_id="", item_id=item.get("item_id", ""),
                score=item.get("score")))
        return items

    async def walk(self, user_id: str, query: str, **options: Any) -> Any:
        """The recorded layered recall: the recorded items, and per layer as many
        placeholders as it found (the experience layer's with the recorded entry ids), in
        the recorded order (none for a recording made by a memory without layers)."""
        items = await self.recall(user_id, query)
        layers = {str(layer.get("layer")): layer for layer in
                  (self._recall or {}).get("layers", ())}
        experience = layers.get("experience", {})
        return LayeredRecall(
            working=[{} for _ in range(int(layers.get("working", {}).get("found", 0)))],
            semantic=items,
            experience=[Experience(entry_id=str(entry), kind="replayed", user_id=user_id,
                                   session_id="", turn_id="", at=datetime.min)
                        for entry in experience.get("entries", ())],
            keyed_by=tuple(experience.get("keyed_by", ())), order=tuple(layers))

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[Any], now: Any,
                    **context: Any) -> list[Any]:
        if turn_id != self._turn:
            return []
        return [WriteOutcome(e["key"], e["update_type"], e["status"], e.get("detail", ""))
                for e in self._writes]

    async def forget(self, user_id: str) -> int:
        return 0


_BASE_FIELDS = frozenset({"session_id", "turn_id", "seq", "at", "kind"})
_STARTED_FIELDS = frozenset(ToolCallStarted.model_fields) - _BASE_FIELDS
_FINISHED_FIELDS = frozenset(ToolCallFinished.model_fields) - _BASE_FIELDS


def _payload(event: Mapping[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    """A recorded event's own fields (not its ids, time or kind) that today's event has."""
    return {k: v for k, v in event.items() if k in fields}

