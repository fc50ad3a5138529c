"""Every error hermes-fsm raises, in one tree.

::

    HermesError                      base: catch this to catch everything of ours
    ├── ConfigError                  a config file or HERMES_* variable is wrong
    ├── GraphError                   a graph file is malformed (file, line, what to change)
    ├── ContractError                a contract is missing, malformed or drifted
    │   └── ContractCheckFailed      `contracts check` found differences or unbumped changes
    ├── HandlerError                 a state handler failed in a way the graph cannot route
    │   └── RetryableError           raise from a handler to ask for a retry of the state
    ├── ToolError                    a tool is unknown, refused, or broke its contract
    │   ├── ToolCallFailed           raise from a tool: a failure with an error code
    │   └── MCPServerError           an MCP server is unreachable, died, or drifted
    ├── BrainError                   a brain could not produce an output
    ├── RecordingError               a recording cannot be read (format, version, a bad line)
    ├── ReplayFailed                 a replay found contract drift or a divergence
    ├── MemoryStoreError             a memory tier's store failed or refused a write
    │   └── VectorSizeMismatch       an embedder's vectors do not fit an existing collection
    ├── SessionError                 a session is unknown or unusable
    │   ├── SessionBusy              another turn holds that session (here or elsewhere)
    │   ├── SessionArchived          the session was archived; start a new one
    │   └── StaleWriter              append refused: lease lost, epoch superseded, seq off
    ├── StoreError                   a session store (PostgreSQL, SQLite) failed
    └── UsageError                   an API or CLI argument is wrong
        └── ContextOverflow          a message alone is over its token budget

Every message says what was wrong, where, and what to do next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

__all__ = [
    "BrainError",
    "ConfigError",
    "ContextOverflow",
    "ContractCheckFailed",
    "ContractError",
    "GraphError",
    "HandlerError",
    "HermesError",
    "MCPServerError",
    "MemoryStoreError",
    "MemoryStoreInUse",
    "RecordingError",
    "ReplayFailed",
    "RetryableError",
    "SessionArchived",
    "SessionBusy",
    "SessionError",
    "StaleWriter",
    "StoreError",
    "ToolCallFailed",
    "ToolError",
    "UsageError",
    "VectorSizeMismatch",
]


class HermesError(Exception):
    """Base class of every hermes-fsm error."""


class ConfigError(HermesError):
    """A configuration file or ``HERMES_*`` environment variable is wrong."""


class GraphError(HermesError):
    """A graph file is malformed.

    Attributes:
        path: the graph file.
        line: 1-based line of the offending node, when known.
        problem: what is wrong and what to change.
    """

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}")


class ContractError(HermesError):
    """A contract is missing, malformed, or does not match what it should."""


class ContractCheckFailed(ContractError):
    """``contracts check`` found a schema that differs from its model or an unbumped change.

    Attributes:
        problems: one line per problem found.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            f"{len(problems)} contract problem(s):\n"
            + "\n".join(f"  - {p}" for p in problems)
        )


class HandlerError(HermesError):
    """A state handler failed."""


class RetryableError(HandlerError):
    """Raise from a handler when the state should be attempted again (e.g. a flaky call).

    The engine re-enters the state up to its retry policy, then takes the failure route.
    """


class ToolError(HermesError):
    """A tool is unknown, refused, failed, or broke its contract."""


class ToolCallFailed(ToolError):
    """Raise from a tool to fail with an error code of its contract.

    ``retryable=None`` takes the retryability the tool contract declares for ``code``
    (not retryable when the contract does not list it).
    """

    def __init__(self, code: str, message: str, retryable: bool | None = None) -> None:
        self.code = code
        self.message = message
        self.retryable = retryable
        super().__init__(f"{code}: {message}")


class MCPServerError(ToolError):
    """An MCP server could not be started, died, or serves tools that drifted from their pins."""


class BrainError(HermesError):
    """A brain could not produce an output for a state."""


class RecordingError(HermesError):
    """A recording cannot be read: wrong format, unknown version, or a malformed line."""


class _Described(Protocol):
    def describe(self) -> str: ...


