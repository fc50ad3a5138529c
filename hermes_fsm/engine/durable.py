"""Durable sessions: the engine's side of a session store and a lease.

With a store, :class:`~hermes_fsm.engine.orchestrator.Orchestrator` runs every turn like this:

1. take the session's lease (refused → :class:`SessionBusy`, or waited for with
   ``busy_policy="queue"``);
2. *claim* the session in the store (bumping its epoch, which fences any older holder)
   and bring the cached session up to date: a session another process moved on (or one
   never seen here) is rebuilt from its checkpoint plus the events after it;
3. if the log ends in an unfinished turn (its process died), finish that turn first,
   from the last completed step;
4. run the turn, appending each step's events — one write per step — right after its
   transition fired; the last write carries the turn's messages and a checkpoint;
5. release the lease.

Finishing a turn from the last completed step needs what the turn had built: its
validated outputs (re-validated from the ``state_output`` events with each state's
contract), attempt counter, taken-transition counts, path and failure routes. All of it
is in the events; the engine knows nothing about specific states.

Tool calls of a durable turn go through an :class:`EffectsJournal` (see
:mod:`hermes_fsm.tools.executor`): a call that finished before a crash is not made again.

Late events — a turn's events emitted after it ended, e.g. the ``memory_write`` of a
memory commit retried in the background (:mod:`hermes_fsm.engine.memory_handlers`) — are
events of the session, stored in order: one is never numbered while a turn of the
session runs (its seq would fall inside that turn's range, and the turn's next append
would find a gap). :class:`DurableSessions` queues it, and whoever next holds the
session's lease in this process writes the queue as an append of its own: the turn that
was running, after its last step and before it releases the lease; else the next turn
of the session, right after its claim (and after finishing an interrupted turn) and
before its own events; else ``Orchestrator.aclose``, under the lease. Sinks and the
session's log get a late event when it is stored. An append of late events that fails
is tried again at the next of those points (three tries, then the events are dropped
and logged); it never fails a turn.

The engine knows nothing of this: :class:`DurableSessions` is a turn hook
(:mod:`hermes_fsm.engine.hooks`) — ``pre_turn`` gives the turn its journal, ``post_step``
appends the step, ``post_turn`` the last step with the messages and the checkpoint,
``turn_failed`` drops the cached copy (the store has the truth) — and it uses the engine
through its public API only (:class:`TurnEngine`): the session cache, and
``new_turn``/``drive_turn`` to run a turn it holds the lease of.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from hermes_fsm.brain.protocol import Repair, RepairReason
from hermes_fsm.conversation.graph import Conversation, apply_ops
from hermes_fsm.engine.context import ContextBuilder, apply_context_event
from hermes_fsm.engine.session import Session, SessionCache, declare_domain
from hermes_fsm.engine.turn import Services, TurnContext, TurnResult, number_late
from hermes_fsm.errors import SessionArchived, SessionBusy, SessionError, StaleWriter, StoreError
from hermes_fsm.events.model import Event
from hermes_fsm.events.sinks import EventSink
from hermes_fsm.graph.model import Graph
from hermes_fsm.sources import IdFactory
from hermes_fsm.store.lease import LeaseHold, LocalLease, SessionLease
from hermes_fsm.store.protocol import Append, Checkpoint, Effect, Message, SessionStore

__all__ = ["DurableSessions", "EffectsJournal", "TurnEngine", "rebuild_turn"]

_log = logging.getLogger("hermes_fsm.engine.durable")

_LATE_TRIES = 3
"""Appends of a session's late events that may fail before they are dropped (and logged)."""


class TurnEngine(Protocol):
    """What the durable layer uses of the engine
    (:class:`~hermes_fsm.engine.orchestrator.Orchestrator` is one)."""

    @property
    def graph(self) -> Graph: ...
    @property
    def ids(self) -> IdFactory: ...
    @property
    def services(self) -> Services: ...
    @property
    def context(self) -> ContextBuilder: ...
    @property
    def busy_policy(self) -> str: ...
    @property
    def history_window(self) -> int: ...
    @property
    def event_log(self) -> bool: ...
    @property
    def event_log_turns(self) -> int | None: ...
    @property
    def session_cache(self) -> SessionCache: ...
    @property
    def sinks(self) -> tuple[EventSink, ...]: ...

    def new_turn(self, session: Session, text: str, user_id: str, *,
                 turn_id: str | None = None) -> TurnContext: ...

    async def drive_turn(self, turn: TurnContext, *, resumed: bool = False) -> TurnResult: ...


