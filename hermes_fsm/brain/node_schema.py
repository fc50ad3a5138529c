r"""The memory schema handed to a model, narrowed to the conversation graph's nodes.

A memory update's ``target_node_id`` must name a node of the session's conversation graph
(the MemoryUpdate contract checks it). Left a free string in the grammar, SmolLM2-135M
wrote ``"East Warehouse-A1001"`` on every MEMORY_COMMIT of ``bench/real_model.py`` that
named a node, and the turn was refused to its failure route. :func:`graph_nodes_schema`
makes it an enum of the graph's node ids (or ``null``), so constrained decoding can only
name a node that exists; the contract still checks it.

>>> schema = {"$defs": {"MemoryUpdate": {"type": "object", "properties": {
...     "target_node_id": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}}
>>> graph_nodes_schema(schema, ["ent_1"])["$defs"]["MemoryUpdate"]["properties"]
{'target_node_id': {'anyOf': [{'type': 'string', 'enum': ['ent_1']}, {'type': 'null'}]}}
>>> graph_nodes_schema(schema, [])["$defs"]["MemoryUpdate"]["properties"]
{'target_node_id': {'type': 'null'}}

:func:`bounded_memory_schema` bounds what a grammar lets a model write: at most
:data:`MEMORY_UPDATES_MAX` updates, a key of at most :data:`MEMORY_TEXT_MAX` characters,
and each unbounded repetition of a pattern (``evidence_source``'s ``\S+``) bounded.
Unbounded, Gemma 3 270M wrote ``tool:get_inventory:…-la-la-la…`` or 15 updates of
``B2001``…``B2014`` until the token cap cut the JSON (10 of 11 refused MEMORY_COMMIT outputs in
``bench/real_model.py``). The contract itself keeps its bounds; only the request narrows.

>>> bounded_pattern(r"^(user_message|session:\S+|tool:[\w.-]+(:[^:\s]+)*)$")
'^(user_message|session:\\S{1,48}|tool:[\\w.-]{1,48}(:[^:\\s]{1,48}){0,4})$'
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MEMORY_GROUPS_MAX", "MEMORY_TEXT_MAX", "MEMORY_UPDATES_MAX", "bounded_memory_schema",
           "bounded_pattern", "graph_nodes_schema", "node_ids"]

MEMORY_UPDATES_MAX = 4
"""The most memory updates one MEMORY_COMMIT request's grammar allows."""

MEMORY_TEXT_MAX = 48
"""The most characters a grammar allows a memory update's key, and each unbounded
repetition of a character in a pattern."""

MEMORY_GROUPS_MAX = 4
"""The most times a grammar repeats a pattern's unbounded group (``(:[^:\\s]+)*``)."""


def node_ids(conversation: Any) -> list[str]:
    """The ids a memory update may target: the graph's entity and intent nodes."""
    if conversation is None:
        return []
    ids = [*getattr(conversation, "entities", {}), *getattr(conversation, "intents", {})]
    return [i for i in ids if isinstance(i, str)]


def graph_nodes_schema(schema: Mapping[str, Any], ids: Sequence[str]) -> Any:
    """``schema`` with ``$defs.MemoryUpdate``'s ``target_node_id`` an enum of ``ids`` or
    null (only null without nodes); another schema comes back as it is."""
    update = (schema.get("$defs") or {}).get("MemoryUpdate")
    props = update.get("properties") if isinstance(update, Mapping) else None
    if not isinstance(props, Mapping) or "target_node_id" not in props:
        return schema
    out = copy.deepcopy(dict(schema))
    target: dict[str, Any] = {k: v for k, v in props["target_node_id"].items()
                              if k not in ("anyOf", "type", "default")}
    if ids:
        target["anyOf"] = [{"type": "string", "enum": list(dict.fromkeys(ids))},
                           {"type": "null"}]
    else:
        target["type"] = "null"
    out["$defs"]["MemoryUpdate"]["properties"]["target_node_id"] = target
    return out


def bounded_memory_schema(schema: Mapping[str, Any]) -> Any:
    """``schema`` (a MemoryCommit's) with its list, its updates' keys and their patterns
    bounded for a grammar (see the module's text); another schema comes back as it is."""
    update = (schema.get("$defs") or {}).get("MemoryUpdate")
    props = update.get("properties") if isinstance(update, Mapping) else None
    updates = (schema.get("properties") or {}).get("memory_updates")
    if not isinstance(props, Mapping) or not isinstance(updates, Mapping):
        return schema
    out = copy.deepcopy(dict(schema))
    out["properties"]["memory_updates"]["maxItems"] = MEMORY_UPDATES_MAX
    for field in out["$defs"]["MemoryUpdate"]["properties"].values():
        if not isinstance(field, dict):
            continue
        if isinstance(field.get("pattern"), str):
            field["pattern"] = bounded_pattern(field["pattern"])
        elif field.get("type") == "string" and "enum" not in field:
            field["maxLength"] = min(field.get("maxLength", MEMORY_TEXT_MAX), MEMORY_TEXT_MAX)
    return out


def bounded_pattern(pattern: str, chars: int = MEMORY_TEXT_MAX,
                    groups: int = MEMORY_GROUPS_MAX) -> str:
    """``pattern`` with each ``+`` and ``*`` outside a character class made a bounded
    repetition: ``{1,chars}``/``{0,chars}`` after a character or class, ``{1,groups}``/
    ``{0,groups}`` after a group (escapes and classes are kept as written)."""
    out: list[str] = []
    in_class = escaped = False
    for c in pattern:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c in "+*":
            bound = groups if out and out[-1] == ")" else chars
            out.append(f"{{{1 if c == '+' else 0},{bound}}}")
            continue
        out.append(c)
    return "".join(out)
