"""hermes-fsm: an explicit finite-state-machine orchestrator for LLM agents.

Every turn walks a declared graph; every state's output is guarded by a pydantic
contract; failures retry within bounds and then take a declared route; every step is an
event.
"""

from __future__ import annotations

from hermes_fsm._internal.version import VERSION
from hermes_fsm.brain.protocol import Brain, BrainReply, BrainRequest, ToolDescription
from hermes_fsm.contracts.base import Contract, ContractRegistry
from hermes_fsm.engine.context import ContextBuilder, ContextConfig
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.engine.session import Session
from hermes_fsm.engine.turn import TurnContext, TurnResult
from hermes_fsm.errors import (
    BrainError,
    ConfigError,
    ContextOverflow,
    ContractCheckFailed,
    ContractError,
    GraphError,
    HandlerError,
    HermesError,
    MCPServerError,
    RetryableError,
    SessionArchived,
    SessionBusy,
    SessionError,
    StaleWriter,
    StoreError,
    ToolCallFailed,
    ToolError,
    UsageError,
)
from hermes_fsm.events.model import EVENT_ADAPTER, Event
from hermes_fsm.events.sinks import EventSink, ListSink, StructlogSink
from hermes_fsm.graph.loader import load_graph, parse_graph
from hermes_fsm.graph.model import Graph
from hermes_fsm.sources import FixedClock, SequentialIds, SystemClock, UuidIds
from hermes_fsm.tools.registry import Tool, ToolRegistry

__version__ = VERSION

__all__ = [
    "EVENT_ADAPTER",
    "Brain",
    "BrainError",
    "BrainReply",
    "BrainRequest",
    "ConfigError",
    "ContextBuilder",
    "ContextConfig",
    "ContextOverflow",
    "Contract",
    "ContractCheckFailed",
    "ContractError",
    "ContractRegistry",
    "Event",
    "EventSink",
    "FixedClock",
    "Graph",
    "GraphError",
    "HandlerError",
    "HermesError",
    "ListSink",
    "MCPServerError",
    "Orchestrator",
    "RetryableError",
    "SequentialIds",
    "Session",
    "SessionArchived",
    "SessionBusy",
    "SessionError",
    "StaleWriter",
    "StoreError",
    "StructlogSink",
    "SystemClock",
    "Tool",
    "ToolCallFailed",
    "ToolDescription",
    "ToolError",
    "ToolRegistry",
    "TurnContext",
    "TurnResult",
    "UsageError",
    "UuidIds",
    "__version__",
    "load_graph",
    "parse_graph",
]
