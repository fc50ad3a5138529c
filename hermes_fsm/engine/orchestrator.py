"""The orchestrator: runs turns for many sessions concurrently on asyncio.

A turn walks the graph from its initial state back to it. For each state the engine
awaits the state's handler (under the state's timeout), validates the raw output
against the state's contract, runs the ``on_output`` hook, then fires ``done``: the
machine's guard refuses to fire for an unvalidated output and the graph's conditions
pick the destination. A violation, a timeout, or a :class:`RetryableError` fires
``retry`` (with the error handed back to the handler as ``turn.repair``) up to the
state's retry policy, with backoff; then ``fail`` takes the declared route. Any other
exception takes the route at once. When the turn budget runs out, ``abort`` takes the
turn back to the initial state with a partial answer. A turn always ends there.

>>> import asyncio
>>> from hermes_fsm.brain.rules import RulesBrain
>>> from hermes_fsm.demo.tools import build_demo_registry
>>> orchestrator = Orchestrator(brain=RulesBrain(), tools=build_demo_registry())
>>> result = asyncio.run(orchestrator.run_turn("s1", "How many A1001 are left in the east?"))
>>> result.status, "342" in result.answer, result.path[0] == result.path[-1] == "IDLE"
('completed', True, True)
"""

from __future__ import annotations

import asyncio
import dis
import inspect
import random
import time
import types
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaSerializer, SchemaValidator

from hermes_fsm._internal.json_safe import nul_position
from hermes_fsm._internal.redact import redact
from hermes_fsm._internal.time_limits import resume_within, within
from hermes_fsm.brain.protocol import Brain, Repair
from hermes_fsm.contracts.base import Contract
from hermes_fsm.conversation.graph import ConversationPolicy
from hermes_fsm.engine.archive import ArchivedSession, archive_idle
from hermes_fsm.engine.context import ContextBuilder, ContextConfig
from hermes_fsm.engine.durable import DurableSessions
from hermes_fsm.engine.fallback import fallback_answer
from hermes_fsm.engine.handlers import ask_brain
from hermes_fsm.engine.hooks import TurnHook, TurnHooks, call_hooks
from hermes_fsm.engine.memory_handlers import cancel_commits_of
from hermes_fsm.engine.session import Session, SessionCache, check_domain, declare_domain
from hermes_fsm.engine.turn import (
    EventSinks,
    OutputDump,
    Services,
    TurnContext,
    TurnResult,
    deliver_late,
)
from hermes_fsm.errors import (
    BrainError,
    HermesError,
    RetryableError,
    SessionBusy,
    SessionError,
    UsageError,
)
from hermes_fsm.events.model import (
    ContractViolation,
    HandlerFailed,
    Retry,
    RouteTaken,
    TimedOut,
)
from hermes_fsm.events.sinks import EventSink
from hermes_fsm.graph.loader import default_graph_path, load_graph
from hermes_fsm.graph.machine import GraphMachine
from hermes_fsm.graph.model import Graph, StateSpec
from hermes_fsm.memory import InProcessMemory, Memory
from hermes_fsm.sources import Clock, IdFactory, SystemClock, UuidIds
from hermes_fsm.store.lease import SessionLease
from hermes_fsm.store.protocol import DELETED_KINDS, SessionStore
from hermes_fsm.tools.executor import ToolExecutor, ToolRunner
from hermes_fsm.tools.mcp.servers import MCPServers
from hermes_fsm.tools.registry import ToolRegistry

__all__ = ["DEFAULT_SESSION_CACHE_BYTES", "Orchestrator"]

DEFAULT_SESSION_CACHE_BYTES = 64 * 1024 * 1024
"""The default bound of the sessions an orchestrator with a store caches (64 MiB)."""


