"""The schema a llama.cpp-style server turns into a grammar, made safe for its parser.

llama-cpp-python turns a ``pattern`` into GBNF as it is: a regex escape such as ``\\S`` or
``\\w`` (the Response and MemoryUpdate contracts' evidence patterns) is not GBNF, llama.cpp's
grammar parser refuses it ("unknown escape"), and llama-cpp-python 0.3.36's server then
samples with no grammar and dies in ``libllama.so`` (SIGSEGV, seen on every MEMORY_COMMIT
of ``bench/real_model.py``). :func:`grammar_patterns` rewrites each
pattern in the classes GBNF has (``\\S`` as ``[^ \\t\\n\\r"\\\\]``, ``.`` as any character but a
quote, a backslash or a newline, so the JSON string stays one), and drops the patterns it
cannot rewrite (:func:`without_patterns` drops all): the contract still checks them when
the output comes back, and a miss is retried like any violation. Before this, MEMORY_COMMIT's
``evidence_source`` was free text to the grammar, and a small model's was refused.

:func:`grounded_schema` narrows an answer's schema (a string ``text`` and an ``evidence``
list) to the turn's facts, so constrained decoding can only produce an answer the Response
contract accepts on its references: ``evidence`` names facts of this turn (an enum of
their ids, at least one; none without facts), and ``text`` writes one of the cited facts'
figures as a whole number (a ``pattern`` made of GBNF-safe classes only). A small model
left free cites ``fact-1`` and writes "The answer is in stock".

>>> without_patterns({"type": "object", "properties": {"id": {"type": "string",
...                   "pattern": "^fact-\\\\S+$"}}})
{'type': 'object', 'properties': {'id': {'type': 'string'}}}
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hermes_fsm.contracts.base import output_field

__all__ = ["answers_with_evidence", "gbnf_pattern", "grammar_patterns", "grounded_schema",
           "json_safe_strings", "turn_facts", "without_patterns"]

_EDGE = '[^"\\\\\\x00-\\x1F{}0-9A-Za-z_.,]'  # one that may stand after a whole number
# and before one: not a hyphen either ("1-0" is no 0 to the contract, nor "A1-0")
_LEAD = '[^"\\\\\\x00-\\x1F{}0-9A-Za-z_.,-]'
_FREE = '[^"\\\\\\x00-\\x1F{}]'  # free text of a grounded answer: no escape, no placeholder brace
# (nor a raw control character: llama-cpp-python's own JSON string rule, [^"\\], lets a
# model write a raw newline, which is no JSON; Gemma 3 did in 12 refused RESPONSE outputs,
# so an answer's text always has a pattern, bounded even without facts: see _free_text)


def without_patterns(schema: Any) -> Any:
    """``schema`` with every string ``pattern`` keyword removed (a property named
    ``pattern`` is kept); the schema given is not changed."""
    return _rewrite_patterns(schema, lambda pattern: None)


def _rewrite_patterns(schema: Any, rewrite: Callable[[str], str | None]) -> Any:
    """``schema`` with each string ``pattern`` keyword replaced by ``rewrite(pattern)``,
    or removed where that is None (a property named ``pattern`` is kept); a copy."""
    if isinstance(schema, list):
        return [_rewrite_patterns(item, rewrite) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            if (new := rewrite(value)) is not None:
                out[key] = new
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _rewrite_patterns(sub, rewrite) for name, sub in value.items()}
        else:
            out[key] = _rewrite_patterns(value, rewrite)
    return out


def grounded_schema(schema: Any, facts: Sequence[tuple[str, Sequence[str]]],
                    max_figures: int = 12, side: int = 80,
                    placeholders: Sequence[str] = (), also: Sequence[str] = (),
                    listed: Sequence[str] = (),
                    words: Sequence[tuple[str, str]] = ()) -> Any:
    """``schema`` narrowed to ``facts`` (each ``(fact id or alias, its figures)``) when it
    is an answer's (a string ``text`` and a string-list ``evidence``); others come back as
    they are. Figures beyond ``max_figures`` distinct ones are not forced (the contract
    still asks for one). ``placeholders`` (``{f1.quantity}``, see
    :mod:`hermes_fsm.brain.fact_alias`) are the other way to write a figure: the text
    holds one of the figures or one of them, and after it at most one more placeholder of
    ``also`` (a fact's other values); no other brace, so no placeholder the facts lack.
    The forced text has at most ``side`` characters before and after the figure: a small
    model that rambles must close the string before its token cap (SmolLM2 ran into the
    cap mid-string, and the cut JSON was a violation; at 160 it still rambled 300
    characters, each one a grammar-checked token on a CPU; at 80 a Chinese answer still
    ran past a 160-token cap, but at 48 a restated schema description was cut short of
    the contract's echo check and reached the user).

    ``listed`` placeholders (a listing's items, :attr:`~hermes_fsm.brain.fact_alias.
    FactAliases.listed`) follow the figure, one of them at least: a count alone ("You
    have 2 reminders") does not answer "what are my reminders?". Where the facts have no
    figure, the text quotes one of ``words`` (``(placeholder, its value)``: the value as
    written, or its placeholder) instead of being free: SmolLM2 confirmed a reminder to
    call 李雷 with its due time alone."""
    if not answers_with_evidence(schema):
        return schema
    props = schema["properties"]
    out = copy.deepcopy(schema)
    evidence = out["properties"]["evidence"]
    if not facts:
        evidence["maxItems"] = 0
        return _free_text(out, props["text"], side)
    evidence["items"] = {"type": "string", "enum": [fact_id for fact_id, _ in facts]}
    evidence["minItems"] = 1
    # each fact once at most: SmolLM2 wrote "f1", "f1", … until the token cap cut the JSON
    # (grammars enforce maxItems; uniqueItems they do not)
    evidence["maxItems"] = len(facts)
    wanted: list[str] = []
    for _, numbers in facts:
        wanted += [n for n in numbers if n not in wanted]
    free = f"{_FREE}{{0,{side}}}"
    items = [h for h in listed if _PLAIN_HOLDER.fullmatch(h)]
    # the items, close after the figure: a Chinese listing of the whole width ran into
    # SmolLM2's 160-token cap
    near = f"{_FREE}{{0,{side // 3}}}"
    tail = f"{near}({_written(items)}){near}" if items else ""
    branches = []
    if wanted and len(wanted) <= max_figures and all(_plain(n) for n in wanted):
        figures = "|".join(n.replace(".", "[.]") for n in wanted)
        branches.append(f"({free}{_LEAD})?({figures}){_EDGE}{tail}" if tail else
                        f"({free}{_LEAD})?({figures})({_EDGE}{free})?")
    holders = [h for h in placeholders if _PLAIN_HOLDER.fullmatch(h)]
    if branches and holders:  # a placeholder needs no edge: its braces are one
        more = [h for h in also if _PLAIN_HOLDER.fullmatch(h)]
        branch = f"{free}({_written(holders)})"
        if tail:
            branch += tail
        else:
            branch += free
            if more:
                branch += f"(({_written(more)}){free})?"
        branches.append(branch)
    if not wanted:
        quoted = [q for holder, value in words for q in (
            _written([holder]) if _PLAIN_HOLDER.fullmatch(holder) else None,
            _literal(value)) if q]
        if quoted:
            branches.append(f"{free}({'|'.join(quoted)}){free}")
    if branches:
        return _text_pattern(out, props["text"], f"^({'|'.join(branches)})$"
                             if len(branches) > 1 else f"^{branches[0]}$")
    return _free_text(out, props["text"], side)


def _free_text(schema: dict[str, Any], text: Mapping[str, Any], side: int) -> dict[str, Any]:
    """``schema`` with its answer's ``text`` free but bounded (``2 * side`` characters) and
    JSON-safe: no quote, escape or raw control character (see :data:`_FREE`)."""
    return _text_pattern(schema, text, f"^{_FREE}{{1,{2 * side}}}$")


def _text_pattern(schema: dict[str, Any], text: Mapping[str, Any], pattern: str
                  ) -> dict[str, Any]:
    """``schema`` with its answer's ``text`` held to ``pattern`` (which bounds the length:
    a grammar takes no length beside a pattern)."""
    schema["properties"]["text"] = {
        **{k: v for k, v in text.items() if k not in ("minLength", "maxLength")},
        "pattern": pattern}
    return schema


def _literal(value: str, longest: int = 48) -> str | None:
    """``value`` as a pattern that matches it as written (letters, digits and spaces as
    they are, other characters each in a class), or ``None`` where it is too long to
    force or holds a character no pattern of ours writes (a quote, an escape, a brace, a
    control character, a class bracket or a caret)."""
    if not value.strip() or len(value) > longest or any(
            c in '"\\{}[]^' or ord(c) < 0x20 for c in value):
        return None
    return "".join(c if c.isalnum() or c == " " else f"[{c}]" for c in value)


def _written(holders: Sequence[str]) -> str:
    """Placeholders as a pattern's alternatives, their braces and dots in classes."""
    return "|".join("".join(c if c.isalnum() or c == "_" else f"[{c}]" for c in h)
                    for h in holders)


_PLAIN_HOLDER = re.compile(r"\{[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?\}")


def answers_with_evidence(schema: Any) -> bool:
    """Whether ``schema`` is an answer's: a string ``text`` and a string-list ``evidence``."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return False
    text, evidence = props.get("text"), props.get("evidence")
    return (isinstance(text, dict) and text.get("type") == "string"
            and isinstance(evidence, dict) and evidence.get("type") == "array"
            and (evidence.get("items") or {}).get("type") == "string")


def _plain(number: str) -> bool:
    return number.replace(".", "", 1).isdigit()


def turn_facts(outputs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(id, content)`` of each fact the turn's outputs established so far (an output
    with a ``facts`` list, e.g. RESULT's report), in order."""
    found: list[tuple[str, Any]] = []
    for output in outputs.values():
        for fact in output_field(output, "facts") or ():
            fact_id = getattr(fact, "id", None)
            if isinstance(fact_id, str) and all(fact_id != f for f, _ in found):
                found.append((fact_id, getattr(fact, "content", None)))
    return found


# characters a pattern's class must not let into the raw JSON: a quote, a backslash, and
# every control character (JSON escapes them; a raw one is no JSON)
_NOT_IN_STRING = '"\\\\\\x00-\\x1F'
_OUTSIDE = {"S": f'[^ {_NOT_IN_STRING}]', "s": "[ ]", "w": "[A-Za-z0-9_]", "d": "[0-9]",
            "W": f"[^A-Za-z0-9_{_NOT_IN_STRING}]", "D": f"[^0-9{_NOT_IN_STRING}]"}
_INSIDE = {"w": "A-Za-z0-9_", "d": "0-9", "s": " "}
_UNGUARDED = ("pattern", "enum", "const", "format")  # a string schema these already shape
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def gbnf_pattern(pattern: str) -> str | None:
    """``pattern`` in the regex subset llama.cpp's schema converter turns into GBNF without
    an escape GBNF refuses, matching only characters a JSON string holds unescaped; ``None``
    when it has a construct that cannot be rewritten (a group flag, a backslash, a quote,
    ``\\b``).

    >>> print(gbnf_pattern("^fact-\\\\S+$"))
    ^fact-[^ "\\\\\\x00-\\x1F]+$
    >>> gbnf_pattern(r"^a\\.b[\\w.-]+$")
    '^a[.]b[A-Za-z0-9_.-]+$'
    >>> gbnf_pattern("^(?:x)$") is None
    True
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "[":
            end, body = _class(pattern, i + 1)
            if body is None:
                return None
            out.append(body)
            i = end
        elif c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt in _OUTSIDE:
                out.append(_OUTSIDE[nxt])
            elif nxt and not nxt.isalnum() and nxt not in '\\"':
                out.append(f"[{nxt}]" if nxt not in "[]^-" else f"[\\{nxt}]")
            else:
                return None
            i += 2
        elif c == ".":
            out.append(f"[^{_NOT_IN_STRING}]")
            i += 1
        elif c == '"' or pattern.startswith("(?", i):
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _class(pattern: str, i: int) -> tuple[int, str | None]:
    """The class starting after ``[`` at ``i``: (index after its ``]``, its GBNF-safe text)."""
    negated = pattern.startswith("^", i)
    body = ["[^" if negated else "["]
    i += negated
    while i < len(pattern) and pattern[i] != "]":
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt in _INSIDE:
                body.append(_INSIDE[nxt])
            elif nxt in ("]", "["):
                body.append(f"\\{nxt}")
            elif nxt and not nxt.isalnum() and nxt not in '\\"-':
                body.append(nxt)
            else:
                return i, None
            i += 2
        elif c == '"':
            return i, None
        else:
            body.append(c)
            i += 1
    if i >= len(pattern):
        return i, None
    if negated:
        body.append(_NOT_IN_STRING)
    body.append("]")
    return i + 1, "".join(body)


def grammar_patterns(schema: Any) -> Any:
    """``schema`` with each string ``pattern`` rewritten by :func:`gbnf_pattern`, or removed
    where it cannot be (a property named ``pattern`` is kept), and every other plain
    string held to JSON-safe characters (:func:`json_safe_strings`); not changed in
    place."""
    return json_safe_strings(_rewrite_patterns(schema, gbnf_pattern))


def json_safe_strings(schema: Any) -> Any:
    """``schema`` with a pattern on each string schema that has no ``pattern``, ``enum``,
    ``const`` or ``format``: no quote, backslash or raw control character, its length
    bounds folded in (a grammar takes no length beside a pattern); the schema given is
    not changed.

    llama-cpp-python 0.3.36's own string rule is ``[^"\\] | escape``: it lets a raw
    newline into a "JSON" string, and the output is no JSON (Gemma 3 did in 12 refused
    answers). Escapes go too: the grammar is only what a model may write, and the
    contract still checks the value.

    >>> out = json_safe_strings({"type": "object", "properties": {
    ...     "key": {"type": "string", "maxLength": 48}, "day": {"type": "string",
    ...     "format": "date"}}})["properties"]
    >>> print(out["key"]["pattern"]); print(out["day"])
    ^[^"\\\\\\x00-\\x1F]{0,48}$
    {'type': 'string', 'format': 'date'}
    """
    if isinstance(schema, list):
        return [json_safe_strings(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):  # names to schemas: any name
            out[key] = {name: json_safe_strings(sub) for name, sub in value.items()}
        elif key in ("default", "examples", "const", "enum"):  # values, not schemas
            out[key] = value
        else:
            out[key] = json_safe_strings(value)
    if out.get("type") == "string" and not any(k in out for k in _UNGUARDED):
        low, high = out.pop("minLength", 0), out.pop("maxLength", None)
        span = ("*" if not low else "+" if low == 1 else f"{{{low},}}") if high is None \
            else f"{{{low},{high}}}"
        out["pattern"] = f"^[^{_NOT_IN_STRING}]{span}$"
    return out
