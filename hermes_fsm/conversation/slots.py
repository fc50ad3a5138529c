"""Slots: the inputs a task needs, derived from the tool contracts (seed 003 §2).

A tool's required inputs (``input_schema.required``) are the required slots of a task
that calls it; an input's ``pattern``, ``enum`` and ``format`` say what a valid value
looks like, and its ``examples`` (or a sample made from the pattern) are shown as the
expected format when the conversation asks for it. The contract's ``slots`` add the
entity type and the question (:class:`~hermes_fsm.contracts.tools.SlotSpec`).

>>> schema = {"type": "object", "required": ["order_id"], "properties": {
...     "order_id": {"type": "string", "pattern": "^ORD-\\\\d{8}$"}}}
>>> [s.name for s in required_slots(schema)], slot_problems(schema, {"order_id": "ORD-1"})
(['order_id'], [SlotProblem(slot='order_id', reason='invalid', value='ORD-1')])
>>> value_in_text(required_slots(schema)[0], "是 ORD-12345678 这个")
'ORD-12345678'
>>> expected_format(required_slots(schema)[0], "zh")
'格式类似 ORD-12345678'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Slot", "SlotProblem", "expected_format", "question", "required_slots",
           "slot_problems", "value_in_text"]


@dataclass(frozen=True, slots=True)
class Slot:
    """One input of a tool, as a slot: what a valid value is and how to ask for it."""

    name: str
    required: bool
    pattern: str = ""
    enum: tuple[str, ...] = ()
    example: str = ""
    description: str = ""
    entity: str | None = None
    ask: str = ""
    ask_en: str = ""


@dataclass(frozen=True, slots=True)
class SlotProblem:
    """A required slot that is ``missing``, or a value that is ``invalid`` (``value``)."""

    slot: str
    reason: Literal["missing", "invalid"]
    value: str = ""


def _spec(specs: Mapping[str, Any] | None, name: str, field: str) -> Any:
    spec = (specs or {}).get(name)
    if spec is None:
        return None
    return spec.get(field) if isinstance(spec, Mapping) else getattr(spec, field, None)


_CACHE: dict[tuple[int, int, bool], tuple[Any, Any, list[Slot]]] = {}


def required_slots(input_schema: Mapping[str, Any], specs: Mapping[str, Any] | None = None,
                   *, every: bool = False) -> list[Slot]:
    """The slots of a tool (its required inputs; ``every``: all inputs), in schema order.

    Args:
        input_schema: the tool's input JSON Schema (read it, never change it: the slots of
            a schema object are computed once).
        specs: the contract's ``slots`` (``SlotSpec`` objects or mappings), if any.
    """
    key = (id(input_schema), id(specs), every)
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is input_schema and cached[1] is specs:
        return cached[2]
    slots = _slots(input_schema, specs, every)
    if len(_CACHE) > 1024:
        _CACHE.clear()
    _CACHE[key] = (input_schema, specs, slots)  # the objects keep their ids while cached
    return slots


def _slots(input_schema: Mapping[str, Any], specs: Mapping[str, Any] | None,
           every: bool) -> list[Slot]:
    required = set(input_schema.get("required", ()))
    slots = []
    for name, prop in (input_schema.get("properties") or {}).items():
        if not every and name not in required:
            continue
        prop = prop if isinstance(prop, Mapping) else {}
        examples = prop.get("examples") or ()
        pattern = str(prop.get("pattern", ""))
        slots.append(Slot(
            name, name in required, pattern, tuple(str(v) for v in prop.get("enum", ())),
            str(examples[0]) if examples else _sample(pattern), str(prop.get("description", "")),
            _spec(specs, name, "entity"), _spec(specs, name, "ask") or "",
            _spec(specs, name, "ask_en") or ""))
    return slots


def slot_problems(input_schema: Mapping[str, Any], arguments: Mapping[str, Any],
                  specs: Mapping[str, Any] | None = None) -> list[SlotProblem]:
    """The required slots ``arguments`` leave out, and the values that fail their
    slot's pattern or enum (every input is checked when given)."""
    problems = []
    for slot in required_slots(input_schema, specs, every=True):
        value = arguments.get(slot.name)
        if value is None or value == "":
            if slot.required:
                problems.append(SlotProblem(slot.name, "missing"))
        elif not valid(slot, value):
            problems.append(SlotProblem(slot.name, "invalid", str(value)))
    return problems


