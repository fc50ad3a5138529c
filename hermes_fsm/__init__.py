"""hermes-fsm: an explicit finite-state-machine orchestrator for LLM agents.

Every turn walks a declared graph; every state's output is guarded by a pydantic
contract; failures retry within bounds and then take a declared route; every step is an
event.
"""

from __future__ import annotations

from .brain import Brain, BrainReply, BrainRequest, ToolDescription
from .context import ContextBuilder, ContextConfig
from .contracts import Contract, ContractRegistry
from .engine import Orchestrator
from .errors import (
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
from .events import EVENT_ADAPTER, Event
from .graph import Graph, load_graph, parse_graph
from .session import Session
from .sinks import EventSink, ListSink, StructlogSink
from .sources import FixedClock, SequentialIds, SystemClock, UuidIds
from .tools import Tool, ToolRegistry
from .turn import TurnContext, TurnResult

__version__ = "0.1.0"

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
