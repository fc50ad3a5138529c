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

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face
from hermes_fsm._internal.version import VERSION

if TYPE_CHECKING:  # imported on first use (see _FACE below); typed here for checkers
    from hermes_fsm.brain import Brain, BrainRequest, OpenAIBrain, RulesBrain
    from hermes_fsm.config import HermesConfig, build_orchestrator, load_config
    from hermes_fsm.contracts import Contract
    from hermes_fsm.engine import Orchestrator, TurnContext, TurnResult
    from hermes_fsm.errors import HermesError
    from hermes_fsm.events import Event, EventSink
    from hermes_fsm.replay import Replayer
    from hermes_fsm.server.app import create_app
    from hermes_fsm.store import InMemoryStore, PostgresStore, SQLiteStore
    from hermes_fsm.tools import Tool, ToolRegistry

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

_FACE = {
    **dict.fromkeys(["Brain", "BrainRequest", "OpenAIBrain", "RulesBrain"], "hermes_fsm.brain"),
    **dict.fromkeys(["HermesConfig", "build_orchestrator", "load_config"], "hermes_fsm.config"),
    "Contract": "hermes_fsm.contracts",
    **dict.fromkeys(["Orchestrator", "TurnContext", "TurnResult"], "hermes_fsm.engine"),
    "HermesError": "hermes_fsm.errors",
    **dict.fromkeys(["Event", "EventSink"], "hermes_fsm.events"),
    "Replayer": "hermes_fsm.replay",
    "create_app": "hermes_fsm.server.app",
    **dict.fromkeys(["InMemoryStore", "PostgresStore", "SQLiteStore"], "hermes_fsm.store"),
    **dict.fromkeys(["Tool", "ToolRegistry"], "hermes_fsm.tools"),
}
"""Where each name of the face lives. Every one is imported on first use, so ``import
hermes_fsm.cli.main`` (``hermes-fsm --help``) does not pay for the engine, the brains, the
memory tiers or the server; psycopg is an extra."""

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
here (imported on first use, like the face), but not part of the face — import them from
their module (type checkers see them there only)."""

__getattr__, __dir__ = lazy_face(__name__, {**_MOVED, **_FACE})
