"""Preconditions and postconditions of tool contracts, in CEL (Common Expression Language).

A contract may declare what must hold before a tool runs and what its output must satisfy::

    registries:                     # what the tool's provider supplies, and an entry's shape
      stores: {type: object, properties: {confidence: {type: number}, name: {type: string}}}
    preconditions:
      - name: store_confirmed
        expr: "registries.stores[args.store].confidence >= 0.8"
        message:
          en: "store {args.store} is only {registries.stores[args.store].confidence} sure"
          zh: "门店ID {args.store} 在门店库中置信度仅{registries.stores[args.store].confidence}"
        confirm: {en: "please confirm the store's full name", zh: "建议确认门店全称"}
    postconditions:
      - expr: "output.units >= 0"
        message: "a negative stock count"

An expression sees ``args`` (the call's arguments), ``caller`` (the user id the engine
calls for), ``registries`` (only those the contract names), in a postcondition
``output``, and what the session knows: ``conversation`` (the conversation graph:
``entities``, the active entity nodes — ``id``, ``type``, ``value``, ``canonical``,
``confidence``, ``version`` — and ``latest``, the latest active node by type, e.g.
``conversation.latest.Store.confidence >= 0.8``) and ``memory`` (the user's active memory
items by key — ``value``, ``confidence``, ``type`` —, e.g.
``!has(memory.blocked) || memory.blocked.value != true``). It must be boolean.
``message`` and ``confirm`` are text (one string, or ``{en, zh}``) whose ``{...}`` parts
are CEL expressions too, rendered when the condition fails.

Everything is compiled once, when the contract loads, and checked there: an expression
that does not parse, names a variable other than those above, reads a field the input
schema (or output schema, or a registry's entry schema) does not have, or is not boolean
is refused with the file, line and reason (a key of ``conversation`` or ``memory``,
which only the session has, is checked when the call is made). The check evaluates the
expression against a probe built from the schemas (every field present, strings empty,
numbers zero), so a branch the probe does not reach is checked when the call is made: an
expression that fails to evaluate then counts as not holding (the call is refused; fail closed).

A failed precondition means the tool never runs: the executor returns ``error_code:
PRECONDITION_FAILED`` naming the condition, with the message and what to confirm in both
languages. A failed postcondition is an output violation under the contract's
``on_output_violation`` policy.

>>> cond = Condition(expr="args.n > 0", message="n must be positive")
>>> schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
>>> compiled = compile_conditions([cond], schema, {}, "precondition")
>>> compiled[0].holds({"args": {"n": 2}}), compiled[0].holds({"args": {"n": 0}})
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hermes_fsm._internal.cel_import import cel_core

if TYPE_CHECKING:
    import cel

__all__ = ["CompiledCompensation", "CompiledCondition", "Condition", "ConditionFailure",
           "Localized", "cel_context", "compile_cel", "compile_compensation",
           "compile_conditions", "narrow_registries"]


class Localized(BaseModel):
    """A text in English and Chinese (either may be left out: the other is used)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    en: str = ""
    zh: str = ""

    def pick(self, lang: str) -> str:
        """The text in ``lang`` (``en`` or ``zh``), else the other one."""
        return (self.zh or self.en) if lang == "zh" else (self.en or self.zh)


class Condition(BaseModel):
    """One precondition or postcondition of a tool contract (see the module docs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="", pattern=r"^$|^[A-Za-z_][\w.-]*$")
    """A short name for the condition (default: the expression itself)."""
    expr: str = Field(min_length=1)
    """A boolean CEL expression over ``args``, ``caller``, ``registries`` (and ``output``)."""
    message: str | Localized = ""
    """What is wrong when it does not hold; ``{cel}`` parts are rendered."""
    confirm: str | Localized = ""
    """What the user should confirm or correct (preconditions), e.g. the store's full name."""

    @property
    def label(self) -> str:
        """The condition's name, or its expression when it has none."""
        return self.name or self.expr


_SESSION = frozenset({"conversation", "memory"})  # what the session knows, read at call time
_ROOTS = {"precondition": frozenset({"args", "caller", "registries"}) | _SESSION,
          "postcondition": frozenset({"args", "caller", "registries", "output"}) | _SESSION}