class EffectsJournal:
    """The effects journal of one session: tool calls by idempotency key.

    The key of a call is ``<session_id>/<call_id>``; call ids are
    ``<turn_id>-s<step>-c<index>``, so a key names (session, turn, step, call).
    """

    __slots__ = ("session_id", "store")

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store, self.session_id = store, session_id

    async def begin(self, call_id: str, tool: str) -> Effect | None:
        """Record the call as started; ``None`` when it is new, else what is known of it."""
        return await self.store.effect_begin(f"{self.session_id}/{call_id}", self.session_id,
                                             tool)

    async def finish(self, call_id: str, envelope: dict[str, Any]) -> None:
        """Record the call's result envelope."""
        await self.store.effect_finish(f"{self.session_id}/{call_id}", envelope)


class DurableSessions:
    """Runs an engine's turns against a store under a lease (see the module docs); the
    turn hook that makes each step durable.

    Args:
        orchestrator: the engine.
        store: where sessions live.
        lease: one writer per session (default: :class:`~hermes_fsm.store.lease.LocalLease`,
            this process only).
        queue_wait_s: how long a queued turn waits for the lease (``busy_policy="queue"``).
    """

    def __init__(self, orchestrator: TurnEngine, store: SessionStore,
                 lease: SessionLease | None = None, queue_wait_s: float | None = None) -> None:
        self.orchestrator = orchestrator
        self.store = store
        self.lease: SessionLease = lease if lease is not None else LocalLease()
        self.queue_wait_s = (queue_wait_s if queue_wait_s is not None
                             else orchestrator.graph.budget_s * 2)
        self._holds: dict[str, LeaseHold] = {}  # session id → the lease its turn runs under
        self._retaken: dict[str, LeaseHold] = {}  # session id → the hold its turn began with
        # session id → (user id, late events waiting to be stored, failed appends)
        self._late: dict[str, tuple[str, list[tuple[type[Event], dict[str, Any]]], int]] = {}

    async def run_turn(self, session_id: str | None, text: str, user_id: str, *,
                       domain: str | None = None) -> TurnResult:
        """Lease, claim and sync the session, finish an interrupted turn, run this one
        (``domain``: the memory domain a new session declares, see ``Orchestrator.session``).
        """
        o = self.orchestrator
        if session_id is None:
            session_id = o.ids.new("session")
        hold = await self._acquire(session_id)
        try:
            session, pending = await self.load(session_id, user_id)
            declare_domain(session, domain)  # refused before anything runs
            if pending:
                await self._finish_pending(session, pending)
            await self.write_late(session)  # landed since this session's last turn here
            result = await o.drive_turn(o.new_turn(session, text, user_id))
            await self.write_late(session)  # landed while the turn ran
            o.session_cache.settle(session, self._holds)  # a bounded cache evicts the LRU
            return result
        finally:
            await self._release(session_id, hold)

    async def resume(self, session_id: str) -> TurnResult | None:
        """Finish the session's interrupted turn, if it has one (``None`` if not).

        Raises:
            SessionError: no such session in the store.
            SessionBusy: another turn holds the session.
        """
        record = await self.store.get(session_id)
        if record is None:
            raise SessionError(f"session {session_id!r} is not in {self.store.name}; "
                               "check the id (and that this process uses the same store)")
        hold = await self._acquire(session_id)
        try:
            session, pending = await self.load(session_id, record.user_id)
            result = await self._finish_pending(session, pending) if pending else None
            await self.write_late(session)
            return result
        finally:
            await self._release(session_id, hold)

    async def _acquire(self, session_id: str) -> LeaseHold:
        wait = self.queue_wait_s if self.orchestrator.busy_policy == "queue" else 0.0
        if not wait and session_id in self._holds:  # a turn of this orchestrator runs on it
            raise SessionBusy(session_id)  # (even if its lease expired meanwhile)
        hold = await self.lease.acquire(session_id, wait)
        if hold is None:
            describe = getattr(self.lease, "describe_busy", None)  # optional for a lease
            if session_id in self._holds:
                raise SessionBusy(session_id)  # a turn of this orchestrator holds it
            raise SessionBusy(session_id, await describe(session_id) if describe else
                              "its lease is held by another turn (here or in another process)")
        self._holds[session_id] = hold
        return hold

    async def _release(self, session_id: str, hold: LeaseHold) -> None:
        current = self._holds.get(session_id)
        if current is hold or (current is not None and self._retaken.get(session_id) is hold):
            del self._holds[session_id]
            self._retaken.pop(session_id, None)
            if current is not hold:  # the lease taken again while the turn ran
                await current.release()
        await hold.release()

    async def _retake(self, session_id: str, lost: LeaseHold) -> None:
        """The turn's lease expired while it ran (its renewal came too late: a process
        paused, a starved event loop): take it again if no one else holds it, and go on.
        What makes that safe is the store's fencing: had another process claimed the
        session meanwhile, the next append is refused (epoch superseded).

        Raises:
            StaleWriter: another holder has the lease now.
        """
        try:
            again = await self.lease.acquire(session_id, 0.0)
        except StoreError:
            again = None
        if again is None:
            raise StaleWriter(session_id, "the lease expired or was taken while the turn ran",
                              reason="lease")
        _log.warning("session %r: the turn's lease expired while it ran (renewed too late); "
                     "taken again, the store's fencing guards the next append", session_id)
        self._retaken.setdefault(session_id, lost)  # the hold run_turn will release
        self._holds[session_id] = again

    async def _finish_pending(self, session: Session, pending: Sequence[dict[str, Any]]
                              ) -> TurnResult:
        turn = rebuild_turn(self.orchestrator, session, pending)
        return await self.orchestrator.drive_turn(turn, resumed=True)

    async def load(self, session_id: str, user_id: str
                   ) -> tuple[Session, list[dict[str, Any]]]:
        """Claim the session; rebuild it from the store unless the cached copy is current.
        The caller holds the session's lease. A rebuilt session is the one that was cached:
        its in-process log is refilled from the stored events (within
        ``event_log_turns``; with a window of 0 no event before the checkpoint is read).

        Returns the session and the events of its unfinished turn (empty if none).

        Raises:
            SessionArchived: the session was archived.
            StoreError: the store failed.
        """
        o = self.orchestrator
        record = await self.store.claim(session_id, user_id, o.graph.initial)
        if record.archived:  # its summary is in long-term memory: a new session recalls it
            self.forget_id(session_id)
            raise SessionArchived(session_id)
        session = o.session_cache.get(session_id)
        if (session is not None and session.seq == record.seq and session.state == record.state
                and not session.busy):
            session.epoch = record.epoch
            return session, []
        checkpoint = await self.store.checkpoint(session_id)
        since = checkpoint.seq if checkpoint else 0
        session = Session(session_id, record.user_id,
                          checkpoint.state if checkpoint else o.graph.initial, o.event_log,
                          o.event_log_turns)
        if session.keeps_log:  # its log as it was while cached: every event, by entry
            events = await self.store.events_after(session_id, 0)
            _restore_log(session, events)
            events = [e for e in events if e["seq"] > since]
        else:
            events = await self.store.events_after(session_id, since)
            if o.event_log and record.seq:  # a window of 0: nothing kept, nothing read
                session.dropped = (0, record.seq)  # (how many entries is not counted)
        if checkpoint is not None:
            session.history = [dict(m) for m in checkpoint.data.get("history", ())]
            session.summary = str(checkpoint.data.get("summary", ""))
            if (conv := checkpoint.data.get("conversation")) is not None:
                session.conversation = Conversation.from_data(conv)
            session.domain = checkpoint.data.get("domain")
        pending: list[dict[str, Any]] = []
        for event in events:  # finished turns past the checkpoint join the history
            if event["kind"] == "context_built":  # it may have folded history into the summary
                apply_context_event(session, event)
            elif event["kind"] == "graph_updated":  # the conversation graph is their fold
                if session.conversation is None:
                    session.conversation = Conversation()
                apply_ops(session.conversation, event["ops"])
            if event["kind"] == "turn_started":
                pending = [event]
                session.domain = event.get("domain", session.domain)  # the session's own
            elif pending:
                pending.append(event)
                if event["kind"] == "turn_finished":
                    session.remember("user", pending[0]["text"], o.history_window)
                    session.remember("assistant", event["answer"], o.history_window)
                    pending = []
        session.state, session.seq, session.epoch = record.state, record.seq, record.epoch
        o.session_cache.add(session)
        return session, pending

    def forget_id(self, session_id: str) -> None:
        """Drop the cached copy of a session, if any (it was archived, or moved on)."""
        self.orchestrator.session_cache.discard(session_id)

    def forget(self, session: Session) -> None:
        """Drop a cached session whose last write failed: the next turn reloads it."""
        self.orchestrator.session_cache.discard(session.session_id, session)

    # --- the turn hook ----------------------------------------------------------------

    def pre_turn(self, *, session: Session, turn: TurnContext, **future_kwargs: Any) -> None:
        """Tool calls of the turn go through the session's effects journal; its late
        events come to this layer's queue."""
        if turn.journal is None:
            turn.journal = EffectsJournal(self.store, session.session_id)
        turn.late = self.queue_late

    # --- late events (see the module docs) ---------------------------------------------

    def queue_late(self, session: Session, kind: type[Event], data: dict[str, Any]) -> None:
        """Queue a late event of ``session`` (its ``seq`` is given when it is written)."""
        user_id, queued, failures = self._late.get(session.session_id,
                                                   (session.user_id, [], 0))
        queued.append((kind, data))
        self._late[session.session_id] = (user_id, queued, failures)

    def drop_late_of(self, user_id: str) -> int:
        """Drop the queued late events of ``user_id``'s sessions (she is being forgotten);
        returns how many were dropped."""
        dropped = 0
        for session_id, (owner, queued, _) in list(self._late.items()):
            if owner == user_id:
                del self._late[session_id]
                dropped += len(queued)
        return dropped

    async def write_late(self, session: Session) -> None:
        """Append the session's queued late events after its last event. The caller holds
        the session's lease, has claimed it, and runs no turn on it. Never raises: a
        failed append is tried again at the next chance (see the module docs)."""
        entry = self._late.pop(session.session_id, None)
        if entry is None:
            return
        user_id, queued, failures = entry
        batch = number_late(session, queued)
        try:
            await self.store.append(Append(session.session_id, session.epoch, session.seq,
                                           session.state, batch.data, (), None,
                                           batch.to_json()))
        except (StaleWriter, StoreError) as exc:
            failures += 1
            if failures < _LATE_TRIES:
                self._late[session.session_id] = (user_id, queued + self._late.get(
                    session.session_id, (user_id, [], 0))[1], failures)
            else:
                _log.error("session %r: %d late event(s) dropped after %d failed appends: %s",
                           session.session_id, len(queued), failures, exc)
            return
        session.seq = batch.last_seq()
        session.record(batch)
        sinks = self.orchestrator.sinks
        for event in batch:
            for sink in sinks:
                sink.emit(event)

    async def write_all_late(self) -> None:
        """Store every queued late event, each session under its lease (a session whose
        lease cannot be had within ``queue_wait_s``, or whose store fails, keeps them
        queued; ``Orchestrator.aclose`` calls this)."""
        for session_id in list(self._late):
            user_id = self._late[session_id][0]
            try:
                hold = await self.lease.acquire(session_id, self.queue_wait_s)
            except StoreError as exc:
                _log.error("session %r: late events not stored, the lease failed: %s",
                           session_id, exc)
                continue
            if hold is None:
                _log.error("session %r: late events not stored, its lease stayed busy",
                           session_id)
                continue
            self._holds[session_id] = hold
            try:
                session, _ = await self.load(session_id, user_id)
                await self.write_late(session)
            except (SessionError, StoreError) as exc:
                _log.error("session %r: late events not stored: %s", session_id, exc)
            finally:
                await self._release(session_id, hold)

    async def post_step(self, *, session: Session, turn: TurnContext,
                        **future_kwargs: Any) -> None:
        """The step is appended before the next state starts."""
        await self.flush(session, turn)

    async def post_turn(self, *, session: Session, turn: TurnContext,
                        **future_kwargs: Any) -> None:
        """The last step: its events, the turn's messages and a checkpoint."""
        await self.flush(session, turn, final=True)

    def turn_failed(self, *, session: Session, **future_kwargs: Any) -> None:
        """The store has the truth: the next turn reloads the session from it."""
        self.forget(session)

    async def flush(self, session: Session, turn: TurnContext, *, final: bool = False) -> None:
        """Append the turn's events since the last flush (with messages and a checkpoint
        when ``final``): the one write of a step.

        Raises:
            StaleWriter: the lease was lost, or the store refused the append.
            StoreError: the store failed.
        """
        data = turn.events.data
        start = turn.flushed
        if start == len(data) and not final:
            return
        hold = self._holds.get(session.session_id)
        if hold is not None and hold.lost:
            await self._retake(session.session_id, hold)
        events = data[start:]
        prev = events[0]["seq"] - 1 if events else session.seq
        messages: list[Message] = []
        checkpoint = None
        if final:
            o = self.orchestrator
            now = o.services.clock.now()
            answer = session.history[-1]["content"] if session.history else ""
            messages = [
                Message(o.ids.new("message"), session.session_id, turn.user_id, "user",
                        turn.text, now),
                Message(o.ids.new("message"), session.session_id, turn.user_id, "assistant",
                        answer, now)]
            state: dict[str, Any] = {"history": list(session.history),
                                     "summary": session.summary}
            if session.conversation is not None:
                state["conversation"] = session.conversation.to_data()
            if session.domain is not None:
                state["domain"] = session.domain
            checkpoint = Checkpoint(session.session_id, session.seq, session.state, state)
        blob = turn.events.json_from(start) if events else None  # serialized once: the
        await self.store.append(Append(session.session_id, session.epoch, prev, session.state,
                                       events, messages, checkpoint, blob))  # log reuses it
        turn.flushed = start + len(events)  # what was written: one emitted meanwhile is not


