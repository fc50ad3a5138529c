"""Replaying recordings against today's contracts and today's graph.

Two checks, shaped like Temporal's replayer (one recording, many, an iterator underneath;
the failure returned as a value, raised by default):

- **validate** — every recorded state output and tool input is validated again against
  today's contracts. A finding names the event, the contract (``name@version``) that now
  rejects it, the field and why: *contract drift*.
- **rerun** — today's graph and handlers are driven by a replay brain and replay tools
  fed from the recording (offline: no model, no tool, no network, no waiting), and the
  events they produce are compared with the recorded ones. The first divergence of each
  turn is reported with a readable diff: a different transition, a different tool call or
  arguments, an output that no longer validates.

>>> import asyncio
>>> from hermes_fsm import Orchestrator
>>> from hermes_fsm.recording import parse_recording, recording_text
>>> orchestrator = Orchestrator()
>>> _ = asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left in the east?"))
>>> recording = parse_recording(recording_text(orchestrator, "s1"), "<memory>")
>>> replayer = Replayer()
>>> replayer.validate(recording).ok, replayer.rerun(recording).ok
(True, True)
"""

from __future__ import annotations

import asyncio
import difflib
import json
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from .brain import BrainRequest
from .contracts import ContractRegistry, split_ref
from .errors import BrainError, ContractError, HermesError, RetryableError
from .events import Event
from .executor import truncate_for_model
from .graph import Graph, default_graph_path, load_graph
from .recording import Recording, load_recording

__all__ = ["Divergence", "Finding", "ReplayFailed", "ReplayResult", "Replayer",
           "offline_catalog"]

# Fields that differ between runs and say nothing about the turn's behaviour: times, ids,
# which brain answered and what it cost, how long a backoff waited.
_VOLATILE = frozenset({"session_id", "turn_id", "seq", "at", "duration_ms", "brain", "usage",
                       "delay_s"})


@dataclass(frozen=True)
class Finding:
    """A recorded payload that today's contract rejects (contract drift)."""

    source: str
    turn_id: str
    seq: int
    kind: str
    subject: str  # the state, or the tool
    contract: str  # today's name@version that rejects it
    recorded_contract: str
    errors: list[dict[str, Any]]

    def describe(self) -> str:
        first = self.errors[0] if self.errors else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
        return (f"{self.source} seq {self.seq} ({self.kind} of {self.subject}): "
                f"{self.contract} rejects {where}: {first.get('msg', '?')}"
                + (f" (recorded with {self.recorded_contract})"
                   if self.recorded_contract and self.recorded_contract != self.contract else ""))


@dataclass(frozen=True)
class Divergence:
    """The first point where a rerun turn differs from its recording."""

    source: str
    turn_id: str
    seq: int  # the recorded event's sequence number (or the last one + 1)
    reason: str
    expected: dict[str, Any] | None
    actual: dict[str, Any] | None
    diff: str

    def describe(self) -> str:
        return f"{self.source} turn {self.turn_id} at seq {self.seq}: {self.reason}\n{self.diff}"


