"""The rule book of the rules brain: the YAML file format, validated and compiled at load.

Every mapping is closed (an unknown field is an error naming the file and line); regexes and
answer templates are compiled once; ``aliases`` tables are the slot normalisers. The packaged
book is ``hermes_fsm/data/rules.yaml``; :class:`~hermes_fsm.brain.rules.RulesBrain` runs one.
"""

from __future__ import annotations

import re
import string
import types
from collections.abc import Callable, Mapping, Sequence
from functools import cache, cached_property, partial
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, model_validator

from hermes_fsm._internal.yaml_lines import YamlProblem, line_at, load_yaml_file, load_yaml_text
from hermes_fsm.errors import ConfigError

__all__ = ["Answers", "IntentRule", "MemoryRule", "PlannedCall", "RuleBook", "Text", "TimeKind",
           "ToolMemoryRule", "Variant", "capture_group", "detect_language"]


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_SPACES = re.compile(r"\s+")
_UPPER = re.compile(r"(?<![\\?])[A-Z]")  # an upper-case letter, not \W nor (?P<
_REF = re.compile(r"^\{(\w+)(\?)?\}$")
_FACT_REF = re.compile(r"^\{@([\w.-]+)\.(\w+)\}$")  # "{@contact_lookup.email}"

TimeKind = Literal["instant", "day", "range", "reference_day"]
"""How an intent's time slot is made exact (:mod:`hermes_fsm.conversation.times`):
``instant`` an ISO date-time with offset, ``day`` an ISO date, ``range`` first and last
day (``<slot>_start``, ``<slot>_end``), ``reference_day`` the day a comparison means
("上个月": the same day a month back)."""
_BUILTIN_NORMALIZERS: dict[str, Callable[[str], str]] = {"upper": str.upper, "lower": str.lower}


def _canonical(names: Mapping[str, str], value: str) -> str:
    """The key ``names`` gives ``value`` (ignoring case and spaces: "iPhone15 Pro" is
    "iphone 15 pro"); else ``value`` lower-cased."""
    return names.get(_SPACES.sub("", value.lower()), value.lower())


def detect_language(text: str) -> str:
    """``"zh"`` when ``text`` contains CJK characters, else ``"en"``."""
    return "en" if text.isascii() or not _CJK.search(text) else "zh"


def _regex(value: Any) -> re.Pattern[str]:
    if not isinstance(value, str):
        raise ValueError("a regex must be a string (quote it)")
    try:  # messages are lower-cased before matching; IGNORECASE is slow, so only if needed
        return re.compile(value, re.IGNORECASE if _UPPER.search(value) else 0)
    except re.error as exc:
        raise ValueError(f"bad regex {value!r}: {exc}; fix the pattern") from None


_Regex = Annotated[re.Pattern[str], PlainValidator(_regex)]


def _fields_of(template: str) -> frozenset[str]:
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"bad template {template!r}: {exc}; write {{{{ for a brace") from None
    if any(not n or n[0].isdigit() for n in names):
        raise ValueError(f"template {template!r} has a positional field; name it, e.g. {{sku}}")
    return frozenset(re.split(r"[.\[]", n, maxsplit=1)[0] for n in names)


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Text(_Rules):
    """A template in English and Chinese, with ``str.format`` fields."""

    en: str
    zh: str

    @model_validator(mode="after")
    def _parse(self) -> Text:
        _ = self.fields  # parsed (and cached) at load: a bad template fails here
        return self

    @cached_property
    def fields(self) -> dict[str, frozenset[str]]:
        """The names each language's template uses."""
        return {"en": _fields_of(self.en), "zh": _fields_of(self.zh)}


class Variant(Text):
    """An answer template, used when its ``when`` values match and all its fields exist."""

    when: dict[str, Any] = {}
    items: dict[str, Text] = {}


