"""The memory schema handed to a model, narrowed to the conversation graph's nodes.

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
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["graph_nodes_schema", "node_ids"]


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
