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
import gc
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from hermes_fsm.contracts.base import ContractRegistry, split_ref
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.errors import ContractError, HermesError, ReplayFailed
from hermes_fsm.events.recording import Recording, load_recording
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.graph.model import Graph
from hermes_fsm.replay.compare import NOT_COMPARED, Divergence, first_divergence
from hermes_fsm.replay.fakes import (
    RecordedIds,
    ReplayBrain,
    ReplayExecutor,
    ReplayMemory,
    index_turn,
    no_wait,
    offline_catalog,
)
from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["Divergence", "Finding", "ReplayFailed", "ReplayResult", "Replayer",
           "offline_catalog"]

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


@dataclass
class ReplayResult:
    """What one replay of one recording found; ``ok`` when it found nothing.

    ``notes`` say what the replay could not see without it being a failure, e.g. a
    recording that starts after seq 1 (an in-memory session's event log keeps a window of
    turns: the turns before it are not in its ``recording_text``)."""

    source: str
    mode: Literal["validate", "rerun"]
    turns: int
    events: int
    findings: list[Finding] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)

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
            "notes": self.notes,
        }


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

    def __init__(self, graph: Graph | str | Path | None = None, *,
                 tools: ToolRegistry | None = None,
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
        self._rerunner: Orchestrator | None = None
        self._replay: tuple[ReplayBrain, ReplayExecutor, ReplayMemory] | None = None
        self._checks: dict[str, tuple[Any, bool]] = {}  # contract name → (today's, has facts)

    # --- one recording -------------------------------------------------------------

    def validate(self, recording: Recording, raise_on_failure: bool = True) -> ReplayResult:
        """Re-validate every recorded state output, tool input and tool output against
        today's contracts.

        A gate: every line is parsed and checked first (an object of a known kind, seqs
        one by one in order, see :attr:`Recording.raw`) — a recording that fails that is
        refused, naming the line; then the events that carry those payloads are checked.

        Raises:
            ReplayFailed: drift was found (unless ``raise_on_failure`` is False).
            RecordingError: a line is not JSON, not an event, of an unknown kind, or out of
                sequence (naming it).
        """
        validated = _VALIDATED
        events = [e for e in recording.raw if e["kind"] in validated]
        turns = len({e["turn_id"] for e in events})
        result = ReplayResult(recording.source, "validate", turns, recording.event_count,
                              notes=_outside(recording.raw))
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
        turns = recording.raw_turns(skip=NOT_COMPARED)  # their lines are not even parsed
        result = ReplayResult(recording.source, "rerun", len(turns), recording.event_count,
                              notes=_outside(turns[0] if turns else []))
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
        find_tool = tools.find
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
                tool = find_tool(name)
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
        orchestrator.ids = RecordedIds([t[0]["turn_id"] for t in turns])
        header = recording.header
        session_id, user_id, source = header.session_id, header.user_id, recording.source
        try:
            for turn in turns:
                started = turn[0]
                if started["kind"] != "turn_started":
                    raise HermesError(f"turn {started['turn_id']} does not begin with "
                                      "turn_started; the recording is cut or out of order")
                outcomes, calls, recall, writes = index_turn(turn)
                brain.load(outcomes)
                executor.load(calls)
                memory.load(started["turn_id"], recall, writes)
                result = await orchestrator.run_turn(session_id, started["text"],
                                                     user_id=started["user_id"] or user_id)
                divergence = first_divergence(source, turn, result.events)
                if divergence is not None:
                    divergences.append(divergence)
        finally:
            orchestrator.session_cache.discard(session_id)

    def _orchestrator(self) -> Orchestrator:
        """One orchestrator (one machine) for every rerun, with one replay brain, executor
        and memory; what they answer is loaded per turn."""
        if self._rerunner is None:
            brain, executor, memory = ReplayBrain(), ReplayExecutor(), ReplayMemory()
            # the rerun compares each turn's events from its result: no session log
            self._rerunner = Orchestrator(self.graph, brain=brain, tools=self.tools,
                                          memory=memory, executor=executor,
                                          sleep=no_wait, event_log=False)
            if not self.build_contexts:  # the input cap is still checked (run_turn)
                self._rerunner.services.context = None
            self._replay = brain, executor, memory
        return self._rerunner


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


def _tool_ref(find_tool: Callable[[str], Tool | None], name: str) -> str:
    """``name@version`` of today's tool ``name`` (its name alone when it has no contract)."""
    tool = find_tool(name)
    contract = tool.contract if tool is not None else None
    return f"{name}@{contract.version}" if contract is not None else name


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors as JSON data (locations as lists)."""
    return json.loads(exc.json(include_url=False, include_context=False))  # type: ignore[no-any-return]


def _outside(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """A note when the recording starts after seq 1: the turns before it are not in it."""
    first = events[0]["seq"] if events else 1
    if first <= 1:
        return []
    return [f"events 1-{first - 1} of the session are not in this recording (its first "
            f"event is seq {first}, turn {events[0]['turn_id']}): an in-memory session "
            "keeps a window of turns (event_log_turns), the rest is in a RecordingSink's "
            "file if one was attached; only the turns from there on were checked, and a "
            "rerun starts them without the earlier history"]


def _finish(result: ReplayResult, raise_on_failure: bool) -> ReplayResult:
    if raise_on_failure and not result.ok:
        raise ReplayFailed(result)
    return result
