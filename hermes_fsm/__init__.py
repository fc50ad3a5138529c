"""hermes-fsm: an explicit finite-state-machine orchestrator for LLM agents.

Every turn walks a declared graph; every state's output is guarded by a pydantic
contract; failures retry within bounds and then take a declared route; every step is an
event.

The names here are what an application needs; everything else lives in the subpackage of
its concept (``hermes_fsm.events``, ``hermes_fsm.graph``, ``hermes_fsm.memory`` …), and
every error in :mod:`hermes_fsm.errors`. ``create_app`` (the server: Starlette and the
ASGI app) and ``PostgresStore`` (psycopg, an extra) are imported when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from hermes_fsm._internal.version import VERSION
from hermes_fsm.brain import Brain, BrainRequest, OpenAIBrain, RulesBrain
from hermes_fsm.config import HermesConfig, build_orchestrator, load_config
from hermes_fsm.contracts import Contract
from hermes_fsm.engine import Orchestrator, TurnContext, TurnResult
from hermes_fsm.errors import HermesError
from hermes_fsm.events import Event, EventSink
from hermes_fsm.replay import Replayer
from hermes_fsm.store import InMemoryStore, SQLiteStore
from hermes_fsm.tools import Tool, ToolRegistry

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from hermes_fsm.server.app import create_app
    from hermes_fsm.store.postgres import PostgresStore

__version__ = VERSION

__all__ = [
    "Brain",
    "BrainRequest",
    "Contract",
    "Event",
    "EventSink",
    "HermesConfig",
    "HermesError",
    "InMemoryStore",
    "OpenAIBrain",
    "Orchestrator",
    "PostgresStore",
    "Replayer",
    "RulesBrain",
    "SQLiteStore",
    "Tool",
    "ToolRegistry",
    "TurnContext",
    "TurnResult",
    "__version__",
    "build_orchestrator",
    "create_app",
    "load_config",
]

_LAZY = {"create_app": "hermes_fsm.server.app", "PostgresStore": "hermes_fsm.store.postgres"}
"""Names of the face imported on first use: the server costs ~10 % of ``import hermes_fsm``
(measured with ``python -X importtime``), psycopg is an extra."""

_MOVED = {
    **dict.fromkeys(
        ["BrainError", "ConfigError", "ContextOverflow", "ContractCheckFailed", "ContractError",
         "GraphError", "HandlerError", "MCPServerError", "RetryableError", "SessionArchived",
         "SessionBusy", "SessionError", "StaleWriter", "StoreError", "ToolCallFailed",
         "ToolError", "UsageError"], "hermes_fsm.errors"),
    **dict.fromkeys(["EVENT_ADAPTER", "ListSink", "StructlogSink"], "hermes_fsm.events"),
    **dict.fromkeys(["BrainReply", "ToolDescription"], "hermes_fsm.brain"),
    **dict.fromkeys(["ContextBuilder", "ContextConfig"], "hermes_fsm.engine.context"),
    "ContractRegistry": "hermes_fsm.contracts",
    **dict.fromkeys(["FixedClock", "SequentialIds", "SystemClock", "UuidIds"],
                    "hermes_fsm.sources"),
    **dict.fromkeys(["Graph", "load_graph", "parse_graph"], "hermes_fsm.graph"),
    "Session": "hermes_fsm.engine.session",
}
"""Names the package root exported before it was cut down to the face above: still found
here (each module is imported already, so this costs nothing), but not part of the face —
import them from their module (type checkers see them there only)."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name) or _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_fsm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
