"""The tool executor: one pipeline for every call, local or MCP.

For each planned call: the tool must exist and be available → its arguments must pass
the input schema (else ``VALIDATION_FAILED``, the call is not made, and planning gets to
rewrite it) → the caller must hold the tool's permissions (a destructive tool needs an
explicit grant) → its circuit breaker must be closed → the call runs under the
contract's timeout → an error is classified into the envelope
``{success: false, error_code, message, retryable}`` → retryable errors are retried with
exponential backoff and jitter up to the contract's retry policy → the output is checked
against the output schema and the contract's violation policy applied (``fail``,
``log_only``, ``fallback: <tool>``) → the breaker learns the outcome → an audit event
(:class:`~hermes_fsm.events.model.ToolCallFinished`) records caller, tool, arguments, full
result or error, attempts and duration. The calls of one plan run concurrently, as one
task group: a call that raises (rather than failing into an envelope — its journal
write failed, say) cancels its siblings, and they are awaited before the error goes on,
so none of them emits an event after the plan failed. An
output too long for a model's context is truncated in the envelope (the event keeps it
whole).

What is stored is bounded: an output nested deeper than ``max_output_depth`` levels, or
longer than ``max_output_bytes`` as JSON (or not writable as JSON at all), is refused —
the call fails with ``OUTPUT_TOO_LARGE`` (not retryable; its event says which bound), so
no event, journal entry or session store ever holds what could not be read back.

A contract's preconditions (:mod:`hermes_fsm.tools.conditions`) are checked after the
permissions: one that does not hold fails the call with ``PRECONDITION_FAILED`` (and
``details``: the condition, what to confirm) and the tool never runs. Its postconditions
are checked with the output schema: one that does not hold is an output violation. A
write whose contract names a compensation is checked and undone as
:mod:`hermes_fsm.tools.compensation` says (status on an unknown outcome; sagas). A call
that is not idempotent is never made again after a ``TIMEOUT`` (it may have acted),
whatever its retry policy: it fails, not retryable, and its status tool is asked instead.
A tool with a canary (:mod:`hermes_fsm.tools.canary`) runs on the version its routing
chooses, with a ``tool_version_chosen`` event; its outcome counts for that version.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from pydantic_core import to_json

from hermes_fsm._internal.json_safe import MAX_OUTPUT_BYTES, MAX_OUTPUT_DEPTH, depth_over
from hermes_fsm._internal.redact import redact
from hermes_fsm._internal.time_limits import within
from hermes_fsm.errors import MCPServerError, ToolCallFailed, ToolError
from hermes_fsm.events.model import (
    ToolCallFinished,
    ToolCallProgress,
    ToolCallRetried,
    ToolCallStarted,
    ToolCanaryRolledBack,
    ToolVersionChosen,
)
from hermes_fsm.tools.breaker import NoBreaker, WindowBreaker
from hermes_fsm.tools.calling import calling_as, reset_caller, set_caller
from hermes_fsm.tools.canary import refresh as refresh_canary
from hermes_fsm.tools.compensation import UNKNOWN_OUTCOMES, compensable, settle
from hermes_fsm.tools.conditions import postcondition_problem, precondition_failure
from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["CallContext", "Emit", "ToolExecutor", "ToolRunner", "current_call"]

Emit = Callable[..., Any]
"""``emit(EventClass, **fields)``: how the executor reports calls (TurnContext.emit)."""


class ToolRunner(Protocol):
    """Runs a plan's calls and returns one result envelope each, in order: what the engine
    needs of an executor (:class:`ToolExecutor` is one; replay's answers from a recording)."""

    async def execute(self, calls: Sequence[tuple[str, str, dict[str, Any]]],
                      emit: Emit, caller: str = ...,
                      journal: Any = None) -> list[dict[str, Any]]: ...



@dataclass(slots=True)
class CallContext:
    """The call a tool function runs for (:data:`current_call`): a tool that forwards the
    call elsewhere (the execution bus) names it by these; ``attempt`` counts the
    function's invocations for this call (retries and a fallback included)."""

    call_id: str
    caller: str
    session_id: str | None = None
    attempt: int = 0


current_call: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "hermes_current_call", default=None)
"""The call being made, while the executor makes it (``None`` outside a call)."""

_PLANNING_ERRORS = frozenset({"VALIDATION_FAILED", "UNKNOWN_TOOL", "PERMISSION_DENIED",
                              "PRECONDITION_FAILED",
                              "CIRCUIT_OPEN"})


