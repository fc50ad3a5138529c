"""What the session stores write: one representation of awkward values for every store.

PostgreSQL refuses two things JSON and Python strings can hold: U+0000 (in a ``text``
column, and as ``\\u0000`` in a ``jsonb`` one) and the non-finite numbers ``NaN``,
``Infinity`` and ``-Infinity`` (no JSON column takes them). A tool or a model can produce
either. So every store (in-memory, SQLite, PostgreSQL) writes its JSON through
:func:`dumps` (or :func:`safe_blob` for JSON serialized elsewhere) and its text through
:func:`safe_text`, and all of them read back the same thing:

- **U+0000** becomes U+FFFD (the replacement character), in string values and keys;
- **non-finite floats** become the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``
  (pydantic's ``inf_nan_mode="strings"``): an event field typed ``float`` reads them back
  as the same float; an untyped value (a tool's output) reads them back as those strings.

A user's own message with U+0000 is refused before the turn starts
(:func:`nul_position`; ``UsageError``, HTTP 422), so it never reaches a store changed.

Reading is bounded too: pydantic's JSON parser stops at about 200 levels of nesting
while its serializer writes up to 255, so :func:`loads` falls back to the standard
library's parser (bounded by the interpreter's recursion limit) for what pydantic's
refuses as too deep. What is stored is bounded where it comes from: a tool's output
(:class:`~hermes_fsm.tools.executor.ToolExecutor`: :data:`MAX_OUTPUT_DEPTH`,
:data:`MAX_OUTPUT_BYTES`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic_core import from_json, to_json

__all__ = ["MAX_OUTPUT_BYTES", "MAX_OUTPUT_DEPTH", "NUL_REPLACEMENT", "depth_over", "dumps",
           "loads", "nul_position", "safe_blob", "safe_text"]

NUL_REPLACEMENT = "\ufffd"
"""What U+0000 becomes in everything a store writes."""

MAX_OUTPUT_DEPTH = 64
"""How deeply a tool's output may nest (lists and objects) to be stored."""

MAX_OUTPUT_BYTES = 1_000_000
"""How long a tool's output may be as JSON (bytes) to be stored."""

# ``\u0000`` as JSON writes it, not preceded by an escaping backslash (``\\u0000`` is
# the text backslash-u-0-0-0-0, which stays as it is).
_NUL_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")
_NON_FINITE = (b"NaN", b"Infinity")


def nul_position(text: str) -> int | None:
    """The index of the first U+0000 in ``text``, or ``None``."""
    index = text.find("\x00")
    return None if index < 0 else index


def safe_text(text: str) -> str:
    """``text`` with every U+0000 replaced (see the module docs)."""
    return text.replace("\x00", NUL_REPLACEMENT) if "\x00" in text else text


def _no_nul(blob: bytes) -> bytes:
    if b"\\u0000" not in blob:
        return blob
    return _NUL_ESCAPE.sub(rb"\1\\ufffd", blob)


def dumps(value: Any) -> bytes:
    """``value`` as JSON a store can hold: no U+0000, no non-finite number."""
    return _no_nul(to_json(value, serialize_unknown=True, inf_nan_mode="strings"))


def safe_blob(blob: bytes, value: Any) -> bytes:
    """``blob`` (JSON of ``value``, serialized elsewhere) made what :func:`dumps` writes.

    A blob that may hold a non-finite number is serialized again from ``value``; one
    that only holds ``\\u0000`` is fixed in place.
    """
    if any(token in blob for token in _NON_FINITE):
        return dumps(value)
    return _no_nul(blob)


def loads(data: str | bytes) -> Any:
    """Parse what a store wrote (see the module docs on nesting).

    Raises:
        ValueError: not JSON, or nested deeper than the interpreter can parse.
    """
    try:
        return from_json(data)
    except ValueError as exc:
        if "recursion limit" not in str(exc):
            raise
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise ValueError(f"JSON nested too deeply to parse ({exc})") from exc


def depth_over(value: Any, limit: int, blob: bytes | None = None) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels deep.

    ``blob`` (its JSON, when at hand) makes the common case cheap: JSON with no more
    brackets than ``limit`` cannot nest deeper.
    """
    if blob is not None and blob.count(b"[") + blob.count(b"{") <= limit:
        return False
    level: list[tuple[Any, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        if isinstance(item, dict):
            children: Sequence[Any] = list(item.values())
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        level.extend((child, depth + 1) for child in children)
    return False