@dataclass
class ReplayResult:
    """What one replay of one recording found; ``ok`` when it found nothing."""

    source: str
    mode: Literal["validate", "rerun"]
    turns: int
    events: int
    findings: list[Finding] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.findings or self.divergences or self.error)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able summary (what ``--report`` writes)."""
        return {
            "source": self.source, "mode": self.mode, "ok": self.ok, "turns": self.turns,
            "events": self.events, "error": self.error,
            "findings": [f.__dict__ for f in self.findings],
            "divergences": [d.__dict__ for d in self.divergences],
        }


class ReplayFailed(HermesError):
    """A replay found drift or divergence (raised unless ``raise_on_failure=False``)."""

    def __init__(self, result: ReplayResult) -> None:
        self.result = result
        lines = [f.describe() for f in result.findings]
        lines += [d.describe() for d in result.divergences]
        if result.error:
            lines.append(result.error)
        super().__init__(f"{result.mode} of {result.source} failed:\n" + "\n".join(lines))


class Replayer:
    """Replays recordings against a graph (default: the bundled one) and its contracts.

    Args:
        graph: today's graph (a :class:`Graph` or a path).
        tools: today's tool registry (default: the demo tools), for tool inputs and plans.
        contracts: today's contracts (default: the graph's).
    """

    def __init__(self, graph: Graph | str | Path | None = None, *, tools: Any = None,
                 contracts: ContractRegistry | None = None) -> None:
        if graph is None:
            graph = default_graph_path()
        self.graph = graph if isinstance(graph, Graph) else load_graph(graph)
        self.contracts = contracts or self.graph.contracts
        if tools is None:
            tools = offline_catalog()
        self.tools = tools
        self._rerunner: Any = None

    # --- one recording -------------------------------------------------------------

    def validate(self, recording: Recording, raise_on_failure: bool = True) -> ReplayResult:
        """Re-validate every recorded state output and tool input against today's contracts.

        Raises:
            ReplayFailed: drift was found (unless ``raise_on_failure`` is False).
        """
        turns = recording.raw_turns()
        result = ReplayResult(recording.source, "validate", len(turns), len(recording.raw))
        for turn in turns:
            result.findings.extend(self._validate_turn(recording.source, turn))
        return _finish(result, raise_on_failure)

    def rerun(self, recording: Recording, raise_on_failure: bool = True) -> ReplayResult:
        """Run today's graph on the recording's inputs, offline; report first divergences.

        Runs its own event loop; from async code, ``await`` :meth:`arerun` instead.

        Raises:
            ReplayFailed: a turn diverged (unless ``raise_on_failure`` is False).
        """
        return asyncio.run(self.arerun(recording, raise_on_failure))

    async def arerun(self, recording: Recording, raise_on_failure: bool = True) -> ReplayResult:
        """:meth:`rerun`, for callers already in an event loop."""
        turns = recording.turns()
        result = ReplayResult(recording.source, "rerun", len(turns), len(recording.events))
        try:
            actual_turns = await self._rerun(recording, turns)
        except HermesError as exc:
            result.error = f"{recording.source}: rerun could not run: {exc}"
            return _finish(result, raise_on_failure)
        for recorded, actual in zip(turns, actual_turns, strict=True):
            divergence = _first_divergence(recording.source, recorded, actual)
            if divergence is not None:
                result.divergences.append(divergence)
        return _finish(result, raise_on_failure)

    # --- many recordings -------------------------------------------------------------

    def validate_all(self, paths: Iterable[str | Path]) -> Iterator[ReplayResult]:
        """Validate each recording file; never raises for drift (see each result)."""
        yield from self._each(paths, self.validate)

    def rerun_all(self, paths: Iterable[str | Path]) -> Iterator[ReplayResult]:
        """Rerun each recording file; never raises for divergence (see each result)."""
        yield from self._each(paths, self.rerun)

    @staticmethod
    def _each(paths: Iterable[str | Path], run: Any) -> Iterator[ReplayResult]:
        for path in paths:
            try:
                recording = load_recording(path, lazy=True)
                yield run(recording, raise_on_failure=False)
            except HermesError as exc:
                yield ReplayResult(str(path), run.__name__, 0, 0, error=str(exc))

    # --- validate ------------------------------------------------------------------

    def _validate_turn(self, source: str, events: Sequence[Mapping[str, Any]]
                       ) -> list[Finding]:
        findings: list[Finding] = []
        fact_ids: set[Any] = set()
        for e in events:
            kind = e["kind"]
            if kind == "state_output" and e.get("contract"):
                recorded = e["contract"]
                name, _ = split_ref(recorded)
                try:
                    contract = self.contracts.get(name)
                except ContractError:
                    findings.append(Finding(source, e["turn_id"], e["seq"], kind, e["state"],
                                            f"{name}@?", recorded,
                                            [{"loc": [], "msg": f"no contract named {name!r} "
                                              "today"}]))
                    continue
                context = {"tool_catalog": self.tools, "fact_ids": fact_ids}
                try:
                    output = contract.validate_output(e["output"], context)
                except ValidationError as exc:
                    findings.append(Finding(source, e["turn_id"], e["seq"], kind, e["state"],
                                            contract.ref(), recorded, _errors(exc)))
                    continue
                if "facts" in type(output).model_fields:
                    fact_ids = {getattr(f, "id", None) for f in output.facts}  # type: ignore[attr-defined]
            elif kind == "tool_call_started":
                problem = self.tools.check_call(e["tool"], e["arguments"])
                if problem is not None:
                    findings.append(Finding(source, e["turn_id"], e["seq"], kind, e["tool"],
                                            f"tool {e['tool']} input", "",
                                            [{"loc": ["arguments"], "msg": problem}]))
        return findings

    # --- rerun ---------------------------------------------------------------------

    async def _rerun(self, recording: Recording,
                     turns: list[list[Event]]) -> list[Sequence[Event]]:
        orchestrator = self._orchestrator()
        brain = ReplayBrain(turns)
        executor = ReplayExecutor(turns)
        memory = ReplayMemory(turns)
        orchestrator.services.brain = brain
        orchestrator.services.executor = executor
        orchestrator.services.memory = memory
        orchestrator.ids = _RecordedIds([t[0].turn_id for t in turns])
        header = recording.header
        session_id, user_id = header.session_id, header.user_id
        out: list[Sequence[Event]] = []
        try:
            for turn in turns:
                started: Any = turn[0]
                if started.kind != "turn_started":
                    raise HermesError(f"turn {started.turn_id} does not begin with "
                                      "turn_started; the recording is cut or out of order")
                brain.begin(started.turn_id)
                executor.begin(started.turn_id)
                memory.begin(started.turn_id)
                result = await orchestrator.run_turn(session_id, started.text,
                                                     user_id=started.user_id or user_id)
                out.append(result.events)
        finally:
            orchestrator.sessions().pop(session_id, None)
        return out

    def _orchestrator(self) -> Any:
        """One orchestrator (one machine) for every rerun; brain, tools, memory and ids are
        swapped per recording."""
        if self._rerunner is None:
            from .engine import Orchestrator

            self._rerunner = Orchestrator(self.graph, brain=ReplayBrain([]), tools=self.tools,
                                          memory=ReplayMemory([]), sleep=_no_wait)
        return self._rerunner


def offline_catalog(registry: Any = None, contracts_dir: str | Path | None = None) -> Any:
    """Today's tools as replay sees them, with no server started.

    ``registry`` (default: the demo tools) plus every pinned tool contract in
    ``contracts_dir`` (default: ``contracts/tools``) that it lacks — MCP tools among them —
    registered with their schemas only: plans and tool inputs are checked against them,
    and calling one is an error (replay never calls a tool).
    """
    from .tool_contracts import default_tool_contract_dir, load_tool_contracts
    from .tools import Tool

    if registry is None:
        from .demo_tools import build_demo_registry

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


async def _no_wait(delay: float) -> None:
    return None


class _RecordedIds:
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
    """

    name = "replay"

    def __init__(self, turns: Sequence[Sequence[Event]]) -> None:
        self._by_turn = {t[0].turn_id: _brain_outcomes(t) for t in turns if t}
        self._current: dict[str, deque[Any]] = {}

    def begin(self, turn_id: str) -> None:
        self._current = {state: deque(q) for state, q in self._by_turn.get(turn_id, {}).items()}

    async def decide(self, request: BrainRequest) -> Any:
        queue = self._current.get(request.state)
        if not queue:
            raise BrainError(f"replay: the recording has no brain output for {request.state} "
                             f"attempt {request.attempt}")
        outcome = queue.popleft()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _brain_outcomes(events: Sequence[Event]) -> dict[str, list[Any]]:
    """Per state, in attempt order: what the brain returned (or the error it ended in)."""
    outcomes: dict[str, list[Any]] = {}
    asked: set[tuple[str, int]] = set()
    for event in events:
        e: Any = event
        key = (getattr(e, "state", ""), getattr(e, "attempt", 0))
        if e.kind == "brain_call":
            asked.add(key)
        elif e.kind == "contract_violation" and key in asked:
            outcomes.setdefault(e.state, []).append(e.raw)
        elif e.kind == "state_output" and key in asked:
            outcomes.setdefault(e.state, []).append(e.raw if e.raw is not None else e.output)
        elif e.kind == "handler_failed" and key not in asked:
            error = (RetryableError(e.message) if e.retryable else BrainError(e.message))
            outcomes.setdefault(e.state, []).append(error)
        elif e.kind == "timed_out" and e.scope == "state" and key not in asked:
            outcomes.setdefault(e.state, []).append(TimeoutError())
    return outcomes


