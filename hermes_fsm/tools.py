"""Local tools: a registry binding Python callables to JSON-Schema'd inputs, and the executor.

>>> registry = ToolRegistry()
>>> @registry.tool(description="Add two integers.")
... def add(a: int, b: int) -> int:
...     return a + b
>>> registry.check_call("add", {"a": 1, "b": "2"})
"arguments do not match the input schema: '2' is not of type 'integer' (at b)"
>>> registry.check_call("mul", {}) is not None
True

Every call goes through one pipeline (:class:`ToolExecutor`): check the arguments against
the input schema → run with a timeout → classify any error into the envelope
``{success: false, error_code, message, retryable}`` → emit start/finish events.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import jsonschema
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .brain import ToolDescription
from .errors import ToolError
from .events import ToolCallFinished, ToolCallStarted

__all__ = ["Tool", "ToolExecutor", "ToolRegistry", "ToolSource"]

SideEffects = Literal["read", "write", "destructive"]


@dataclass(slots=True)
class Tool:
    """A callable with its contract: name, description for a model, input schema, timeout."""

    name: str
    description: str
    fn: Callable[..., Any]
    input_schema: dict[str, Any]
    timeout_s: float = 10.0
    side_effects: SideEffects = "read"
    input_model: type[BaseModel] | None = field(default=None, repr=False)
    _validator: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        jsonschema.Draft202012Validator.check_schema(self.input_schema)
        self._validator = jsonschema.Draft202012Validator(self.input_schema)

    def argument_problem(self, arguments: Mapping[str, Any]) -> str | None:
        """``None`` when ``arguments`` satisfy the input schema, else the first problem.

        A tool made from a typed signature checks with its (strict) pydantic model first,
        which is much faster; the JSON Schema check then only words the problem.
        """
        if self.input_model is not None:
            try:
                self.input_model.model_validate(arguments)
                return None
            except ValidationError:
                pass
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"arguments do not match the input schema: {error.message}" + (
            f" (at {where})" if where else ""
        )

    def describe(self) -> ToolDescription:
        return ToolDescription(self.name, self.description, self.input_schema)


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
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{fn.__name__}_input", __config__=ConfigDict(extra="forbid", strict=True), **fields
    )
    return model


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a tool's input model, untitled."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


class ToolSource(Protocol):
    """Anything that can list tools into a registry (local modules now, MCP servers later)."""

    def tools(self) -> Iterable[Tool]: ...


class ToolRegistry:
    """Tools by name. Satisfies the Plan contract's ``ToolCatalog``."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._described: list[ToolDescription] | None = None
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ToolError(f"tool {tool.name!r} is registered twice; rename one of them")
        self._tools[tool.name] = tool
        self._described = None
        return tool

    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        timeout_s: float = 10.0,
        side_effects: SideEffects = "read",
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register a sync or async function as a tool, schema from its signature."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            doc = description or inspect.getdoc(fn) or ""
            if not doc:
                raise ToolError(
                    f"tool {fn.__name__}: give it a docstring or description= (models read it)"
                )
            model = model_from_signature(fn)
            self.add(
                Tool(
                    name=name or fn.__name__,
                    description=doc,
                    fn=fn,
                    input_schema=schema_of(model),
                    input_model=model,
                    timeout_s=timeout_s,
                    side_effects=side_effects,
                )
            )
            return fn

        return register

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise ToolError(f"unknown tool {name!r}; known tools: {known}") from None

    def names(self) -> list[str]:
        return sorted(self._tools)

    def describe(self) -> list[ToolDescription]:
        """Every tool as a brain sees it, by name (cached until a tool is added)."""
        if self._described is None:
            self._described = [self._tools[n].describe() for n in self.names()]
        return self._described

    def check_call(self, tool_name: str, arguments: dict[str, Any]) -> str | None:
        tool = self._tools.get(tool_name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return f"unknown tool {tool_name!r}; known tools: {known}"
        return tool.argument_problem(arguments)

    def __len__(self) -> int:
        return len(self._tools)


Emit = Callable[..., Any]
"""``emit(EventClass, **fields)``: how the executor reports calls (TurnContext.emit)."""


class ToolExecutor:
    """Runs planned calls concurrently through one pipeline and returns result envelopes."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def execute(
        self, calls: Sequence[tuple[str, str, dict[str, Any]]], emit: Emit
    ) -> list[dict[str, Any]]:
        """Run ``(call_id, tool_name, arguments)`` calls; one envelope per call, in order."""
        if len(calls) == 1:
            return [await self._run_one(*calls[0], emit)]
        return list(await asyncio.gather(*(self._run_one(*c, emit) for c in calls)))

    async def _run_one(
        self, call_id: str, tool_name: str, arguments: dict[str, Any], emit: Emit
    ) -> dict[str, Any]:
        emit(ToolCallStarted, call_id=call_id, tool=tool_name, arguments=arguments)
        started = time.perf_counter()
        envelope = await self._outcome(call_id, tool_name, arguments)
        duration_ms = (time.perf_counter() - started) * 1000
        if envelope["success"]:
            emit(ToolCallFinished, call_id=call_id, tool=tool_name, ok=True,
                 output=envelope["output"], duration_ms=duration_ms)
        else:
            error = {k: envelope[k] for k in ("error_code", "message", "retryable")}
            emit(ToolCallFinished, call_id=call_id, tool=tool_name, ok=False, error=error,
                 duration_ms=duration_ms)
        return envelope

    async def _outcome(
        self, call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        def failure(code: str, message: str, retryable: bool) -> dict[str, Any]:
            return {"call_id": call_id, "tool_name": tool_name, "success": False,
                    "error_code": code, "message": message, "retryable": retryable}

        problem = self.registry.check_call(tool_name, arguments)
        if problem is not None:
            code = "UNKNOWN_TOOL" if problem.startswith("unknown tool") else "VALIDATION_FAILED"
            return failure(code, problem, False)
        tool = self.registry.get(tool_name)
        try:
            async with asyncio.timeout(tool.timeout_s):
                result = tool.fn(**arguments)
                if inspect.isawaitable(result):
                    result = await _await(result)
        except TimeoutError:
            return failure("TIMEOUT", f"{tool_name} did not answer within {tool.timeout_s}s", True)
        except ToolError as exc:
            return failure("TOOL_ERROR", str(exc), False)
        except Exception as exc:  # a tool's own failure becomes an envelope, not a crash
            return failure("TOOL_EXCEPTION", f"{type(exc).__name__}: {exc}", False)
        return {"call_id": call_id, "tool_name": tool_name, "success": True, "output": result}


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
