"""Tools whose calls travel over the bus: the orchestrator's side.

:func:`serve_over_bus` swaps a registry's local tools for stand-ins with the same
contracts whose function sends an :class:`~.messages.ExecuteRequest` and waits for how it
ends. Everything else of the executor pipeline stays in the orchestrator and unchanged:
validation, permissions, the breaker, retries (each attempt is a new request with its
own idempotency key), the output check, the effects journal, the audit events. The engine
keeps seeing a :class:`~hermes_fsm.tools.executor.ToolExecutor`.

A reply maps onto the executor's envelope: ``EXECUTE_RESULT`` is the output,
``EXECUTE_ERROR`` a :class:`~hermes_fsm.errors.ToolCallFailed` with its code, and
``EXECUTE_TIMEOUT`` a ``TIMEOUT`` failure — retryable only for an idempotent tool
that no worker took (otherwise its effect is unknown). A bus that fails under the send
(Redis away) is ``SERVER_UNAVAILABLE``, retryable for an idempotent tool only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.tools.bus.messages import CallerInfo, ExecuteRequest, Reply, RetryInfo
from hermes_fsm.tools.bus.protocol import Bus
from hermes_fsm.tools.bus.tracing import request_span, trace_context
from hermes_fsm.tools.executor import current_call
from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["RemoteCall", "bus_readiness", "serve_over_bus"]


class RemoteCall:
    """The function of a bus-served tool: one request per invocation.

    Args:
        bus: the transport.
        group: the tool group whose workers serve it.
        tool: the local tool it stands for (its contract names version, timeout, retry
            policy and idempotency).
        registry: resolves the caller's roles and grants, sent with the request.
        trace: returns the trace context to carry (default: OpenTelemetry's current one,
            ``{}`` when tracing is off; see :mod:`~.tracing`).
    """

    def __init__(self, bus: Bus, group: str, tool: Tool, registry: ToolRegistry,
                 trace: Callable[[], dict[str, str]] | None = None) -> None:
        self.bus, self.group, self.tool, self.registry = bus, group, tool, registry
        self.trace = trace
        self.__name__ = tool.name

    def request(self, arguments: dict[str, Any]) -> ExecuteRequest:
        """The request for one invocation (the current call's ids, or fresh ones)."""
        contract = self.tool.contract
        assert contract is not None
        context = current_call.get()
        request_id = uuid.uuid4().hex
        if context is not None:
            context.attempt += 1
            call_id, user, session, attempt = (context.call_id, context.caller,
                                               context.session_id, context.attempt)
        else:
            call_id, user, session, attempt = f"adhoc-{request_id[:12]}", "anonymous", None, 1
        # with a session the key is stable (a resumed turn's repeat finds the recorded
        # outcome); without one it is unique, so calls of unrelated processes never meet
        scope = session if session is not None else f"adhoc-{request_id}"
        caller = self.registry.permissions.caller(user)
        turn_id = call_id.rpartition("-s")[0] or None
        return ExecuteRequest(
            request_id=request_id, session_id=session, turn_id=turn_id, call_id=call_id,
            idempotency_key=f"{scope}/{call_id}/a{attempt}", tool_name=self.tool.name,
            tool_version=contract.version, idempotent=contract.is_idempotent,
            input_params=arguments, timeout_ms=max(1, int(self.tool.timeout_s * 1000)),
            retry_policy=RetryInfo(attempt=attempt, max_attempts=contract.retry.max_attempts),
            caller=CallerInfo(user_id=caller.user_id, roles=caller.roles, grants=caller.grants),
            trace=self.trace() if self.trace is not None else trace_context(),
            sent_at=time.time())

    async def __call__(self, **arguments: Any) -> Any:
        """Send the call and return its output, or raise its structured failure."""
        context = current_call.get()
        with request_span(self.tool.name, context.call_id if context else "") as span:
            request = self.request(arguments)
            span.set_attribute("hermes.request_id", request.request_id)
            span.set_attribute("hermes.attempt", request.retry_policy.attempt)
            reply = await self._send(request)
            span.set_attribute("hermes.outcome", reply.kind if reply.kind != "EXECUTE_ERROR"
                               else reply.error_code)
        if reply.kind == "EXECUTE_RESULT":
            return reply.output_data
        if reply.kind == "EXECUTE_ERROR":
            raise ToolCallFailed(reply.error_code, reply.error_message, reply.retryable)
        idempotent = request.idempotent
        untaken = reply.reason.startswith("no worker")
        raise ToolCallFailed(
            "TIMEOUT", f"{self.tool.name} got no answer over the bus within "
            f"{request.timeout_ms / 1000:g}s ({reply.reason}; request {request.request_id})",
            idempotent and untaken)

    async def _send(self, request: ExecuteRequest) -> Reply:
        try:
            return await self.bus.call(request, self.group)
        except ToolCallFailed:
            raise
        except Exception as exc:  # the bus is away: the request may or may not be out
            raise ToolCallFailed(
                "SERVER_UNAVAILABLE", f"the bus ({self.bus.name}) failed sending "
                f"{self.tool.name}: {type(exc).__name__}: {exc}", request.idempotent) from exc


def serve_over_bus(registry: ToolRegistry, bus: Bus, group: str = "default",
                   names: Iterable[str] | None = None,
                   trace: Callable[[], dict[str, str]] | None = None) -> list[str]:
    """Replace the local tools ``names`` (default: every local tool) of ``registry`` with
    stand-ins that call ``group``'s workers over ``bus``; returns the names replaced.

    MCP tools (``source`` ``mcp:…``) stay where they are.
    """
    wanted = set(names) if names is not None else None
    replaced: list[str] = []
    for tool in registry.tools():
        if tool.source != "local" or (wanted is not None and tool.name not in wanted):
            continue
        remote = Tool(tool.name, tool.description, RemoteCall(bus, group, tool, registry, trace),
                      tool.input_schema, contract=tool.contract, source=f"bus:{group}",
                      input_model=tool.input_model, own_timeout=True)
        registry.remove(tool.name)
        registry.add(remote)
        replaced.append(tool.name)
    return replaced


async def bus_readiness(registry: ToolRegistry) -> dict[str, dict[str, Any]]:
    """One readiness check per bus tool group of ``registry``: ``ready`` when a live worker
    (its heartbeat not expired) serves every tool the registry sends to that group.

    ``{}`` when no tool goes over a bus. A bus that cannot be asked is not ready (the
    error is the check's).
    """
    groups: dict[tuple[int, str], tuple[Bus, set[str]]] = {}
    for tool in registry.tools():
        fn = tool.fn
        if isinstance(fn, RemoteCall):
            _bus, names = groups.setdefault((id(fn.bus), fn.group), (fn.bus, set()))
            names.add(tool.name)
    checks: dict[str, dict[str, Any]] = {}
    for (_key, group), (bus, names) in groups.items():
        try:
            workers = [w for w in await bus.workers() if w.group == group]
        except Exception as exc:  # reported in the readiness document, not raised
            checks[f"bus:{group}"] = {"ready": False, "bus": bus.name,
                                      "error": f"{type(exc).__name__}: {exc}"}
            continue
        served = set().union(*(set(w.tools) for w in workers)) if workers else set()
        missing = sorted(names - served)
        checks[f"bus:{group}"] = {"ready": not missing, "bus": bus.name,
                                  "workers": [w.worker_id for w in workers],
                                  "tools": sorted(names), "unserved": missing}
    return checks