class IntentRule(_Rules):
    """Patterns that classify a message as ``name``, and regexes that fill its slots."""

    name: str = Field(min_length=1)
    confidence: float = Field(ge=0.0, le=1.0)
    needs_tools: bool = False
    patterns: list[_Regex] = Field(min_length=1)
    extract: list[_Regex] = []
    normalize: dict[str, str] = {}
    parameters: dict[str, Any] = {}
    times: dict[str, TimeKind] = {}
    tool: str | None = Field(default=None, min_length=1)
    """A tool planned for this intent without a ``plans`` entry: its arguments are the slots
    named like its input schema's properties, typed by that schema (needs tools)."""

    @model_validator(mode="after")
    def _check(self) -> IntentRule:
        if self.tool is not None:
            self.needs_tools = True
        if any(not p.groupindex for p in self.extract):
            raise ValueError("each extract regex needs a named group, e.g. (?P<sku>...)")
        if unknown := set(self.normalize) - {g for p in self.extract for g in p.groupindex}:
            raise ValueError(f"normalize names {sorted(unknown)}, which no extract regex fills")
        filled = {g for p in self.extract for g in p.groupindex} | set(self.parameters)
        if unknown := set(self.times) - filled:
            raise ValueError(f"times names {sorted(unknown)}, which no extract regex or "
                             "parameter fills")
        return self

    def matches(self, low: str) -> bool:
        """Whether the lower-cased message belongs to this intent."""
        return any(p.search(low) for p in self.patterns)

    def slots(self, text: str, low: str,
              normalizers: Mapping[str, Callable[[str], str]]) -> dict[str, Any]:
        """Slots from the extract regexes' named groups; the first value of each wins, put
        through its ``normalize`` entry (a name in ``normalizers``)."""
        found: dict[str, Any] = {}
        for pattern in self.extract:
            match = pattern.search(low)
            for slot in match.groupdict() if match else ():
                value = capture_group(match, slot, text, low)  # type: ignore[arg-type]
                if value and slot not in found:
                    norm = self.normalize.get(slot)
                    found[slot] = normalizers[norm](value) if norm else value
        return found


def capture_group(match: re.Match[str], group: str, text: str, low: str) -> str:
    """A group of a match on ``low``, cut from ``text`` to keep its case when lengths agree."""
    if match[group] is None:
        return ""
    same = len(text) == len(low)
    return (text[match.start(group):match.end(group)] if same else match[group]).strip()


class Fallback(_Rules):
    """The intent of a message no rule matches."""

    name: str = "unknown"
    confidence: float = Field(default=0.2, ge=0.0, le=1.0)


