"""A tool worker: serves one tool group's requests off a bus, each call sandboxed.

For each delivery: decode it (a malformed one is dead-lettered, with a
``bus.message_refused`` event, and acked — the worker serves on); a request delivered
more than ``max_deliveries`` times is dead-lettered and answered ``DEAD_LETTERED``; one
past its answer deadline is answered ``EXECUTE_TIMEOUT`` without running; else it is
acked to the orchestrator (``EXECUTE_ACK``) and run:

- **the caller's permissions**, checked again (defence in depth: a request forged on the
  stream, or altered on its way, is not trusted because it reached the worker): a caller
  that lacks a permission the tool's contract requires is answered ``PERMISSION_DENIED``
  naming it, with a ``bus.permission_denied`` event, and nothing runs or is journalled;
- **the fence** (exactly-once effects over at-least-once delivery): with an effects
  journal (``fence``, the session store in real use), the worker claims the request's
  idempotency key before running the tool. A key already finished returns the recorded
  outcome (``replayed``) without running; a key started but never finished (a worker
  died in the call) is ``OUTCOME_UNKNOWN`` for a non-idempotent tool — never run again —
  and simply run again for an idempotent one (counted in :attr:`Worker.reruns`);
- **the run**: in the runner (a :class:`~hermes_fsm.tools.bus.sandbox.SandboxPool` in
  real use) under the tool's budget, 0.6 × the bus timeout;
- the outcome is journalled, then answered (``EXECUTE_RESULT`` / ``EXECUTE_ERROR``), then
  the entry acked. A worker killed anywhere in between leaves the entry pending; another
  worker reclaims it after the visibility timeout and the fence decides.

A heartbeat every ``heartbeat_s`` says the worker is alive (``hermes-fsm workers list``)
and keeps its running entries claimed.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_core import to_json

from hermes_fsm.contracts.tools import BUILTIN_ERRORS
from hermes_fsm.tools.bus.messages import (
    CallerInfo,
    ExecuteAck,
    ExecuteError,
    ExecuteRequest,
    ExecuteResult,
    ExecuteTimeout,
    MalformedMessage,
    Reply,
    decode,
)
from hermes_fsm.tools.bus.protocol import Bus, BusEvent, Delivery, WorkerInfo, log_event
from hermes_fsm.tools.bus.sandbox import SandboxOutcome
from hermes_fsm.tools.bus.tracing import execute_span
from hermes_fsm.tools.permissions import Caller, permission_problem

__all__ = ["EffectsFence", "Runner", "ToolSpec", "Worker", "specs_of"]


class Runner(Protocol):
    """Runs one call under a budget (:class:`~hermes_fsm.tools.bus.sandbox.SandboxPool`)."""

    async def run(self, tool: str, arguments: dict[str, Any], budget_s: float
                  ) -> SandboxOutcome: ...


class EffectsFence(Protocol):
    """The effects journal as the worker uses it (a ``SessionStore`` is one)."""

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Any: ...

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the worker knows of a tool it serves: whether a repeat is harmless, and how
    its contract classifies an error code it did not classify itself."""

    name: str
    idempotent: bool
    retryable_codes: frozenset[str] = frozenset()
    permissions: tuple[str, ...] = ()
    """The roles or grants a caller must hold (the contract's ``permissions``)."""
    side_effects: str = "read"
    """A ``destructive`` tool also needs a grant naming it."""

    def refusal(self, caller: CallerInfo) -> str | None:
        """Why ``caller`` may not call this tool, or ``None`` (the orchestrator's rule)."""
        if not self.permissions and self.side_effects != "destructive":
            return None
        who = Caller(caller.user_id, tuple(caller.roles), tuple(caller.grants))
        return permission_problem(who, self.name, self.side_effects, self.permissions)


class _PendingAck:
    """A call's ``EXECUTE_ACK`` while it waits to be sent (see :meth:`Worker._ack_later`)."""

    __slots__ = ("ack", "sending", "task", "timer")

    def __init__(self, ack: ExecuteAck) -> None:
        self.ack = ack
        self.sending = False
        self.task: asyncio.Task[None] | None = None  # the send, once the timer fired
        self.timer: asyncio.TimerHandle | None = None

    def hold(self) -> bool:
        """Keep the ack from going out on its own; ``False`` when it is already going."""
        if self.sending:
            return False
        if self.timer is not None:
            self.timer.cancel()
        return True


