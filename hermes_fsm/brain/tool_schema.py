"""A plan's schema narrowed to the tools offered, for constrained decoding.

The plan contract's schema leaves ``tool_name`` a free string and ``arguments`` any
object: a grammar built from it lets a model name a tool that does not exist, or call one
with arguments it cannot take. :func:`offered_tools_schema` rewrites the ``ToolCall``
definition as a ``oneOf`` with one branch per offered tool: ``tool_name`` that tool's
name (an enum of one), ``arguments`` that tool's own input schema. A grammar built from
it (llama.cpp's ``json_schema_to_grammar``) can only produce calls of offered tools with
arguments of the right shape; numeric bounds are still not enforced by such grammars,
and the contract still validates everything.

>>> from hermes_fsm.brain.protocol import ToolDescription
>>> from hermes_fsm.contracts.states import Plan
>>> tool = ToolDescription("clock", "The time.", {"type": "object", "properties": {}})
>>> narrowed = offered_tools_schema(Plan.json_schema(), [tool])
>>> narrowed["$defs"]["ToolCall"]["oneOf"][0]["properties"]["tool_name"]
{'type': 'string', 'enum': ['clock']}
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_fsm.brain.protocol import ToolDescription
from hermes_fsm.contracts.base import explicit_any

__all__ = ["offered_tools_schema"]


def offered_tools_schema(schema: Mapping[str, Any],
                         tools: Sequence[ToolDescription]) -> dict[str, Any]:
    """``schema`` with its ``ToolCall`` definition (``$defs.ToolCall``, an object with
    ``tool_name`` and ``arguments``) narrowed to ``tools``; other schemas are returned as
    they are. With no tool offered, the list of calls must be empty."""
    defs = schema.get("$defs")
    call = defs.get("ToolCall") if isinstance(defs, Mapping) else None
    props = call.get("properties") if isinstance(call, Mapping) else None
    if not isinstance(props, Mapping) or not {"tool_name", "arguments"} <= set(props):
        return dict(schema)
    assert isinstance(call, Mapping)
    narrowed = copy.deepcopy(dict(schema))
    if not tools:
        for prop in narrowed.get("properties", {}).values():
            if isinstance(prop, dict) and prop.get("items") == {"$ref": "#/$defs/ToolCall"}:
                prop["maxItems"] = 0
        return narrowed
    branches = []
    for tool in tools:
        properties = dict(copy.deepcopy(props))
        properties["tool_name"] = {"type": "string", "enum": [tool.name]}
        properties["arguments"] = _arguments(tool.input_schema)
        branch = {key: copy.deepcopy(value) for key, value in call.items()
                  if key not in ("properties", "title", "description")}
        branch.update(title=f"call {tool.name}", properties=properties)
        branches.append(branch)
    narrowed["$defs"]["ToolCall"] = {
        "description": f"{call.get('description', 'One planned tool call.')} The tool is one "
                       f"of: {', '.join(t.name for t in tools)}; its arguments follow that "
                       "tool's input schema.",
        "oneOf": branches}
    return narrowed


def _arguments(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's input schema, usable inside another schema: local ``$ref``s cannot be
    carried over (they point into the tool's own document), so such a schema becomes any
    object; ``$schema``/``$id`` are dropped; untyped parts get explicit types."""
    if '"$ref"' in json.dumps(input_schema, default=str):
        return {"type": "object"}
    cleaned = {k: v for k, v in input_schema.items() if k not in ("$schema", "$id", "title")}
    cleaned.setdefault("type", "object")
    return explicit_any(cleaned)