_NOT_THE_TOOLS = frozenset({"UNKNOWN_TOOL", "PERMISSION_DENIED", "PRECONDITION_FAILED",
                            "CIRCUIT_OPEN"})
"""Codes of calls refused before the tool ran (a canary does not count them)."""

_LOCAL_BREAKERS = (NoBreaker, WindowBreaker)
"""Breakers whose ``refresh`` does nothing (they know only this process): not awaited."""

_log = structlog.get_logger("hermes_fsm.tools.executor")


def _session_of() -> str | None:
    call = current_call.get()
    return call.session_id if call is not None else None


def _no_events(kind: Any, **fields: Any) -> None:
    return None


class ToolExecutor:
    """Runs planned calls concurrently through one pipeline and returns result envelopes.

    Args:
        registry: the tools (with their permissions and circuit breaker).
        max_result_chars: an output whose JSON is longer is truncated for the model.
        random: source of jitter for retry backoff (``() -> float`` in [0, 1)).
        sleep: how to wait between retries (inject a fake to test backoff without waiting).
        max_output_depth, max_output_bytes: the bounds of an output that is stored (see
            the module docs); beyond them the call fails with ``OUTPUT_TOO_LARGE``.
        sync_workers: threads for sync tools (a tool defined with ``def``, not ``async
            def``). Each call of one runs in a worker thread, never on the event loop, so
            its ``timeout_s`` holds and the other turns of the process go on while it
            blocks. A timeout cannot stop the thread: the call returns ``TIMEOUT`` on time,
            and the function runs on to its end in its thread, holding a worker. With
            every worker held, more sync calls wait for one (and time out if none frees
            up in time; a call that times out before it started never runs).
    """

    def __init__(self, registry: ToolRegistry, *, max_result_chars: int = 4000,
                 random: Callable[[], float] | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 max_output_depth: int = MAX_OUTPUT_DEPTH,
                 max_output_bytes: int = MAX_OUTPUT_BYTES,
                 sync_workers: int = 16) -> None:
        self.registry = registry
        self.max_result_chars = max_result_chars
        self.max_output_depth, self.max_output_bytes = max_output_depth, max_output_bytes
        self._random = random or _random
        self._sleep = sleep
        self.sync_workers = sync_workers
        self._pool: ThreadPoolExecutor | None = None  # made at the first sync call
        # by id: the contract (kept, so its id is not reused) and whether it has pre- and
        # postconditions
        self._has_conditions: dict[int, tuple[Any, bool, bool]] = {}

    async def execute(self, calls: Sequence[tuple[str, str, dict[str, Any]]],
                      emit: Emit = _no_events, caller: str = "anonymous",
                      journal: Any = None) -> list[dict[str, Any]]:
        """Run ``(call_id, tool_name, arguments)`` calls for user ``caller``.

        With an effects ``journal`` (a durable session's, see
        :class:`~hermes_fsm.engine.durable.EffectsJournal`) each call is journalled as started
        before it runs and with its envelope after: a call that finished before a crash
        is not made again (its envelope is reused), and one whose outcome is unknown is
        made again only if its contract says it is idempotent — otherwise it fails with
        ``OUTCOME_UNKNOWN`` instead of acting twice.

        Returns one envelope per call, in order: ``{call_id, tool_name, success: true,
        output}`` or ``{call_id, tool_name, success: false, error_code, message,
        retryable}``.
        """
        breaker = self.registry.breaker
        if type(breaker) not in _LOCAL_BREAKERS:  # tools tripped in other processes
            await breaker.refresh()
        if self.registry.canaries and self.registry.canary_log is not None and calls:
            await self.refresh_canaries(calls[0][0], emit)  # versions, across processes
        if len(calls) == 1:  # the common plan, written out (every call pays for this path)
            call_id, name, arguments = calls[0]
            tool = self.registry.find(name)
            if tool is None or tool.contract is None or tool.contract.compensation is None:
                token = set_caller(caller)  # tools learn the user from the engine, never
                try:  # the model
                    return [await self._run_one(call_id, name, arguments, emit, caller,
                                                journal)]
                finally:
                    reset_caller(token)
        with calling_as(caller):
            return await self._execute(calls, emit, caller, journal)

    async def _execute(self, calls: Sequence[tuple[str, str, dict[str, Any]]], emit: Emit,
                       caller: str, journal: Any) -> list[dict[str, Any]]:
        envelopes = await self._execute_plan(calls, emit, caller, journal)
        if compensable(self.registry, calls):  # status checks, sagas (tools/compensation.py)
            envelopes = await settle(self, calls, envelopes, emit, caller, journal)
        return envelopes

    async def make_call(self, call_id: str, tool_name: str, arguments: dict[str, Any],
                        emit: Emit, caller: str, journal: Any = None) -> dict[str, Any]:
        """One call through the whole pipeline, on its own (a status or compensating call)."""
        return await self._run_one(call_id, tool_name, arguments, emit, caller, journal)

    async def _execute_plan(self, calls: Sequence[tuple[str, str, dict[str, Any]]],
                            emit: Emit, caller: str, journal: Any) -> list[dict[str, Any]]:
        if len(calls) == 1:
            return [await self._run_one(*calls[0], emit, caller, journal)]
        try:  # structured: a call that raises cancels its siblings, awaited before it goes on
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._run_one(*c, emit, caller, journal))
                         for c in calls]
        except BaseExceptionGroup as failed:
            raise _first(failed) from None
        return [task.result() for task in tasks]

    async def _run_one(self, call_id: str, tool_name: str, arguments: dict[str, Any],
                       emit: Emit, caller: str, journal: Any = None) -> dict[str, Any]:
        token = current_call.set(CallContext(call_id, caller,
                                             getattr(journal, "session_id", None)))
        try:  # the whole call in this one frame: each await of a coroutine costs ~0.3 µs
            tool = self.registry.find(tool_name)
            if journal is not None:
                known = await journal.begin(call_id, tool_name)
                if known is not None:
                    reused = self._journalled(known, call_id, tool_name, tool, arguments,
                                              emit, caller)
                    if reused is not None:
                        return reused
            emit(ToolCallStarted, call_id=call_id, tool=tool_name, arguments=arguments,
                 caller=caller)
            routed = None
            if self.registry.canaries and tool is not None:  # a share to a new version
                routed = self._route(call_id, tool_name, caller, journal, emit)
                if routed is not None:
                    tool = routed[0]
            started = time.perf_counter()
            audit: dict[str, Any] = {"attempts": 0, "violation": None, "fallback": None}
            envelope = await self._outcome(call_id, tool_name, tool, arguments, caller, emit,
                                           audit)
            if routed is not None:
                self._canary_outcome(call_id, tool_name, routed[1], envelope, emit)
            if journal is not None:
                await journal.finish(call_id, envelope)
            duration_ms = (time.perf_counter() - started) * 1000
            source = tool.source if tool is not None else "unknown"
            attempts = audit["attempts"]
            if envelope["success"]:
                output = envelope["output"]
                # JSON of the output as stored (bytes, non-finite numbers as strings) is
                # never shorter than the text truncation measures (characters): within the
                # limit, no cut
                size = audit.pop("json_bytes", None)
                truncated = (False if size is not None and size <= self.max_result_chars
                             else self._truncate(envelope))
                emit(ToolCallFinished, call_id=call_id, tool=tool_name, ok=True,
                     output=output, duration_ms=duration_ms, attempts=attempts,
                     caller=caller, source=source, arguments=arguments, truncated=truncated,
                     output_violation=audit["violation"], fallback=audit["fallback"])
            else:
                error = {k: envelope[k] for k in ("error_code", "message", "retryable")}
                if "details" in envelope:
                    error["details"] = envelope["details"]
                emit(ToolCallFinished, call_id=call_id, tool=tool_name, ok=False,
                     error=error, duration_ms=duration_ms, attempts=attempts, caller=caller,
                     source=source, arguments=arguments,
                     output_violation=audit["violation"], fallback=audit["fallback"])
            return envelope
        finally:
            current_call.reset(token)

    def _route(self, call_id: str, tool_name: str, caller: str, journal: Any, emit: Emit
               ) -> tuple[Tool, bool] | None:
        """The version a call of a canaried tool runs on (:mod:`hermes_fsm.tools.canary`)."""
        canary = self.registry.canaries.get(tool_name)
        if canary is None:
            return None
        key = canary.key(getattr(journal, "session_id", None) or _session_of(), call_id,
                         caller)
        routed = self.registry.canary_route(tool_name, key)
        if routed is not None:
            chosen, candidate = routed
            version = chosen.contract.version if chosen.contract is not None else "?"
            emit(ToolVersionChosen, call_id=call_id, tool=tool_name, runs=chosen.name,
                 version=version, candidate=candidate)
        return routed

    async def refresh_canaries(self, call_id: str = "", emit: Emit = _no_events) -> None:
        """Read every canary's versions from the registry's experience log (each at most
        once per its ``refresh_s``; nothing without a log); emit the rollbacks this made."""
        if self.registry.canary_log is None:
            return
        registry = self.registry
        for name, canary in registry.canaries.items():
            if canary.rolled_back is not None:
                continue
            stable, candidate = registry.find(name), registry.find(canary.candidate)
            if stable is None or candidate is None or stable.contract is None \
                    or candidate.contract is None:
                continue
            why = await refresh_canary(canary, registry.canary_log, stable.contract.version,
                                       candidate.contract.version)
            if why is not None:
                _log.warning("canary rolled back", tool=name, candidate=canary.candidate,
                             reason=why)
                emit(ToolCanaryRolledBack, call_id=call_id, tool=name,
                     candidate=canary.candidate, reason=why,
                     version=candidate.contract.version)

    def _canary_outcome(self, call_id: str, tool_name: str, candidate: bool,
                        envelope: dict[str, Any], emit: Emit) -> None:
        """Count the outcome for its version; emit the rollback it caused, if it did."""
        canary = self.registry.canaries.get(tool_name)
        code = envelope.get("error_code")
        if canary is None or (code is not None and code in _NOT_THE_TOOLS):
            return  # refused before the version ran: says nothing of the version
        why = canary.record(candidate, bool(envelope["success"]))
        if why is not None:
            _log.warning("canary rolled back", tool=tool_name, candidate=canary.candidate,
                         reason=why)
            ran = self.registry.find(canary.candidate)
            emit(ToolCanaryRolledBack, call_id=call_id, tool=tool_name,
                 candidate=canary.candidate, reason=why,
                 version=ran.contract.version if ran and ran.contract else None)

    def _journalled(self, known: Any, call_id: str, tool_name: str, tool: Tool | None,
                    arguments: dict[str, Any], emit: Emit, caller: str
                    ) -> dict[str, Any] | None:
        """The envelope of a journalled call, or ``None`` when it should be made again."""
        if known.status == "finished" and known.outcome is not None:
            envelope = dict(known.outcome)  # its events say attempts=0: nothing was called
        elif tool is not None and tool.contract is not None and tool.contract.is_idempotent:
            return None  # outcome unknown, but repeating it is harmless
        else:
            envelope = {"call_id": call_id, "tool_name": tool_name, "success": False,
                        "error_code": "OUTCOME_UNKNOWN", "retryable": False,
                        "message": (f"{tool_name} ({call_id}) was started before a restart and "
                                    "its outcome is unknown; it is not idempotent, so it was "
                                    "not made again. Check its effect before asking again.")}
        emit(ToolCallStarted, call_id=call_id, tool=tool_name, arguments=arguments,
             caller=caller)
        source = tool.source if tool is not None else "unknown"
        if envelope.get("success"):
            emit(ToolCallFinished, call_id=call_id, tool=tool_name, ok=True,
                 output=envelope.get("output"), duration_ms=0.0, attempts=0, caller=caller,
                 source=source, arguments=arguments, output_violation=None, fallback=None)
        else:
            emit(ToolCallFinished, call_id=call_id, tool=tool_name, ok=False,
                 error={k: envelope.get(k) for k in ("error_code", "message", "retryable")},
                 duration_ms=0.0, attempts=0, caller=caller, source=source,
                 arguments=arguments, output_violation=None, fallback=None)
        return envelope

    async def _outcome(self, call_id: str, tool_name: str, tool: Tool | None,
                       arguments: dict[str, Any], caller: str, emit: Emit,
                       audit: dict[str, Any], fallback_depth: int = 0) -> dict[str, Any]:
        def failure(code: str, message: str, retryable: bool) -> dict[str, Any]:
            return {"call_id": call_id, "tool_name": tool_name, "success": False,
                    "error_code": code, "message": message, "retryable": retryable}

        registry = self.registry
        if tool is None:
            known = ", ".join(registry.names()) or "none"
            return failure("UNKNOWN_TOOL", f"unknown tool {tool_name!r}; known tools: {known}",
                           False)
        if tool.available is not None and (why := tool.available()) is not None:
            return failure("SERVER_UNAVAILABLE", f"{tool_name} is unavailable: {why}", True)
        problem = tool.argument_problem(arguments)
        if problem is not None:
            return failure("VALIDATION_FAILED", problem, False)
        contract = tool.contract
        assert contract is not None
        if contract.permissions or tool.side_effects == "destructive":
            denied = registry._permission(registry.permissions.caller(caller), tool_name)
            if denied is not None:
                return failure("PERMISSION_DENIED", denied, False)
        pre, post = self._conditions(contract)
        if pre:  # the tool never runs when one does not hold
            refused = precondition_failure(tool, registry.registries, arguments, caller)
            if refused is not None:
                return {**failure("PRECONDITION_FAILED", refused[0], False),
                        "details": refused[1]}
        breaker = registry.breaker
        if breaker.any_open() and (why := breaker.problem(tool_name)) is not None:
            return failure("CIRCUIT_OPEN", why, False)
        policy = contract.retry
        attempt = 0
        while True:
            attempt += 1
            audit["attempts"] += 1
            progress = None if tool.pass_kwargs else _progress(emit, call_id, tool_name)
            code, message, declared, output = await self._attempt(tool, arguments, progress)
            if code is None:
                break
            retryable = contract.error_is_retryable(code) if declared is None else declared
            breaker.record(tool_name, False)
            if retryable and code in UNKNOWN_OUTCOMES and not contract.is_idempotent:
                # it may have acted: made again it could act twice (its status tool is
                # asked after the plan, tools/compensation.py)
                return failure(code, f"{message}; not made again: {tool_name} is not "
                               "idempotent and may have acted, so check its effect first",
                               False)
            if not retryable or attempt >= policy.max_attempts:
                return failure(code, message, retryable)
            delay = policy.delay(attempt, self._random)
            emit(ToolCallRetried, call_id=call_id, tool=tool_name, attempt=attempt + 1,
                 error_code=code, message=message, delay_s=delay)
            if delay > 0:
                await self._sleep(delay)
        unstorable = self._unstorable(output, audit)
        if unstorable is not None:
            breaker.record(tool_name, False)
            return failure("OUTPUT_TOO_LARGE", f"{tool_name} returned an output {unstorable}; "
                           "it was not kept — ask for less (a narrower query, a page)", False)
        violation = tool.output_problem(output)
        if violation is None and post:
            violation = postcondition_problem(tool, registry.registries, arguments, caller,
                                              output)
        if violation is None:
            breaker.record(tool_name, True)
            return {"call_id": call_id, "tool_name": tool_name, "success": True,
                    "output": output}
        audit["violation"] = violation
        policy_name = contract.on_output_violation
        if policy_name == "log_only":
            breaker.record(tool_name, True)
            return {"call_id": call_id, "tool_name": tool_name, "success": True,
                    "output": output}
        breaker.record(tool_name, False)
        fallback = contract.fallback
        if fallback is not None and fallback_depth == 0:
            audit["fallback"] = fallback
            stand_in = registry.find(fallback)
            result = await self._outcome(call_id, fallback, stand_in, arguments, caller, emit,
                                         audit, fallback_depth + 1)
            result["tool_name"] = tool_name
            return result
        return failure("OUTPUT_VIOLATION", f"{tool_name}: {violation}", False)

    async def _attempt(self, tool: Tool, arguments: dict[str, Any], progress: Any = None
                       ) -> tuple[str | None, str, bool | None, Any]:
        """One call: ``(None, "", None, output)`` or ``(code, message, retryable?, None)``.

        ``retryable`` is ``None`` when the contract decides (it does unless the tool raised
        :class:`ToolCallFailed` with an explicit ``retryable``).
        """
        try:
            if tool.blocking:  # a sync function: in a worker thread, under its timeout
                async with asyncio.timeout(tool.timeout_s):
                    result = await self._in_thread(tool, arguments)
                    if hasattr(result, "__await__"):
                        result = await result
                return None, "", None, result
            result = tool.fn(**arguments) if tool.pass_kwargs else \
                tool.invoke(arguments, progress)  # tool.invoke, the common case inline
            if hasattr(result, "__await__"):
                # own_timeout: it raises ToolCallFailed("TIMEOUT") itself
                result = await (result if tool.own_timeout else within(result, tool.timeout_s))
        except TimeoutError:
            return ("TIMEOUT", f"{tool.name} did not answer within {tool.timeout_s:g}s",
                    None, None)
        except ToolCallFailed as exc:  # messages redacted: they go to events and the model
            return exc.code, redact(exc.message), exc.retryable, None
        except MCPServerError as exc:
            return "SERVER_UNAVAILABLE", redact(str(exc)), True, None
        except ToolError as exc:
            return "TOOL_ERROR", redact(str(exc)), None, None
        except Exception as exc:  # a tool's own failure becomes an envelope, not a crash
            return "TOOL_EXCEPTION", redact(f"{type(exc).__name__}: {exc}"), None, None
        return None, "", None, result

    def _conditions(self, contract: Any) -> tuple[bool, bool]:
        """Whether ``contract`` has pre- and postconditions (read once per contract: they
        are compiled at load; a contract is immutable)."""
        entry = self._has_conditions.get(id(contract))
        if entry is None or entry[0] is not contract:
            if len(self._has_conditions) >= 1024:  # tools come and go (MCP): stay small
                self._has_conditions.clear()
            entry = self._has_conditions[id(contract)] = (
                contract, bool(contract.compiled_preconditions),
                bool(contract.compiled_postconditions))
        return entry[1], entry[2]

    def _unstorable(self, output: Any, audit: dict[str, Any] | None = None) -> str | None:
        """Why ``output`` is beyond the stored bounds, or ``None`` (then ``audit``, when
        given, gets the size of its JSON as ``json_bytes``)."""
        if audit is not None:
            audit.pop("json_bytes", None)  # a fallback's output is measured afresh
        if output is None or isinstance(output, bool | int | float):
            return None
        try:  # as json_safe.dumps writes it, less the U+0000 escape (which keeps the length)
            blob = to_json(output, serialize_unknown=True, inf_nan_mode="strings")
        except ValueError as exc:  # nested beyond what JSON is written for, or a cycle
            return f"that cannot be written as JSON ({exc})"
        if audit is not None:
            audit["json_bytes"] = len(blob)
        if len(blob) > self.max_output_bytes:
            return (f"of {len(blob)} bytes as JSON, over the limit of "
                    f"{self.max_output_bytes} bytes")
        if depth_over(output, self.max_output_depth, blob):
            return f"nested more than {self.max_output_depth} levels deep (the limit)"
        return None

    def _in_thread(self, tool: Tool, arguments: dict[str, Any]) -> asyncio.Future[Any]:
        """Call a sync tool in one of the executor's worker threads (with the caller's
        context variables)."""
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(self.sync_workers,
                                                   thread_name_prefix="hermes-tool")
        call = functools.partial(contextvars.copy_context().run, tool.invoke, arguments)
        return asyncio.get_running_loop().run_in_executor(pool, call)

    def _truncate(self, envelope: dict[str, Any]) -> bool:
        return truncate_for_model(envelope, self.max_result_chars)