class ReplayExecutor:
    """Answers tool calls from the recording, in order; never runs a tool."""

    def __init__(self, turns: Sequence[Sequence[Event]], max_result_chars: int = 4000) -> None:
        self.max_result_chars = max_result_chars
        self._by_turn: dict[str, list[tuple[Any, Any]]] = {}
        for events in turns:
            pending: dict[str, Any] = {}
            calls: list[tuple[Any, Any]] = []
            for event in events:
                e: Any = event
                if e.kind == "tool_call_started":
                    pending[e.call_id] = e
                elif e.kind == "tool_call_finished" and e.call_id in pending:
                    calls.append((pending.pop(e.call_id), e))
            if events:
                self._by_turn[events[0].turn_id] = calls
        self._queue: deque[tuple[Any, Any]] = deque()

    def begin(self, turn_id: str) -> None:
        self._queue = deque(self._by_turn.get(turn_id, []))

    async def execute(self, calls: Sequence[tuple[str, str, dict[str, Any]]],
                      emit: Any, caller: str = "anonymous") -> list[dict[str, Any]]:
        return [self._one(call_id, tool, arguments, emit) for call_id, tool, arguments in calls]

    def _one(self, call_id: str, tool: str, arguments: dict[str, Any],
             emit: Any) -> dict[str, Any]:
        if not self._queue:
            emit_started = {"call_id": call_id, "tool": tool, "arguments": arguments}
            emit(_event_class("tool_call_started"), **emit_started)
            return {"call_id": call_id, "tool_name": tool, "success": False,
                    "error_code": "REPLAY_NO_RECORDED_CALL",
                    "message": "the recording has no more tool calls", "retryable": False}
        started, finished = self._queue.popleft()
        emit(type(started), **{**_payload(started), "call_id": call_id, "tool": tool,
                               "arguments": arguments})
        emit(type(finished), **{**_payload(finished), "call_id": call_id, "tool": tool})
        if finished.ok:
            envelope = {"call_id": call_id, "tool_name": tool, "success": True,
                        "output": finished.output}
            if finished.truncated:  # the model saw a preview: show it the same one
                truncate_for_model(envelope, self.max_result_chars)
            return envelope
        return {"call_id": call_id, "tool_name": tool, "success": False, **finished.error}


