"""Arguments typed from a tool's input schema: slots are text, a tool may want numbers.

The rules brain fills a tool's arguments from slots of the message, which are strings.
A tool whose input schema says ``number``, ``integer`` or ``boolean`` (``everything
.get-sum``'s ``a`` and ``b``) would refuse ``"3"``; :func:`typed_arguments` converts what
converts cleanly and leaves the rest for the tool's contract to refuse.

>>> typed_arguments({"a": "3", "b": "2.5", "loud": "yes", "name": "x"},
...                 {"properties": {"a": {"type": "number"}, "b": {"type": "number"},
...                                 "loud": {"type": "boolean"}, "name": {"type": "string"}}})
{'a': 3, 'b': 2.5, 'loud': True, 'name': 'x'}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["typed_arguments"]

_TRUE = {"true", "yes", "y", "on", "1", "是", "对"}
_FALSE = {"false", "no", "n", "off", "0", "否", "不"}


def typed_arguments(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with string values converted to the type their property declares
    (``integer``, ``number``, ``boolean``, or a union listing one of them)."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return dict(arguments)
    typed = dict(arguments)
    for name, value in arguments.items():
        prop = properties.get(name)
        if isinstance(value, str) and isinstance(prop, Mapping):
            typed[name] = _convert(value, _types(prop))
    return typed


def _types(prop: Mapping[str, Any]) -> list[str]:
    declared = prop.get("type")
    types = [declared] if isinstance(declared, str) else list(declared or [])
    for branch in prop.get("anyOf", ()) or ():
        if isinstance(branch, Mapping) and isinstance(branch.get("type"), str):
            types.append(branch["type"])
    return types


def _convert(value: str, types: list[str]) -> Any:
    if "string" in types or not types:
        return value
    text = value.strip().replace(",", "")
    if "integer" in types:
        try:
            return int(text)
        except ValueError:
            pass
    if "number" in types:
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return int(number) if number.is_integer() and "." not in text else number
    if "boolean" in types:
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return value
