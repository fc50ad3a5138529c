"""Checking that a JSON Schema is one, quickly, with jsonschema's verdict and words.

``jsonschema.Draft202012Validator.check_schema`` interprets the 2020-12 meta-schema
(``$dynamicRef`` and all) in Python: about 1 ms a schema on a quiet core, and a CLI
process checks ~50 of them (the tool contracts' input and output schemas) before its
first turn. :func:`check_schema` asks jsonschema-rs's compiled meta-schema first (about
0.02 ms) and takes its "valid" only where jsonschema could not disagree:

- the schema declares no ``$schema`` or the 2020-12 one (other drafts go to jsonschema);
- every string the meta-schema gives a ``format`` (``pattern`` and the keys of
  ``patternProperties``: ``regex``; ``$id``, ``$ref``, ``$dynamicRef``: ``uri-reference``;
  ``$schema`` and the keys of ``$vocabulary``: ``uri``) conforms under jsonschema's own
  format checker, which jsonschema-rs does not apply. The walk looks at every mapping in
  the document, so it checks a superset.

Anything else (an invalid schema, a value jsonschema-rs cannot read, jsonschema-rs absent)
is decided by jsonschema itself, so the error raised is always jsonschema's.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jsonschema

__all__ = ["check_schema"]

_DRAFT = jsonschema.Draft202012Validator
_URIS = {"https://json-schema.org/draft/2020-12/schema",
         "https://json-schema.org/draft/2020-12/schema#"}
_FORMATS = {"pattern": "regex", "$id": "uri-reference", "$ref": "uri-reference",
            "$dynamicRef": "uri-reference", "$schema": "uri"}
_KEY_FORMATS = {"patternProperties": "regex", "$vocabulary": "uri"}


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise :class:`jsonschema.SchemaError` (jsonschema's own) unless ``schema`` is a
    valid Draft 2020-12 JSON Schema, with its formats checked."""
    if not _surely_valid(schema):
        _DRAFT.check_schema(schema)


@functools.cache
def _rs_meta() -> Any:
    """jsonschema-rs's meta-schema check, imported on first use (``--help`` needs none)."""
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - a dependency; jsonschema still decides
        return None
    return jsonschema_rs.meta


def _surely_valid(schema: Mapping[str, Any]) -> bool:
    meta = _rs_meta()
    if meta is None or not isinstance(schema, Mapping):
        return False
    declared = schema.get("$schema")
    if declared is not None and declared not in _URIS:
        return False
    try:
        if not meta.is_valid(schema):
            return False
    except Exception:  # a value it cannot read: jsonschema decides
        return False
    return _formats_conform(schema)


def _formats_conform(schema: Mapping[str, Any]) -> bool:
    conforms = _DRAFT.FORMAT_CHECKER.conforms
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                fmt = _FORMATS.get(key)
                if fmt is not None and isinstance(value, str) and not conforms(value, fmt):
                    return False
                keys_format = _KEY_FORMATS.get(key)
                if keys_format is not None and isinstance(value, Mapping) and not all(
                        isinstance(k, str) and conforms(k, keys_format) for k in value):
                    return False
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return True
