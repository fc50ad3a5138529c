"""Configuration: a YAML file plus ``HERMES_*`` environment variables; none means embedded.

::

    graph: states/agent_turn.yaml     # the graph file (default: the bundled seven-state turn)
    brain:
      kind: rules                     # the offline rules brain
      rules_file: my_rules.yaml       # optional: your own rules (default: the bundled ones)
    busy_policy: refuse               # or queue
    timezone: Asia/Shanghai           # exact times use its offset (default: the machine's zone)
    history_window: 20                # messages kept per session
    log: {format: console, level: info}
    mcp_servers:                      # default: the bundled demo server over stdio; {} for none
      calendar: {transport: stdio, command: python, args: [-m, some.server], env: {TZ: UTC},
                 enabled_tools: [calendar_query]}
      notes: {transport: http, url: "http://127.0.0.1:8931/mcp", headers: {Authorization: ...}}
    tools: {contracts_dir: contracts/tools, max_result_chars: 4000,
            breaker: {window: 10, min_calls: 5, failure_rate: 0.5, cooldown_s: 30,
                      experience: {window_s: 600, min_calls: 10, failure_rate: 0.5}}}
    permissions: {default_roles: [user], users: {ops: {roles: [admin], grants: [wipe_db]}}}
    memory: {data_dir: ~/.local/share/hermes-fsm, redis_url: …, postgres_url: …,
             qdrant_url: …, embedder: {kind: hashing}}   # see hermes_fsm.memory.settings
    brain: {kind: openai, base_url: "http://127.0.0.1:8080/v1", model: smollm2,
            api_key_env: OPENAI_API_KEY}                  # any /v1/chat/completions server
    server: {host: 127.0.0.1, port: 8765, tokens: {s3cret: alice}}   # hermes-fsm serve
    sessions: {store: auto, lease: auto, schema: hermes,  # see SessionsConfig
               cache_mb: 64, event_log_turns: 0}      # memory per session: bounded
    context: {max_context_tokens: 8192, reserved_output_tokens: 1024,
              on_input_overflow: error}                   # see hermes_fsm.engine.context
    bus: {kind: redis, url: "redis://127.0.0.1:6379/0", group: default}  # see BusConfig
    telemetry: {exporter: otlp, endpoint: "http://127.0.0.1:4318/v1/traces"}  # or console
    conversation: {enabled: true, pending_ttl_s: 1800, decay_per_hour: 0.02,
                   confirm_below: 0.6, max_slot_failures: 2}  # see ConversationConfig
    budgets: {budget_s: 240, timeout_s: 90, states: {RESPONSE: 150}}  # over the graph's
    brains: {rules: {kind: rules}, big: {kind: openai, base_url: …, model: …}}
                                  # named brains; a graph state says `brain: big`

Relative paths are read relative to the config file. The file is found by ``--config``
or ``HERMES_CONFIG``; ``HERMES_GRAPH`` overrides ``graph``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hermes_fsm._internal.yaml_lines import LineDict, YamlProblem, line_at, load_yaml_file
from hermes_fsm.config.budgets import BudgetsConfig
from hermes_fsm.config.secrets import register_config_secrets
from hermes_fsm.engine.budget import ContextConfig
from hermes_fsm.errors import ConfigError
from hermes_fsm.memory.settings import EmbedderConfig, MemoryConfig
from hermes_fsm.tools.mcp.settings import MCPServerConfig

__all__ = ["BrainConfig", "BusConfig", "ConversationConfig", "HermesConfig", "LogConfig",
           "MCPServerConfig", "SandboxConfig", "ServerConfig", "SessionsConfig",
           "TelemetryConfig", "ToolsConfig", "load_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BrainConfig(_Strict):
    """Which brain decides state outputs: the offline rules, or an OpenAI-compatible server.

    ``kind: openai`` needs ``base_url`` (e.g. ``http://127.0.0.1:8080/v1``) and ``model``;
    the API key is read from the environment variable named by ``api_key_env`` (none for a
    local server). See :class:`hermes_fsm.brain.openai.OpenAIBrain` for the rest.
    """

    kind: Literal["rules", "openai"] = "rules"
    rules_file: Path | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    structured_output: Literal["auto", "json_schema", "json_object_schema",
                               "json_object"] = "auto"
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    contract_max_tokens: dict[str, Annotated[int, Field(ge=1)]] = {}
    stream_every_state: bool = False
    system_role: bool = True  # false: no system role in the chat template (Gemma 3)

    @model_validator(mode="after")
    def _openai_fields(self) -> BrainConfig:
        if self.kind == "openai" and not (self.base_url and self.model):
            raise ValueError("an openai brain needs `base_url` (e.g. http://127.0.0.1:8080/v1) "
                             "and `model`")
        return self


class ServerConfig(_Strict):
    """``hermes-fsm serve``: where to listen, and the bearer tokens (token → user id).

    ``HERMES_SERVER_TOKENS="token1=alice,token2=bob"`` replaces ``tokens``. Without tokens
    the server only listens on a loopback address.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    tokens: dict[str, str] = {}


class LogConfig(_Strict):
    """How events are logged through structlog (the CLI prints them regardless)."""

    format: Literal["console", "json", "off"] = "off"
    level: Literal["debug", "info", "warning", "error"] = "info"


def _demo_mcp_servers() -> dict[str, MCPServerConfig]:
    script = Path(__file__).resolve().parent.parent / "demo" / "calendar.py"  # stdlib only
    # only the tool the demo turn uses (its contract is pinned in contracts/tools): the
    # server's test tools (count_slowly, server_pid) stay out of the default catalog
    return {"demo": MCPServerConfig(transport="stdio", command="python", args=[str(script)],
                                    enabled_tools=["calendar_query", "calendar_events"])}


class ExperienceBreakerConfig(_Strict):
    """The breaker's view of the experience log (every session and process writing to it):
    a tool with at least ``min_calls`` calls in the last ``window_s`` seconds, of which at
    least ``failure_rate`` failed, is open. The log is read at most every ``refresh_s``."""

    enabled: bool = True
    window_s: float = Field(default=600.0, gt=0.0)
    min_calls: int = Field(default=10, ge=1)
    failure_rate: float = Field(default=0.5, gt=0.0, le=1.0)
    refresh_s: float = Field(default=5.0, ge=0.0)


class BreakerConfig(_Strict):
    """The circuit breaker of every tool: open when ``failure_rate`` of the last calls failed."""

    window: int = Field(default=10, ge=1)
    min_calls: int = Field(default=5, ge=1)
    failure_rate: float = Field(default=0.5, gt=0.0, le=1.0)
    cooldown_s: float = Field(default=30.0, ge=0.0)
    experience: ExperienceBreakerConfig = ExperienceBreakerConfig()


class CanaryConfig(_Strict):
    """A new version of a tool (``candidate``: its registered name, local or MCP) that gets
    ``share`` of the tool's calls, routed by a stable hash of the request (or the session,
    or the user); it rolls back when its error rate over the last ``window`` calls exceeds
    the stable version's by ``margin`` (see :mod:`hermes_fsm.tools.canary`). ``share: 0``
    rolls back by hand. Idempotent tools only, unless ``allow_writes``."""

    candidate: str = Field(min_length=1)
    share: float = Field(default=0.05, ge=0.0, le=1.0)
    margin: float = Field(default=0.1, ge=0.0, le=1.0)
    window: int = Field(default=200, ge=1)
    min_calls: int = Field(default=20, ge=1)
    by: Literal["request", "session", "user"] = "request"
    allow_writes: bool = False
    refresh_s: float = Field(default=5.0, ge=0.0)  # how often the experience log is read


class ToolsetConfig(_Strict):
    """A scenario's tools, offered to planning when the turn's intent is one of
    ``intents`` (``*``: every intent); see :mod:`hermes_fsm.tools.toolsets`."""

    tools: list[str] = Field(min_length=1)
    intents: list[str] = Field(min_length=1)
    resources: list[str] = []  # MCP resource URIs read into the scenario's requests


class ToolsConfig(_Strict):
    """Tool contracts and the executor's settings."""

    contracts_dir: Path | None = None  # pinned tool contracts (default: contracts/tools)
    local: list[str] = []  # your tools: module:attribute (see hermes_fsm.config.local_tools)
    demo: bool | None = None  # the demo tools too (default: only without local tools)
    max_result_chars: int = Field(default=4000, ge=100)
    breaker: BreakerConfig = BreakerConfig()
    canaries: dict[str, CanaryConfig] = {}  # by the stable tool's name
    toolsets: dict[str, ToolsetConfig] = {}  # by scenario; none: every tool is offered
    always: list[str] = []  # with toolsets: tools offered whatever the scenario
    prefer: dict[str, str] = {}  # overlapping tools: exposed name → the one hidden


class UserPermissions(_Strict):
    """A user's roles and explicit grants (tool names; destructive tools need one)."""

    roles: list[str] = ["user"]
    grants: list[str] = []


class PermissionsConfig(_Strict):
    """Who may call which tool."""

    default_roles: list[str] = ["user"]
    users: dict[str, UserPermissions] = {}


class SessionsConfig(_Strict):
    """Where sessions live (:mod:`hermes_fsm.store`), who may write one (:mod:`~.lease`).

    ``store: auto`` is PostgreSQL when ``memory.postgres_url`` (``HERMES_POSTGRES_URL``) is
    set, else a SQLite file (``sqlite_path``, default ``<data_dir>/sessions.sqlite3``);
    ``memory`` keeps sessions in this process only. ``lease: auto`` is Redis when
    ``memory.redis_url`` (``HERMES_REDIS_URL``) is set, else in-process.

    Memory per session: ``cache_mb`` bounds the sessions a process caches over its store
    (LRU by size; an evicted one is rebuilt from the store at its next turn; ``null``:
    unbounded); ``event_log_turns`` keeps that many turns in each cached session's
    in-process event log (default ``null``: every turn this process ran, which
    ``recording_text`` and other readers of the in-process log need; ``hermes-fsm serve``
    defaults to 0, since the server reads the store, which has every event).
    """

    store: Literal["auto", "memory", "sqlite", "postgres"] = "auto"
    sqlite_path: Path | None = None
    pg_schema: str = Field(default="hermes", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    lease: Literal["auto", "local", "redis"] = "auto"
    lease_ttl_s: float = Field(default=10.0, gt=0.0)
    cache_mb: float | None = Field(default=64.0, gt=0.0)
    event_log_turns: int | None = Field(default=None, ge=0)


class SandboxConfig(_Strict):
    """Each sandboxed call's limits (see :mod:`hermes_fsm.tools.bus.sandbox`)."""

    cpu_s: int | None = Field(default=30, gt=0)
    memory_mb: int | None = Field(default=1024, gt=0)
    open_files: int | None = Field(default=256, gt=0)
    processes: int | None = Field(default=None, gt=0)  # enforced for a non-root user only
    user: str | None = None  # run tools as this user (the worker must run as root)
    env: list[str] = []  # environment variables the tools may see


class BusConfig(_Strict):
    """The execution bus (:mod:`hermes_fsm.tools.bus`): where tool calls run.

    ``kind: none`` (the default) runs tools in the orchestrator's process, as ever;
    ``inprocess`` runs them in a sandboxed worker inside it; ``redis`` sends them over
    Redis Streams to ``hermes-fsm worker`` processes. ``HERMES_BUS_URL`` sets ``url`` and
    ``kind: redis``; without a ``url`` the Redis bus uses ``memory.redis_url``.
    ``registry`` names the local tools (``module:attribute`` of a ``ToolRegistry`` or a
    callable returning one) both sides load; ``tools`` the ones that go over the bus
    (default: all local tools), served by the workers of ``group``.
    """

    kind: Literal["none", "inprocess", "redis"] = "none"
    url: str | None = None
    prefix: str = "hermes"
    group: str = Field(default="default", pattern=r"^[A-Za-z0-9_.-]+$")
    registry: str = "hermes_fsm.demo.tools:build_demo_registry"
    tools: list[str] | None = None
    visibility_timeout_s: float = Field(default=30.0, gt=0.0)
    max_deliveries: int = Field(default=3, ge=1)
    heartbeat_s: float = Field(default=2.0, gt=0.0)
    concurrency: int = Field(default=4, ge=1)
    sandbox: SandboxConfig = SandboxConfig()
    mcp_servers: list[str] = []
    """Names of ``mcp_servers`` entries the workers of ``group`` start and serve (the
    orchestrator then does not start them and calls their tools over the bus; with
    ``kind: inprocess`` its own embedded worker runs them)."""


class TelemetryConfig(_Strict):
    """OpenTelemetry traces (off by default; ``console`` or ``otlp`` need the otel extra)."""

    exporter: Literal["none", "console", "otlp"] = "none"
    endpoint: str | None = None  # the OTLP/HTTP endpoint (default: the SDK's, or its env)
    service_name: str = "hermes-fsm"
class ConversationConfig(_Strict):
    """The conversation graph and its pending tasks
    (:class:`~hermes_fsm.conversation.graph.ConversationPolicy`): on or off, how long a
    clarification or an approval waits (``pending_ttl_s``), the time decay of a node's
    confidence and the level below which it is confirmed before use, how many answers
    may fail a slot's format before the task is dropped, and the graph's caps (pruned as
    each turn starts: ``max_entities``, ``max_deprecated``, ``max_intents``)."""

    enabled: bool = True
    pending_ttl_s: float = Field(default=1800.0, gt=0.0)
    decay_per_hour: float = Field(default=0.02, ge=0.0, le=1.0)
    confirm_below: float = Field(default=0.6, ge=0.0, le=1.0)
    max_slot_failures: int = Field(default=2, ge=0, le=10)
    max_entities: int = Field(default=64, ge=4)  # the graph's cap (pruned past it)
    max_deprecated: int = Field(default=8, ge=0)
    max_intents: int = Field(default=16, ge=1)


class HermesConfig(_Strict):
    """The whole configuration; every field has an embedded default."""

    graph: Path | None = None
    brain: BrainConfig = BrainConfig()
    busy_policy: Literal["refuse", "queue"] = "refuse"
    timezone: str | None = None  # IANA name; None: the machine's local zone (HERMES_TIMEZONE)
    history_window: int = Field(default=20, ge=1, le=10_000)
    log: LogConfig = LogConfig()
    mcp_servers: dict[str, MCPServerConfig] = Field(default_factory=_demo_mcp_servers)
    tools: ToolsConfig = ToolsConfig()
    permissions: PermissionsConfig = PermissionsConfig()
    memory: MemoryConfig = MemoryConfig()
    server: ServerConfig = ServerConfig()
    sessions: SessionsConfig = SessionsConfig()
    context: ContextConfig = ContextConfig()
    bus: BusConfig = BusConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    conversation: ConversationConfig = ConversationConfig()
    budgets: BudgetsConfig = BudgetsConfig()
    brains: dict[str, BrainConfig] = {}  # named brains a graph state picks with `brain: NAME`
    state_brains: dict[str, str] = {}  # state → brain name, over the graph file's `brain:`
    fallback_brains: dict[str, str] = {}  # state → the brain of its last attempt after a refusal
    source: str = Field(default="embedded defaults", exclude=True)

    @model_validator(mode="after")
    def _known_timezone(self) -> HermesConfig:
        if self.timezone is not None:
            try:
                ZoneInfo(self.timezone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"timezone {self.timezone!r} is not a known IANA zone; use a "
                                 "name like 'Asia/Shanghai' or 'UTC', or leave it out for the "
                                 "machine's local zone") from None
        return self


def load_config(path: str | Path | None = None,
                environ: Mapping[str, str] | None = None) -> HermesConfig:
    """Load the configuration from ``path``, else ``HERMES_CONFIG``, else embedded defaults,
    and register its secrets with the redaction policy (:mod:`hermes_fsm.config.secrets`).

    Raises:
        ConfigError: unreadable or malformed file (with file and line), or a wrong variable.
    """
    env = os.environ if environ is None else environ
    if path is None:
        path = env.get("HERMES_CONFIG") or None
    if path is None:
        config = HermesConfig()
    else:
        config = _from_file(Path(path))
    zone = env.get("HERMES_TIMEZONE")
    if zone:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"HERMES_TIMEZONE={zone!r} is not a known IANA zone; use a name "
                              "like 'Asia/Shanghai' or 'UTC', or unset it") from None
        config = config.model_copy(update={"timezone": zone})
    graph = env.get("HERMES_GRAPH")
    if graph:
        if not Path(graph).is_file():
            raise ConfigError(f"HERMES_GRAPH={graph!r} is not a file; point it at a graph YAML "
                              "or unset it to use the bundled graph")
        config = config.model_copy(update={"graph": Path(graph)})
    services = {"redis_url": "HERMES_REDIS_URL", "postgres_url": "HERMES_POSTGRES_URL",
                "qdrant_url": "HERMES_QDRANT_URL", "data_dir": "HERMES_DATA_DIR"}
    memory: dict[str, Any] = {field: env[var] for field, var in services.items()
                              if env.get(var)}
    if env.get("HERMES_EMBEDDER"):  # auto, use, hashing, minilm, openai
        try:
            memory["embedder"] = config.memory.embedder.model_copy(update={
                "kind": EmbedderConfig.model_validate({"kind": env["HERMES_EMBEDDER"]}).kind})
        except ValidationError as exc:
            raise ConfigError(f"HERMES_EMBEDDER={env['HERMES_EMBEDDER']!r} is not an embedder: "
                              "use auto, use, hashing, minilm or openai") from exc
    if memory:
        config = config.model_copy(update={"memory": config.memory.model_copy(update=memory)})
    bus_url = env.get("HERMES_BUS_URL")
    if bus_url:
        config = config.model_copy(update={"bus": config.bus.model_copy(
            update={"url": bus_url, "kind": "redis"})})
    register_config_secrets(config, env)  # never shown in an error, event or log from now on
    tokens = env.get("HERMES_SERVER_TOKENS")
    if tokens:
        server = config.server.model_copy(update={"tokens": _parse_tokens(tokens)})
        config = config.model_copy(update={"server": server})
        register_config_secrets(config, env)  # the file's tokens above, these too
    return config


def _parse_tokens(text: str) -> dict[str, str]:
    """``"token1=alice,token2=bob"`` → ``{"token1": "alice", "token2": "bob"}``."""
    tokens: dict[str, str] = {}
    for item in text.split(","):
        token, sep, user = item.strip().partition("=")
        if not sep or not token.strip() or not user.strip():
            raise ConfigError("HERMES_SERVER_TOKENS must look like 'token1=alice,token2=bob' "
                              f"(got an item {item.strip()!r}); fix or unset it")
        tokens[token.strip()] = user.strip()
    return tokens


def _from_file(path: Path) -> HermesConfig:
    try:
        doc: Any = load_yaml_file(path)
    except YamlProblem as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        raise ConfigError(f"{where}: {exc.problem}") from None
    if doc is None:
        doc = LineDict()
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a config file must be a mapping "
                          "(see hermes_fsm.config.settings)")
    try:
        config = HermesConfig.model_validate(doc)
    except ValidationError as exc:  # every mistake of the file, each with its line
        problems: list[tuple[int, str]] = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = line_at(doc, loc)
            field = ".".join(str(p) for p in loc)
            what = ("unknown field; remove it or check its spelling"
                    if err["type"] == "extra_forbidden" else err["msg"])
            problems.append((line or 0, f"{path}:{line}: {field}: {what}"))
        problems.sort(key=lambda p: p[0])  # in file order
        lines = [text for _, text in problems]
        if len(lines) > 1:
            lines.insert(0, f"{path}: {len(lines)} problems:")
        raise ConfigError("\n".join(lines)) from None
    base = path.resolve().parent
    updates: dict[str, Any] = {"source": str(path)}
    if config.graph is not None and not config.graph.is_absolute():
        updates["graph"] = base / config.graph
    if config.brain.rules_file is not None and not config.brain.rules_file.is_absolute():
        updates["brain"] = config.brain.model_copy(
            update={"rules_file": base / config.brain.rules_file})
    named = {name: b.model_copy(update={"rules_file": base / b.rules_file})
             for name, b in config.brains.items()
             if b.rules_file is not None and not b.rules_file.is_absolute()}
    if named:
        updates["brains"] = {**config.brains, **named}
    if config.tools.contracts_dir is not None and not config.tools.contracts_dir.is_absolute():
        updates["tools"] = config.tools.model_copy(
            update={"contracts_dir": base / config.tools.contracts_dir})
    path_ = config.sessions.sqlite_path
    if path_ is not None and not path_.expanduser().is_absolute():
        updates["sessions"] = config.sessions.model_copy(
            update={"sqlite_path": base / path_.expanduser()})
    tokenizer = config.context.tokenizer
    if tokenizer not in ("auto", "heuristic", "calibrated") and not Path(
            tokenizer).expanduser().is_absolute():  # a tokenizer.json next to the config
        updates["context"] = config.context.model_copy(
            update={"tokenizer": str(base / Path(tokenizer).expanduser())})
    if config.memory.data_dir is not None and not config.memory.data_dir.is_absolute():
        updates["memory"] = config.memory.model_copy(
            update={"data_dir": base / config.memory.data_dir.expanduser()})
    return config.model_copy(update=updates)
