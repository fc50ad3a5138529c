"""Replaying recordings against today's contracts and today's graph.

Two checks, shaped like Temporal's replayer (one recording, many, an iterator underneath;
the failure returned as a value, raised by default):

- **validate** — every recorded state output, tool input and tool output is validated
  again against today's contracts (state contracts, tools' input and output schemas). A
  finding names the event, the contract (``name@version``) that now rejects it, the field
  and why: *contract drift*. Only the lines holding those payloads are parsed.
- **rerun** — today's graph and handlers are driven by a replay brain and replay tools
  fed from the recording (offline: no model, no tool, no network, no waiting), and the
  events they produce are compared with the recorded ones. The first divergence of each
  turn is reported with a readable diff: a different transition, a different tool call or
  arguments, an output that no longer validates. Recorded and rerun events are compared
  as field dicts (the recording's JSON, the engine's event data), on every field but the
  volatile ones; no event object is built on either side. ``context_built`` events are
  not compared (their recorded lines are not parsed), and by default a rerun builds no
  contexts: the replay brain does not read prompts (``build_contexts=True`` builds them
  as a model-backed run would). A message over today's input cap is refused either way.

>>> import asyncio
>>> from hermes_fsm.events.recording import parse_recording, recording_text
>>> from hermes_fsm.testing import demo_orchestrator
>>> orchestrator = demo_orchestrator()
>>> _ = asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left in the east?"))
>>> recording = parse_recording(recording_text(orchestrator, "s1"), "<memory>")
>>> replayer = Replayer()
>>> replayer.validate(recording).ok, replayer.rerun(recording).ok
(True, True)
"""

from __future__ import annotations

import asyncio
import difflib
import gc
import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import ValidationError

from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.contracts.base import ContractRegistry, split_ref
from hermes_fsm.errors import BrainError, ContractError, HermesError, RetryableError
from hermes_fsm.events.model import Event, ToolCallFinished, ToolCallStarted, event_data
from hermes_fsm.events.recording import Recording, load_recording
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.graph.model import Graph
from hermes_fsm.tools.executor import truncate_for_model

__all__ = ["Divergence", "Finding", "ReplayFailed", "ReplayResult", "Replayer",
           "offline_catalog"]

# Fields that differ between runs and say nothing about the turn's behaviour: times, ids,
# which brain answered and what it cost, how long a backoff waited.
# ``tokens`` (memory_recalled): counted by the configured token counter, which may differ
# between the recording process and this one (a tokenizer file, a calibrated ratio)
_VOLATILE = frozenset({"session_id", "turn_id", "seq", "at", "duration_ms", "brain", "usage",
                       "usage_source", "delay_s", "tokens"})

# Event kinds a rerun does not compare. ``context_built`` records what the recording
# process's budget and token counter made of each brain request; the replay brain answers
# from the recording whatever its context, and the counts depend on that process's
# settings (window, tokenizer, calibration), so comparing them would report settings,
# not behaviour. Their recorded lines are not even parsed, and a rerun builds no contexts
# unless asked (``Replayer(build_contexts=True)``).
_NOT_COMPARED = frozenset({"context_built"})