def truncate_for_model(envelope: dict[str, Any], limit: int) -> bool:
    """Shorten a long output in the envelope (for the model); ``True`` when it was.

    The model sees a preview of ``limit`` characters; the event log keeps the whole output.
    """
    output = envelope["output"]
    if output is None or isinstance(output, bool | int | float):
        return False
    text = output if isinstance(output, str) else to_json(
        output, serialize_unknown=True).decode()
    if len(text) <= limit:
        return False
    envelope["output"] = {"truncated": True, "total_chars": len(text),
                          "preview": text[:limit],
                          "note": "the output was cut for length; the event log has it all"}
    return True


def _progress(emit: Emit, call_id: str, tool: str) -> Any:
    """A progress callback that turns MCP progress notifications into events."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        emit(ToolCallProgress, call_id=call_id, tool=tool, progress=progress, total=total,
             message=message)

    return report


def _random() -> float:
    return random.random()


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error a failed plan raises: the first call's (the others' are added as notes).

    A plan's calls only raise what is not a tool's own failure (those become envelopes):
    the effects journal's store failing, an engine bug. The caller sees that error itself,
    as it would from one call, not an exception group.
    """
    errors = list(group.exceptions)
    first = errors[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    for other in errors[1:]:
        first.add_note(f"another call of the same plan failed too: {type(other).__name__}: "
                       f"{other}")
    return first


__all__ += ["is_planning_error"]


def is_planning_error(code: str) -> bool:
    """Whether an error code means the plan was wrong (the call was never made)."""
    return code in _PLANNING_ERRORS
