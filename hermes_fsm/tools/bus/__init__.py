"""The execution bus (seed 003 §4): tool calls as messages, served by sandboxed workers.

- :mod:`~.messages`: ``EXECUTE_REQUEST`` / ``ACK`` / ``RESULT`` / ``ERROR`` / ``TIMEOUT``,
  versioned contracts with committed schemas (``contracts/bus``);
- :mod:`~.protocol`: the :class:`Bus` protocol;
- :mod:`~.inprocess` (the embedded default) and :mod:`~.redis_streams`: the transports;
- :mod:`~.remote`: the orchestrator's side — tools whose calls go over a bus, behind the
  unchanged :class:`~hermes_fsm.tools.executor.ToolExecutor`;
- :mod:`~.worker` and :mod:`~.sandbox`: the worker's side — the fence in the effects
  journal, and calls in a pool of resource-limited child processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.tools.bus.inprocess import InProcessBus
    from hermes_fsm.tools.bus.messages import (
        ExecuteAck,
        ExecuteError,
        ExecuteRequest,
        ExecuteResult,
        ExecuteTimeout,
        MalformedMessage,
    )
    from hermes_fsm.tools.bus.protocol import Bus, Delivery, WorkerInfo
    from hermes_fsm.tools.bus.redis_streams import RedisStreamsBus
    from hermes_fsm.tools.bus.remote import serve_over_bus
    from hermes_fsm.tools.bus.sandbox import SandboxLimits, SandboxPool
    from hermes_fsm.tools.bus.worker import ToolSpec, Worker, specs_of

__all__ = ["Bus", "Delivery", "ExecuteAck", "ExecuteError", "ExecuteRequest", "ExecuteResult",
           "ExecuteTimeout", "InProcessBus", "MalformedMessage", "RedisStreamsBus",
           "SandboxLimits", "SandboxPool", "ToolSpec", "Worker", "WorkerInfo", "serve_over_bus",
           "specs_of"]

__getattr__, __dir__ = lazy_face(__name__, {
    "Bus": "hermes_fsm.tools.bus.protocol",
    "Delivery": "hermes_fsm.tools.bus.protocol",
    "ExecuteAck": "hermes_fsm.tools.bus.messages",
    "ExecuteError": "hermes_fsm.tools.bus.messages",
    "ExecuteRequest": "hermes_fsm.tools.bus.messages",
    "ExecuteResult": "hermes_fsm.tools.bus.messages",
    "ExecuteTimeout": "hermes_fsm.tools.bus.messages",
    "InProcessBus": "hermes_fsm.tools.bus.inprocess",
    "MalformedMessage": "hermes_fsm.tools.bus.messages",
    "RedisStreamsBus": "hermes_fsm.tools.bus.redis_streams",
    "SandboxLimits": "hermes_fsm.tools.bus.sandbox",
    "SandboxPool": "hermes_fsm.tools.bus.sandbox",
    "ToolSpec": "hermes_fsm.tools.bus.worker",
    "Worker": "hermes_fsm.tools.bus.worker",
    "WorkerInfo": "hermes_fsm.tools.bus.protocol",
    "serve_over_bus": "hermes_fsm.tools.bus.remote",
    "specs_of": "hermes_fsm.tools.bus.worker",
})
