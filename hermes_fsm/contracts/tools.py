"""Tool contracts: one versioned YAML file per tool in ``contracts/tools/<name>.yaml``.

A contract says everything the executor and a model need to know about a tool::

    name: inventory_lookup
    version: 1.0.0
    description: Look up how many units of a product are in stock ... (written for a model)
    side_effects: read              # read | write | destructive
    idempotent: true                # optional; default: true for read tools only
    timeout_s: 5
    retry: {max_attempts: 3, backoff_s: 0.1, multiplier: 2, max_backoff_s: 2, jitter: 0.2}
    permissions: []                 # roles or grants the caller needs (all of them)
    errors:                         # the codes the tool may fail with
      NOT_FOUND: {retryable: false, description: no such SKU}
    on_output_violation: fail       # fail | log_only | {fallback: other_tool}
    input_schema: {...}             # JSON Schema of the arguments
    output_schema: {...}            # JSON Schema of the output (optional)
    approval: false                 # optional: a plan calling it waits for the user's yes
    slots:                          # optional: how the conversation fills an input
      order_id: {entity: Order, ask: '请问您的订单号是多少?', ask_en: 'What is your order number?'}
    registries: {stores: {...}}     # optional: registries the provider supplies (entry schema)
    preconditions: [{expr: ..., message: ..., confirm: ...}]   # optional, CEL: see
    postconditions: [{expr: ..., message: ...}]                # hermes_fsm.contracts.conditions

An input the schema ``required`` is a required slot of the task that calls the tool;
its ``pattern`` (and ``examples``, shown as the expected format) is what a value must
match before the tool runs. ``slots`` adds, per input, the entity type the conversation
graph resolves it from (pronouns and follow-ups pick the latest active node of that
type) and the question a clarification asks when it is missing.

A malformed file is refused at load with its file, line and field.

>>> contract = ToolContract(name="add", version="1.0.0", description="Add two integers.",
...                         input_schema={"type": "object"})
>>> contract.retry.max_attempts, contract.error_is_retryable("TIMEOUT")
(1, True)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import jsonschema
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from hermes_fsm._internal.data import data_path
from hermes_fsm._internal.schema_check import check_schema
from hermes_fsm._internal.yaml_lines import (
    LineDict,
    YamlProblem,
    line_at,
    load_yaml_file,
    load_yaml_text,
)
from hermes_fsm.contracts.conditions import (
    CompiledCondition,
    Condition,
    ConditionProblem,
    compile_compensation,
    compile_conditions,
)
from hermes_fsm.contracts.retry import RetryPolicy
from hermes_fsm.errors import ContractError

__all__ = [
    "BUILTIN_ERRORS",
    "Compensation",
    "ErrorCode",
    "Fallback",
    "SlotSpec",
    "ToolContract",
    "default_tool_contract_dir",
    "dump_tool_contract",
    "load_tool_contract",
    "load_tool_contracts",
]

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")

BUILTIN_ERRORS: dict[str, bool] = {
    "VALIDATION_FAILED": False,  # arguments broke the input schema: not called
    "UNKNOWN_TOOL": False,
    "PERMISSION_DENIED": False,
    "CIRCUIT_OPEN": False,  # the tool keeps failing; its breaker is open
    "TIMEOUT": True,
    "SERVER_UNAVAILABLE": True,  # an MCP server is down or restarting
    "OUTPUT_VIOLATION": False,  # the output broke the output schema (policy: fail)
    "PRECONDITION_FAILED": False,  # a precondition of the contract did not hold: not called
    "COMPENSATED": False,  # the write was undone by its compensating tool (a saga)
    "OUTPUT_TOO_LARGE": False,  # the output is beyond what is stored (depth, size)
    "OUTCOME_UNKNOWN": False,  # a crash hid whether a non-idempotent call ran: not repeated
    "TOOL_ERROR": False,
    "TOOL_EXCEPTION": False,
}
"""Error codes every tool may return, and whether each is retryable."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ErrorCode(_Strict):
    """An error code a tool may fail with."""

    retryable: bool
    description: str = ""