def _restore_log(session: Session, events: Sequence[dict[str, Any]]) -> None:
    """Refill a rebuilt session's in-process log from its stored events: one entry per
    turn (up to its ``turn_finished``) and one per run of late events after it, the
    window keeping the last entries as :meth:`Session.record` would have. (Two batches
    of late events of one turn, stored back to back, come back as one entry.)"""
    start = 0
    for i in range(1, len(events) + 1):
        if i == len(events) or events[i]["turn_id"] != events[start]["turn_id"] or (
                events[i]["kind"] == "turn_started" or events[i - 1]["kind"] == "turn_finished"):
            session.record_stored(events[start:i])
            start = i


def rebuild_turn(orchestrator: TurnEngine, session: Session,
                 events: Sequence[dict[str, Any]]) -> TurnContext:
    """A turn as it stood after its last stored step, from its events (as JSON data), to
    go on with ``drive_turn(turn, resumed=True)``.

    ``events`` starts with the turn's ``turn_started``. The session must be in the state
    the last stored step entered.

    Raises:
        SessionError: a stored output no longer validates against its state's contract.
    """
    first = events[0]
    graph = orchestrator.graph
    turn = orchestrator.new_turn(session, first["text"], first["user_id"], turn_id=first["turn_id"])
    turn.path = [graph.initial]
    retried: RepairReason = "error"
    for event in events[1:]:
        kind = event["kind"]
        if kind == "retry":
            retried = event["reason"]
        elif kind == "state_entered":
            turn.path.append(event["state"])
            key = (event["source"], event["state"])
            turn.taken[key] = turn.taken.get(key, 0) + 1
            turn.attempt = event["attempt"]
            turn.repair = (Repair(retried, "the previous attempt ended before a restart "
                                  f"({event['trigger']})")
                           if event["trigger"] == "retry" else None)
        elif kind == "state_output":
            spec = graph.states[event["state"]]
            turn.state = spec
            output = event["output"]
            if spec.contract is not None:
                try:
                    output = spec.contract.validate_output(output, turn.validation_context())
                except ValidationError as exc:
                    raise SessionError(
                        f"session {session.session_id!r}, turn {turn.turn_id!r}: the stored "
                        f"output of {spec.name} no longer validates against "
                        f"{spec.contract.ref()} ({exc.error_count()} error(s)); the contract "
                        "changed since the turn started — resume with the old contract") from exc
            turn.accept(output)
        elif kind == "route_taken":
            turn.routes += 1
    turn.state = None
    turn.output = None
    turn.output_state = None
    return turn
