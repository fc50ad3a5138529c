"""The figures of a turn's facts, and whether an answer states them.

A fact's *figures* are the numbers among its content's values (``{"quantity": 342}`` has
``342``; the ``1001`` of the string ``"A1001"`` is not one). An answer states a figure when
it writes it as a whole number: ``342`` is in "342 units" and "还有342件", not in "3420" or
"A1001". The Response contract asks an answer that cites a fact with figures to state at
least one of them; a brain that decodes with a grammar is made to (``hermes_fsm.brain.
grounded_schema``).

>>> figures({"sku": "A1001", "warehouse": "east", "quantity": 342})
['342']
>>> figures({"stock": {"east": 0, "west": 57}, "total": 57, "ok": True})
['0', '57']
>>> states_figure("A1001 has 342 units", ["342"]), states_figure("A1001: 3420", ["342"])
(True, False)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["FACT_PLACEHOLDER", "FactFigures", "figures", "numbers_in", "states_figure"]

FACT_PLACEHOLDER = re.compile(r"\{(f[0-9]+)(?:\.([A-Za-z0-9_]+))?\}")
"""A placeholder for a fact's value, as a model-backed brain has an answer write it
(``{f1}``, ``{f1.quantity}``; :mod:`hermes_fsm.brain.fact_alias` fills it): one left in an
answer named no value of the turn, and the Response contract refuses it."""

# a number not inside a word or a code: CJK around it is fine ("还有342件"), "A1001" is not
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.,])(?<![A-Za-z0-9]-)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
                     r"(?![A-Za-z0-9_])")


def figures(content: Any) -> list[str]:
    """The distinct numbers among ``content``'s values (nested), as an answer writes them,
    in the order found (booleans, NaN and infinities are not numbers)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            text = str(value)
        elif isinstance(value, float):
            if not math.isfinite(value):  # NaN or ±Infinity: no figure an answer can state
                return
            text = str(int(value)) if value.is_integer() else repr(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
            return
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)
            return
        else:
            return
        if text not in found:
            found.append(text)

    walk(content)
    return found


class FactFigures(Mapping[Any, list[str]]):
    """Each fact's :func:`figures` by its ``id`` (the last fact of an id wins, as in a
    dict built from them), each worked out when first read: an answer cites a few of a
    turn's facts, and most turns read none before the next facts replace them.

    >>> class Fact:
    ...     def __init__(self, id, content): self.id, self.content = id, content
    >>> found = FactFigures([Fact("f1", {"quantity": 342}), Fact("f2", "none")])
    >>> found["f1"], found.get("f2"), found.get("f9"), len(found), dict(found)
    (['342'], [], None, 2, {'f1': ['342'], 'f2': []})
    """

    __slots__ = ("_facts", "_found")

    def __init__(self, facts: Iterable[Any]) -> None:
        self._facts = {getattr(f, "id", None): f for f in facts}
        self._found: dict[Any, list[str]] = {}

    def __getitem__(self, fact_id: Any) -> list[str]:
        found = self._found.get(fact_id)
        if found is None:
            fact = self._facts[fact_id]  # KeyError: no fact of that id
            found = self._found[fact_id] = figures(getattr(fact, "content", None))
        return found

    def __iter__(self) -> Iterator[Any]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)

    def __repr__(self) -> str:
        return f"FactFigures({dict(self)!r})"


def numbers_in(text: str) -> list[str]:
    """The numbers written in ``text`` (``1,500`` as ``1500``; decimals kept)."""
    return [m.group(1).replace(",", "") + (m.group(2) or "") for m in _NUMBER.finditer(text)]


def states_figure(text: str, wanted: Iterable[str]) -> bool:
    """Whether ``text`` writes one of the figures ``wanted`` as a whole number."""
    written = set(numbers_in(text))
    return any(w in written for w in wanted)