class Fallback(_Strict):
    """Output-violation policy: call another tool with the same arguments instead."""

    fallback: str = Field(min_length=1)


class Compensation(_Strict):
    """How a write tool's effect is checked and undone (the contract's ``compensation``).

    ``status`` is asked when a call ends in ``TIMEOUT`` or ``OUTCOME_UNKNOWN``; when its
    output makes ``done`` true the write happened (the call succeeds with the status
    output), otherwise — or when the status cannot be had — ``compensate`` runs. When a
    later call of the same plan fails, ``compensate`` undoes each write of the plan that
    succeeded, in reverse plan order (a saga). ``arguments`` maps each argument of the
    status and compensating tools to a CEL expression over ``args`` (the write's) and
    ``output`` (the write's output; ``null`` when unknown).
    """

    status: str | None = None
    done: str = "true"
    compensate: str = Field(min_length=1)
    arguments: dict[str, str] = {}


class SlotSpec(_Strict):
    """How the conversation fills one input of a tool (the contract's ``slots``).

    Attributes:
        entity: the conversation graph's entity type the input is resolved from (e.g.
            ``Product``, ``Warehouse``, ``Order``); ``None``: not an entity.
        ask: the clarification question when the input is missing (Chinese or any
            language; the expected format is appended from the schema).
        ask_en: the question in English (default: ``ask``).
    """

    entity: str | None = Field(default=None, pattern=r"^[A-Za-z][\w]*$")
    ask: str = ""
    ask_en: str = ""


