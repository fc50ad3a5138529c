"""Tools and their registry: Python callables (and MCP tools) bound to versioned contracts.

>>> registry = ToolRegistry()
>>> @registry.tool(description="Add two integers.")
... def add(a: int, b: int) -> int:
...     return a + b
>>> registry.check_call("add", {"a": 1, "b": "2"})
"arguments do not match the input schema: '2' is not of type 'integer' (at b)"
>>> registry.check_call("mul", {}) is not None
True
>>> registry.get("add").contract.output_schema
{'type': 'integer'}

A tool's contract (:class:`~hermes_fsm.contracts.tools.ToolContract`) is generated from the
callable's typed signature, or written by hand in ``contracts/tools/<name>.yaml`` and bound
with ``@registry.tool(contract=...)``. The registry is the ``ToolCatalog`` the Plan
contract checks calls against; :meth:`ToolRegistry.catalog_for` gives the view of one
user (permissions applied). Tools whose circuit breaker is open, or whose MCP server is
not ready, are neither offered to the brain nor accepted in a plan.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import fastjsonschema
import jsonschema
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

from hermes_fsm.brain.protocol import ToolDescription
from hermes_fsm.contracts.formats import FAST_FORMATS, FORMAT_CHECKER
from hermes_fsm.contracts.retry import RetryPolicy
from hermes_fsm.contracts.tools import ErrorCode, Fallback, ToolContract, load_tool_contract
from hermes_fsm.errors import ToolError
from hermes_fsm.tools.breaker import CircuitBreaker, NoBreaker
from hermes_fsm.tools.canary import Canary
from hermes_fsm.tools.permissions import Caller, Permissions, permission_problem
from hermes_fsm.tools.server_prompts import ServerPrompt
from hermes_fsm.tools.toolsets import Toolsets

__all__ = ["CallerCatalog", "Tool", "ToolRegistry", "ToolSource", "model_from_signature",
           "schema_of"]

SideEffects = Literal["read", "write", "destructive"]


@dataclass(slots=True, eq=False)
class Tool:
    """A callable with its contract.

    Built either from the plain fields (a contract is made from them) or with
    ``contract=`` (the contract's fields win). ``fn`` takes the arguments as keywords, or
    as one mapping when ``pass_kwargs`` is false (MCP tools). ``available`` says why the
    tool cannot be called right now (e.g. its server is restarting), ``None`` when it can.
    ``check_output=False`` leaves the output check to someone else (the MCP client checks
    structured output against the schema the server advertised). ``own_timeout=True``
    says the callable enforces ``timeout_s`` itself (the MCP client's request timeout,
    which costs less than a timer of the executor's around every call). A sync ``fn``
    runs in a worker thread, where its timeout holds; ``inline=True`` calls it on the
    event loop instead (for a function that never blocks — an in-memory lookup: a thread
    costs tens of µs a call), where nothing can time it out.
    """

    name: str
    description: str
    fn: Callable[..., Any]
    input_schema: dict[str, Any]
    timeout_s: float = 10.0
    side_effects: SideEffects = "read"
    input_model: type[BaseModel] | None = field(default=None, repr=False)
    contract: ToolContract | None = field(default=None, repr=False)
    source: str = "local"
    pass_kwargs: bool = True
    available: Callable[[], str | None] | None = field(default=None, repr=False)
    check_output: bool = True
    own_timeout: bool = False
    inline: bool = False
    blocking: bool = field(default=False, init=False)
    """A sync local function not marked ``inline``: the executor calls it in a worker
    thread (see :class:`~hermes_fsm.tools.executor.ToolExecutor`)."""
    _validator: Any = field(default=None, repr=False)
    _fast_check: Any = field(default=None, repr=False)
    _output_check: Callable[[Any], str | None] | None = field(default=None, repr=False)
    _validate_args: Callable[[Any], Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.contract is None:
            self.contract = ToolContract(
                name=self.name, version="1.0.0", description=self.description,
                side_effects=self.side_effects, timeout_s=self.timeout_s,
                input_schema=self.input_schema)
        else:
            c = self.contract
            self.name, self.description, self.input_schema = c.name, c.description, c.input_schema
            self.timeout_s, self.side_effects = c.timeout_s, c.side_effects
        self.blocking = self.pass_kwargs and not self.inline and not _is_async(self.fn)
        # the input schema is a valid JSON Schema: the (frozen) ToolContract checked it
        self._validator = jsonschema.Draft202012Validator(
            self.input_schema, format_checker=FORMAT_CHECKER)
        self._fast_check = _compiled(self.input_schema, self._validator)
        self._output_check = (_output_checker(self.contract.output_schema)
                              if self.check_output else None)
        model = self.input_model
        if model is not None:  # its validator itself (every call asks): model_validate
            # only forwards to it, unless the model overrides it
            plain = getattr(model.model_validate, "__func__", None) is \
                BaseModel.model_validate.__func__  # type: ignore[attr-defined]
            self._validate_args = (model.__pydantic_validator__.validate_python if plain
                                   else model.model_validate)

    def argument_problem(self, arguments: Mapping[str, Any]) -> str | None:
        """``None`` when ``arguments`` satisfy the input schema, else the first problem.

        A tool made from a typed signature checks with its (strict) pydantic model first,
        which is much faster; the JSON Schema check then only words the problem.
        """
        if self._validate_args is not None:
            try:
                self._validate_args(arguments)
                return None
            except ValidationError:
                pass
        elif self._fast_check is not None:
            try:
                self._fast_check(arguments)
                return None
            except fastjsonschema.JsonSchemaException:
                pass
        elif self._validator.is_valid(arguments):
            return None
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"arguments do not match the input schema: {error.message}" + (
            f" (at {where})" if where else ""
        )

    def output_problem(self, output: Any) -> str | None:
        """``None`` when ``output`` satisfies the output schema (or there is none)."""
        check = self._output_check
        return None if check is None else check(output)

    def invoke(self, arguments: dict[str, Any], progress: Any = None) -> Any:
        """Call the function (its result may be awaitable).

        ``progress`` (an async ``(progress, total, message)`` callback) reaches tools that
        take arguments as one mapping (MCP tools); local tools do not report progress.
        """
        if self.pass_kwargs:
            return self.fn(**arguments)
        return self.fn(arguments) if progress is None else self.fn(arguments, progress)

    def describe(self) -> ToolDescription:
        """The tool as a brain sees it."""
        return ToolDescription(self.name, self.description, self.input_schema)


def _is_async(fn: Any) -> bool:
    """Whether calling ``fn`` returns a coroutine by its definition (a sync function that
    returns an awaitable counts as sync: what it does before returning may block)."""
    call = type(fn).__call__ if not inspect.isroutine(fn) else None  # a callable object
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def _output_checker(schema: dict[str, Any] | None) -> Callable[[Any], str | None] | None:
    """A fast check for the output schema: no schema and open objects need no jsonschema."""
    if schema is None or schema == {}:
        return None
    if set(schema) <= {"type", "additionalProperties", "title", "description"} and \
            schema.get("type") == "object" and schema.get("additionalProperties", True) is True:
        return lambda out: None if isinstance(out, dict) else (
            f"output does not match the output schema: {type(out).__name__} is not an object")
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    fast = _compiled(schema, validator)

    def check(output: Any) -> str | None:
        if fast is not None:
            try:
                fast(output)
                return None
            except fastjsonschema.JsonSchemaException:
                pass  # jsonschema words the problem
        elif validator.is_valid(output):
            return None
        error = jsonschema.exceptions.best_match(validator.iter_errors(output))
        where = "/".join(str(p) for p in error.absolute_path) if error else ""
        message = error.message if error else "invalid"
        return f"output does not match the output schema: {message}" + (
            f" (at {where})" if where else "")

    return check


_NEWER_KEYWORDS = ("prefixItems", "unevaluated", "dependentRequired", "dependentSchemas",
                   "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "minContains",
                   "maxContains")


def _compiled(schema: Mapping[str, Any], validator: Any) -> _Compiled | None:
    """A compiled check of ``schema`` (fastjsonschema: ~20× faster than interpreting it), or
    ``None`` — then jsonschema checks alone.

    fastjsonschema knows drafts up to 7: a schema using a keyword of 2019-09/2020-12 is
    left to jsonschema, so the compiled check never accepts what Draft 2020-12 refuses.
    """
    text = json.dumps(schema)
    if any(f'"{word}' in text for word in _NEWER_KEYWORDS):
        return None
    return _Compiled(schema, validator)


class _Compiled:
    """``schema`` compiled by fastjsonschema on its first call, not when the tool is
    registered (~2 ms a schema: a CLI process registers ~16 tools and calls one or two).
    Raises ``fastjsonschema.JsonSchemaException`` for an instance that does not match; a
    schema fastjsonschema cannot compile is checked by ``validator`` (jsonschema's) instead.
    """

    __slots__ = ("_check", "_schema", "_validator")

    def __init__(self, schema: Mapping[str, Any], validator: Any) -> None:
        self._schema, self._validator = schema, validator
        self._check: Callable[[Any], Any] | None = None

    def __call__(self, instance: Any) -> None:
        check = self._check
        if check is None:
            try:
                check = fastjsonschema.compile(dict(self._schema), formats=FAST_FORMATS)
            except Exception:  # an unusual schema: the interpreting validator handles it
                check = self._interpreted
            self._check = check
        check(instance)

    def _interpreted(self, instance: Any) -> None:
        if not self._validator.is_valid(instance):
            raise fastjsonschema.JsonSchemaException("does not match the schema")


def model_from_signature(fn: Callable[..., Any]) -> type[BaseModel]:
    """A strict, closed pydantic model of ``fn``'s keyword arguments, from its type hints."""
    fields: dict[str, Any] = {}
    hints = inspect.get_annotations(fn, eval_str=True)
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolError(f"tool {fn.__name__}: *args/**kwargs cannot be described; name them")
        annotation = hints.get(name, Any)
        default = ... if param.default is param.empty else param.default
        fields[name] = (annotation, default)
    model: type[BaseModel] = create_model(
        f"{fn.__name__}_input", __config__=ConfigDict(extra="forbid", strict=True), **fields
    )
    return model


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a tool's input model, untitled."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def output_schema_of(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The JSON Schema of ``fn``'s return annotation (``None`` when it has none or is Any)."""
    hint = inspect.get_annotations(fn, eval_str=True).get("return", inspect.Signature.empty)
    if hint in (inspect.Signature.empty, Any, None):
        return None
    schema = TypeAdapter(hint).json_schema()
    schema.pop("title", None)
    return schema


class ToolSource(Protocol):
    """Anything that can list tools into a registry (local modules, MCP servers)."""

    def tools(self) -> Iterable[Tool]: ...


class ToolRegistry:
    """Tools by name. Satisfies the Plan contract's ``ToolCatalog``.

    Args:
        tools: tools to register.
        permissions: resolves callers by user id (default: everyone has role ``user``).
        breaker: the circuit breaker the executor feeds and planning consults.
    """

    def __init__(self, tools: Iterable[Tool] = (), *, permissions: Permissions | None = None,
                 breaker: CircuitBreaker | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._described: list[ToolDescription] | None = None
        self.permissions = permissions or Permissions()
        self.breaker: CircuitBreaker = breaker or NoBreaker()
        self._gated: list[Tool] = []  # tools with an availability check
        self.registries: dict[str, Mapping[str, Any]] = {}
        """Registries the contracts' conditions read, by name (:meth:`provide_registry`)."""
        self.canaries: dict[str, Canary] = {}
        """Canary versions by the stable tool's name (:meth:`add_canary`)."""
        self.canary_log: Any = None
        """The experience log canaries read each version's error rate and rollbacks from
        (:func:`hermes_fsm.tools.canary.refresh`); ``None``: in-process counts only."""
        self._hidden: frozenset[str] = frozenset()  # candidates and overlapped tools
        self.preferred: dict[str, str] = {}
        """Overlapping tools (a local one and an MCP one doing the same): the hidden name →
        the one configuration exposes (``tools.prefer``); see :meth:`prefer`."""
        self.prompts: dict[str, ServerPrompt] = {}
        """MCP servers' prompt templates a turn loads by intent
        (:mod:`hermes_fsm.tools.server_prompts`), by ``<server>.<prompt>``."""
        self.toolsets: Toolsets | None = None
        """Tools by scenario (:mod:`hermes_fsm.tools.toolsets`): ``None``, every tool is
        offered to every planning request."""
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        """Register a tool (raises ToolError when the name is taken)."""
        if tool.name in self._tools:
            raise ToolError(f"tool {tool.name!r} is registered twice; rename one of them")
        self._tools[tool.name] = tool
        self._changed()
        return tool

    def provide_registry(self, name: str, entries: Mapping[str, Any]) -> None:
        """Supply the registry ``name`` (key → entry) that tool contracts' preconditions and
        postconditions read as ``registries.<name>`` (e.g. a store registry)."""
        self.registries[name] = entries

    def add_canary(self, canary: Canary) -> Canary:
        """Route a share of the calls of ``canary.stable`` to ``canary.candidate``
        (:mod:`hermes_fsm.tools.canary`); the candidate is no longer offered to brains.

        Either tool may be registered later (an MCP server's, once it is ready): until
        both are, every call goes to the stable tool.

        Raises:
            ToolError: the stable tool is known and not idempotent, and the canary does
                not ``allow_writes``; or the two names are the same.
        """
        if canary.stable == canary.candidate:
            raise ToolError(f"canary of {canary.stable!r}: the candidate must be another "
                            "registered tool (the new version under its own name)")
        tool = self._tools.get(canary.stable)
        if tool is not None:
            self._check_canary(canary, tool)
        self.canaries[canary.stable] = canary
        self._changed()
        return canary

    def prefer(self, exposed: str, hidden: str) -> None:
        """Of two overlapping tools (a local one and an MCP one, say), expose ``exposed``
        only: ``hidden`` is neither offered to brains nor accepted in a plan."""
        if exposed == hidden:
            raise ToolError(f"tools.prefer: {exposed!r} cannot hide itself; name the other "
                            "tool of the overlap")
        self.preferred[hidden] = exposed
        self._changed()

    @staticmethod
    def _check_canary(canary: Canary, tool: Tool) -> None:
        contract = tool.contract
        if contract is not None and not contract.is_idempotent and not canary.allow_writes:
            raise ToolError(f"canary of {tool.name!r}: the tool is not idempotent "
                            f"({contract.side_effects}), so a broken new version would leave "
                            "effects a rollback cannot undo; canary idempotent tools, or set "
                            "allow_writes: true")

    def canary_route(self, name: str, key: str) -> tuple[Tool, bool] | None:
        """Where a call of ``name`` with routing ``key`` goes when ``name`` has a canary:
        ``(tool, is_candidate)``; ``None`` when it has none."""
        canary = self.canaries.get(name)
        if canary is None:
            return None
        stable = self._tools.get(name)
        choice = canary.choose(key)
        chosen = self._tools.get(choice.tool) if choice.candidate else stable
        if chosen is None or stable is None:
            return None
        if choice.candidate and not canary.allow_writes and stable.contract is not None \
                and not stable.contract.is_idempotent:
            return stable, False
        return chosen, choice.candidate

    def remove(self, name: str) -> None:
        """Unregister a tool (no error when it is not registered)."""
        if self._tools.pop(name, None) is not None:
            self._changed()

    def replace_source(self, source: str, tools: Iterable[Tool]) -> None:
        """Replace every tool of ``source`` (e.g. ``mcp:calendar``) with ``tools``."""
        for name in [n for n, t in self._tools.items() if t.source == source]:
            del self._tools[name]
        self._changed()
        for tool in tools:
            self.add(tool)

    def _changed(self) -> None:
        self._described = None
        self._hidden = frozenset(c.candidate for c in self.canaries.values()) | \
            frozenset(self.preferred)
        self._gated = [t for t in self._tools.values() if t.available is not None]

    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        timeout_s: float = 10.0,
        side_effects: SideEffects = "read",
        contract: ToolContract | str | Path | None = None,
        version: str = "1.0.0",
        retry: RetryPolicy | None = None,
        permissions: Iterable[str] = (),
        errors: Mapping[str, ErrorCode | Mapping[str, Any]] | None = None,
        output_schema: dict[str, Any] | None = None,
        on_output_violation: Literal["fail", "log_only"] | Fallback = "fail",
        inline: bool = False,
        approval: bool = False,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register a sync or async function as a tool.

        With ``contract`` (a :class:`ToolContract` or the path of its YAML file) the
        function is bound to that contract; otherwise a contract is generated from the
        function's typed signature, its docstring (or ``description``) and the options.
        A sync function runs in a worker thread unless ``inline`` (see :class:`Tool`).
        ``approval``: a plan calling it waits for the user's yes (the contract's field).
        """

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            model = model_from_signature(fn)
            schema = schema_of(model)
            if contract is not None:
                bound = contract if isinstance(contract, ToolContract) else \
                    load_tool_contract(contract)
                self.add(Tool(bound.name, bound.description, fn, bound.input_schema,
                              contract=bound, inline=inline,
                              input_model=model if schema == bound.input_schema else None))
                return fn
            doc = description or inspect.getdoc(fn) or ""
            if not doc:
                raise ToolError(
                    f"tool {fn.__name__}: give it a docstring or description= (models read it)"
                )
            generated = ToolContract(
                name=name or fn.__name__, version=version, description=doc,
                side_effects=side_effects, timeout_s=timeout_s, retry=retry or RetryPolicy(),
                permissions=tuple(permissions),
                errors={k: v if isinstance(v, ErrorCode) else ErrorCode(**v)
                        for k, v in (errors or {}).items()},
                on_output_violation=on_output_violation, input_schema=schema,
                output_schema=output_schema if output_schema is not None
                else output_schema_of(fn), approval=approval)
            self.add(Tool(generated.name, doc, fn, schema, contract=generated, input_model=model,
                          inline=inline))
            return fn

        return register

    def get(self, name: str) -> Tool:
        """The tool ``name``; raises ToolError (listing the known tools) when unknown."""
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise ToolError(f"unknown tool {name!r}; known tools: {known}") from None

    def find(self, name: str) -> Tool | None:
        """The tool ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Every registered tool name, sorted."""
        return sorted(self._tools)

    def tools(self) -> list[Tool]:
        """Every registered tool, by name."""
        return [self._tools[n] for n in self.names()]

    def unavailable(self, tool: Tool) -> str | None:
        """Why ``tool`` cannot be called now (server not ready, breaker open), or ``None``."""
        if tool.available is not None:
            why = tool.available()
            if why is not None:
                return why
        breaker = self.breaker
        return breaker.problem(tool.name) if breaker.any_open() else None

    def describe(self, caller: Caller | None = None) -> list[ToolDescription]:
        """Every tool a brain may plan with now, by name.

        Tools whose breaker is open or whose server is not ready are left out; with a
        ``caller``, so are the tools that caller may not call.
        """
        if self._described is None:  # a canary's candidate is reached through its stable name
            self._described = [self._tools[n].describe() for n in self.names()
                               if n not in self._hidden]
        described = self._described
        if self._gated or self.breaker.any_open():
            described = [d for d in described if self.unavailable(self._tools[d.name]) is None]
        if caller is not None:
            described = [d for d in described if self._permission(caller, d.name) is None]
        return described

    def _permission(self, caller: Caller, name: str) -> str | None:
        tool = self._tools[name]
        contract = tool.contract
        assert contract is not None
        if not contract.permissions and tool.side_effects != "destructive":
            return None
        return permission_problem(caller, name, tool.side_effects, contract.permissions)

    def check_call(self, tool_name: str, arguments: dict[str, Any],
                   caller: Caller | None = None) -> str | None:
        """``None`` when the call may be made, else what is wrong with it."""
        tool = self._tools.get(tool_name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return f"unknown tool {tool_name!r}; known tools: {known}"
        if tool_name in self._hidden:
            if tool_name in self.preferred:
                exposed = self.preferred[tool_name]
                return (f"tool {tool_name!r} overlaps {exposed!r}, which the configuration "
                        f"exposes instead (tools.prefer); plan {exposed!r}")
            stable = next(c.stable for c in self.canaries.values() if c.candidate == tool_name)
            return (f"tool {tool_name!r} is the canary version of {stable!r}; plan {stable!r} "
                    "(a share of its calls reaches the new version)")
        if (tool.available is not None or self.breaker.any_open()) and \
                (why := self.unavailable(tool)) is not None:
            return f"tool {tool_name!r} is unavailable: {why}"
        if caller is not None and (denied := self._permission(caller, tool_name)) is not None:
            return f"permission denied: {denied}"
        return tool.argument_problem(arguments)

    def catalog_for(self, user_id: str) -> CallerCatalog:
        """The catalog as ``user_id`` sees it (for the Plan contract and the brain)."""
        return CallerCatalog(self, self.permissions.caller(user_id))

    def __len__(self) -> int:
        return len(self._tools)


class CallerCatalog:
    """A registry seen by one caller: only permitted tools are offered or accepted."""

    __slots__ = ("caller", "registry")

    def __init__(self, registry: ToolRegistry, caller: Caller) -> None:
        self.registry = registry
        self.caller = caller

    def check_call(self, tool_name: str, arguments: dict[str, Any]) -> str | None:
        """``None`` when this caller may make the call, else what is wrong with it."""
        return self.registry.check_call(tool_name, arguments, self.caller)

    def describe(self) -> list[ToolDescription]:
        """The tools this caller may plan with now."""
        return self.registry.describe(self.caller)
