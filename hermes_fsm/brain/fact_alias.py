"""Short names for a turn's facts, so a small model grounds its answer by structure.

A 135M model cannot copy ``fact-turn-<32 hex>-s4-c1`` or a figure reliably (issue 18: it
cited made-up ids, copied earlier answers' figures, ran into its token cap mid-id). So a
model-backed brain shows each fact of the turn under an alias, ``f1`` … ``fn``, with a
placeholder for each of its values: ``{f1.quantity}`` for the ``quantity`` of the fact's
output, ``{f1}`` for the whole output. The answer cites aliases in ``evidence`` (an enum of
them in the grammar) and writes values as placeholders in ``text``; :meth:`FactAliases.
resolve` then maps the aliases back to the fact ids and fills the placeholders with the
values, before the Response contract checks the answer. Nothing is made valid that was
not: an alias that names no fact stays as written (the contract refuses it as evidence
naming no fact), an unfilled placeholder stays in the text (the contract refuses it), and
empty evidence stays empty.

>>> aliases = FactAliases.of([("fact-t1-c1", {"tool": "inventory_lookup",
...     "output": {"sku": "A1001", "warehouse": "east", "quantity": 342}})])
>>> aliases.lines[0]
'- f1 (inventory_lookup): {f1.sku} = A1001; {f1.warehouse} = east; {f1.quantity} = 342'
>>> aliases.resolve('{"text": "A1001: {f1.quantity} units", "evidence": ["f1"]}')
'{"text": "A1001: 342 units", "evidence": ["fact-t1-c1"]}'
>>> aliases.speak("evidence ['x'] names no fact of this turn (facts: fact-t1-c1)")
"evidence ['x'] names no fact of this turn (facts: f1)"
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hermes_fsm.contracts.grounding import FACT_PLACEHOLDER as PLACEHOLDER
from hermes_fsm.contracts.grounding import figures

__all__ = ["PLACEHOLDER", "FactAliases", "PlaceholderStream", "in_words", "render"]

_KEY = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class FactAliases:
    """The aliases of one turn's facts: ``ids`` (alias to fact id), ``values``
    (placeholder to the text it stands for), ``figures`` (placeholder to the figures that
    text writes), the prompt's ``lines`` (one per fact) and the placeholders they
    ``show`` (a fact's keys; the whole fact, ``{f1}``, where it has none); of those,
    the ones whose value is a list of items in words (``listed``: a listing's items,
    which its count alone does not say)."""

    ids: Mapping[str, str]
    values: Mapping[str, str]
    figures: Mapping[str, tuple[str, ...]]
    lines: tuple[str, ...]
    shown: tuple[str, ...]
    listed: tuple[str, ...] = ()

    @classmethod
    def of(cls, facts: Sequence[tuple[str, Any]]) -> FactAliases:
        """Aliases ``f1`` … for ``facts`` (``(fact id, content)``, in the turn's order)."""
        ids: dict[str, str] = {}
        raw: dict[str, Any] = {}  # placeholder -> the value it stands for
        lines: list[str] = []
        shown: list[str] = []
        for n, (fact_id, content) in enumerate(facts, start=1):
            alias = f"f{n}"
            ids[alias] = fact_id
            tool = content.get("tool") if isinstance(content, Mapping) else None
            body = (content["output"] if isinstance(content, Mapping) and "output" in content
                    else content)
            raw[f"{{{alias}}}"] = body
            parts = []
            if isinstance(body, Mapping):
                for key, value in body.items():
                    if isinstance(key, str) and _KEY.fullmatch(key):
                        raw[f"{{{alias}.{key}}}"] = value
                        shown.append(f"{{{alias}.{key}}}")
                        parts.append(f"{shown[-1]} = {render(value)}")
            if not parts:
                shown.append(f"{{{alias}}}")
                parts.append(f"{shown[-1]} = {render(body)}")
            label = f" ({tool})" if isinstance(tool, str) else ""
            lines.append(f"- {alias}{label}: " + "; ".join(parts))
        values = {holder: render(value) for holder, value in raw.items()}
        found = {holder: tuple(figures(value)) for holder, value in raw.items()}
        listed = tuple(h for h in shown if isinstance(raw[h], list | tuple) and raw[h]
                       and not found[h] and in_words(values[h]))
        return cls(ids, values, found, tuple(lines), tuple(shown), listed)

    def with_figures(self) -> list[str]:
        """The placeholders shown that write a figure (the grammar may force one)."""
        return [holder for holder in self.shown if self.figures[holder]]

    def with_words(self) -> list[str]:
        """The placeholders shown whose value is words and writes no figure: what an
        answer to facts without figures quotes (a reminder's ``{f1.text}``, not its id or
        due time)."""
        return [h for h in self.shown if not self.figures[h] and in_words(self.values[h])]

    def fill(self, text: str) -> str:
        """``text`` with each known placeholder replaced by its value (others kept)."""
        return PLACEHOLDER.sub(lambda m: self.values.get(m.group(0), m.group(0)), text)

    def resolve(self, raw: str) -> str:
        """A model's JSON answer in fact ids and values: each ``evidence`` alias mapped to
        its fact id (anything else kept as written) and the ``text`` filled. Output that
        is not a JSON object comes back as it is (the contract refuses it)."""
        try:
            data = json.loads(raw)
        except ValueError:
            return raw
        if not isinstance(data, dict):
            return raw
        evidence = data.get("evidence")
        if isinstance(evidence, list):
            data["evidence"] = [self.ids.get(e, e) if isinstance(e, str) else e
                                for e in evidence]
        if isinstance(data.get("text"), str):
            data["text"] = self.fill(data["text"])
        return json.dumps(data, ensure_ascii=False)

    def speak(self, text: str) -> str:
        """``text`` (a refusal's errors) with each fact id written as its alias."""
        for alias, fact_id in sorted(self.ids.items(), key=lambda kv: -len(kv[1])):
            text = text.replace(fact_id, alias)
        return text

    def stream(self) -> PlaceholderStream:
        """A filter for the streamed answer text: placeholders arrive as their values."""
        return PlaceholderStream(self.values)


_WORDS = re.compile(r"[\u3400-\u9fff]|[A-Za-z]{2,}[^A-Za-z0-9]+[A-Za-z]{2,}")


def in_words(text: str) -> bool:
    """Whether ``text`` says something in words: a CJK character, or two words of letters
    (``call Bob``, ``给李雷打电话``; not an id such as ``r2``, a code such as ``A1001``, a
    single word such as ``east`` or a date-time).

    >>> [in_words(t) for t in ("call Bob", "给李雷打电话", "r2", "east", "2026-12-05T09:00:00Z")]
    [True, True, False, False, False]
    """
    return _WORDS.search(text) is not None


def render(value: Any) -> str:
    """A fact's value as an answer writes it: a string as it is, a number as
    :func:`~hermes_fsm.contracts.grounding.figures` writes it, a mapping as ``key value``
    pairs, a list as its items (a mapping item by its values).

    >>> render({"east": 342, "north": 120.0})
    'east 342, north 120'
    >>> render([{"text": "call Bob", "due": "2026-12-04"}, {"text": "x", "due": None}])
    'call Bob, 2026-12-04; x, none'
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return str(int(value)) if value.is_integer() else repr(value)
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {render(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple):
        items = [", ".join(render(v) for v in item.values()) if isinstance(item, Mapping)
                 else render(item) for item in value]
        return "; ".join(items) or "none"
    return json.dumps(value, ensure_ascii=False, default=str)


class PlaceholderStream:
    """Fills placeholders in answer text that arrives piece by piece: text from a ``{``
    that may still become a known placeholder is held back until it does (then its value
    is let through) or cannot (then it goes through as written).

    >>> stream = PlaceholderStream({"{f1.quantity}": "342"})
    >>> [stream.feed(p) for p in ["There are {f1.", "quantity} units {x}", " {f"]]
    ['There are ', '342 units {x}', ' ']
    >>> stream.flush()
    '{f'
    """

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = values
        self._pending = ""

    def feed(self, piece: str) -> str:
        """Add ``piece``; return the text that can be shown now."""
        rest, self._pending = self._pending + piece, ""
        out: list[str] = []
        while rest:
            at = rest.find("{")
            if at < 0:
                out.append(rest)
                break
            out.append(rest[:at])
            rest = rest[at:]
            end = rest.find("}")
            candidate = rest if end < 0 else rest[:end + 1]
            if candidate in self._values:
                out.append(self._values[candidate])
                rest = rest[end + 1:]
            elif end < 0 and any(h.startswith(rest) for h in self._values):
                self._pending = rest
                break
            else:
                out.append("{")
                rest = rest[1:]
        return "".join(out)

    def flush(self) -> str:
        """The text still held back (the answer ended inside a would-be placeholder)."""
        pending, self._pending = self._pending, ""
        return pending