class PlannedCall(_Rules):
    """A tool call planned for an intent; ``"{slot}"`` / ``"{slot?}"`` arguments take slots."""

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = {}
    reasoning: str = Field(min_length=1)
    requires: list[str] = []  # slots that must be there for the call, though no argument

    @model_validator(mode="after")
    def _check(self) -> PlannedCall:
        needed = [*self.required, *self.requires]
        if extra := _fields_of(self.reasoning) - set(needed):
            raise ValueError(f"reasoning uses {sorted(extra)}; use only required slots "
                             f"({', '.join(needed) or 'none'})")
        return self

    @cached_property
    def refs(self) -> dict[str, tuple[str, bool]]:
        """Argument → (slot, optional) for the arguments that take a slot."""
        return {arg: (m[1], bool(m[2])) for arg, v in self.arguments.items()
                if isinstance(v, str) and (m := _REF.match(v))}

    @property
    def required(self) -> list[str]:
        """The slots the call cannot be made without."""
        return [slot for slot, optional in self.refs.values() if not optional]

    @cached_property
    def fact_refs(self) -> dict[str, tuple[str, str]]:
        """Argument → (tool, field) for ``"{@tool.field}"`` arguments: a field of an earlier
        call's output in this turn (the call waits for a later planning round)."""
        return {arg: (m[1], m[2]) for arg, v in self.arguments.items()
                if isinstance(v, str) and (m := _FACT_REF.match(v))}

    def arguments_for(self, params: Mapping[str, Any],
                      facts: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The arguments filled from ``params`` (and ``facts``: tool name → its output);
        ``None`` when a required slot is missing (or a slot of ``requires``, or a fact)."""
        if any(slot not in params for slot in self.requires):
            return None
        args, refs, fact_refs = {}, self.refs, self.fact_refs
        for arg, value in self.arguments.items():
            if arg in fact_refs:
                tool, field = fact_refs[arg]
                output = (facts or {}).get(tool)
                if not isinstance(output, Mapping) or field not in output:
                    return None
                args[arg] = output[field]
            elif arg not in refs and isinstance(value, str) and "{" in value:
                try:  # a text with slots in it ("Sales {period_start} – {period_end}")
                    args[arg] = value.format_map(params)
                except (KeyError, ValueError, IndexError):
                    return None
            elif arg not in refs:
                args[arg] = value
            elif refs[arg][0] in params:
                args[arg] = params[refs[arg][0]]
            elif not refs[arg][1]:
                return None
        return args


class MemoryRule(_Rules):
    """A memory update taken from a message matching ``patterns``, and how to acknowledge it."""

    key: str = Field(min_length=1)
    patterns: list[_Regex] = Field(min_length=1)
    value: str | None = None
    values: dict[str, str] = {}
    memory_type: Literal["preference", "fact", "progress", "correction"] = "preference"
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    ack: Variant
    normalize: str | None = None  # an `aliases` table: the value is the canonical key
    fills: str | None = None  # the slot a request that leaves it out takes from this memory

    @model_validator(mode="after")
    def _check(self) -> MemoryRule:
        if self.value is None and any("value" not in p.groupindex for p in self.patterns):
            raise ValueError("each pattern needs a (?P<value>...) group, or give a fixed value")
        if extra := _fields_of(self.key) - {"value"}:
            raise ValueError(f"key may only use {{value}}, not {sorted(extra)}")
        return self


class ToolMemoryRule(_Rules):
    """A tool result worth remembering: a memory update made from the output of ``tool``
    (``key`` and ``value`` are templates over its output's fields), with the evidence in
    the seed's form, ``tool:<tool>:<field>…`` (``tool:store_stock:hz_xh_001:IP15-128``),
    about the graph node of ``target`` (an output field holding a node's canonical value)."""

    tool: str = Field(min_length=1)
    key: str = Field(min_length=1)
    value: str = Field(min_length=1)
    evidence: list[str] = []
    target: str | None = None
    memory_type: Literal["preference", "fact", "progress", "correction"] = "fact"
    confidence: float = Field(default=0.9, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _parse(self) -> ToolMemoryRule:
        _fields_of(self.key), _fields_of(self.value)  # a bad template fails at load
        return self


def _variants(*pairs: tuple[str, str]) -> Callable[[], list[Variant]]:
    return lambda: [Variant(en=en, zh=zh) for en, zh in pairs]


class Answers(_Rules):
    """Answer templates: per tool, per intent (replies, ask), and for the other cases.

    Every section has a default, so a rules file needs only what it changes: a tool
    without a template of its own is answered by ``generic`` (``{tool}``, ``{output}``:
    a text result as it is, else its JSON), and a tool a plan named that was not offered
    to the turn by ``not_offered``.
    """

    tools: dict[str, list[Variant]] = {}
    replies: dict[str, list[Variant]] = {}
    ask: dict[str, list[Variant]] = {}
    generic: list[Variant] = Field(min_length=1, default_factory=_variants(
        ("{tool} returned: {output}", "{tool} 的结果:{output}")))
    failure: list[Variant] = Field(min_length=1, default_factory=_variants(
        ("Sorry, that could not be done: {message}.", "抱歉,未能完成:{message}。")))
    no_facts: list[Variant] = Field(min_length=1, default_factory=_variants(
        ("I tried, but the tools returned nothing I can answer from.",
         "我尝试了查询,但工具没有返回可用的结果。")))
    unavailable: list[Variant] = Field(min_length=1, default_factory=_variants(
        ("Sorry, I couldn't do that this time; please try again.",
         "抱歉,这次没能完成,请再试一次。")))
    not_offered: list[Variant] = Field(min_length=1, default_factory=_variants(
        ("Sorry, I can't use the tool {tool} now: it is not among the tools available to this "
         "turn (not configured, its server is down, or not permitted for you).",
         "抱歉,目前无法使用工具 {tool}:它不在本轮可用的工具中(未配置、服务器不可用或无权限)。")))
    from_memory: list[Variant] = [Variant(
        en="(From what you told me before, I used {value_label} for the {slot}.)",
        zh="(按你之前告诉我的偏好,{slot_label}用的是{value_label}。)")]

    def reply_for(self, intent: str) -> list[Variant]:
        """The reply templates of ``intent``; the built-in last resort for the fallback
        intent when the file has none."""
        return self.replies.get(intent) or _LAST_RESORT


_LAST_RESORT = [Variant(en="Sorry, I did not understand that; could you say it another way?",
                        zh="抱歉,我没有理解,可以换个说法吗?")]


class RuleBook(_Rules):
    """The rules of a :class:`RulesBrain` as loaded from YAML (see ``data/rules.yaml``)."""

    version: Literal[1] = 1
    labels: dict[str, Text] = {}
    aliases: dict[str, dict[str, list[str]]] = {}
    separator: Text = Text(en=", ", zh="、")
    intents: list[IntentRule] = Field(min_length=1)
    fallback: Fallback = Fallback()
    plans: dict[str, list[PlannedCall]] = {}
    answers: Answers = Field(default_factory=Answers)
    memory: list[MemoryRule] = []
    tool_memory: list[ToolMemoryRule] = []

    @cached_property
    def normalizers(self) -> dict[str, Callable[[str], str]]:
        """Normaliser by name: ``upper``, ``lower``, and one per ``aliases`` table (a value
        named in the table becomes its canonical key; any other value is lower-cased)."""
        found = dict(_BUILTIN_NORMALIZERS)
        for table_name, table in self.aliases.items():
            names = {_SPACES.sub("", n.lower()): key for key, ns in table.items()
                     for n in (key, *ns)}
            found[table_name] = partial(_canonical, names)
        return found

    @classmethod
    def default(cls) -> RuleBook:
        """The packaged rules (``hermes_fsm/data/rules.yaml``), loaded once."""
        return _default_rules()

    @classmethod
    def from_file(cls, path: str | Path) -> RuleBook:
        """Load a rules file.

        Raises:
            ConfigError: unreadable or malformed; names the file, line and field.
        """
        return cls._load(lambda: load_yaml_file(path), str(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "<rules>") -> RuleBook:
        """Load rules from YAML text; ``source`` names it in errors (raises ConfigError)."""
        return cls._load(lambda: load_yaml_text(text, source), source)

    @classmethod
    def _load(cls, read: Callable[[], Any], source: str) -> RuleBook:
        try:
            doc = read()
        except YamlProblem as exc:
            raise ConfigError(f"{source}:{exc.line or 1}: {exc.problem}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{source}: a rules file is a mapping with intents, plans, "
                              "answers and memory; start from hermes_fsm/data/rules.yaml")
        try:
            book = cls.model_validate(doc)
        except ValidationError as exc:
            problems = [(e["loc"], _explain(e)) for e in exc.errors()]
        else:
            problems = book._cross_check()
        if problems:
            raise ConfigError("\n".join(
                f"{source}:{line_at(doc, loc) or 1}: {_dotted(loc)}: {what}"
                for loc, what in problems))
        return book

    def _cross_check(self) -> list[tuple[tuple[Any, ...], str]]:
        names = {rule.name for rule in self.intents}
        problems: list[tuple[tuple[Any, ...], str]] = [
            (("plans", i), f"plans for unknown intent {i!r}; intents: {', '.join(sorted(names))}")
            for i in self.plans if i not in names]
        # a planned tool without answers.tools.<tool> is answered by answers.generic
        known = set(_BUILTIN_NORMALIZERS) | set(self.aliases)
        tables = ", ".join(sorted(self.aliases)) or "none declared"
        for n, rule in enumerate(self.intents):
            problems += [(("intents", n, "normalize", slot), f"unknown normaliser {name!r}; "
                          f"use upper, lower or a table of `aliases` ({tables})")
                         for slot, name in rule.normalize.items() if name not in known]
            if rule.needs_tools and rule.name not in self.plans and rule.tool is None:
                problems.append((("intents", n, "needs_tools"), f"intent {rule.name!r} needs "
                                 f"tools but has no plan; add plans.{rule.name}, or name "
                                 "its tool (tool: NAME)"))
            if not rule.needs_tools and rule.name not in self.answers.replies:
                problems.append((("intents", n, "name"), f"no reply template for intent "
                                 f"{rule.name!r}; add answers.replies.{rule.name}"))
        last = self.answers.replies.get(self.fallback.name)
        if last is not None and \
                not any(not v.when and not v.fields["en"] | v.fields["zh"] for v in last):
            problems.append((("answers", "replies"), f"answers.replies.{self.fallback.name} "
                             "needs a variant without fields or `when` (the last resort)"))
        return problems

    def label(self, value: Any, lang: str) -> str:
        """The display label of ``value`` in ``lang`` (the value itself when it has none)."""
        text = self.labels.get(value) if isinstance(value, str) else None
        return getattr(text, lang) if text is not None else str(value)

    def say(self, variants: Sequence[Variant], lang: str, values: Mapping[str, Any]) -> str | None:
        """The first of ``variants`` that renders with ``values`` in ``lang``, else ``None``."""
        base: dict[str, Any] | None = None
        for variant in variants:
            try:
                if variant.items:
                    ctx = self._context(values, lang, variant.items)
                else:
                    ctx = base = base if base is not None else self._context(values, lang, {})
                if variant.fields[lang] <= ctx.keys() and all(
                        k in ctx and ctx[k] == v for k, v in variant.when.items()):
                    return str(getattr(variant, lang).format_map(ctx))
            except (LookupError, ValueError, TypeError, AttributeError):
                continue
        return None

    def _context(self, values: Mapping[str, Any], lang: str, items: Mapping[str, Text]
                 ) -> dict[str, Any]:
        """Template fields: values, ``x_label``; lists and mappings joined, with ``x_count``."""
        sep, ctx = getattr(self.separator, lang), {}
        for key, value in values.items():
            item = getattr(items[key], lang) if key in items else None
            if isinstance(value, dict):
                parts = [(item or "{key_label}: {value}").format(
                    key=k, key_label=self.label(k, lang), value=v) for k, v in value.items()]
            elif isinstance(value, (list, tuple)):
                parts = [item.format_map(self._context(v, lang, {}))
                         if item and isinstance(v, dict) else str(v) for v in value]
            else:
                ctx[key], ctx[f"{key}_label"] = value, self.label(value, lang)
                continue
            ctx[key], ctx[f"{key}_count"] = sep.join(parts), len(value)
        return ctx


@cache
def _default_rules() -> RuleBook:
    text = resources.files("hermes_fsm").joinpath("data/rules.yaml").read_text("utf-8")
    return RuleBook.from_yaml(text, "hermes_fsm/data/rules.yaml")


def _dotted(loc: Sequence[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "file"


def _explain(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        allowed = _allowed_fields(error["loc"][:-1])
        return f"unknown field {error['loc'][-1]!r}; remove it or fix its spelling " \
               f"(allowed: {allowed})"
    if error["type"] == "missing":
        return "this required field is missing; add it"
    what = str(error["msg"]).removeprefix("Value error, ")
    return what if error["type"] == "value_error" else f"{what}; change it"


def _allowed_fields(loc: Sequence[Any]) -> str:
    """The fields of the rules model at ``loc`` (a pydantic error location)."""
    kind: Any = RuleBook
    for part in (*loc, None):
        while get_origin(kind) in (Union, types.UnionType, Annotated):
            kind = next(a for a in get_args(kind) if a is not type(None))
        if part is None:
            break
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            kind = kind.model_fields[part].annotation if part in kind.model_fields else None
        else:  # list[X] → X, dict[str, X] → X
            kind = get_args(kind)[-1] if get_args(kind) else None
    is_model = isinstance(kind, type) and issubclass(kind, BaseModel)
    return ", ".join(kind.model_fields) if is_model else "see hermes_fsm/data/rules.yaml"