class Worker:
    """Serves ``group``'s requests from ``bus`` with ``runner`` (see the module docs).

    Args:
        bus: the transport.
        group: the tool group (request stream) served.
        tools: the tools served, by name.
        runner: where calls run.
        fence: the effects journal; ``None`` runs every delivery (in-process use).
        concurrency: calls at once (a call's slot is free once its tool ran: its answer
            and XACK overlap the next take).
        heartbeat_s: how often the worker says it is alive.
        worker_id: its name (default: host, pid and a random part).
        on_event: how refused messages and dead letters are reported.
        ack_after_s: how long a call runs before its ``EXECUTE_ACK`` is sent on its own;
            a call that ends sooner sends it with its answer, in the same round trip.
    """

    def __init__(self, bus: Bus, group: str, tools: Mapping[str, ToolSpec], runner: Runner,
                 *, fence: EffectsFence | None = None, concurrency: int = 2,
                 heartbeat_s: float = 2.0, worker_id: str | None = None,
                 on_event: BusEvent = log_event, ack_after_s: float = 0.02) -> None:
        self.bus, self.group, self.tools, self.runner = bus, group, dict(tools), runner
        self.ack_after_s = ack_after_s
        self._acks: dict[str, _PendingAck] = {}  # entry id -> its ack, while not sent
        self.fence = fence
        self.concurrency = concurrency
        self.heartbeat_s = heartbeat_s
        self.worker_id = worker_id or (
            f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}")
        self.on_event = on_event
        self.info = WorkerInfo(self.worker_id, group, sorted(self.tools), os.getpid(),
                               socket.gethostname(), concurrency, started_at=time.time())
        self._in_flight: dict[str, asyncio.Task[None]] = {}  # taken, not yet acked
        self._running: set[str] = set()  # those holding one of `concurrency` slots
        self._slot_freed = asyncio.Event()
        self.served = 0
        self.replayed = 0
        self.reruns = 0
        self.refused = 0
        self.denied = 0

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (or the task is cancelled); running calls finish."""
        stop = stop or asyncio.Event()
        beat = asyncio.get_running_loop().create_task(self._heartbeats(stop))
        last_reclaim = 0.0
        backoff = 0.05
        try:
            while not stop.is_set():
                free = self.concurrency - len(self._running)
                if free <= 0:
                    self._slot_freed.clear()
                    try:
                        async with asyncio.timeout(0.5):
                            await self._slot_freed.wait()
                    except TimeoutError:
                        pass
                    continue
                try:
                    deliveries: list[Delivery] = []
                    now = time.monotonic()
                    if now - last_reclaim >= min(1.0, self.bus.visibility_timeout_s / 2):
                        last_reclaim = now
                        deliveries = await self.bus.reclaim(self.group, self.worker_id, free)
                    if not deliveries:
                        deliveries = await self.bus.take(self.group, self.worker_id, free,
                                                         block_s=0.5)
                    backoff = 0.05
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the bus is away: retry, the calls stay pending
                    self.on_event("bus.reconnecting", where=f"worker {self.worker_id}",
                                  error=f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
                for delivery in deliveries:
                    task = asyncio.get_running_loop().create_task(self._serve(delivery))
                    self._in_flight[delivery.entry_id] = task
                    self._running.add(delivery.entry_id)
                    task.add_done_callback(functools.partial(self._done, delivery.entry_id))
        finally:
            if self._in_flight:
                await asyncio.gather(*self._in_flight.values(), return_exceptions=True)
            beat.cancel()

    def _done(self, entry_id: str, _task: asyncio.Task[None]) -> None:
        self._in_flight.pop(entry_id, None)
        self._free_slot(entry_id)

    def _free_slot(self, entry_id: str) -> None:
        """The call no longer needs its slot: its tool ran (the journal write, the answer
        and the XACK that follow overlap the next take), or it ended without a run."""
        if entry_id in self._running:
            self._running.discard(entry_id)
            self._slot_freed.set()

    async def _heartbeats(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.info.in_flight, self.info.served = len(self._in_flight), self.served
            try:
                await self.bus.heartbeat(self.info, ttl_s=self.heartbeat_s * 3)
                if self._in_flight:
                    await self.bus.touch(self.group, self.worker_id, list(self._in_flight))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.on_event("bus.reconnecting", where=f"heartbeat {self.worker_id}",
                              error=f"{type(exc).__name__}: {exc}")
            try:
                async with asyncio.timeout(self.heartbeat_s):
                    await stop.wait()
            except TimeoutError:
                pass

    async def _serve(self, delivery: Delivery) -> None:
        """One delivery, start to ack; a failure of the bus leaves it pending (reclaimed)."""
        try:
            await self._handle(delivery)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the bus or the journal failed: the entry stays pending
            self.on_event("bus.serve_failed", entry_id=delivery.entry_id,
                          error=f"{type(exc).__name__}: {exc}")

    async def _handle(self, delivery: Delivery) -> None:
        bus, group = self.bus, self.group
        try:
            request = decode(delivery.raw)
            if not isinstance(request, ExecuteRequest):
                raise MalformedMessage(f"a {request.kind} on a request stream")
        except MalformedMessage as exc:
            self.refused += 1
            self.on_event("bus.message_refused", where=f"{group} {delivery.entry_id}",
                          reason=str(exc))
            await bus.dead_letter(group, delivery, f"malformed: {exc}")
            await bus.ack(group, delivery.entry_id)
            return
        rid = request.request_id
        if delivery.count > bus.max_deliveries:
            await bus.dead_letter(group, delivery,
                                  f"delivered {delivery.count} times (max {bus.max_deliveries})")
            await self._answer(request, ExecuteError(
                request_id=rid, error_code="DEAD_LETTERED", worker_id=self.worker_id,
                error_message=(f"{request.tool_name} was delivered {delivery.count} times "
                               "without an answer; it was dead-lettered, not run again")),
                delivery)
            return
        if time.time() > request.deadline:
            await self._answer(request, ExecuteTimeout(
                request_id=rid, timeout_ms=request.timeout_ms,
                reason="past its answer deadline when a worker took it; not run"), delivery)
            return
        spec = self.tools.get(request.tool_name)
        pending = _PendingAck(ExecuteAck(request_id=rid, worker_id=self.worker_id,
                                         scheduled_at=time.time(), delivery=delivery.count))
        pending.timer = asyncio.get_running_loop().call_later(  # a timer, not a task
            self.ack_after_s, self._ack_later, request.reply_to, pending)
        self._acks[delivery.entry_id] = pending
        try:
            await self._run(request, spec, delivery)
        finally:
            self._acks.pop(delivery.entry_id, None)
            if not pending.hold() and pending.task is not None:  # its failure (the bus
                await pending.task  # away) leaves the entry pending

    def _ack_later(self, reply_to: str, pending: _PendingAck) -> None:
        """Send ``EXECUTE_ACK`` once the call has run ``ack_after_s`` (a quicker one
        carries it with its answer, in :meth:`_answer`: one round trip fewer)."""
        pending.sending = True
        pending.task = asyncio.get_running_loop().create_task(
            self.bus.reply(reply_to, pending.ack))

    async def _run(self, request: ExecuteRequest, spec: ToolSpec | None,
                   delivery: Delivery) -> None:
        rid, group = request.request_id, self.group
        if spec is None:
            await self._answer(request, self._error(
                request, "UNKNOWN_TOOL", f"worker {self.worker_id} (group {group}) does not "
                f"serve {request.tool_name!r}; it serves {', '.join(sorted(self.tools))}"),
                delivery)
            return
        denied = spec.refusal(request.caller)
        if denied is not None:  # defence in depth: the orchestrator checked it too
            self.denied += 1
            self.on_event("bus.permission_denied", request_id=rid, tool=request.tool_name,
                          user=request.caller.user_id, worker=self.worker_id, reason=denied)
            await self._answer(request, self._error(
                request, "PERMISSION_DENIED", f"worker {self.worker_id} refused "
                f"{request.tool_name} (request {rid}): {denied}"), delivery)
            return
        key = f"bus:{request.idempotency_key}"
        if self.fence is not None:
            known = await self.fence.effect_begin(key, request.session_id or "bus",
                                                  request.tool_name)
            if known is not None:
                recorded = self._recorded(request, spec, known)
                if recorded is not None:
                    await self._answer(request, recorded, delivery)
                    return
                self.reruns += 1
        attributes = {"hermes.tool": request.tool_name, "hermes.request_id": rid,
                      "hermes.call_id": request.call_id, "hermes.worker": self.worker_id,
                      "hermes.attempt": request.retry_policy.attempt,
                      "hermes.delivery": delivery.count,
                      "hermes.session_id": request.session_id or ""}
        with execute_span(request.trace, attributes) as span:
            outcome = await self.runner.run(request.tool_name, dict(request.input_params),
                                            request.tool_budget_s)
            self._free_slot(delivery.entry_id)
            span.set_attribute("hermes.outcome", "ok" if outcome.ok else outcome.code)
        reply: Reply
        if outcome.ok:
            reply = ExecuteResult(request_id=rid, output_data=outcome.output,
                                  execution_time_ms=outcome.duration_ms,
                                  worker_id=self.worker_id)
        else:
            reply = self._error(request, outcome.code, outcome.message, outcome.retryable)
        if self.fence is not None:
            await self.fence.effect_finish(key, reply.model_dump(mode="json"))
        self.served += 1
        await self._answer(request, reply, delivery)

    def _error(self, request: ExecuteRequest, code: str, message: str,
               retryable: bool | None = False) -> ExecuteError:
        spec = self.tools.get(request.tool_name)
        if retryable is None:
            retryable = spec is not None and code in spec.retryable_codes
        if code in ("TIMEOUT", "OUTCOME_UNKNOWN") and (spec is None or not spec.idempotent):
            retryable = False  # killed mid-call: its effect is unknown, a repeat could double it
        return ExecuteError(request_id=request.request_id, error_code=code,
                            error_message=message, retryable=retryable,
                            worker_id=self.worker_id)

    def _recorded(self, request: ExecuteRequest, spec: ToolSpec, known: Any) -> Reply | None:
        """The answer the journal already holds for this key, or ``None`` to run it."""
        outcome = getattr(known, "outcome", None)
        if getattr(known, "status", None) == "finished" and isinstance(outcome, dict):
            self.replayed += 1
            try:
                message = decode(to_json(outcome))
            except MalformedMessage:
                message = None
            if isinstance(message, ExecuteResult | ExecuteError):
                return message.model_copy(update={"replayed": True,
                                                  "request_id": request.request_id})
        if spec.idempotent:
            return None
        return ExecuteError(
            request_id=request.request_id, error_code="OUTCOME_UNKNOWN", retryable=False,
            worker_id=self.worker_id, replayed=True,
            error_message=(f"{request.tool_name} ({request.call_id}) was started by a worker "
                           "that stopped before recording its outcome; it is not idempotent, "
                           "so it was not run again. Check its effect before asking again."))

    async def _answer(self, request: ExecuteRequest, reply: Reply, delivery: Delivery
                      ) -> None:
        pending = self._acks.pop(delivery.entry_id, None)
        ack = None
        if pending is not None:
            if pending.hold():  # not out yet: it goes with the answer, just before it
                ack = pending.ack
            elif pending.task is not None:
                await pending.task  # going out: the ack stays ahead of the answer
        await self.bus.finish(request.reply_to, reply, self.group, delivery.entry_id, ack=ack)


def specs_of(registry: Any, names: Any = None) -> dict[str, ToolSpec]:
    """The :class:`ToolSpec` of each local tool of ``registry`` (or only ``names``)."""
    wanted = set(names) if names is not None else None
    specs: dict[str, ToolSpec] = {}
    for tool in registry.tools():
        if wanted is not None and tool.name not in wanted:
            continue
        contract = tool.contract
        codes = {c for c, retry in BUILTIN_ERRORS.items() if retry}
        codes |= {c for c, e in contract.errors.items() if e.retryable}
        codes -= {c for c, e in contract.errors.items() if not e.retryable}
        specs[tool.name] = ToolSpec(tool.name, contract.is_idempotent, frozenset(codes),
                                    tuple(contract.permissions), tool.side_effects)
    return specs