class ReplayMemory:
    """Long-term memory as the recording saw it: recalls and write outcomes, per turn.

    A rerun must not depend on what a memory store holds today (other sessions of the
    same user wrote to it since), so recall returns the recorded items and a commit
    reports the recorded outcomes. Nothing is stored.
    """

    def __init__(self, turns: Sequence[Sequence[Event]]) -> None:
        self._recalls: dict[str, Any] = {}
        self._writes: dict[str, list[Any]] = {}
        for events in turns:
            for event in events:
                e: Any = event
                if e.kind == "memory_recalled":
                    self._recalls[e.turn_id] = e
                elif e.kind == "memory_write":
                    self._writes.setdefault(e.turn_id, []).append(e)
        self._turn = ""

    def begin(self, turn_id: str) -> None:
        self._turn = turn_id

    async def recall(self, user_id: str, query: str, k: int = 5) -> list[Any]:
        from datetime import datetime

        from .errors import MemoryStoreError
        from .memory import MemoryItem

        event = self._recalls.get(self._turn)
        if event is None:
            return []
        if event.error:
            raise MemoryStoreError(event.error)
        items = []
        for item in event.items:
            created = datetime.fromisoformat(item["created_at"])
            items.append(MemoryItem(
                user_id=user_id, key=item["key"], value=item["value"], memory_type="fact",
                confidence=item.get("confidence", 0.0), status="active", created_at=created,
                updated_at=created, evidence="", turn_id="", item_id=item.get("item_id", ""),
                score=item.get("score")))
        return items

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[Any], now: Any,
                    **context: Any) -> list[Any]:
        from .memory import WriteOutcome

        return [WriteOutcome(e.key, e.update_type, e.status, e.detail)
                for e in self._writes.get(turn_id, [])]

    async def forget(self, user_id: str) -> int:
        return 0


