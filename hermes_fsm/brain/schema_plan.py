"""A call the rules brain plans from a tool's input schema alone (an intent's ``tool:``),
without a ``plans`` entry of its own.

The call's arguments are the intent's slots named like the schema's properties, typed by
the schema (:func:`~hermes_fsm.brain.typed_arguments.typed_arguments`: a slot ``"3"`` for a
``number`` is sent as ``3``); a required property without a slot is a missing slot to ask
for, never a guess.

>>> from hermes_fsm.brain.protocol import ToolDescription
>>> schema = {"type": "object", "properties": {"a": {"type": "number"},
...           "b": {"type": "number"}}, "required": ["a", "b"]}
>>> tool = ToolDescription("everything.get-sum", "Returns the sum of two numbers", schema)
>>> schema_call(tool, {"a": "3", "b": "4", "lang": "en"})
({'a': 3, 'b': 4}, [])
>>> schema_call(tool, {"a": "3", "lang": "en"})
(None, ['b'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hermes_fsm.brain.protocol import ToolDescription
from hermes_fsm.brain.typed_arguments import typed_arguments

__all__ = ["schema_call"]


def schema_call(
    tool: ToolDescription, params: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The arguments of a call of ``tool`` from the slots ``params``, and the required
    properties no slot fills (the call is ``None`` then)."""
    schema = tool.input_schema or {}
    properties = schema.get("properties") or {}
    required = [str(name) for name in schema.get("required") or ()]
    missing = [name for name in required if params.get(name) in (None, "")]
    if missing:
        return None, missing
    args = {name: params[name] for name in properties if params.get(name) not in (None, "")}
    return typed_arguments(args, schema), []