_BOUND = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_KEYED = re.compile(r"registries\.([A-Za-z_]\w*)\s*\[\s*([A-Za-z_][\w.]*)\s*\]")
_MEMBER = re.compile(r"([A-Za-z_][\w.]*)\s+in\s+registries\.([A-Za-z_]\w*)(?![\w.\[])")
_ANY_USE = re.compile(r"registries\.([A-Za-z_]\w*)")


@dataclass(frozen=True, slots=True)
class ConditionFailure:
    """A condition that did not hold: its label, rendered texts, and why (an evaluation
    error, when it could not be evaluated)."""

    kind: str
    label: str
    message: Localized
    confirm: Localized
    error: str | None = None

    def text(self, lang: str = "en") -> str:
        """One line: the message, then what to confirm."""
        said = self.message.pick(lang) or (
            f"{self.kind} {self.label!r} does not hold" if lang != "zh"
            else f"{'前置条件' if self.kind == 'precondition' else '后置条件'} {self.label} 不成立")
        ask = self.confirm.pick(lang)
        if lang == "zh":
            return f"{said},{ask}" if ask else said
        return f"{said}; {ask}" if ask else said


@dataclass(frozen=True, slots=True)
class CompiledCondition:
    """A condition compiled once (its expression, its message's and confirm's parts)."""

    kind: str
    condition: Condition
    program: Any
    texts: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]  # (field, lang, parts)
    keyed: tuple[tuple[str, str], ...]  # (registry, key path): the entries it can reach
    whole: frozenset[str]  # registries it reads other than by a key
    roots: frozenset[str] = frozenset()  # the variables it (or its texts) reads

    def holds(self, context: Mapping[str, Any] | cel.Context) -> bool:
        """Whether the condition holds in ``context`` (raises when it cannot be evaluated).

        ``context`` is a mapping or a :class:`cel.Context` (built once for several
        conditions: converting the values into CEL is most of an evaluation's cost)."""
        return self.program.execute(_cel(context)) is True

    def check(self, context: Mapping[str, Any] | cel.Context) -> ConditionFailure | None:
        """``None`` when it holds; else what failed (an evaluation error counts as failed)."""
        try:
            if self.holds(context):
                return None
            error = None
        except Exception as exc:  # CEL raises KeyError, TypeError, RuntimeError ...
            error = f"{type(exc).__name__}: {exc}"
        rendered: dict[str, dict[str, str]] = {"message": {}, "confirm": {}}
        for field, lang, parts in self.texts:
            rendered[field][lang] = _render(parts, context)
        return ConditionFailure(self.kind, self.condition.label, Localized(**rendered["message"]),
                                Localized(**rendered["confirm"]), error)


def _cel(context: Mapping[str, Any] | cel.Context) -> Any:
    # a Mapping is converted; anything else is a cel.Context (cel's core is imported only
    # when an expression is first compiled, and without its package's CLI: issue 19)
    return dict(context) if isinstance(context, Mapping) else context


def compile_cel(source: str) -> Any:
    """``cel.compile(source)``; the first call imports cel's core
    (:mod:`hermes_fsm._internal.cel_import`)."""
    return cel_core().compile(source)


def cel_context(values: Mapping[str, Any]) -> cel.Context:
    """``cel.Context(values)``: converted into CEL values once, for several expressions."""
    context: cel.Context = cel_core().Context(
        values if isinstance(values, dict) else dict(values))
    return context


def _render(parts: tuple[tuple[str, Any], ...], context: Mapping[str, Any] | cel.Context) -> str:
    out = []
    for literal, program in parts:
        out.append(literal)
        if program is not None:
            try:
                value = program.execute(_cel(context))
            except Exception:
                value = "?"
            out.append(_show(value))
    return "".join(out)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _template(text: str, kind: str, where: str) -> tuple[tuple[str, Any], ...]:
    parts: list[tuple[str, Any]] = []
    last = 0
    for match in _PLACEHOLDER.finditer(text):
        source = match.group(1).strip()
        try:
            program = compile_cel(source)
        except Exception as exc:
            raise ConditionProblem(where, f"{{{source}}} does not compile: "
                                   f"{_first_line(exc)}") from None
        _check_roots(program, source, kind, where)
        parts.append((text[last:match.start()], program))
        last = match.end()
    parts.append((text[last:], None))
    return tuple(parts)