class Orchestrator:
    """Runs turns of a graph for many sessions.

    The orchestrator takes its parts; it picks no backend. An orchestrator as a
    configuration says (a model or the rules brain, the demo tools and MCP servers,
    memory services, a session store) is :func:`hermes_fsm.config.build_orchestrator`'s;
    the bundled demo in one call is :func:`hermes_fsm.testing.demo_orchestrator`.

    Args:
        graph: a :class:`Graph`, a path to a graph file, or ``None`` for the bundled
            seven-state turn.
        brain: decides state outputs (e.g. :class:`~hermes_fsm.brain.rules.RulesBrain`,
            :class:`~hermes_fsm.brain.openai.OpenAIBrain`).
        tools: the tool registry (e.g. :func:`hermes_fsm.demo.tools.build_demo_registry`,
            or an empty :class:`~hermes_fsm.tools.registry.ToolRegistry`).
        memory: long-term memory (default: :class:`~hermes_fsm.memory.InProcessMemory`, a
            real in-process implementation of the protocol — every tier in this process,
            nothing kept past it — as ``store=None`` means sessions are not durable).
        sinks: extra event sinks (each gets every event); see :meth:`add_sink`.
        clock, ids: sources of time and ids (inject fixed ones for byte-stable events).
        busy_policy: ``"refuse"`` (a turn on a busy session raises :class:`SessionBusy`)
            or ``"queue"`` (it waits for the running turn).
        history_window: messages kept per session.
        random: source of jitter for retry backoff.
        sleep: how backoff waits (default ``asyncio.sleep``; replay passes a no-op).
        executor: the tool executor (default: one over ``tools``).
        mcp_servers: MCP servers feeding ``tools``; started by :meth:`start` (or
            ``async with``), stopped by :meth:`aclose`. Without them nothing needs starting.
        store: a session store (:mod:`hermes_fsm.store`) makes sessions durable: each
            step's events are appended before the next state starts, and any process
            with the same store can resume a session (see :mod:`hermes_fsm.engine.durable`;
            its :class:`~hermes_fsm.engine.durable.DurableSessions` is a turn hook, run
            ahead of ``hooks``). ``None`` (the default): sessions live in this process only.
        lease: one writer per session for a durable store (default: this process only;
            :class:`~hermes_fsm.store.lease.RedisLease` across processes).
        context: the token budget of brain requests — a
            :class:`~hermes_fsm.engine.context.ContextConfig` (default: its defaults) or a ready
            :class:`~hermes_fsm.engine.context.ContextBuilder`; see
            :mod:`hermes_fsm.engine.context`.
        event_log: keep each in-process session's event log (``Session.events``, what
            ``recording_text`` and the server's event replay read). ``False`` saves
            serializing every turn's events when nothing reads them there: a turn's events
            are still in its :class:`TurnResult`, the sinks and a durable store (a replay
            rerun runs this way).
        event_log_turns: keep only the last ``event_log_turns`` turns in each session's
            in-process event log (``None``: every turn). The dropped ones are still in a
            :class:`~hermes_fsm.events.recording.RecordingSink`'s file, if one is attached,
            and in a durable store; ``Session.dropped`` says what went.
        session_cache_bytes: with a ``store``, the bound in bytes of the sessions cached in
            this process (LRU; an evicted session is rebuilt from the store at its next
            turn; default :data:`DEFAULT_SESSION_CACHE_BYTES`; ``None``: unbounded).
            Without a store it does not apply: a session lives only in this process, so
            ``event_log_turns`` and ``history_window`` bound each one instead.
        hooks: turn hooks, called at defined points of every turn (see
            :mod:`hermes_fsm.engine.hooks`).
        conversation: the conversation layer's policy (the graph on or off, how long a
            pending clarification or approval waits, time decay; see
            :class:`~hermes_fsm.conversation.graph.ConversationPolicy`).

    Attributes:
        session_cache: the sessions held in this process
            (:class:`~hermes_fsm.engine.session.SessionCache`).
        durable: the durable layer over ``store`` (``None`` without a store).
        hooks: the turn hooks, by point (:class:`~hermes_fsm.engine.hooks.TurnHooks`).
    """

    def __init__(
        self,
        graph: Graph | str | Path | None = None,
        *,
        brain: Brain,
        tools: ToolRegistry,
        memory: Memory | None = None,
        sinks: Iterable[EventSink] = (),
        clock: Clock | None = None,
        ids: IdFactory | None = None,
        busy_policy: Literal["refuse", "queue"] = "refuse",
        history_window: int = 20,
        random: Any = None,
        sleep: Any = None,
        executor: ToolRunner | None = None,
        mcp_servers: MCPServers | None = None,
        store: SessionStore | None = None,
        lease: SessionLease | None = None,
        context: ContextConfig | ContextBuilder | None = None,
        event_log: bool = True,
        hooks: Iterable[TurnHook] = (),
        conversation: ConversationPolicy | None = None,
        event_log_turns: int | None = None,
        session_cache_bytes: int | None = DEFAULT_SESSION_CACHE_BYTES,
    ) -> None:
        if graph is None:
            graph = default_graph_path()
        if not isinstance(graph, Graph):
            graph = load_graph(graph)
        if busy_policy not in ("refuse", "queue"):
            raise UsageError(f"busy_policy must be 'refuse' or 'queue', not {busy_policy!r}")
        self.graph = graph
        self.machine = GraphMachine(graph)
        self.services = Services(
            brain=brain, tools=tools, executor=executor or ToolExecutor(tools),
            memory=memory if memory is not None else InProcessMemory(),
            clock=clock or SystemClock(),
            conversation=conversation or ConversationPolicy(),
        )
        self._sinks = EventSinks(sinks)
        self.ids = ids or UuidIds()
        self.busy_policy = busy_policy
        self.history_window = history_window
        if not isinstance(context, ContextBuilder):
            context = ContextBuilder(context, brain=brain, history_window=history_window)
        self.services.context = self.context = context
        self._random = random or _default_random
        self._sleep = sleep or asyncio.sleep
        for name, value in (("event_log_turns", event_log_turns),
                            ("session_cache_bytes", session_cache_bytes)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise UsageError(f"{name} must be a whole number >= 0 or None, not {value!r}")
        self._sessions: dict[str, Session] = {}  # read at every turn: a plain dict
        self.session_cache = SessionCache(
            self._sessions, session_cache_bytes if store is not None else None)
        self.event_log = event_log
        self.event_log_turns = event_log_turns
        self.mcp = mcp_servers
        self.store = store
        self.durable: DurableSessions | None = None
        self._closes: list[Any] = []  # what aclose closes last (close_with)
        if store is not None:
            self.durable = DurableSessions(self, store, lease)
            hooks = (self.durable, *hooks)
        elif lease is not None:
            raise UsageError("a lease guards a durable session store; pass store= as well "
                             "(e.g. hermes_fsm.store.SQLiteStore(path))")
        self.hooks = TurnHooks(hooks)
        # per state, worked out once: the handler to call, the contract's ref, the
        # contract's model_validate when its validate_output is Contract's own, the
        # contract class with how its event writes it (see _fast_dump), and whether the
        # handler can never suspend (see _never_suspends)
        self._plan = {name: (handler, spec.contract.ref() if spec.contract is not None else None,
                             _fast_validate(spec.contract), *_fast_dump(spec.contract),
                             _never_suspends(handler))
                      for name, spec in graph.states.items()
                      for handler in (spec.handler if spec.handler is not None else ask_brain,)}

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> Orchestrator:
        """Start the MCP servers (a no-op without them); their tools join when ready."""
        if self.mcp is not None:
            await self.mcp.start()
        return self

    def close_with(self, resource: Any) -> None:
        """Close ``resource`` (anything with an async ``aclose``) when this orchestrator
        closes, after its own parts, the last one given first: a configuration's tool bus
        (``build_orchestrator``), or a client of your own the tools use."""
        self._closes.append(resource)

    async def aclose(self) -> None:
        """Stop the MCP servers (a no-op without them); finish and close memory; then what
        :meth:`close_with` was given."""
        if self.mcp is not None:
            await self.mcp.aclose()
        close = getattr(self.services.memory, "close", None)
        if close is not None:  # waits (bounded) for background commits, then closes stores
            await close()
        close_brain = getattr(self.services.brain, "aclose", None)
        if close_brain is not None:  # e.g. the OpenAI-compatible brain's HTTP client
            await close_brain()
        if self.durable is not None:
            await self.durable.write_all_late()  # what landed after each session's last turn
            await self.durable.lease.close()
            await self.durable.store.close()
        for resource in reversed(self._closes):  # each time: a restarted one reopens them
            await resource.aclose()

    async def __aenter__(self) -> Orchestrator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- sinks ------------------------------------------------------------------------

    def add_sink(self, sink: EventSink) -> None:
        """Send every event from now on to ``sink`` too (a no-op if it gets them already).
        Safe while turns run: one added mid-turn sees the rest of that turn. Call it from
        the event loop's thread."""
        self._sinks.add(sink)

    def remove_sink(self, sink: EventSink) -> None:
        """Send ``sink`` no more events, from the next one on, running turns included
        (a no-op for a sink that is not attached)."""
        self._sinks.remove(sink)

    @property
    def sinks(self) -> tuple[EventSink, ...]:
        """The attached sinks, in the order they get each event (read-only: change them
        with :meth:`add_sink` and :meth:`remove_sink`)."""
        return self._sinks.current

    # --- sessions ---------------------------------------------------------------------

    def session(self, session_id: str | None = None, user_id: str | None = None, *,
                domain: str | None = None) -> Session:
        """The session ``session_id`` (created on first use, for ``user_id`` or
        ``"anonymous"``, in the memory ``domain``); a new id when ``None``. Without
        ``user_id`` an existing session is returned whoever owns it
        (``orchestrator.session("s1").events`` after a turn).

        ``domain`` (seed 003 §5, e.g. ``"credit_card"``) is the session's memory domain:
        the recall and the commits of its turns stay inside it (see
        :mod:`hermes_fsm.engine.memory_handlers`). A session declares it when it is
        created (before its first turn); ``None`` later means "the session's own".

        Raises:
            SessionError: ``user_id`` is given and the session belongs to another user, or
                ``domain`` is given and is not the domain the session was created in.
            UsageError: ``domain`` is blank.
        """
        if session_id is None:
            session_id = self.ids.new("session")
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = Session(
                session_id, user_id or "anonymous", self.graph.initial, self.event_log,
                self.event_log_turns, domain=check_domain(domain))
        elif user_id is not None and session.user_id != user_id:
            raise SessionError(f"session {session_id!r} belongs to another user; "
                               "use a session id of your own (or omit it to get a new one)")
        else:
            declare_domain(session, domain)
        return session

    def sessions(self) -> Mapping[str, Session]:
        """Every session of this orchestrator, by id (a read-only view of
        :attr:`session_cache`)."""
        return self.session_cache.view

    # --- turns ------------------------------------------------------------------------

    async def run_turn(self, session_id: str | None, text: str,
                       user_id: str = "anonymous", *, domain: str | None = None) -> TurnResult:
        """Run one turn: ``text`` from ``user_id`` on ``session_id``, back to the initial state.

        ``domain`` declares a new session's memory domain (see :meth:`session`); for an
        existing session it must be the session's own, or ``None``.

        Raises:
            UsageError: empty text; U+0000 in the text, the session id or the user id (no
                store can keep it as it is: it is refused rather than changed).
            ContextOverflow: the text alone is over its token budget (see
                :mod:`hermes_fsm.engine.context`; ``on_input_overflow: truncate`` cuts it instead).
            SessionBusy: a turn is running on this session (``busy_policy='refuse'``).
            SessionError: the session belongs to another user, or is of another memory
                domain than ``domain``.
            SessionArchived: the session was archived (durable store); start a new one.
        """
        if not isinstance(text, str) or not text.strip():
            raise UsageError("the message text is empty; pass the user's message as text")
        if "\x00" in text or "\x00" in (session_id or "") or "\x00" in str(user_id):
            _refuse_nul(text=text, session_id=session_id, user_id=user_id)
        self.context.check_input(text)  # a message over its token budget: refused up front
        if self.durable is not None:
            return await self.durable.run_turn(session_id, text, user_id, domain=domain)
        session = self.session(session_id, user_id, domain=domain)
        if session.busy:
            if self.busy_policy == "refuse":
                raise SessionBusy(session.session_id)
            async with session.lock:
                return await self.drive_turn(self.new_turn(session, text, user_id))
        if self.busy_policy == "queue":
            async with session.lock:
                return await self.drive_turn(self.new_turn(session, text, user_id))
        return await self.drive_turn(self.new_turn(session, text, user_id))

    async def resume(self, session_id: str) -> TurnResult | None:
        """Finish the session's interrupted turn from its last stored step (durable store).

        A turn whose process died is also finished automatically before the next turn on
        its session runs. Returns ``None`` when the session has no unfinished turn.

        Raises:
            UsageError: the orchestrator has no store.
            SessionError: the session is not in the store.
            SessionBusy: a turn is running on it.
        """
        if self.durable is None:
            raise UsageError("resume needs a durable session store: Orchestrator(store=...)")
        return await self.durable.resume(session_id)

    async def archive_idle(self, older_than: timedelta, *, now: datetime | None = None,
                           dry_run: bool = False) -> list[ArchivedSession]:
        """Archive the sessions idle for ``older_than`` (durable store): each is summarized,
        the summary goes to its user's long-term memory, and turns on it are refused from
        then on (see :mod:`hermes_fsm.engine.archive`).

        Raises:
            UsageError: the orchestrator has no store.
        """
        if self.durable is None:
            raise UsageError("archiving needs a durable session store: Orchestrator(store=...)"
                             " (hermes_fsm.store.SQLiteStore or PostgresStore)")
        return await archive_idle(self.durable, older_than, now=now, dry_run=dry_run)

    async def forget_user(self, user_id: str) -> dict[str, Any]:
        """Remove ``user_id`` everywhere this orchestrator keeps her: her memory commits
        still retried in the background are cancelled (none writes after this), every
        memory tier and the experience log forget her, the session store deletes her
        sessions with their messages, events, checkpoints and journalled calls, and her
        sessions cached in this process (with their late events) are dropped. A later
        turn on one of her old session ids starts a new session with no history.

        Returns what was removed, per store: ``sessions``, ``messages``, ``events``,
        ``checkpoints``, ``effects`` (the session store; 0 without one), ``memory``
        (records per tier and ``pending_commits`` cancelled), ``experience`` (entries of
        the experience log) and ``cached_sessions`` (dropped from this process).

        Raises:
            SessionBusy: a turn of hers is running in this process (forget her after it).
            StoreError, MemoryStoreError: a store failed; calling again finishes the job.
        """
        busy = [s for s in self._sessions.values() if s.user_id == user_id and s.busy]
        if busy:
            raise SessionBusy(busy[0].session_id, f"a turn of user {user_id!r} is running "
                              "on it; forget her when it has finished")
        memory = self.services.memory
        pending = await cancel_commits_of(memory, user_id)
        report = getattr(memory, "forget_report", None)
        if report is not None:
            tiers = dict(await report(user_id))
        else:  # a Memory of its own: it says only how many records it removed
            tiers = {"records": await memory.forget(user_id)}
        tiers["pending_commits"] = tiers.get("pending_commits", 0) + pending
        experience = tiers.pop("experience", 0)
        cached = [sid for sid, s in self._sessions.items() if s.user_id == user_id]
        for sid in cached:
            self.session_cache.discard(sid)
        counts = dict.fromkeys(DELETED_KINDS, 0)
        if self.durable is not None:
            self.durable.drop_late_of(user_id)
            counts = await self.durable.store.delete_user(user_id)
        return {**counts, "memory": tiers, "experience": experience,
                "cached_sessions": len(cached)}

    def new_turn(self, session: Session, text: str, user_id: str, *,
                 turn_id: str | None = None) -> TurnContext:
        """A new turn of ``session``: ``text`` from ``user_id``, on this orchestrator's
        services and sinks, with a new turn id (or ``turn_id``, for a turn rebuilt from its
        stored events); nothing has run yet (run it with :meth:`drive_turn`)."""
        return TurnContext(session, turn_id or self.ids.new("turn"), user_id, text,
                           self.services, self._sinks)

    async def drive_turn(self, turn: TurnContext, *, resumed: bool = False) -> TurnResult:
        """Run ``turn`` until its session is back in the initial state; the turn hooks are
        called on the way (:mod:`hermes_fsm.engine.hooks`).

        ``turn`` is a new one (:meth:`new_turn`: it starts with ``turn_started``), or with
        ``resumed`` one rebuilt from its stored events
        (:func:`~hermes_fsm.engine.durable.rebuild_turn`), which goes on from the state its
        session is in. The caller holds the session: this neither checks nor waits for a
        busy session, nor takes a durable session's lease — :meth:`run_turn` and
        :meth:`resume` do, and call this.

        Raises:
            whatever a handler raised past its routes, a hook raised, or cancellation.
        """
        session = turn.session
        session.busy = True
        started = time.perf_counter()
        hooks = self.hooks
        graph = self.graph
        status = "completed"
        loop = asyncio.get_running_loop()
        # the loop's clock; asyncio's own loop reads time.monotonic (called directly here)
        clock = time.monotonic if type(loop).time is _BASE_LOOP_TIME else loop.time
        deadline = clock() + graph.budget_s
        try:
            if hooks.pre_turn:
                await call_hooks(hooks.pre_turn, session=session, turn=turn, resumed=resumed)
            if not resumed:
                turn.emit_started(graph.name, session.domain)
                self.machine.fire("start", session, turn)
                if hooks.post_step:
                    await _post_step(hooks, session, turn)
            try:
                initial, states, run_state = graph.initial, graph.states, self._run_state
                context = turn.validation_context()  # one dict for the whole turn
                post_step = hooks.post_step
                while session.state != initial:
                    if clock() >= deadline:
                        raise _BudgetExceeded
                    await run_state(states[session.state], session, turn, deadline, clock,
                                    context)
                    if post_step and session.state != initial:
                        await _post_step(hooks, session, turn)  # the step, before the next
            except _BudgetExceeded:
                status = "partial"
                turn.emit(TimedOut, scope="turn", state=session.state, attempt=turn.attempt,
                          limit_s=graph.budget_s)
                stopped_in = session.state
                self.machine.fire("abort", session, turn)
                partial = turn.answer() or graph.partial_answer.format(state=stopped_in)
                result = self._finish(session, turn, status, partial, started)
            else:
                if turn.routes:
                    status = "degraded"
                elif turn.awaiting is not None:  # a clarification or an approval waits
                    status = turn.awaiting
                answer = turn.answer() or fallback_answer(graph, turn.events)  # never blank
                result = self._finish(session, turn, status, answer, started)
            if hooks.post_turn:
                await call_hooks(hooks.post_turn, session=session, turn=turn, result=result)
            return result
        except BaseException as exc:
            if session.state != graph.initial:  # cancelled or an engine bug: never stay mid-turn
                self.machine.fire("abort", session, turn)
            if hooks.turn_failed:
                await call_hooks(hooks.turn_failed, session=session, turn=turn, exception=exc)
            raise
        finally:
            session.record(turn.events)
            session.busy = False
            if session.late:  # late events of an earlier turn that waited for this one
                deliver_late(session, self._sinks.current)

    def _finish(self, session: Session, turn: TurnContext, status: str, answer: str,
                started: float) -> TurnResult:
        duration_ms = (time.perf_counter() - started) * 1000.0
        turn.emit_finished(status, answer, duration_ms)
        session.remember("user", turn.text, self.history_window)
        session.remember("assistant", answer, self.history_window)
        return TurnResult(session.session_id, turn.turn_id, status, answer, turn.path,
                          turn.events, duration_ms)

    async def _run_state(self, spec: StateSpec, session: Session, turn: TurnContext,
                         deadline: float, clock: Any, context: Mapping[str, Any]) -> None:
        """One attempt at a state: handler → guard → hook → ``done``; or retry, or route.

        The state's timeout is cut short by the turn's deadline; running into the deadline
        raises ``_BudgetExceeded`` (the turn's budget, not the state's, ran out).
        ``context`` is the turn's ``validation_context()``.
        """
        turn.state = spec
        reason: Literal["violation", "timeout", "error"]
        try:
            handler, ref, fast, model, dump, settles = self._plan[spec.name]
            raw = handler(turn)
            if type(raw) is _COROUTINE:
                if settles:  # it cannot suspend: no time limit to arm, nothing to step
                    raw = await raw
                else:  # stepped eagerly, as `within` does
                    try:
                        yielded = raw.send(None)
                    except StopIteration as done:
                        raw = done.value
                    else:  # its time limit starts now, as within's does (most never suspend)
                        raw = await resume_within(raw, yielded,
                                                  _limit(spec.timeout_s, deadline, clock))
            elif inspect.isawaitable(raw):
                raw = await within(raw, _limit(spec.timeout_s, deadline, clock))
            if fast is not None and type(raw) is dict:
                # what Contract.validate_output does with a dict, without its type checks
                try:
                    output = fast(raw, context=context)
                    raw = None  # a dict: the event keeps no raw text
                except ValidationError as exc:
                    output = self._refuse(spec, raw, turn, exc)
            else:
                output = self._validate(spec, raw, turn)
            if output is not _REFUSED:
                turn.accept(output)
                if spec.on_output is not None:
                    await self._call(spec.on_output, _limit(spec.timeout_s, deadline, clock),
                                     turn, output)
                if raw is not None and type(raw) is not str and not isinstance(raw, str):
                    raw = None  # the event keeps raw text only
                if type(output) is model:
                    turn.emit_output(spec.name, ref, output, raw, dump)
                else:
                    turn.emit_output(spec.name, ref, _dump(output), raw)
                if self.machine.fire("done", session, turn):
                    return
                raise HermesError(  # the loader guarantees an unconditional way out
                    f"no transition out of {spec.name} accepted the output; check the graph")
            reason = "violation"
        except TimeoutError:
            if clock() >= deadline:
                raise _BudgetExceeded from None
            reason = "timeout"
            turn.emit(TimedOut, scope="state", state=spec.name, attempt=turn.attempt,
                      limit_s=spec.timeout_s or 0.0)
            turn.repair = Repair.timeout(spec.timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            retryable = isinstance(exc, RetryableError)
            turn.emit(HandlerFailed, state=spec.name, attempt=turn.attempt,
                      error_type=type(exc).__name__, message=redact(str(exc)),
                      retryable=retryable)
            if not retryable:
                why = "brain_error" if isinstance(exc, BrainError) else "handler_error"
                self._route(spec, session, turn, why)
                return
            reason = "error"
            turn.repair = Repair.error(exc)
        policy = spec.retry
        if turn.attempt < policy.max_attempts:
            delay = policy.delay(turn.attempt, self._random)
            turn.emit(Retry, state=spec.name, attempt=turn.attempt + 1, reason=reason,
                      delay_s=delay)
            if delay > 0:
                if clock() + delay >= deadline:
                    await self._sleep(max(0.0, deadline - clock()))
                    raise _BudgetExceeded
                await self._sleep(delay)
            repair = turn.repair
            self.machine.fire("retry", session, turn)
            turn.repair = repair
            return
        self._route(spec, session, turn, f"{reason}: {policy.max_attempts} attempt(s) exhausted")

    def _validate(self, spec: StateSpec, raw: Any, turn: TurnContext) -> Any:
        contract = spec.contract
        if contract is None:
            return raw
        try:
            return contract.validate_output(raw, turn.validation_context())
        except ValidationError as exc:
            return self._refuse(spec, raw, turn, exc)

    @staticmethod
    def _refuse(spec: StateSpec, raw: Any, turn: TurnContext, exc: ValidationError) -> Any:
        """Emit the violation of the state's contract by ``raw``; returns ``_REFUSED``."""
        contract = spec.contract
        assert contract is not None
        errors = exc.errors(include_url=False, include_context=False)
        turn.emit(ContractViolation, state=spec.name, attempt=turn.attempt,
                  contract=contract.ref(), errors=_jsonable(errors), raw=_jsonable(raw))
        turn.repair = Repair.violation(contract.ref(), exc)
        return _REFUSED

    def _route(self, spec: StateSpec, session: Session, turn: TurnContext, reason: str) -> None:
        turn.routes += 1
        turn.emit(RouteTaken, state=spec.name, dest=spec.on_failure or self.graph.initial,
                  reason=reason, attempts=turn.attempt)
        self.machine.fire("fail", session, turn)

    @staticmethod
    async def _call(fn: Any, timeout_s: float | None, *args: Any) -> Any:
        """Call a handler or hook; await it under ``timeout_s`` if it returns an awaitable
        (:func:`~hermes_fsm._internal.time_limits.within`: one that finishes without
        suspending runs with no timer)."""
        result = fn(*args)
        if type(result) is not types.CoroutineType and not inspect.isawaitable(result):
            return result
        return await within(result, timeout_s)


def _post_step(hooks: TurnHooks, session: Session, turn: TurnContext) -> Any:
    """The ``post_step`` hooks of the step that just fired its transition."""
    path = turn.path
    return call_hooks(hooks.post_step, session=session, turn=turn,
                      source=path[-2] if len(path) > 1 else path[-1], dest=path[-1])


def _fast_validate(contract: type[Contract] | None) -> Any:
    """What ``contract.model_validate`` calls (its validator's ``validate_python``: the
    ``__pydantic_validator__`` attribute pydantic documents on every model) when
    ``contract`` validates a dict as :meth:`Contract.validate_output` does (it overrides
    neither), else ``None``. ``model_validate`` is used while the model is not built
    (forward references: pydantic rebuilds it on first use)."""
    if contract is None or not issubclass(contract, Contract):
        return None
    if contract.validate_output.__func__ is not Contract.validate_output.__func__:  # type: ignore[attr-defined]
        return None
    if contract.model_validate.__func__ is not BaseModel.model_validate.__func__:  # type: ignore[attr-defined]
        return None
    validator = contract.__pydantic_validator__
    if not isinstance(validator, SchemaValidator):
        return contract.model_validate
    return validator.validate_python


_SUSPENDING_OPS = frozenset(("YIELD_VALUE", "SEND", "GET_AWAITABLE", "GET_AITER",
                             "GET_ANEXT", "BEFORE_ASYNC_WITH"))


def _never_suspends(handler: Any) -> bool:
    """Whether ``handler`` is an ``async def`` function whose own code has no ``await``,
    ``async for`` or ``async with`` (CPython compiles each into the opcodes above): its
    coroutine returns at its first step, so the engine awaits it with no time limit armed
    and no step by hand (``coroutine.send`` and its ``StopIteration``: ~0.13 µs a state).
    ``False`` for anything else (a callable object, a partial, a sync function)."""
    if type(handler) is not types.FunctionType or not inspect.iscoroutinefunction(handler):
        return False
    return not any(op.opname in _SUSPENDING_OPS for op in dis.get_instructions(handler))


def _fast_dump(contract: type[Contract] | None) -> tuple[type | None, OutputDump | None]:
    """``(contract, dump)``: how the state's event writes an output of exactly the class
    ``contract`` (:class:`~hermes_fsm.engine.turn.OutputDump`: its serializer's
    ``to_python`` and ``to_json``, whose other defaults are ``model_dump``'s — the
    ``__pydantic_serializer__`` attribute pydantic documents on every model — and
    :func:`_finite_dump`); ``(None, None)`` when the class overrides ``model_dump`` or is
    not built yet (``_dump`` it)."""
    if contract is None or not issubclass(contract, BaseModel):
        return None, None
    if contract.model_dump is not BaseModel.model_dump:
        return None, None
    if contract.model_dump_json is not BaseModel.model_dump_json:
        return None, None
    serializer = contract.__pydantic_serializer__
    if not isinstance(serializer, SchemaSerializer):
        return None, None
    return contract, OutputDump(serializer.to_python, serializer.to_json,
                                _finite_dump(contract))


def _finite_dump(contract: type[BaseModel]) -> bool:
    """Whether ``contract``'s own ``model_dump(mode="json")`` can never hold a NaN or
    ±Infinity float, whatever its values: worked out once per state, so the state's
    output needs no check before the session log's fast writer (see
    :func:`hermes_fsm.events.model.write_json`).

    In JSON mode pydantic writes a non-finite float as ``None`` (``ser_json_inf_nan``
    "null", the default; the model's own setting governs its nested values) wherever it
    infers the type (``Any``, ``dict``, ``list``, a model or function serializer's return
    value), but keeps it where a ``float`` serializer writes it. So: the default setting,
    and every ``float`` in the model's core schema (``__pydantic_core_schema__``,
    documented on every model; nested models and computed fields included) one that
    validation keeps finite and nothing changes afterwards: a field of a model that is
    frozen (or validates assignments) and refuses NaN and ±Infinity (``allow_inf_nan``
    off: :class:`~hermes_fsm.contracts.base.Contract`'s default), given straight by the
    field (not by a validator function, not inside a list or dict, which stay mutable),
    in a schema with no validator function anywhere (an ``after`` validator may return
    anything). ``False`` whenever in doubt.
    """
    if contract.model_config.get("ser_json_inf_nan", "null") != "null":
        return False
    floats = functions = False
    nodes: list[tuple[Any, str | None]] = [(contract.__pydantic_core_schema__, None)]
    seen: set[tuple[int, str | None]] = set()
    while nodes:
        node, where = nodes.pop()
        if (id(node), where) in seen:
            continue
        seen.add((id(node), where))
        if isinstance(node, list | tuple):
            nodes.extend((item, where) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "float":
            if where != "field" or node.get("allow_inf_nan", False) is not False:
                return False
            floats = True
        elif isinstance(kind, str) and kind.startswith("function-") and where != "serializer":
            functions = True
        for key, value in node.items():
            nodes.append((value, _schema_place(node, kind, key, where)))
    return not (floats and functions)


def _schema_place(node: dict[str, Any], kind: Any, key: str, where: str | None
                  ) -> str | None:
    """Where a child of a core-schema node is, for :func:`_finite_dump`: ``"model"`` (the
    fields of a model that keeps floats finite), ``"fields"`` / ``"field"`` (its fields,
    one field's schema), ``"serializer"`` (how a value is written), else ``None``."""
    if key == "serialization" or where == "serializer":
        return "serializer"
    if kind == "model":
        return "model" if key == "schema" and _keeps_floats(node) else None
    if kind == "model-fields":
        return "fields" if key == "fields" and where == "model" else None
    if where == "fields" and kind is None:
        return "field_def"  # the fields dict: each value a model-field
    if kind == "model-field":
        return "field" if key == "schema" and where == "field_def" else None
    if kind in ("default", "nullable") and key == "schema" and where == "field":
        return "field"
    return None


def _keeps_floats(node: dict[str, Any]) -> bool:
    """Whether a ``model`` core-schema node's float fields stay as validated: its config
    refuses NaN and ±Infinity, its class is frozen or validates assignments, and no
    ``__init__`` or ``model_post_init`` of its own may set them."""
    cls = node.get("cls")
    config = node.get("config") or {}
    if config.get("allow_inf_nan") is not False or node.get("custom_init") or \
            node.get("post_init") or node.get("root_model"):
        return False
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return False
    settings = cls.model_config
    return bool(settings.get("frozen") or settings.get("validate_assignment"))


_BASE_LOOP_TIME = asyncio.BaseEventLoop.time
"""``loop.time`` of asyncio's own loops: ``time.monotonic()``."""

_REFUSED = object()
"""What _validate returns for an output that broke its contract."""

_COROUTINE = types.CoroutineType


class _BudgetExceeded(Exception):
    """The turn's budget ran out (raised inside the engine, never to callers)."""


def _limit(timeout_s: float | None, deadline: float, clock: Any) -> float:
    """A state's time limit: its own timeout, cut short by the turn's deadline."""
    remaining = deadline - clock()
    return remaining if timeout_s is None or remaining < timeout_s else timeout_s


def _dump(output: Any) -> Any:
    """A validated output as JSON-able data for its event."""
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json")
    return _jsonable(output)


def _refuse_nul(**values: Any) -> None:
    """Raise the :class:`UsageError` for the first value holding U+0000."""
    names = {"text": "the message text", "session_id": "the session id",
             "user_id": "the user id"}
    for name, value in values.items():
        if isinstance(value, str) and (at := nul_position(value)) is not None:
            raise UsageError(f"{names[name]} holds U+0000 (a NUL character) at position {at}; "
                             "remove it (no session store can keep it) and send it again")


def _default_random() -> float:
    return random.random()


def _jsonable(value: Any) -> Any:
    """Best-effort conversion of raw outputs and pydantic error dicts to JSON-able data."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)
