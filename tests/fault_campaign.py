"""A seeded random fault campaign on real PostgreSQL + Redis (shared by
``tests/test_fault_campaign.py`` and ``bench/faults.py``).

Sessions run turns concurrently; each turn gets 0–2 faults drawn by a seeded
``random.Random`` from :data:`KINDS`: tool hang / exception / garbage output (beyond its
output contract: wrong shape, NaN, U+0000, 300 levels deep), brain invalid JSON / wrong
types / huge output / exception / hang, ``CLIENT KILL`` of the lease's Redis connection
and ``pg_terminate_backend`` of the store's connections. Some turns are doubled (a second
``run_turn`` on the same session at the same moment), so a genuinely busy session is
refused. :func:`run_campaign` counts outcomes and the violations of four properties:

- every turn ends in IDLE by a declared route (no exception out of ``run_turn`` but
  ``SessionBusy`` for a session that one of our turns holds);
- no event lost (store seqs contiguous per session, every emitted event stored);
- no session unreadable (``get`` and ``events_after`` work for every session);
- no non-idempotent call executed twice (``transfer`` executions counted by ``ref``).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import psycopg

from hermes_fsm.errors import SessionBusy
from hermes_fsm.events.model import Event
from hermes_fsm.graph.model import Graph
from hermes_fsm.store.lease import RedisLease
from hermes_fsm.store.postgres import PostgresStore
from hermes_fsm.testing import demo_orchestrator
from hermes_fsm.tools.registry import ToolRegistry
from tests.support import INTENT_TOOLS, MEMORY_NONE, PLAN_EMPTY, graph_with

BRAIN_STATES = ["INTENT", "PLANNING", "RESPONSE", "MEMORY_COMMIT"]
BRAIN_KINDS = ["brain_invalid_json", "brain_wrong_types", "brain_huge", "brain_exception",
               "brain_hang"]
TOOL_KINDS = ["tool_hang", "tool_exception", "tool_garbage_shape", "tool_garbage_nan",
              "tool_garbage_nul", "tool_garbage_deep"]
INFRA_KINDS = ["redis_client_kill", "pg_terminate_backend"]
KINDS = BRAIN_KINDS + TOOL_KINDS + INFRA_KINDS
TOOLS = ["transfer", "lookup"]
OUTPUT_SCHEMA = {"type": "object", "properties": {"ok": {"type": "integer"}},
                 "required": ["ok"], "additionalProperties": False}


def campaign_graph(state_timeout_s: float = 0.15, budget_s: float = 4.0) -> Graph:
    """The bundled graph with short timeouts (hangs are cheap) and no backoff."""
    states = {s: {"timeout_s": state_timeout_s} for s in BRAIN_STATES}
    states["EXECUTION"] = {"timeout_s": 1.0}
    return graph_with(states, budget_s=budget_s)


@dataclass
class Fault:
    kind: str
    where: str  # a brain state or a tool name
    times: int  # how many attempts it hits (then the state answers normally)


@dataclass
class Findings:
    seed: int
    turns: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    planned: Counter[str] = field(default_factory=Counter)
    triggered: Counter[str] = field(default_factory=Counter)
    raised: list[str] = field(default_factory=list)
    bad_routes: list[str] = field(default_factory=list)
    false_busy: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    transfers: int = 0

    def violations(self) -> dict[str, list[str]]:
        return {name: items for name, items in (
            ("raised out of run_turn", self.raised), ("not back in IDLE by a declared route",
                                                     self.bad_routes),
            ("SessionBusy while none of our turns held the session", self.false_busy),
            ("store seqs not contiguous", self.gaps), ("emitted events not stored", self.lost),
            ("sessions unreadable", self.unreadable),
            ("non-idempotent call executed twice", self.twice)) if items}

    def report(self) -> str:
        lines = [f"seed {self.seed}: {self.turns} turns, {sum(self.planned.values())} faults "
                 f"planned, {sum(self.triggered.values())} triggered; "
                 f"{self.transfers} transfer executions",
                 "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
                 "faults triggered: " + ", ".join(f"{k} {v}" for k, v in
                                                  sorted(self.triggered.items()))]
        ended = sum(v for k, v in self.outcomes.items() if k in ("completed", "degraded",
                                                                 "partial"))
        accepted = self.turns - self.outcomes["busy (genuine)"]
        good = ended - len(self.bad_routes)
        lines.append(f"turns ending in IDLE by a declared route: {good}/{accepted} "
                     f"({100.0 * good / max(1, accepted):.1f} %)")
        for name, items in self.violations().items():
            lines.append(f"VIOLATION {name}: {len(items)}")
            lines.extend(f"  {item}" for item in items[:8])
        if not self.violations():
            lines.append("all properties held")
        return "\n".join(lines)


class FaultBrain:
    """A brain (the Brain protocol) that plays a happy tool-using turn and injects the
    faults planned for the turn named in the user's text."""

    name = "fault-campaign"

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign

    async def decide(self, request: Any) -> Any:
        key = request.text
        fault = self.campaign.take_fault(key, request.state)
        if fault is not None:
            if fault.kind == "brain_invalid_json":
                return '{"intent_type": "inventory_query", "confidence": '
            if fault.kind == "brain_wrong_types":
                return {"intent_type": 7, "parameters": "x", "confidence": "high",
                        "needs_tools": "maybe", "tool_calls": 3, "text": None,
                        "evidence": 1, "memory_updates": {}}
            if fault.kind == "brain_huge":
                return {"text": "x" * 3_000_000, "evidence": [], "intent_type": "x" * 3_000_000}
            if fault.kind == "brain_exception":
                raise RuntimeError(f"injected brain failure in {request.state}")
            if fault.kind == "brain_hang":
                await asyncio.Event().wait()
            if fault.kind == "redis_client_kill":
                await self.campaign.kill_redis()
            if fault.kind == "pg_terminate_backend":
                await self.campaign.kill_pg()
        if request.state == "INTENT":
            return INTENT_TOOLS
        if request.state == "PLANNING":
            if "plan" in request.outputs:
                return PLAN_EMPTY
            ref = self.campaign.new_ref(key)
            return {"tool_calls": [
                {"tool_name": "transfer", "arguments": {"ref": ref, "amount": 5},
                 "reasoning_trace": "pay"},
                {"tool_name": "lookup", "arguments": {"ref": ref}, "reasoning_trace": "check"}]}
        if request.state == "RESPONSE":
            return {"text": "done", "evidence": []}
        return MEMORY_NONE


def nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


class Campaign:
    def __init__(self, seed: int, *, faults: int, sessions: int, pg_url: str, redis_url: str,
                 double_rate: float = 0.08) -> None:
        self.seed, self.target, self.sessions = seed, faults, sessions
        self.pg_url, self.redis_url, self.double_rate = pg_url, redis_url, double_rate
        self.rng = random.Random(seed)
        tag = uuid.uuid4().hex[:10]
        self.app_name, self.client_name = f"hermes-campaign-{tag}", f"hermes-campaign-{tag}"
        self.store = PostgresStore(pg_url, schema=f"hermes_campaign_{tag}",
                                   application_name=self.app_name)
        self.lease = RedisLease(redis_url, prefix=f"hermes-test:{tag}:", ttl_s=2.0,
                                client_name=self.client_name)
        self.plans: dict[str, list[Fault]] = {}
        self.refs: Counter[str] = Counter()
        self.ref_faults: dict[str, list[Fault]] = {}
        self.executions: Counter[str] = Counter()
        self.started: dict[str, list[list[str]]] = defaultdict(list)  # ref -> call id tails
        self.emitted: dict[str, dict[int, tuple[str, str]]] = defaultdict(dict)
        self.inflight: Counter[str] = Counter()
        self.findings = Findings(seed)

    # --- faults -------------------------------------------------------------------------

    def plan_turn(self, key: str) -> None:
        faults = []
        for _ in range(self.rng.choice([0, 1, 1, 2])):
            kind = self.rng.choice(KINDS)
            where = self.rng.choice(TOOLS if kind in TOOL_KINDS else BRAIN_STATES)
            faults.append(Fault(kind, where, self.rng.choice([1, 1, 9])))
            self.findings.planned[kind] += 1
        self.plans[key] = faults

    def take_fault(self, key: str, where: str) -> Fault | None:
        for fault in self.plans.get(key, ()):
            if fault.where == where and fault.times > 0:
                fault.times -= 1
                self.findings.triggered[fault.kind] += 1
                return fault
        return None

    def describe(self, key: str) -> list[str]:
        return [f"{f.kind}@{f.where}" for f in self.plans.get(key, ())]

    def new_ref(self, key: str) -> str:
        self.refs[key] += 1
        return f"{key}/{self.refs[key]}"

    async def kill_redis(self) -> None:
        import redis.asyncio as aioredis

        admin = aioredis.Redis.from_url(self.redis_url)
        try:
            for client in await admin.client_list():
                if client.get("name") == self.client_name:
                    await admin.client_kill_filter(_id=client["id"])
        finally:
            await admin.aclose()

    async def kill_pg(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.pg_url, autocommit=True) as conn:
            await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name = %s", (self.app_name,))

    def tools(self) -> ToolRegistry:
        registry = ToolRegistry()

        async def misbehave(tool: str, ref: str) -> Any:
            key = ref.rsplit("/", 1)[0]
            fault = self.take_fault(key, tool)
            if fault is None:
                return None
            if fault.kind == "tool_hang":
                await asyncio.Event().wait()
            if fault.kind == "tool_exception":
                raise RuntimeError(f"injected {tool} failure")
            return {"tool_garbage_shape": ["not", "an", "object"],
                    "tool_garbage_nan": {"ok": float("nan"), "extra": float("inf")},
                    "tool_garbage_nul": {"ok": "a\x00b"},
                    "tool_garbage_deep": nest(300)}[fault.kind]

        @registry.tool(side_effects="write", timeout_s=0.2, output_schema=OUTPUT_SCHEMA,
                       description="Move money (not idempotent); ref names the intended call.")
        async def transfer(ref: str, amount: int) -> Any:
            self.executions[ref] += 1  # counted before any fault: it was executed
            bad = await misbehave("transfer", ref)
            return bad if bad is not None else {"ok": amount}

        @registry.tool(timeout_s=0.2, output_schema=OUTPUT_SCHEMA, description="Read a balance.")
        async def lookup(ref: str) -> Any:
            bad = await misbehave("lookup", ref)
            return bad if bad is not None else {"ok": 10}

        return registry

    # --- turns --------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        self.emitted[event.session_id][event.seq] = (event.turn_id, event.kind)
        if event.kind == "tool_call_started" and getattr(event, "tool", None) == "transfer":
            ref = str(getattr(event, "arguments", {}).get("ref"))
            self.started[ref].append(str(getattr(event, "call_id", "?")).rsplit("-", 2)[-2:])

    async def one_call(self, orchestrator: Any, sid: str, key: str, graph: Graph) -> None:
        findings = self.findings
        findings.turns += 1
        self.inflight[sid] += 1
        held_at_start = self.inflight[sid] > 1
        try:
            result = await orchestrator.run_turn(sid, key, user_id="u")
        except SessionBusy as exc:
            if held_at_start or self.inflight[sid] > 1:
                findings.outcomes["busy (genuine)"] += 1
            else:
                findings.outcomes["busy (false)"] += 1
                findings.false_busy.append(f"seed {self.seed} session {sid} turn {key!r}: {exc}")
            return
        except Exception as exc:  # a finding: nothing but SessionBusy may come out
            findings.outcomes["raised"] += 1
            findings.raised.append(f"seed {self.seed} session {sid} turn {key!r} faults "
                                   f"{self.describe(key)}: "
                                   f"{type(exc).__name__}: {str(exc)[:300]}")
            return
        finally:
            self.inflight[sid] -= 1
        findings.outcomes[result.status] += 1
        problem = route_problem(graph, result.path)
        if problem:
            findings.bad_routes.append(f"seed {self.seed} session {sid} turn {key!r}: {problem}")

    async def session_loop(self, orchestrator: Any, sid: str, graph: Graph,
                           turns: list[str]) -> None:
        for key in turns:
            if key.endswith("+double"):
                await asyncio.gather(self.one_call(orchestrator, sid, key, graph),
                                     self.one_call(orchestrator, sid, key + "'", graph))
            else:
                await self.one_call(orchestrator, sid, key, graph)

    async def run(self) -> Findings:
        graph = campaign_graph()
        orchestrator = demo_orchestrator(graph, brain=FaultBrain(self), tools=self.tools(),
                                         store=self.store, lease=self.lease)
        orchestrator.add_sink(self)
        per_session: dict[str, list[str]] = {f"s{i}": [] for i in range(self.sessions)}
        n = 0
        while sum(self.findings.planned.values()) < self.target:
            sid = f"s{n % self.sessions}"
            key = f"{sid} turn {len(per_session[sid])}"
            if self.rng.random() < self.double_rate:
                key += " +double"
                self.plans[key + "'"] = []
            self.plan_turn(key)
            per_session[sid].append(key)
            n += 1
        try:
            await asyncio.gather(*(self.session_loop(orchestrator, sid, graph, turns)
                                   for sid, turns in per_session.items()))
            await orchestrator.durable.write_all_late() if orchestrator.durable else None
            await self.check_store(list(per_session))
        finally:
            await self.cleanup(orchestrator)
        self.findings.transfers = sum(self.executions.values())
        self.findings.twice = [
            f"seed {self.seed} transfer ref {ref!r} executed {count} times (turn faults "
            f"{self.describe(ref.rsplit('/', 1)[0])}; started as {self.started[ref]})"
            for ref, count in sorted(self.executions.items()) if count > 1]
        return self.findings

    async def check_store(self, sids: list[str]) -> None:
        findings = self.findings
        for sid in sids:
            try:
                await self.store.get(sid)
                stored = await self.store.events_after(sid)
            except Exception as exc:
                findings.unreadable.append(f"seed {self.seed} session {sid}: "
                                           f"{type(exc).__name__}: {str(exc)[:300]}")
                continue
            seqs = [e["seq"] for e in stored]
            if seqs != list(range(1, len(seqs) + 1)):
                missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
                findings.gaps.append(f"seed {self.seed} session {sid}: {len(seqs)} events, "
                                     f"missing seqs {missing[:10]}")
            by_seq = {e["seq"]: (e.get("turn_id"), e.get("kind")) for e in stored}
            lost = [(seq, kind) for seq, (turn, kind) in sorted(self.emitted[sid].items())
                    if by_seq.get(seq) != (turn, kind)]
            if lost:
                findings.lost.append(f"seed {self.seed} session {sid}: {len(lost)} emitted "
                                     f"events not in the store, first {lost[:5]}")

    async def cleanup(self, orchestrator: Any) -> None:
        try:
            await orchestrator.aclose()
        except Exception as exc:
            self.findings.raised.append(f"seed {self.seed} aclose: {type(exc).__name__}: {exc}")
        import redis.asyncio as aioredis

        admin = aioredis.Redis.from_url(self.redis_url)
        async for k in admin.scan_iter(match=f"{self.lease.prefix}*"):
            await admin.delete(k)
        await admin.aclose()
        fresh = PostgresStore(self.pg_url, schema=self.store.schema,
                              application_name=self.app_name + "-drop")
        await fresh.drop_schema()
        await fresh.close()


def route_problem(graph: Graph, path: list[str]) -> str | None:
    """Why ``path`` is not a walk of declared routes from and back to the initial state."""
    initial = graph.initial
    if not path or path[0] != initial or path[-1] != initial:
        return f"path {path} does not start and end in {initial}"
    allowed = {(t.source, t.dest) for t in graph.transitions}
    allowed |= set(graph.failure_routes())
    for i, (a, b) in enumerate(itertools.pairwise(path)):
        if (a, b) in allowed or a == b or (b == initial and i == len(path) - 2):  # retry; abort
            continue
        return f"step {a} -> {b} is not a declared route (path {path})"
    return None


async def run_campaign(seed: int, *, faults: int, sessions: int, pg_url: str,
                       redis_url: str) -> Findings:
    return await Campaign(seed, faults=faults, sessions=sessions, pg_url=pg_url,
                          redis_url=redis_url).run()
