"""YAML loading that remembers where every value came from.

Mappings load as :class:`LineDict` and sequences as :class:`LineList`; both know the
1-based line of themselves (``.line``) and of each of their keys or items
(``.line_of(key)``), so a loader can say *file:line: what is wrong*. Duplicate keys,
which plain PyYAML silently overwrites, are an error here.

>>> doc = load_yaml_text("a: 1\\nb:\\n  - x\\n  - y\\n", "f.yaml")
>>> doc.line_of("b"), doc["b"].line_of(1)
(2, 4)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_DEPTH", "LineDict", "LineList", "YamlProblem", "line_at",
           "load_yaml_file", "load_yaml_text"]

MAX_YAML_BYTES = 1024 * 1024
"""The largest YAML input read (graphs, tool contracts, rules, config files are a few KB;
a file far over that is a mistake, and parsing it would take seconds)."""
MAX_YAML_DEPTH = 64
"""How deeply mappings and lists may nest (deeper would exhaust Python's recursion)."""


class YamlProblem(Exception):
    """YAML that cannot be read: ``line`` (1-based, when known) and ``problem``."""

    def __init__(self, line: int | None, problem: str) -> None:
        self.line = line
        self.problem = problem
        super().__init__(problem)


class LineDict(dict[Any, Any]):
    """A mapping that knows its line and the line of each key."""

    line: int = 0
    key_lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list[Any]):
    """A sequence that knows its line and the line of each item."""

    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        if 0 <= index < len(self.item_lines):
            return self.item_lines[index]
        return self.line


class _Loader(yaml.SafeLoader):
    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        """PyYAML's, counting the nesting: too deep is a :class:`YamlProblem` at its line
        (composing and constructing recurse once per level)."""
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise YamlProblem(mark.line + 1, f"nested more than {MAX_YAML_DEPTH} levels "
                                                 "deep; flatten the structure")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise YamlProblem(key_node.start_mark.line + 1,
                              "a mapping key must be a plain value") from None
        if key in result:
            first = result.key_lines[key]
            raise YamlProblem(
                key_node.start_mark.line + 1,
                f"duplicate key {key!r} (first at line {first}); keep one of them",
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)

_CSafeLoader: Any = getattr(yaml, "CSafeLoader", None)  # absent when PyYAML lacks libyaml
if _CSafeLoader is not None:
    class _FastLoader(_CSafeLoader):  # type: ignore[misc]
        """libyaml's parser with the same constructors: 6x faster than :class:`_Loader`
        (a CLI process reads ~20 YAML files). Used only for text it reads exactly as
        :class:`_Loader` would; anything else goes to :class:`_Loader`, whose errors are
        the ones users see."""

    _FastLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                _construct_mapping)
    _FastLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
                                _construct_sequence)

# YAML's printable set (the YAML 1.1 spec, as PyYAML's Reader checks it): text with any
# other character is left to _Loader, which says which character and where.
_NON_PRINTABLE = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD"
                            "\U00010000-\U0010FFFF]")
_NO_DOCUMENT = object()


def _fast_load(text: str) -> Any:
    """``text`` parsed by libyaml, or ``_NO_DOCUMENT`` where the Python loader must read
    it: libyaml is unavailable, the text has a character YAML does not allow, it fails in
    any way (the Python loader then reports it in its own words) or it nests deeper than
    :data:`MAX_YAML_DEPTH`."""
    if _CSafeLoader is None or _NON_PRINTABLE.search(text):
        return _NO_DOCUMENT
    loader = _FastLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _deeper_than(node, MAX_YAML_DEPTH):
            return _NO_DOCUMENT
        return loader.construct_document(node)
    except (yaml.YAMLError, YamlProblem, RecursionError):
        return _NO_DOCUMENT
    finally:
        loader.dispose()