# The events ``validate`` reads: the payloads it checks, and where each turn begins.
_VALIDATED = frozenset({"turn_started", "state_output", "tool_call_started",
                        "tool_call_finished"})


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
        tools: today's tool registry (default: the demo tools), for tool inputs and
            outputs, and plans.
        contracts: today's contracts (default: the graph's).
        build_contexts: whether a rerun builds each brain request's context (token
            budget, rolling summary, ``context_built`` events) as a model-backed run does.
            Off by default: the replay brain answers from the recording whatever its
            prompt, and ``context_built`` events are not compared, so building them only
            costs time (about a fifth of a rerun). A message over today's input cap is
            refused either way (the rerun reports the ``ContextOverflow``).
    """

    def __init__(self, graph: Graph | str | Path | None = None, *, tools: Any = None,
                 contracts: ContractRegistry | None = None,
                 build_contexts: bool = False) -> None:
        if graph is None:
            graph = default_graph_path()
        self.graph = graph if isinstance(graph, Graph) else load_graph(graph)
        self.contracts = contracts or self.graph.contracts
        if tools is None:
            tools = offline_catalog()
        self.tools = tools
        self.build_contexts = build_contexts
        self._rerunner: Any = None
        self._replay: tuple[ReplayBrain, ReplayExecutor, ReplayMemory] | None = None
        self._checks: dict[str, tuple[Any, bool]] = {}  # contract name → (today's, has facts)

    # --- one recording -------------------------------------------------------------

    def validate(self, recording: Recording, raise_on_failure: bool = True) -> ReplayResult:
        """Re-validate every recorded state output, tool input and tool output against
        today's contracts.

        Only the events that carry those payloads are read (a lazily loaded recording
        parses only their lines).

        Raises:
            ReplayFailed: drift was found (unless ``raise_on_failure`` is False).
            RecordingError: a line to check is malformed.
        """
        events = recording.select(_VALIDATED)
        turns = len({e["turn_id"] for e in events})
        result = ReplayResult(recording.source, "validate", turns, recording.event_count)
        try:
            self._validate_events(recording.source, events, result.findings)
        except (KeyError, TypeError, AttributeError):
            recording.events  # noqa: B018 - a malformed event: raises, naming its line
            raise
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
        turns = recording.raw_turns(skip=_NOT_COMPARED)  # their lines are not even parsed
        result = ReplayResult(recording.source, "rerun", len(turns), recording.event_count)
        divergences: list[Divergence] = []
        try:
            await self._rerun(recording, turns, divergences)
        except HermesError as exc:
            result.error = f"{recording.source}: rerun could not run: {exc}"
            return _finish(result, raise_on_failure)
        except (KeyError, TypeError, AttributeError):
            recording.events  # noqa: B018 - a malformed event: raises, naming its line
            raise
        if divergences:  # a malformed recorded event diverges: say so, naming its line
            recording.events  # noqa: B018
        result.divergences = divergences
        return _finish(result, raise_on_failure)

    # --- many recordings -------------------------------------------------------------

    def validate_all(self, paths: Iterable[str | Path]) -> Iterator[ReplayResult]:
        """Validate each recording file; never raises for drift (see each result)."""
        yield from self._each(paths, self.validate)

    def rerun_all(self, paths: Iterable[str | Path]) -> Iterator[ReplayResult]:
        """Rerun each recording file; never raises for divergence (see each result).

        One event loop runs them all (not one per file, as :meth:`rerun` would; Ctrl-C
        stops the batch where it is). While it runs, the garbage collector leaves alone
        what existed before it started (``gc.freeze``) and runs less often: a batch
        creates many short-lived objects and keeps none (see :func:`_batch_gc`).
        """
        with asyncio.Runner() as runner, _batch_gc():
            # the loop's run_until_complete, not runner.run: that swaps the SIGINT handler
            # twice per call, which costs more than a small recording's turns
            run = runner.get_loop().run_until_complete

            def rerun(recording: Recording, raise_on_failure: bool) -> ReplayResult:
                return run(self.arerun(recording, raise_on_failure))

            yield from self._each(paths, rerun)

    @staticmethod
    def _each(paths: Iterable[str | Path], run: Any) -> Iterator[ReplayResult]:
        for path in paths:
            try:
                recording = load_recording(path, lazy=True)
                yield run(recording, raise_on_failure=False)
            except HermesError as exc:
                yield ReplayResult(str(path), run.__name__, 0, 0, error=str(exc))

    # --- validate ------------------------------------------------------------------

    def _validate_events(self, source: str, events: Sequence[Mapping[str, Any]],
                         findings: list[Finding]) -> None:
        """Check each payload against today's contract; findings in event order.

        References are checked too, as the engine does: plans against today's tools,
        answers' evidence against the facts established earlier in the same turn.
        """
        tools = self.tools
        find_tool = getattr(tools, "find", None)
        checks = self._checks
        facts: dict[str, set[Any]] = {}
        for e in events:
            kind = e["kind"]
            if kind == "state_output":
                recorded = e.get("contract")
                if not recorded:
                    continue
                name = split_ref(recorded)[0]
                check = checks.get(name)
                if check is None:
                    check = checks[name] = self._contract_check(name)
                contract, has_facts = check
                if contract is None:
                    findings.append(Finding(source, e["turn_id"], e["seq"], kind, e["state"],
                                            f"{name}@?", recorded,
                                            [{"loc": [], "msg": f"no contract named {name!r} "
                                              "today"}]))
                    continue
                turn_id = e["turn_id"]
                fact_ids = facts.get(turn_id)
                if fact_ids is None:
                    fact_ids = facts[turn_id] = set()
                context = {"tool_catalog": tools, "fact_ids": fact_ids}
                try:
                    output = contract.validate_output(e["output"], context)
                except ValidationError as exc:
                    findings.append(Finding(source, turn_id, e["seq"], kind, e["state"],
                                            contract.ref(), recorded, _errors(exc)))
                    continue
                if has_facts:
                    facts[turn_id] = {getattr(f, "id", None) for f in output.facts}
            elif kind == "tool_call_started":
                name = e["tool"]
                problem = tools.check_call(name, e["arguments"])
                if problem is not None:
                    findings.append(Finding(source, e["turn_id"], e["seq"], kind, name,
                                            f"tool {_tool_ref(find_tool, name)} input", "",
                                            [{"loc": ["arguments"], "msg": problem}]))
            elif kind == "tool_call_finished":
                # an output refused when it was recorded (or replaced by a fallback's) was
                # dealt with then: drift is today's contract refusing one that passed
                if not e["ok"] or e.get("output_violation") or e.get("fallback"):
                    continue
                name = e["tool"]
                tool = find_tool(name) if find_tool is not None else None
                if tool is None:  # unknown today: its tool_call_started says so
                    continue
                problem = tool.output_problem(e.get("output"))
                if problem is not None:
                    findings.append(Finding(source, e["turn_id"], e["seq"], kind, name,
                                            f"tool {_tool_ref(find_tool, name)} output", "",
                                            [{"loc": ["output"], "msg": problem}]))

    def _contract_check(self, name: str) -> tuple[Any, bool]:
        """Today's contract called ``name`` (``None`` if there is none), and whether its
        outputs establish facts (a ``facts`` list) that later outputs may cite."""
        try:
            contract = self.contracts.get(name)
        except ContractError:
            return None, False
        return contract, "facts" in contract.model_fields

    # --- rerun ---------------------------------------------------------------------

    async def _rerun(self, recording: Recording, turns: list[list[dict[str, Any]]],
                     divergences: list[Divergence]) -> None:
        """Run each recorded turn again and compare its events as they come (the rerun
        events of a turn are dropped once compared)."""
        orchestrator = self._orchestrator()
        assert self._replay is not None
        brain, executor, memory = self._replay
        orchestrator.ids = _RecordedIds([t[0]["turn_id"] for t in turns])
        header = recording.header
        session_id, user_id, source = header.session_id, header.user_id, recording.source
        try:
            for turn in turns:
                started = turn[0]
                if started["kind"] != "turn_started":
                    raise HermesError(f"turn {started['turn_id']} does not begin with "
                                      "turn_started; the recording is cut or out of order")
                outcomes, calls, recall, writes = _index_turn(turn)
                brain.load(outcomes)
                executor.load(calls)
                memory.load(started["turn_id"], recall, writes)
                result = await orchestrator.run_turn(session_id, started["text"],
                                                     user_id=started["user_id"] or user_id)
                divergence = _first_divergence(source, turn, result.events)
                if divergence is not None:
                    divergences.append(divergence)
        finally:
            orchestrator.session_cache.discard(session_id)

    def _orchestrator(self) -> Any:
        """One orchestrator (one machine) for every rerun, with one replay brain, executor
        and memory; what they answer is loaded per turn."""
        if self._rerunner is None:
            from hermes_fsm.engine.orchestrator import Orchestrator

            brain, executor, memory = ReplayBrain(), ReplayExecutor(), ReplayMemory()
            # the rerun compares each turn's events from its result: no session log
            self._rerunner = Orchestrator(self.graph, brain=brain, tools=self.tools,
                                          memory=memory, executor=executor,  # type: ignore[arg-type]
                                          sleep=_no_wait, event_log=False)
            if not self.build_contexts:  # the input cap is still checked (run_turn)
                self._rerunner.services.context = None
            self._replay = brain, executor, memory
        return self._rerunner


def offline_catalog(registry: Any = None, contracts_dir: str | Path | None = None) -> Any:
    """Today's tools as replay sees them, with no server started.

    ``registry`` (default: the demo tools) plus every pinned tool contract in
    ``contracts_dir`` (default: ``contracts/tools``) that it lacks — MCP tools among them —
    registered with their schemas only: plans and tool inputs are checked against them,
    and calling one is an error (replay never calls a tool).
    """
    from hermes_fsm.contracts.tools import default_tool_contract_dir, load_tool_contracts
    from hermes_fsm.tools.registry import Tool

    if registry is None:
        from hermes_fsm.demo.tools import build_demo_registry

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


@contextmanager
def _batch_gc() -> Iterator[None]:
    """The garbage collector tuned for a batch of replays, restored afterwards.

    The youngest generation is collected every ``_BATCH_GC_THRESHOLD`` net allocations
    rather than every 700 (a rerun allocates many small objects per turn and keeps none
    past its recording, so frequent collections find little and cost much), and what
    exists when the batch starts (modules, contracts, the replayer) is frozen out of the
    collections that still run (``gc.freeze``) — unless the process froze objects of its
    own, which are then left as they are.
    """
    thresholds = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    gc.set_threshold(_BATCH_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freeze:
            gc.unfreeze()


_BATCH_GC_THRESHOLD = 20_000


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
        self.load(_index_turn(self._turns.get(turn_id, ()))[0])

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
            data = [_fields(e) for e in events]
            out[data[0]["turn_id"]] = data
    return out


def _fields(event: Any) -> Mapping[str, Any]:
    """An event's fields: a raw event as is, a typed one's values."""
    return event if isinstance(event, Mapping) else event.__dict__


_INDEXED = frozenset({"brain_call", "state_output", "contract_violation", "handler_failed",
                      "timed_out", "tool_call_started", "tool_call_finished", "memory_recalled",
                      "memory_write"})


def _index_turn(events: Sequence[Mapping[str, Any]]
                ) -> tuple[dict[str, list[Any]], list[tuple[Mapping[str, Any], Mapping[str, Any]]],
                           Mapping[str, Any] | None, list[Mapping[str, Any]]]:
    """What a recorded turn's events say the outside world did, in one pass:

    - per state, in attempt order, what the brain returned (or the error it ended in);
    - the tool calls, each as its (started, finished) events, in the order they finished;
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
        self.load(_index_turn(self._turns.get(turn_id, ()))[1])

    def load(self, calls: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> None:
        """Answer from ``calls``: (``tool_call_started``, ``tool_call_finished``) events."""
        self._queue = deque(calls)

    async def execute(self, calls: Sequence[tuple[str, str, dict[str, Any]]],
                      emit: Any, caller: str = "anonymous", journal: Any = None
                      ) -> list[dict[str, Any]]:
        return [self._one(call_id, tool, arguments, emit) for call_id, tool, arguments in calls]

    def _one(self, call_id: str, tool: str, arguments: dict[str, Any],
             emit: Any) -> dict[str, Any]:
        if not self._queue:
            emit(ToolCallStarted, call_id=call_id, tool=tool, arguments=arguments)
            return {"call_id": call_id, "tool_name": tool, "success": False,
                    "error_code": "REPLAY_NO_RECORDED_CALL",
                    "message": "the recording has no more tool calls", "retryable": False}
        started, finished = self._queue.popleft()
        emit(ToolCallStarted, **{**_payload(started, _STARTED_FIELDS), "call_id": call_id,
                                 "tool": tool, "arguments": arguments})
        emit(ToolCallFinished, **{**_payload(finished, _FINISHED_FIELDS), "call_id": call_id,
                                  "tool": tool})
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
        _, _, recall, writes = _index_turn(self._turns.get(turn_id, ()))
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
        from datetime import datetime

        from hermes_fsm.errors import MemoryStoreError
        from hermes_fsm.memory import MemoryItem

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

    async def apply(self, user_id: str, turn_id: str, updates: Sequence[Any], now: Any,
                    **context: Any) -> list[Any]:
        from hermes_fsm.memory import WriteOutcome

        if turn_id != self._turn:
            return []
        return [WriteOutcome(e["key"], e["update_type"], e["status"], e.get("detail", ""))
                for e in self._writes]

    async def forget(self, user_id: str) -> int:
        return 0


_EVENT_CLASSES: dict[str, Any] = {cls.model_fields["kind"].default: cls
                                  for cls in get_args(get_args(Event)[0])}
_BASE_FIELDS = frozenset({"session_id", "turn_id", "seq", "at", "kind"})
_STARTED_FIELDS = frozenset(ToolCallStarted.model_fields) - _BASE_FIELDS
_FINISHED_FIELDS = frozenset(ToolCallFinished.model_fields) - _BASE_FIELDS


def _event_class(kind: str) -> Any:
    return _EVENT_CLASSES[kind]


def _payload(event: Mapping[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    """A recorded event's own fields (not its ids, time or kind) that today's event has."""
    return {k: v for k, v in event.items() if k in fields}


def _normal(data: Mapping[str, Any]) -> dict[str, Any]:
    """An event's fields without the volatile ones (times, ids, costs)."""
    return {k: v for k, v in data.items() if k not in _VOLATILE}


_Comparison = tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any], frozenset[str]]
_COMPARED: dict[str, _Comparison] = {}


def _comparison(kind: str) -> _Comparison | None:
    """For events of ``kind``: a getter of the fields a rerun compares (all but the
    volatile ones), the event's defaults, and its field names; ``None`` for no such kind."""
    found = _COMPARED.get(kind)
    if found is None:
        cls = _EVENT_CLASSES.get(kind)
        if cls is None:
            return None
        fields = [n for n in cls.model_fields if n not in _VOLATILE]
        defaults = dict(event_data(cls, {}))
        found = _COMPARED[kind] = (itemgetter(*fields), defaults, frozenset(defaults))
    return found


def _recorded(event: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded event as its typed event's fields: defaults filled (for an event recorded
    before a field with a default was added), unknown fields left out."""
    comparison = _comparison(event["kind"])
    if comparison is None:
        return dict(event)
    _, defaults, names = comparison
    data = defaults.copy()
    data.update((k, v) for k, v in event.items() if k in names)
    return data


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


def _first_divergence(source: str, recorded: Sequence[Any],
                      actual: Sequence[Any]) -> Divergence | None:
    """The first event where a rerun turn differs from its recording, on every field but
    the volatile ones; ``None`` when they agree. Events are compared as field dicts (the
    recording's raw JSON, the rerun's event data): no event object is built."""
    actual_data = getattr(actual, "_data", None)  # an EventList: compare its field dicts
    if actual_data is None:
        actual_data = [_fields(e) for e in actual]
    if recorded and type(recorded[0]) is not dict:
        recorded = [_fields(e) for e in recorded]
    skip = _NOT_COMPARED
    rec_events = [e for e in recorded if e["kind"] not in skip]
    act_events = [d for d in actual_data if d["kind"] not in skip]
    compared = _COMPARED
    for rec, act in zip(rec_events, act_events, strict=False):
        kind = act["kind"]
        if rec["kind"] == kind:
            comparison = compared.get(kind) or _comparison(kind)
            if comparison is not None:
                get = comparison[0]
                try:
                    if get(rec) == get(act):
                        continue
                except KeyError:  # recorded before a field was added: compare its default
                    if get(_recorded(rec)) == get(act):
                        continue
        return _divergence(source, rec_events, rec, act)
    if len(rec_events) == len(act_events):
        return None
    if len(rec_events) > len(act_events):
        return _divergence(source, rec_events, rec_events[len(act_events)], None)
    return _divergence(source, rec_events, None, act_events[len(rec_events)])


def _divergence(source: str, recorded: Sequence[Mapping[str, Any]],
                rec: Mapping[str, Any] | None, act: Mapping[str, Any] | None) -> Divergence:
    """The divergence at ``rec`` (the recorded event, ``None`` past the recorded end) and
    ``act`` (the rerun's, ``None`` past the rerun's end), with a readable diff."""
    exp = _normal(_recorded(rec)) if rec is not None else None
    now = _normal(act) if act is not None else None
    seq = rec["seq"] if rec is not None else recorded[-1]["seq"] + 1
    diff = "\n".join(difflib.unified_diff(
        _pretty(exp), _pretty(now), fromfile=f"recorded seq {seq}", tofile="rerun",
        lineterm=""))
    return Divergence(source, recorded[0]["turn_id"], seq, _reason(exp, now), exp, now, diff)


def _tool_ref(find_tool: Any, name: str) -> str:
    """``name@version`` of today's tool ``name`` (its name alone when it has no contract)."""
    tool = find_tool(name) if find_tool is not None else None
    contract = getattr(tool, "contract", None)
    return f"{name}@{contract.version}" if contract is not None else name


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
