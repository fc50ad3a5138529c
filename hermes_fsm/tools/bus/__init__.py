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
