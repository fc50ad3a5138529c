"""The schema a llama.cpp-style server turns into a grammar, made safe for its parser.

llama-cpp-python turns a ``pattern`` into GBNF as it is: a regex escape such as ``\\S`` or
``\\w`` (the Response and MemoryUpdate contracts' evidence patterns) is not GBNF, llama.cpp's
grammar parser refuses it ("unknown escape"), and llama-cpp-python 0.3.36's server then
samples with no grammar and dies in ``libllama.so`` (SIGSEGV, seen on every MEMORY_COMMIT
of ``bench/real_model.py``). Patterns are dropped from the grammar's schema: the contract
still checks them when the output comes back, and a miss is retried like any violation.

>>> without_patterns({"type": "object", "properties": {"id": {"type": "string",
...                   "pattern": "^fact-\\\\S+$"}}})
{'type': 'object', 'properties': {'id': {'type': 'string'}}}
"""

from __future__ import annotations

from typing import Any

__all__ = ["without_patterns"]


def without_patterns(schema: Any) -> Any:
    """``schema`` with every string ``pattern`` keyword removed (a property named
    ``pattern`` is kept); the schema given is not changed."""
    if isinstance(schema, list):
        return [without_patterns(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: without_patterns(sub) for name, sub in value.items()}
        else:
            out[key] = without_patterns(value)
    return out