def _deeper_than(root: yaml.Node, limit: int) -> bool:
    """Whether composing ``root`` nests more than ``limit`` levels, counted as
    :meth:`_Loader.compose_node` counts them (an alias counts its own level only)."""
    deepest: dict[int, int] = {}  # id(node) -> the deepest level it was walked at
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if deepest.get(id(node), 0) >= depth:  # an alias of a node already walked as deep
            continue
        deepest[id(node)] = depth
        if isinstance(node, yaml.MappingNode):
            stack.extend((child, depth + 1) for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
    return False


def load_yaml_text(text: str, name: str = "<string>") -> Any:
    """Parse YAML text into LineDict/LineList/scalars.

    Raises:
        YamlProblem: syntax error, duplicate key, nesting over :data:`MAX_YAML_DEPTH`,
            text over :data:`MAX_YAML_BYTES`, with the line.
    """
    if len(text) > MAX_YAML_BYTES:
        raise YamlProblem(None, _too_big(len(text.encode("utf-8", "replace"))))
    doc = _fast_load(text)
    if doc is not _NO_DOCUMENT:
        return doc
    try:
        return yaml.load(text, Loader=_Loader)  # safe: _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        raise _syntax_problem(exc) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise YamlProblem(line, f"YAML error: character {char} is not allowed in YAML text; "
                                "remove it (is this a binary file?)") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(None, f"YAML error: {exc}") from None


# Contexts naming something opened on one line and left unclosed: PyYAML notices only
# where the next token (or the end of the file) breaks it, but the mistake is the opening.
_UNCLOSED = {
    "while scanning a quoted scalar": "the quoted string",
    "while parsing a flow mapping": "the {...} mapping",
    "while parsing a flow sequence": "the [...] list",
}

_HINTS = {  # problem prefix -> what to do
    "mapping values are not allowed here": "; quote a value that contains ': '",
    "found character '\\t'": "; indent with spaces, not tabs",
    "expected <block end>": "; check the indentation of this line",
    "could not determine a constructor": "; graph and config files are plain YAML, remove the tag",
}


def _syntax_problem(exc: yaml.MarkedYAMLError) -> YamlProblem:
    problem = exc.problem or "malformed YAML"
    pline = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
    cline = exc.context_mark.line + 1 if exc.context_mark is not None else None
    unclosed = _UNCLOSED.get(exc.context or "")
    if unclosed and cline is not None:
        return YamlProblem(cline, f"YAML syntax error: {unclosed} opened on this line is never "
                                  f"closed ({problem} at line {pline}); close it")
    what = problem + next((h for p, h in _HINTS.items() if problem.startswith(p)), "")
    if exc.context and cline is not None and cline != pline:
        what += f" ({exc.context} that starts at line {cline})"
    elif exc.context:
        what = f"{exc.context}: {what}"
    return YamlProblem(pline if pline is not None else cline, f"YAML syntax error: {what}")


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse a YAML file (see :func:`load_yaml_text`).

    Raises:
        YamlProblem: unreadable file, over :data:`MAX_YAML_BYTES`, syntax error,
            duplicate key, nesting too deep.
    """
    try:
        size = Path(path).stat().st_size
        if size > MAX_YAML_BYTES:  # refused before it is read
            raise YamlProblem(None, _too_big(size))
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise YamlProblem(None, f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise YamlProblem(None, f"the file is not UTF-8 text: {exc}") from None
    return load_yaml_text(text, str(path))


def _too_big(size: int) -> str:
    return (f"the file is {size:,} bytes, over the {MAX_YAML_BYTES:,}-byte limit for YAML "
            "inputs; is it the right file?")


def line_at(doc: Any, loc: Sequence[Any]) -> int | None:
    """The line of the deepest node of ``doc`` reachable along ``loc`` (a pydantic ``loc``)."""
    node, line = doc, getattr(doc, "line", None)
    for part in loc:
        if isinstance(node, LineDict) and part in node:
            line = node.line_of(part)
            node = node[part]
        elif isinstance(node, LineList) and isinstance(part, int) and 0 <= part < len(node):
            line = node.line_of(part)
            node = node[part]
        else:
            break
    return line