def valid(slot: Slot, value: Any) -> bool:
    """Whether ``value`` passes the slot's pattern and enum."""
    if slot.pattern and not (isinstance(value, str) and re.search(slot.pattern, value)):
        return False
    return not slot.enum or str(value) in slot.enum


def value_in_text(slot: Slot, text: str) -> str | None:
    """A valid value for ``slot`` found in a user's message, or ``None``.

    With a pattern: the first part of the text that matches it (anchors dropped, case
    ignored, then checked as written); with an enum: a value the text names; otherwise
    the whole message when it is short (an answer to "what is the …?").
    """
    if slot.pattern:
        loose = slot.pattern.removeprefix("^").removesuffix("$")
        for match in re.finditer(loose, text, re.IGNORECASE):
            for candidate in (match.group(0), match.group(0).upper()):
                if re.search(slot.pattern, candidate):
                    return candidate
        return None
    if slot.enum:
        low = text.lower()
        return next((v for v in slot.enum if v.lower() in low), None)
    stripped = text.strip().strip("。.!！?？")
    return stripped if 0 < len(stripped) <= 40 else None


def expected_format(slot: Slot, lang: str) -> str:
    """"格式类似 ORD-12345678" / "for example ORD-12345678" ("" when nothing is known)."""
    if slot.example:
        return f"格式类似 {slot.example}" if lang == "zh" else f"for example {slot.example}"
    if slot.enum:
        return ("可选: " if lang == "zh" else "one of: ") + ", ".join(slot.enum)
    return ""


_NAMES_EN = {"due": "time", "sku": "product (SKU)", "to": "recipient"}

_NAMES_ZH = {"order_id": "订单号", "sku": "商品编号(SKU)", "warehouse": "仓库",
             "due": "时间", "to": "收件人", "store_id": "门店", "store": "门店",
             "location": "地点"}


def question(slot: Slot, lang: str, problem: SlotProblem | None = None,
             *, failures: int = 0) -> str:
    """The clarification question for ``slot``: the contract's ``ask`` (or one made from
    the slot's name), the expected format, and — after a failed answer — what was wrong."""
    fmt = expected_format(slot, lang)
    if lang == "zh":
        ask = slot.ask or f"请问您的{_NAMES_ZH.get(slot.name, slot.name)}是什么?"
        text = ask if not fmt else f"{ask.rstrip('?？')}?{fmt}。"
        if problem is not None and problem.reason == "invalid":
            bad = f"“{problem.value}”不是有效的{_NAMES_ZH.get(slot.name, slot.name)}"
            text = f"{bad}。{text}" if failures < 2 else (
                f"{bad},已经两次不符合格式了。{fmt or ''},请直接回复这个值;"
                "或者回复“取消”放弃这个请求。")
        return text
    name = _NAMES_EN.get(slot.name, slot.name.replace("_", " "))
    ask = slot.ask_en or f"What is the {name}?"
    text = ask if not fmt else f"{ask} ({fmt})"
    if problem is not None and problem.reason == "invalid":
        bad = f'"{problem.value}" is not a valid {name}'
        text = f"{bad}. {text}" if failures < 2 else (
            f"{bad}, and that is the second answer that does not fit. "
            f"Please reply with the {name} only ({fmt or 'as asked'}), or say cancel.")
    return text


def _sample(pattern: str) -> str:
    """A sample value for a simple pattern (``^ORD-\\d{8}$`` → ``ORD-12345678``), or ""."""
    if not pattern:
        return ""
    body = pattern.removeprefix("^").removesuffix("$")
    out: list[str] = []
    pos = 0
    digits = "1234567890"
    while pos < len(body):
        match = re.match(r"\\d\{(\d+)\}", body[pos:])
        if match:
            n = int(match.group(1))
            out.append((digits * (n // 10 + 1))[:n])
            pos += match.end()
            continue
        match = re.match(r"\\d[+*]?", body[pos:])
        if match:
            out.append("1")
            pos += match.end()
            continue
        char = body[pos]
        if char == "\\" and pos + 1 < len(body) and body[pos + 1] in "-.":
            out.append(body[pos + 1])
            pos += 2
        elif char.isalnum() or char in "-_:/@":
            out.append(char)
            pos += 1
        else:
            return ""  # a class or group this sampler does not read: no sample
    return "".join(out)