class ToolContract(_Strict):
    """The versioned contract of one tool (see the module docstring for the file format)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z_][\w.-]*$")
    version: str
    description: str = Field(min_length=1)
    side_effects: Literal["read", "write", "destructive"] = "read"
    idempotent: bool | None = None  # None: read tools are, write/destructive ones are not
    timeout_s: float = Field(default=10.0, gt=0.0, le=3600.0)
    retry: RetryPolicy = RetryPolicy()
    permissions: tuple[str, ...] = ()
    errors: dict[str, ErrorCode] = {}
    on_output_violation: Literal["fail", "log_only"] | Fallback = "fail"
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    approval: bool = False
    """Whether a plan that calls the tool waits for the user's approval before it runs
    (destructive tools, sending on the user's behalf)."""
    slots: dict[str, SlotSpec] = {}
    """Per input: its entity type and clarification question (see :class:`SlotSpec`)."""
    registries: dict[str, dict[str, Any]] = {}
    """Registries the conditions read (supplied by the tool's provider): name → the JSON
    Schema of one entry."""
    preconditions: tuple[Condition, ...] = ()
    """CEL conditions that must hold before the tool runs
    (:mod:`hermes_fsm.contracts.conditions`)."""
    postconditions: tuple[Condition, ...] = ()
    """CEL conditions its output must satisfy (a failure is an output violation)."""
    compensation: Compensation | None = None
    """How a write is checked and undone (:class:`Compensation`)."""
    _compiled: tuple[tuple[CompiledCondition, ...], tuple[CompiledCondition, ...]] = \
        PrivateAttr(default=((), ()))
    _compensation: Any = PrivateAttr(default=None)

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not _SEMVER.match(value):
            raise ValueError(f"version {value!r} is not MAJOR.MINOR.PATCH (e.g. '1.0.0')")
        return value

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _int_is_a_float(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                check_schema(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
            problem = _ref_problem(value, value, "")
            if problem is not None:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _slots_are_inputs(self) -> ToolContract:
        known = self.input_schema.get("properties")
        for name in self.slots:
            if not isinstance(known, Mapping) or name not in known:
                raise ValueError(f"slots: {name!r} is not an input of the tool (not in "
                                 "input_schema.properties); name an input or remove it")
        return self

    @model_validator(mode="after")
    def _conditions_compile(self) -> ToolContract:
        try:
            pre = compile_conditions(self.preconditions, self.input_schema, self.registries,
                                     "precondition")
            post = compile_conditions(self.postconditions, self.input_schema, self.registries,
                                      "postcondition", output_schema=self.output_schema or {})
        except ConditionProblem as exc:
            raise PydanticCustomError("condition", "{where}: {problem}",
                                      {"where": exc.where, "problem": exc.problem}) from None
        self._compiled = (pre, post)
        if self.compensation is not None:
            try:
                self._compensation = compile_compensation(self.compensation.done,
                                                          self.compensation.arguments)
            except ConditionProblem as exc:
                raise PydanticCustomError("condition", "{where}: {problem}",
                                          {"where": f"compensation.{exc.where}",
                                           "problem": exc.problem}) from None
        return self

    def _private(self, name: str) -> Any:
        """A private attribute's value, read where pydantic keeps it (``__pydantic_private__``,
        documented on every model): read as an attribute, it goes by pydantic's
        ``__getattr__`` (~1.4 µs; the compiled conditions are read several times a call)."""
        private = self.__pydantic_private__
        return private[name] if private is not None else getattr(self, name)

    @property
    def compiled_preconditions(self) -> tuple[CompiledCondition, ...]:
        """The preconditions, compiled at load."""
        pre: tuple[CompiledCondition, ...] = self._private("_compiled")[0]
        return pre

    @property
    def compiled_compensation(self) -> Any:
        """The compensation's ``done`` and ``arguments``, compiled at load (or ``None``)."""
        return self._private("_compensation")

    @property
    def compiled_postconditions(self) -> tuple[CompiledCondition, ...]:
        """The postconditions, compiled at load."""
        post: tuple[CompiledCondition, ...] = self._private("_compiled")[1]
        return post

    def error_is_retryable(self, code: str) -> bool:
        """Whether ``code`` is retryable: the contract's table, then the built-in codes."""
        declared = self.errors.get(code)
        if declared is not None:
            return declared.retryable
        return BUILTIN_ERRORS.get(code, False)

    @property
    def is_idempotent(self) -> bool:
        """Whether making the call twice does no more than making it once.

        ``idempotent`` when given; else true for ``read`` tools only. A durable turn
        resumed after a crash repeats a call of unknown outcome only if this holds.
        """
        return self.idempotent if self.idempotent is not None else self.side_effects == "read"

    @property
    def fallback(self) -> str | None:
        """The fallback tool of the output-violation policy, if it is one."""
        policy = self.on_output_violation
        return policy.fallback if isinstance(policy, Fallback) else None

    def to_document(self) -> dict[str, Any]:
        """The contract as the plain mapping written to YAML (stable field order)."""
        doc = self.model_dump(mode="json", exclude_none=True)
        doc["retry"] = self.retry.model_dump()
        if not self.approval:  # the default: files of tools that need none stay as they were
            del doc["approval"]
        for field in ("registries", "preconditions", "postconditions"):
            if not doc.get(field):
                doc.pop(field, None)
            elif field != "registries":
                doc[field] = [c.model_dump(mode="json", exclude_defaults=True)
                              for c in getattr(self, field)]
        if not self.slots:
            del doc["slots"]
        else:
            doc["slots"] = {k: v.model_dump(exclude_defaults=True) for k, v in self.slots.items()}
        return doc


def default_tool_contract_dir() -> Path:
    """``contracts/tools`` of the source checkout (through the package's data link)."""
    return data_path("contracts", "tools")


def dump_tool_contract(contract: ToolContract) -> str:
    """The YAML text of a contract, stable so that re-exporting changes nothing."""
    return yaml.safe_dump(contract.to_document(), sort_keys=False, allow_unicode=True,
                          width=100)


def load_tool_contract(path: str | Path) -> ToolContract:
    """Load one contract file.

    Raises:
        ContractError: unreadable or malformed, with the file, the line and the field.
    """
    return _parse(lambda: load_yaml_file(path), str(path))


def parse_tool_contract(text: str, source: str = "<tool contract>") -> ToolContract:
    """Parse a contract from YAML text; ``source`` names it in errors (raises ContractError)."""
    return _parse(lambda: load_yaml_text(text, source), source)


def load_tool_contracts(directory: str | Path) -> dict[str, ToolContract]:
    """Every ``*.yaml`` contract of ``directory`` by tool name ({} when it does not exist).

    Raises:
        ContractError: a malformed file, or a file whose name is not its tool's name.
    """
    directory = Path(directory)
    contracts: dict[str, ToolContract] = {}
    if not directory.is_dir():
        return contracts
    for path in sorted(directory.glob("*.yaml")):
        contract = load_tool_contract(path)
        if path.stem != contract.name:
            raise ContractError(f"{path}:1: name: the file of tool {contract.name!r} must be "
                                f"named {contract.name}.yaml; rename the file or the tool")
        contracts[contract.name] = contract
    return contracts


def _parse(read: Any, source: str) -> ToolContract:
    try:
        doc = read()
    except YamlProblem as exc:
        raise ContractError(f"{source}:{exc.line or 1}: {exc.problem}") from None
    except OSError as exc:
        raise ContractError(f"{source}: cannot read the tool contract ({exc})") from None
    if not isinstance(doc, LineDict):
        raise ContractError(f"{source}:1: a tool contract is a mapping with name, version, "
                            "description, input_schema ...; see hermes_fsm.contracts.tools")
    try:
        return ToolContract.model_validate(doc)
    except ValidationError as exc:
        raise ContractError("\n".join(_explain(source, doc, err) for err in exc.errors())) from None


_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})  # values, not schemas


def _ref_problem(root: Any, node: Any, path: str) -> str | None:
    """Why a ``$ref`` of the schema ``root`` cannot be followed (``None`` when every one
    can): tool schemas are self-contained, references are local (``#/...``) and point
    at a part of the schema."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
                return (f"$ref {ref!r} at {path or '/'} is not a local reference: a tool "
                        "schema is self-contained; put the definition under $defs and "
                        "refer to it as '#/$defs/NAME'")
            target: Any = root
            for part in ref[2:].split("/") if ref != "#" else ():
                part = unquote(part).replace("~1", "/").replace("~0", "~")
                try:
                    target = target[int(part) if isinstance(target, list) else part]
                except (KeyError, IndexError, ValueError, TypeError):
                    return (f"$ref {ref!r} at {path or '/'} points at nothing in the schema; "
                            "fix the path or add the definition under $defs")
        children: Any = [(k, v) for k, v in node.items() if k not in _DATA_KEYWORDS]
    elif isinstance(node, list):
        children = enumerate(node)
    else:
        return None
    for key, child in children:
        problem = _ref_problem(root, child, f"{path}/{key}")
        if problem is not None:
            return problem
    return None


def _explain(source: str, doc: LineDict, err: Mapping[str, Any]) -> str:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p[:1].isupper()
                                              and p not in _keys(doc, err["loc"])))
    field = ".".join(str(p) for p in loc) or "file"
    if err["type"] == "condition":  # where: preconditions.0.expr
        where = tuple(int(p) if p.isdigit() else p for p in err["ctx"]["where"].split("."))
        line = line_at(doc, where) or 1
        return f"{source}:{line}: {err['ctx']['where']}: {err['ctx']['problem']}"
    if err["type"] == "extra_forbidden":
        what = "unknown field; remove it or check its spelling"
    elif err["type"] == "missing":
        what = "this required field is missing; add it"
    else:
        what = str(err["msg"]).removeprefix("Value error, ")
    return f"{source}:{line_at(doc, loc) or 1}: {field}: {what}"


def _keys(doc: Any, loc: Any) -> set[Any]:
    """Every key along ``loc`` (to tell data keys from pydantic's union-branch labels)."""
    keys: set[Any] = set()
    node = doc
    for part in loc:
        if isinstance(node, dict):
            keys |= set(node)
            node = node.get(part)
    return keys