def _event_class(kind: str) -> Any:
    from typing import get_args

    from .events import Event

    for cls in get_args(get_args(Event)[0]):
        if cls.model_fields["kind"].default == kind:
            return cls
    raise KeyError(kind)


def _payload(event: Any) -> dict[str, Any]:
    data: dict[str, Any] = event.model_dump()
    for key in ("session_id", "turn_id", "seq", "at", "kind"):
        data.pop(key, None)
    return data


def _normal(data: Mapping[str, Any]) -> dict[str, Any]:
    """An event's fields without the volatile ones (times, ids, costs)."""
    return {k: v for k, v in data.items() if k not in _VOLATILE}


def _reason(expected: Mapping[str, Any] | None, actual: Mapping[str, Any] | None) -> str:
    if actual is None:
        return "the rerun turn ended early"
    if expected is None:
        return "the rerun turn went on past the recorded end"
    ek, ak = expected.get("kind"), actual.get("kind")
    if ek == ak == "state_exited":
        return (f"a different transition out of {expected.get('state')}: recorded "
                f"{expected.get('trigger')} → {expected.get('dest')}, now "
                f"{actual.get('trigger')} → {actual.get('dest')}")
    if ek == ak == "state_entered":
        return (f"a different transition: recorded {expected.get('trigger')} → "
                f"{expected.get('state')}, now {actual.get('trigger')} → {actual.get('state')}")
    if ek == ak == "tool_call_started":
        if expected.get("tool") != actual.get("tool"):
            return (f"a different tool call: recorded {expected.get('tool')}, "
                    f"now {actual.get('tool')}")
        return f"different arguments for {actual.get('tool')}"
    if ek == "state_output" and ak == "contract_violation":
        return (f"the recorded output of {expected.get('state')} no longer validates "
                f"against {actual.get('contract')}")
    if ek == ak == "state_output":
        return f"a different output of {expected.get('state')}"
    return f"a different event: recorded {ek}, now {ak}"


def _first_divergence(source: str, recorded: Sequence[Event],
                      actual: Sequence[Event]) -> Divergence | None:
    actual_data = getattr(actual, "_data", None)  # an EventList: compare its field dicts
    if actual_data is None:
        actual_data = [e.__dict__ for e in actual]
    for index in range(max(len(recorded), len(actual_data))):
        exp = _normal(recorded[index].__dict__) if index < len(recorded) else None
        act = _normal(actual_data[index]) if index < len(actual_data) else None
        if exp == act:
            continue
        seq = recorded[index].seq if index < len(recorded) else recorded[-1].seq + 1
        diff = "\n".join(difflib.unified_diff(
            _pretty(exp), _pretty(act), fromfile=f"recorded seq {seq}", tofile="rerun",
            lineterm=""))
        return Divergence(source, recorded[0].turn_id, seq, _reason(exp, act), exp, act, diff)
    return None


def _pretty(data: Mapping[str, Any] | None) -> list[str]:
    if data is None:
        return ["(no event)"]
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False,
                      default=str).splitlines()


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors as JSON data (locations as lists)."""
    return json.loads(exc.json(include_url=False, include_context=False))  # type: ignore[no-any-return]


def _finish(result: ReplayResult, raise_on_failure: bool) -> ReplayResult:
    if raise_on_failure and not result.ok:
        raise ReplayFailed(result)
    return result