class ConditionProblem(ValueError):
    """A condition refused at load: ``where`` is its field path (``preconditions.0.expr``)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    lines = [line for line in text.splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


def _check_roots(program: Any, source: str, kind: str, where: str) -> None:
    bound = set(_BOUND.findall(source))
    unknown = sorted(set(program.variables()) - _ROOTS[kind] - bound)
    if unknown:
        known = ", ".join(sorted(_ROOTS[kind]))
        raise ConditionProblem(where, f"unknown variable {unknown[0]!r} in {source!r}; a "
                               f"{kind} can use {known}")


def compile_conditions(conditions: Sequence[Condition], input_schema: Mapping[str, Any],
                       registries: Mapping[str, Mapping[str, Any]],
                       kind: Literal["precondition", "postcondition"],
                       output_schema: Mapping[str, Any] | None = None,
                       field: str | None = None) -> tuple[CompiledCondition, ...]:
    """Compile and check ``conditions`` (raises :class:`ConditionProblem` with the field).

    Args:
        input_schema: the tool's input schema (the probe's ``args``).
        registries: registry name → the JSON Schema of one entry (the probe's entries).
        kind: ``precondition`` or ``postcondition`` (which may read ``output``).
        output_schema: the output schema (the probe's ``output``).
        field: the contract field named in errors (default ``kind + "s"``).
    """
    field = field or f"{kind}s"
    probe = _probe_context(input_schema, registries, output_schema)
    compiled = []
    for i, condition in enumerate(conditions):
        where = f"{field}.{i}.expr"
        try:
            program = compile_cel(condition.expr)
        except Exception as exc:
            raise ConditionProblem(where, f"the expression does not compile: "
                                   f"{_first_line(exc)}") from None
        _check_roots(program, condition.expr, kind, where)
        for name in set(_ANY_USE.findall(condition.expr)) - set(registries):
            raise ConditionProblem(where, f"registries.{name} is not a registry of the "
                                   "contract; name it under registries: (with the schema of "
                                   "an entry) or fix the spelling")
        try:
            result = program.execute(probe)
        except KeyError as exc:
            if set(program.variables()) & _SESSION:
                result = None  # a key the session may have at call time (fail closed then)
            else:
                raise ConditionProblem(
                    where, f"{condition.expr!r} reads {exc} which the schemas do not have; "
                    "check the field's name against the input, output or registry schema"
                ) from None
        except Exception as exc:
            raise ConditionProblem(where, f"{condition.expr!r} cannot be evaluated: "
                                   f"{_first_line(exc)}") from None
        if result is not None and not isinstance(result, bool):
            raise ConditionProblem(where, f"{condition.expr!r} is not boolean (it gives "
                                   f"{type(result).__name__}); compare it with something")
        texts = []
        for text_field in ("message", "confirm"):
            value = getattr(condition, text_field)
            langs = {"en": value} if isinstance(value, str) else {"en": value.en, "zh": value.zh}
            for lang, text in langs.items():
                if text:
                    texts.append((text_field, lang,
                                  _template(text, kind, f"{field}.{i}.{text_field}")))
        sources = [condition.expr, *(part.source for _, _, parts in texts
                                     for _, part in parts if part is not None)]
        keyed, whole = _reach(sources)
        roots = frozenset(program.variables()) | {
            v for _, _, parts in texts for _, part in parts if part is not None
            for v in part.variables()}
        compiled.append(CompiledCondition(kind, condition, program, tuple(texts), keyed, whole,
                                          roots & _ROOTS[kind]))
    return tuple(compiled)


@dataclass(frozen=True, slots=True)
class CompiledCompensation:
    """A compensation's ``done`` test and argument mapping, compiled once."""

    done: Any
    arguments: tuple[tuple[str, Any], ...]

    def is_done(self, status_output: Any, args: Mapping[str, Any]) -> bool:
        """Whether the status tool's output says the write happened (``False`` when the
        test cannot be evaluated)."""
        try:
            return self.done.execute({"output": status_output, "args": dict(args)}) is True
        except Exception:
            return False

    def arguments_for(self, args: Mapping[str, Any], output: Any) -> dict[str, Any]:
        """The status / compensating tool's arguments (raises when one cannot be made)."""
        context = {"args": dict(args), "output": output}
        return {name: program.execute(context) for name, program in self.arguments}


def compile_compensation(done: str, arguments: Mapping[str, str]) -> CompiledCompensation:
    """Compile a compensation's ``done`` and ``arguments`` (raises :class:`ConditionProblem`
    naming ``done`` or ``arguments.<name>``)."""
    compiled = []
    for where, source in [("done", done), *((f"arguments.{k}", v) for k, v in arguments.items())]:
        try:
            program = compile_cel(source)
        except Exception as exc:
            raise ConditionProblem(where, f"{source!r} does not compile: "
                                   f"{_first_line(exc)}") from None
        unknown = sorted(set(program.variables()) - {"args", "output"}
                         - set(_BOUND.findall(source)))
        if unknown:
            raise ConditionProblem(where, f"unknown variable {unknown[0]!r} in {source!r}; "
                                   "a compensation can use args and output")
        compiled.append((where, program))
    return CompiledCompensation(compiled[0][1], tuple(
        (where.removeprefix("arguments."), program) for where, program in compiled[1:]))


def _reach(sources: Sequence[str]) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
    """The registry entries ``sources`` read by a key — (registry, the key's dotted path,
    e.g. ``args.store``) — and the registries they read otherwise (whole)."""
    keyed: dict[tuple[str, str], None] = {}
    whole: set[str] = set()
    for source in sources:
        pairs = [*_KEYED.findall(source), *((n, k) for k, n in _MEMBER.findall(source))]
        for name, key in pairs:
            keyed.setdefault((name, key), None)
        if len(pairs) < len(_ANY_USE.findall(source)):
            whole |= set(_ANY_USE.findall(source))
    return tuple(keyed), frozenset(whole)


def _resolve(path: str, context: Mapping[str, Any]) -> Any:
    """The value at a dotted path (``args.store``) of ``context``, or ``None``."""
    node: Any = context
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def narrow_registries(conditions: Sequence[CompiledCondition],
                      registries: Mapping[str, Mapping[str, Any]],
                      context: Mapping[str, Any],
                      schemas: Mapping[str, Mapping[str, Any]] | None = None
                      ) -> dict[str, Any]:
    """The part of ``registries`` the conditions can reach in ``context``.

    A registry read only by a key (``registries.stores[args.store]``, ``args.store in
    registries.stores``) is given as just that entry (or none): converting a whole
    registry into CEL values costs time in proportion to its size, on every call. With
    ``schemas`` (registry → entry schema), an entry that is a mapping keeps only the
    fields its schema names.
    """
    schemas = schemas or {}

    def entry(name: str, value: Any) -> Any:
        fields = (schemas.get(name) or {}).get("properties")
        if isinstance(value, Mapping) and isinstance(fields, Mapping):
            return {k: value[k] for k in fields if k in value}
        return value

    whole = {name for c in conditions for name in c.whole}
    narrowed: dict[str, Any] = {
        name: {k: entry(name, v) for k, v in (registries.get(name) or {}).items()}
        for name in whole}
    for condition in conditions:
        for name, key_path in condition.keyed:
            if name in whole:
                continue
            part = narrowed.setdefault(name, {})
            key = _resolve(key_path, context)
            source: Mapping[Any, Any] = registries.get(name) or {}
            if isinstance(key, str | int) and key in source:
                part[key] = entry(name, source[key])
    return narrowed


def _sample(schema: Any, depth: int = 0) -> Any:
    """A probe value of ``schema``: every property present, strings empty, numbers zero."""
    if not isinstance(schema, Mapping) or depth > 8:
        return None
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            for option in schema[union]:
                if isinstance(option, Mapping) and option.get("type") != "null":
                    return _sample(option, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in schema):
        return {k: _sample(v, depth + 1) for k, v in (schema.get("properties") or {}).items()}
    return {"string": "", "integer": 0, "number": 0.0, "boolean": False,
            "array": []}.get(str(kind))


def _probe_context(input_schema: Mapping[str, Any], registries: Mapping[str, Mapping[str, Any]],
                   output_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    args = _sample(input_schema)
    if not isinstance(args, dict):
        args = {}
    return {"args": args, "caller": "",
            "registries": {name: {"": _sample(schema), 0: _sample(schema)}
                           for name, schema in registries.items()},
            "output": _sample(output_schema) if output_schema is not None else None,
            "conversation": {"entities": [], "latest": {}}, "memory": {}}