class FailedReplay(Protocol):
    """What :class:`ReplayFailed` reads of a replay's result
    (:class:`hermes_fsm.replay.ReplayResult` is one)."""

    @property
    def source(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def findings(self) -> Sequence[_Described]: ...
    @property
    def divergences(self) -> Sequence[_Described]: ...
    @property
    def error(self) -> str | None: ...


_Result = TypeVar("_Result", bound=FailedReplay)


class ReplayFailed(HermesError, Generic[_Result]):
    """A replay found contract drift or a divergence (raised unless
    ``raise_on_failure=False``).

    Generic in its result's type so that ``result`` keeps it where the raise is seen;
    ``except ReplayFailed as exc`` gives it as ``Any``.

    Attributes:
        result: the replay's result (a :class:`hermes_fsm.replay.ReplayResult`): every
            finding and divergence, each describing itself.
    """

    def __init__(self, result: _Result) -> None:
        self.result = result
        lines = [f.describe() for f in result.findings]
        lines += [d.describe() for d in result.divergences]
        if result.error:
            lines.append(result.error)
        super().__init__(f"{result.mode} of {result.source} failed:\n" + "\n".join(lines))


class MemoryStoreError(HermesError):
    """A memory tier (working, semantic, experience) failed; the message names the store."""


class MemoryStoreInUse(MemoryStoreError):
    """An embedded memory store is held by another process (the message names its pid)."""


class VectorSizeMismatch(MemoryStoreError):
    """An embedder's vector size differs from the one an existing collection was made with."""


class SessionError(HermesError):
    """A session is unknown or cannot be used."""


class SessionBusy(SessionError):
    """The session is held for another turn; turns of one session never interleave.

    ``detail`` says what holds it: a turn running in this process (the default), or a
    lease held elsewhere and when it expires (see ``describe_busy`` of the leases in
    :mod:`hermes_fsm.store.lease`).
    """

    def __init__(self, session_id: str,
                 detail: str = "a turn is running on it in this process") -> None:
        self.session_id = session_id
        self.detail = detail
        super().__init__(
            f"session {session_id!r} is busy: {detail}. "
            "Wait for that turn to finish, or create the Orchestrator with "
            "busy_policy='queue' to queue turns instead of refusing them."
        )


class SessionArchived(SessionError):
    """The session was archived (idle too long): its summary went to long-term memory.

    Turns on it are refused; a new session of the same user starts from that memory.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r} is archived: it was idle and its summary was moved to "
            "the user's long-term memory. Start a new session (omit the session id, or use a "
            "new one); it recalls what mattered from memory."
        )


class StaleWriter(SessionError):
    """An append was refused: this writer's hold on the session is gone or out of step.
    Nothing was written.

    ``reason`` says which, and the message claims no more than that:

    - ``"epoch"``: the session was claimed again since this writer claimed it (a newer
      epoch: another process, or another orchestrator on the same store, took it over);
    - ``"lease"``: the lease expired or was taken while the turn ran (refused before the
      store was asked: another process may hold the session now);
    - ``"seq"``: the epoch is still this writer's, so nobody took the session over, but
      the log is not at the seq the append expected: this process's events are out of
      step with the store (a bug);
    - ``"missing"``: the session is not in the store.
    """

    def __init__(self, session_id: str, detail: str, *, reason: str = "epoch") -> None:
        self.session_id = session_id
        self.reason = reason
        advice = _STALE_ADVICE.get(reason, _STALE_ADVICE["epoch"])
        super().__init__(f"session {session_id!r}: append refused, {detail}. {advice}")


_STALE_ADVICE = {
    "epoch": ("The session was claimed again since this turn claimed it (by another process, "
              "or another orchestrator on the same store); drop this turn and let that holder "
              "(or a resume) finish it."),
    "lease": ("Another process may hold the session now; drop this turn — the next turn or a "
              "resume finishes it from its last stored step (if turns outlive the lease, check "
              "the lease's store and its TTL)."),
    "seq": ("The epoch is still this writer's, so no other process took the session over: "
            "this process's events are out of step with the store (one numbered but not "
            "written, or written twice). The store stays consistent and the next turn reloads "
            "the session from it; please report this as a bug."),
    "missing": "Claim the session before appending to it.",
}


class StoreError(HermesError):
    """A session store failed (connection lost, disk full, schema too new)."""


class UsageError(HermesError):
    """An argument to the API or the CLI is wrong."""


class ContextOverflow(UsageError):
    """A message alone is over the input part of the context budget.

    Raised before the turn starts (``context.on_input_overflow: error``, the default);
    with ``truncate`` the brain gets the message cut to its budget instead, and the
    ``context_built`` event says so.
    """
